//! Checking a run's output after the run: a fast run whose output is wrong does not count.
//!
//! The input topic is read once (the restore's input once per run, since every run appends
//! to it) into an [`InputSummary`]: records per key, the value every record carries. After
//! the application has closed, and before its output topic is deleted, the output topic is
//! read to its end with `isolation.level=read_committed` (records of aborted transactions
//! and transaction markers, which occupy offsets, are not counted) and every record goes
//! through a [`Checker`], which compares it with what the workload must produce from that
//! input. Reading happens outside the timed window.

use super::*;

/// What the workload must produce from its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// One output per input record, same key, same value.
    Map,
    /// One output per input record whose key ends in an even digit ([`keep`]), same key,
    /// the value upper-cased.
    FilterMap,
    /// One output per input record, same key, the key's running count (8-byte big-endian);
    /// the last output of a key is its number of input records. Also the restore's.
    Count,
    /// One output per input record, same key, the number of rows per user (`10` / `100`).
    Join(u64),
}

impl Expect {
    pub(crate) fn of(workload: &str) -> Res<Self> {
        Ok(match workload {
            "map" | "avro" => Self::Map,
            "filtermap" => Self::FilterMap,
            "count" | "restore" => Self::Count,
            "join10" => Self::Join(10),
            "join100" => Self::Join(100),
            other => return Err(format!("no output check for workload {other}").into()),
        })
    }
}

/// What an input topic holds, as far as the checks need it.
#[derive(Clone, Debug, Default)]
pub(crate) struct InputSummary {
    pub(crate) records: u64,
    /// Records per key (a record without a key counts under the empty key).
    pub(crate) per_key: HashMap<Vec<u8>, u64>,
    /// The key of the first record of every partition (the restore reuses them).
    pub(crate) first_key: BTreeMap<i32, Vec<u8>>,
    /// The value all records carry, when they all carry the same one (the preload's do).
    pub(crate) value: Option<Vec<u8>>,
    /// Records carry different values: `value` is meaningless.
    pub(crate) mixed_values: bool,
}

impl InputSummary {
    pub(crate) fn add(&mut self, partition: i32, key: &[u8], value: &[u8]) {
        self.records += 1;
        match self.per_key.get_mut(key) {
            Some(n) => *n += 1,
            None => {
                self.per_key.insert(key.to_vec(), 1);
            }
        }
        self.first_key.entry(partition).or_insert_with(|| key.to_vec());
        match &self.value {
            _ if self.mixed_values => {}
            None => self.value = Some(value.to_vec()),
            Some(v) if v.as_slice() != value => {
                self.mixed_values = true;
                self.value = None;
            }
            Some(_) => {}
        }
    }

    /// Reads all of `topic`.
    pub(crate) fn read(bootstrap: &str, topic: &str) -> Res<Self> {
        let mut s = Self::default();
        read_topic(bootstrap, topic, |p, k, v| s.add(p, k, v))?;
        Ok(s)
    }
}

/// One key's expected and seen outputs.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    want: u64,
    seen: u64,
    /// The last count seen (the count workload).
    last: Option<u64>,
}

/// Compares output records, fed in the order of their partition, with what the workload
/// must produce from an input.
pub(crate) struct Checker<'a> {
    expect: Expect,
    tally: HashMap<&'a [u8], Tally>,
    /// The value every output must carry, when the input's values are uniform.
    value: Option<Vec<u8>>,
    records: u64,
    /// The first wrong record, with how many there were.
    wrong: Option<String>,
    wrong_count: u64,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(expect: Expect, input: &'a InputSummary) -> Self {
        let tally = input
            .per_key
            .iter()
            .map(|(k, n)| {
                let want = if expect == Expect::FilterMap && !keep(k) {
                    0
                } else {
                    *n
                };
                (
                    k.as_slice(),
                    Tally {
                        want,
                        ..Tally::default()
                    },
                )
            })
            .collect();
        let value = match expect {
            Expect::Map => input.value.clone(),
            Expect::FilterMap => input.value.as_ref().map(|v| v.to_ascii_uppercase()),
            Expect::Join(rows) => Some(rows.to_string().into_bytes()),
            Expect::Count => None,
        };
        Self {
            expect,
            tally,
            value,
            records: 0,
            wrong: None,
            wrong_count: 0,
        }
    }

    fn wrong(&mut self, what: impl FnOnce() -> String) {
        self.wrong_count += 1;
        if self.wrong.is_none() {
            self.wrong = Some(what());
        }
    }

    /// One output record.
    pub(crate) fn record(&mut self, key: &[u8], value: &[u8]) {
        self.records += 1;
        let Some(t) = self.tally.get_mut(key) else {
            self.wrong(|| format!("key {} not in the input", show(key)));
            return;
        };
        t.seen += 1;
        if self.expect == Expect::Count {
            match <[u8; 8]>::try_from(value) {
                Ok(b) => t.last = Some(u64::from_be_bytes(b)),
                Err(_) => self.wrong(|| format!("count of {} is {} bytes, not 8", show(key), value.len())),
            }
        } else if let Some(want) = &self.value
            && value != want.as_slice()
        {
            let got = show(&value[..value.len().min(16)]);
            self.wrong(|| format!("value of {} is {got}", show(key)));
        }
    }

    /// `Ok` when the output is what the workload must produce, else a short reason.
    pub(crate) fn finish(self) -> Result<(), String> {
        let want: u64 = self.tally.values().map(|t| t.want).sum();
        if self.records != want {
            return Err(format!("{} output records, want {want}", self.records));
        }
        if let Some(w) = self.wrong {
            return Err(format!("{} wrong records, first: {w}", self.wrong_count));
        }
        let mut keys: Vec<(&&[u8], &Tally)> = self.tally.iter().filter(|(_, t)| t.seen != t.want).collect();
        keys.sort_unstable_by_key(|(k, _)| **k);
        if let Some((k, t)) = keys.first() {
            return Err(format!(
                "{} keys with a wrong number of outputs, first: {} {}, want {}",
                keys.len(),
                show(k),
                t.seen,
                t.want
            ));
        }
        if self.expect == Expect::Count {
            let mut keys: Vec<(&&[u8], &Tally)> = self
                .tally
                .iter()
                .filter(|(_, t)| t.want > 0 && t.last != Some(t.want))
                .collect();
            keys.sort_unstable_by_key(|(k, _)| **k);
            if let Some((k, t)) = keys.first() {
                return Err(format!(
                    "{} keys with a wrong final count, first: {} {}, want {}",
                    keys.len(),
                    show(k),
                    t.last.unwrap_or(0),
                    t.want
                ));
            }
        }
        Ok(())
    }
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).escape_debug().to_string()
}

/// Reads `topic` from the beginning to its end, handing every record to `f` with its
/// partition, in offset order per partition; returns the number of records.
///
/// The end is the partition's end as librdkafka reports it (`enable.partition.eof`), which
/// under `read_committed` is the last stable offset: what a transaction left open would
/// still hold is not counted. A topic that is written to while it is read is not supported.
pub(crate) fn read_topic(bootstrap: &str, topic: &str, mut f: impl FnMut(i32, &[u8], &[u8])) -> Res<u64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        // librdkafka assigns only with a group; this one never joins nor commits.
        .set("group.id", "side-by-side-check")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        // Large fetches and a deep prefetch queue: reading is all this consumer does.
        .set("max.partition.fetch.bytes", "16777216")
        .set("queued.max.messages.kbytes", "262144")
        .set("queued.min.messages", "1000000")
        .set("fetch.queue.backoff.ms", "10")
        .create()?;
    let meta = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let partitions: Vec<i32> = meta
        .topics()
        .first()
        .ok_or("topic missing")?
        .partitions()
        .iter()
        .map(|p| p.id())
        .collect();
    if partitions.is_empty() {
        return Err(format!("topic {topic} has no partitions").into());
    }
    let mut tpl = TopicPartitionList::new();
    for p in &partitions {
        tpl.add_partition_offset(topic, *p, Offset::Beginning)?;
    }
    consumer.assign(&tpl)?;
    let mut at_end: std::collections::HashSet<i32> = std::collections::HashSet::new();
    let mut n = 0u64;
    let stall = Duration::from_secs(60);
    let mut progress = Instant::now();
    while at_end.len() < partitions.len() {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                n += 1;
                progress = Instant::now();
                f(
                    m.partition(),
                    m.key().unwrap_or_default(),
                    m.payload().unwrap_or_default(),
                );
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                progress = Instant::now();
                at_end.insert(p);
            }
            Some(Err(e)) => return Err(format!("reading {topic}: {e}").into()),
            None => {}
        }
        if progress.elapsed() > stall {
            return Err(format!(
                "reading {topic}: no progress for {stall:?} after {n} records, {} of {} partitions at their end",
                at_end.len(),
                partitions.len()
            )
            .into());
        }
    }
    Ok(n)
}

/// Reads the output topic `output` of a run and checks it against `input`: `"ok"`, or a
/// short reason why the run does not count.
pub(crate) fn check_output(bootstrap: &str, output: &str, expect: Expect, input: &InputSummary) -> String {
    let mut checker = Checker::new(expect, input);
    match read_topic(bootstrap, output, |_, k, v| checker.record(k, v)) {
        Ok(_) => match checker.finish() {
            Ok(()) => "ok".into(),
            Err(reason) => reason,
        },
        Err(e) => format!("output not readable: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys `key-0`..`key-3` with 1..=4 records each, every value `v`.
    fn input() -> InputSummary {
        let mut s = InputSummary::default();
        for k in 0..4u8 {
            for _ in 0..=k {
                s.add(i32::from(k % 2), format!("key-{k}").as_bytes(), b"v");
            }
        }
        s
    }

    fn run(expect: Expect, input: &InputSummary, out: &[(&str, Vec<u8>)]) -> Result<(), String> {
        let mut c = Checker::new(expect, input);
        for (k, v) in out {
            c.record(k.as_bytes(), v);
        }
        c.finish()
    }

    /// What a correct application writes for `expect` from [`input`].
    fn correct(expect: Expect) -> Vec<(&'static str, Vec<u8>)> {
        let mut out = Vec::new();
        for (k, key) in ["key-0", "key-1", "key-2", "key-3"].into_iter().enumerate() {
            for i in 1..=k as u64 + 1 {
                match expect {
                    Expect::Map => out.push((key, b"v".to_vec())),
                    Expect::FilterMap if k % 2 == 0 => out.push((key, b"V".to_vec())),
                    Expect::FilterMap => {}
                    Expect::Count => out.push((key, i.to_be_bytes().to_vec())),
                    Expect::Join(rows) => out.push((key, rows.to_string().into_bytes())),
                }
            }
        }
        out
    }

    const ALL: [Expect; 4] = [Expect::Map, Expect::FilterMap, Expect::Count, Expect::Join(10)];

    #[test]
    fn summary_counts_keys_and_sees_mixed_values() {
        let mut s = input();
        assert_eq!(s.records, 10);
        assert_eq!(s.per_key[b"key-3".as_slice()], 4);
        assert_eq!(s.first_key[&1], b"key-1");
        assert_eq!(s.value.as_deref(), Some(b"v".as_slice()));
        s.add(0, b"key-0", b"w");
        assert!(s.mixed_values && s.value.is_none());
        s.add(0, b"key-0", b"v");
        assert!(s.value.is_none());
    }

    #[test]
    fn correct_output_passes() {
        let input = input();
        for e in ALL {
            assert_eq!(run(e, &input, &correct(e)), Ok(()), "{e:?}");
        }
    }

    #[test]
    fn a_missing_record_fails() {
        let input = input();
        for e in ALL {
            let mut out = correct(e);
            out.remove(0);
            let err = run(e, &input, &out).unwrap_err();
            assert!(err.contains("output records, want"), "{e:?}: {err}");
        }
    }

    #[test]
    fn a_record_moved_to_another_key_fails() {
        let input = input();
        for e in [Expect::Map, Expect::Join(10)] {
            let mut out = correct(e);
            out[0].0 = "key-2";
            let err = run(e, &input, &out).unwrap_err();
            assert!(
                err.contains("2 keys with a wrong number of outputs, first: key-0 0, want 1"),
                "{err}"
            );
        }
    }

    #[test]
    fn filtermap_output_of_an_odd_key_fails() {
        let input = input();
        let mut out = correct(Expect::FilterMap);
        out[0].0 = "key-1";
        let err = run(Expect::FilterMap, &input, &out).unwrap_err();
        assert!(err.contains("keys with a wrong number of outputs"), "{err}");
    }

    #[test]
    fn wrong_values_fail() {
        let input = input();
        for (e, bad) in [
            (Expect::Map, b"x".to_vec()),
            (Expect::FilterMap, b"v".to_vec()),
            (Expect::Join(10), b"9".to_vec()),
            (Expect::Count, vec![0; 4]),
        ] {
            let mut out = correct(e);
            out[0].1 = bad;
            let err = run(e, &input, &out).unwrap_err();
            assert!(err.starts_with("1 wrong records, first:"), "{e:?}: {err}");
        }
    }

    #[test]
    fn a_wrong_final_count_fails() {
        let input = input();
        let mut out = correct(Expect::Count);
        // key-3's last count says 3 where it counted 4 records: e.g. a store that lost one.
        let last = out.len() - 1;
        out[last].1 = 3u64.to_be_bytes().to_vec();
        let err = run(Expect::Count, &input, &out).unwrap_err();
        assert_eq!(err, "1 keys with a wrong final count, first: key-3 3, want 4");
    }

    #[test]
    fn an_unknown_key_fails() {
        let input = input();
        let mut out = correct(Expect::Map);
        out[0].0 = "other";
        let err = run(Expect::Map, &input, &out).unwrap_err();
        assert!(err.contains("key other not in the input"), "{err}");
    }
}
