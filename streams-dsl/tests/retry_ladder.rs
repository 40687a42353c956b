//! The retry ladder (`streams_dsl::retry`) in the TopologyTestDriver, on its mock wall
//! clock: every handler call is logged with the clock's time, and every record is checked
//! by its identity (key, stage, attempt), never by counts or maxima alone.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use streams_core::serdes::{BytesSerde, NullableSerde, StringSerde};
use streams_core::topology::changelog_topic;
use streams_core::{Headers, Topology};
use streams_dsl::retry::{
    Attempt, HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, HEADER_ORIGINAL_OFFSET,
    HEADER_ORIGINAL_PARTITION, HEADER_ORIGINAL_TOPIC, HEADER_REPLAYED_FROM, Outcome, PendingKey,
    PendingKeySerde, PendingRecord, PendingRecordSerde, RetryError, RetryLadder, RetryNodes, RetryOptions,
    add_retry_ladder, due_at_ms,
};
use streams_test_utils::{DriverConfig, TestRecord, TopologyTestDriver};

const START: i64 = 1_000_000;
const TICK: i64 = 100;
const APP: &str = "retry-test";

/// One call of the handler.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    key: String,
    stage: usize,
    number: u32,
    /// The wall clock when it was made.
    at: i64,
    /// The due time it carried (retry stages).
    due: Option<i64>,
}

/// One listener event: (key, stage, attempt, outcome).
type Event = (String, usize, u32, Outcome);

/// What a key asks of the handler: `ok*` succeeds, `fatal*` fails fatally, `down*` always
/// fails retriably, `flakyN*` fails retriably N times, then succeeds.
fn script(key: &str, number: u32) -> Result<(), RetryError> {
    if key.starts_with("fatal") {
        return Err(RetryError::fatal("bad request"));
    }
    if key.starts_with("down") {
        return Err(RetryError::retriable(format!("HTTP 503 (attempt {number})")));
    }
    if let Some(rest) = key.strip_prefix("flaky") {
        let n: u32 = rest
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or(0);
        if number <= n {
            return Err(RetryError::retriable(format!("HTTP 500 (attempt {number})")));
        }
    }
    Ok(())
}

struct Harness {
    driver: TopologyTestDriver,
    ladder: RetryLadder,
    nodes: RetryNodes,
    clock: Arc<AtomicI64>,
    calls: Arc<Mutex<Vec<Call>>>,
    events: Arc<Mutex<Vec<Event>>>,
}

type Raw = NullableSerde<BytesSerde>;

/// A record as written, in bytes.
type RawRecord = TestRecord<Option<Vec<u8>>, Option<Vec<u8>>>;

fn raw() -> Raw {
    NullableSerde(BytesSerde)
}

impl Harness {
    fn new(delays_ms: &[u64], options: RetryOptions, partitions: &[(&str, i32)]) -> Self {
        let delays: Vec<Duration> = delays_ms.iter().map(|&d| Duration::from_millis(d)).collect();
        let ladder = RetryLadder::new("req", &delays);
        let clock = Arc::new(AtomicI64::new(START));
        let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
        let events: Arc<Mutex<Vec<Event>>> = Arc::default();
        let handler = {
            let clock = clock.clone();
            let calls = calls.clone();
            move |a: &Attempt<'_, String, String>| {
                calls.lock().unwrap().push(Call {
                    key: a.key().clone(),
                    stage: a.stage(),
                    number: a.number(),
                    at: clock.load(Ordering::SeqCst),
                    due: due_at_ms(a.headers()),
                });
                script(a.key(), a.number())
            }
        };
        let options = {
            let events = events.clone();
            options
                .punctuate_every(Duration::from_millis(TICK as u64))
                .listener(move |e| {
                    let key = String::from_utf8_lossy(e.key.unwrap_or_default()).into_owned();
                    events
                        .lock()
                        .unwrap()
                        .push((key, e.stage, e.attempt, e.outcome.clone()));
                })
        };
        let mut b = Topology::builder();
        let nodes = add_retry_ladder(&mut b, &ladder, StringSerde, StringSerde, handler, &options);
        let mut config = DriverConfig::default().application_id(APP);
        config.start_wall_clock = START;
        for &(t, n) in partitions {
            config = config.partitions(t, n);
        }
        let driver = TopologyTestDriver::new(b.build().unwrap(), config).unwrap();
        Self {
            driver,
            ladder,
            nodes,
            clock,
            calls,
            events,
        }
    }

    /// Advances the wall clock to `to` in ticks of the punctuation interval, so a
    /// punctuation runs at every multiple of it.
    fn advance_to(&self, to: i64) {
        while self.clock.load(Ordering::SeqCst) < to {
            self.clock.fetch_add(TICK, Ordering::SeqCst);
            self.driver
                .advance_wall_clock(Duration::from_millis(TICK as u64))
                .unwrap();
            assert_eq!(self.driver.wall_clock(), self.clock.load(Ordering::SeqCst));
        }
    }

    fn pipe(&self, key: &str, value: &str) {
        self.driver
            .input_topic("req", StringSerde, StringSerde)
            .pipe_at(key.to_owned(), value.to_owned(), 42)
            .unwrap();
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// Every handler call of `key`, as (stage, number, at).
    fn calls_of(&self, key: &str) -> Vec<(usize, u32, i64)> {
        self.calls()
            .into_iter()
            .filter(|c| c.key == key)
            .map(|c| (c.stage, c.number, c.at))
            .collect()
    }

    /// Every record written to `topic`, in bytes.
    fn read(&self, topic: &str) -> Vec<RawRecord> {
        self.driver
            .output_topic(topic, raw(), raw())
            .read_records()
            .unwrap()
    }

    /// The records of `topic` by key text.
    fn read_by_key(&self, topic: &str) -> BTreeMap<String, Vec<RawRecord>> {
        let mut by_key: BTreeMap<String, Vec<_>> = BTreeMap::new();
        for r in self.read(topic) {
            let key = String::from_utf8(r.key.clone().unwrap_or_default()).unwrap();
            by_key.entry(key).or_default().push(r);
        }
        by_key
    }

    /// How many records wait in every retry stage's stores (all partitions).
    fn waiting(&self) -> usize {
        let mut n = 0;
        for store in self.nodes.stores() {
            for p in 0..4 {
                if let Ok(kv) = self.driver.store(&store, p) {
                    n += kv.read().unwrap().all().unwrap().count();
                }
            }
        }
        n
    }

    fn events_of(&self, key: &str) -> Vec<(usize, u32, Outcome)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.0 == key)
            .map(|e| (e.1, e.2, e.3.clone()))
            .collect()
    }
}

fn header(h: &Headers, name: &str) -> Option<String> {
    h.last_str(name).map(str::to_owned)
}

fn names(h: &Headers) -> Vec<String> {
    h.iter().map(|(k, _)| k.to_owned()).collect()
}

#[test]
fn success_at_the_first_attempt_touches_nothing_else() {
    let h = Harness::new(&[1000, 2000], RetryOptions::new(), &[]);
    h.pipe("ok-1", "v");
    h.advance_to(START + 10_000);
    assert_eq!(
        h.calls(),
        vec![Call {
            key: "ok-1".into(),
            stage: 0,
            number: 1,
            at: START,
            due: None,
        }]
    );
    for t in h.ladder.topics() {
        assert!(h.read(&t).is_empty(), "{t}");
    }
    assert_eq!(h.waiting(), 0);
    assert_eq!(h.events_of("ok-1"), vec![(0, 1, Outcome::Succeeded)]);
}

#[test]
fn failures_walk_the_ladder_with_increasing_due_times() {
    // Three partitions on the main topic, two on the retry topics: stages need not be
    // co-partitioned.
    let h = Harness::new(
        &[1000, 2000, 4000],
        RetryOptions::new(),
        &[
            ("req", 3),
            ("req-retry-1", 2),
            ("req-retry-2", 2),
            ("req-retry-3", 2),
        ],
    );
    let keys = ["ok-1", "flaky1-a", "flaky2-b", "down-c", "fatal-d"];
    for k in keys {
        h.pipe(k, &format!("value of {k}"));
    }
    // The first attempts are made at once; nothing else until a delay has passed.
    assert_eq!(h.calls().len(), 5);
    h.advance_to(START + 900);
    assert_eq!(h.calls().len(), 5, "nothing is attempted before it is due");
    assert_eq!(h.waiting(), 3);
    h.advance_to(START + 20_000);

    let s = START;
    assert_eq!(h.calls_of("ok-1"), vec![(0, 1, s)]);
    assert_eq!(h.calls_of("flaky1-a"), vec![(0, 1, s), (1, 2, s + 1000)]);
    assert_eq!(
        h.calls_of("flaky2-b"),
        vec![(0, 1, s), (1, 2, s + 1000), (2, 3, s + 3000)]
    );
    assert_eq!(
        h.calls_of("down-c"),
        vec![(0, 1, s), (1, 2, s + 1000), (2, 3, s + 3000), (3, 4, s + 7000)]
    );
    assert_eq!(h.calls_of("fatal-d"), vec![(0, 1, s)]);
    assert_eq!(
        h.calls().len(),
        1 + 2 + 3 + 4 + 1,
        "no other call: {:?}",
        h.calls()
    );
    // Every retry was attempted at its due time (the clock ticks 100 ms), never before.
    for c in h.calls().iter().filter(|c| c.stage > 0) {
        assert_eq!(c.due, Some(c.at), "{c:?}");
    }

    // Where each record was read first, for the original-position headers.
    let main = h.read_by_key("req");
    let original = |k: &str| {
        let r = &main[k][0];
        (r.partition.to_string(), main[k].len())
    };
    // Each retry topic got exactly the records that failed at the stage before it, once,
    // with the due time of that stage's delay.
    let retry = |topic: &str, want: &[&str], attempt: u32, due: i64| {
        let got = h.read_by_key(topic);
        assert_eq!(
            got.keys().map(String::as_str).collect::<Vec<_>>(),
            want,
            "{topic}"
        );
        for (k, records) in &got {
            assert_eq!(records.len(), 1, "{k} in {topic} once");
            let r = &records[0];
            assert_eq!(r.value.as_deref(), Some(format!("value of {k}").as_bytes()));
            assert_eq!(r.timestamp, 42, "the record keeps its timestamp");
            let hd = &r.headers;
            assert_eq!(header(hd, HEADER_ATTEMPT), Some(attempt.to_string()));
            assert_eq!(header(hd, HEADER_NEXT_AT), Some(due.to_string()));
            assert_eq!(
                header(hd, HEADER_LAST_ERROR),
                Some(format!(
                    "HTTP {} (attempt {attempt})",
                    if k.starts_with("down") { 503 } else { 500 }
                ))
            );
            assert_eq!(header(hd, HEADER_ORIGINAL_TOPIC).as_deref(), Some("req"));
            assert_eq!(header(hd, HEADER_ORIGINAL_PARTITION), Some(original(k).0));
            assert_eq!(original(k).1, 1);
            assert_eq!(hd.len(), 6, "each retry header once: {:?}", names(hd));
        }
    };
    retry("req-retry-1", &["down-c", "flaky1-a", "flaky2-b"], 1, s + 1000);
    retry("req-retry-2", &["down-c", "flaky2-b"], 2, s + 3000);
    retry("req-retry-3", &["down-c"], 3, s + 7000);
    let dead = h.read_by_key("req-dlq");
    assert_eq!(
        dead.keys().map(String::as_str).collect::<Vec<_>>(),
        ["down-c", "fatal-d"]
    );
    assert_eq!(
        header(&dead["down-c"][0].headers, HEADER_ATTEMPT).as_deref(),
        Some("4")
    );
    assert_eq!(
        header(&dead["fatal-d"][0].headers, HEADER_ATTEMPT).as_deref(),
        Some("1")
    );
    assert_eq!(h.waiting(), 0, "handled records leave the stores");

    // The listener heard every step once.
    let retrying = |topic: &str, due: i64| Outcome::Retrying {
        topic: topic.into(),
        due_at_ms: due,
    };
    assert_eq!(
        h.events_of("down-c"),
        vec![
            (0, 1, retrying("req-retry-1", s + 1000)),
            (1, 2, Outcome::Waiting { due_at_ms: s + 1000 }),
            (1, 2, retrying("req-retry-2", s + 3000)),
            (2, 3, Outcome::Waiting { due_at_ms: s + 3000 }),
            (2, 3, retrying("req-retry-3", s + 7000)),
            (3, 4, Outcome::Waiting { due_at_ms: s + 7000 }),
            (3, 4, Outcome::DeadLettered { fatal: false }),
        ]
    );
    assert_eq!(
        h.events_of("fatal-d"),
        vec![(0, 1, Outcome::DeadLettered { fatal: true })]
    );
    assert_eq!(
        h.events_of("flaky1-a"),
        vec![
            (0, 1, retrying("req-retry-1", s + 1000)),
            (1, 2, Outcome::Waiting { due_at_ms: s + 1000 }),
            (1, 2, Outcome::Succeeded),
        ]
    );
}

#[test]
fn a_fatal_failure_is_dead_lettered_at_once_with_the_original_bytes() {
    let h = Harness::new(&[1000], RetryOptions::new(), &[]);
    let mut app = Headers::new();
    app.add("trace", "t-1");
    h.driver
        .input_topic("req", StringSerde, StringSerde)
        .pipe_with_headers("fatal-x".into(), "payload".into(), 7, app)
        .unwrap();
    // A value the serde cannot read is fatal too, and its bytes are kept as they were.
    let bad_utf8: &[u8] = &[0xC3, 0x28];
    h.driver
        .input_topic("req", raw(), raw())
        .pipe_raw(Some(b"undecodable"), Some(bad_utf8), 8)
        .unwrap();
    h.advance_to(START + 5000);
    assert_eq!(h.calls_of("fatal-x"), vec![(0, 1, START)]);
    assert!(h.calls_of("undecodable").is_empty(), "the handler never sees it");
    assert!(h.read("req-retry-1").is_empty());
    let dead = h.read_by_key("req-dlq");
    assert_eq!(dead.len(), 2);
    let x = &dead["fatal-x"][0];
    assert_eq!(x.value.as_deref(), Some(&b"payload"[..]));
    assert_eq!(x.timestamp, 7);
    assert_eq!(
        names(&x.headers),
        [
            "trace",
            HEADER_ORIGINAL_TOPIC,
            HEADER_ORIGINAL_PARTITION,
            HEADER_ORIGINAL_OFFSET,
            HEADER_ATTEMPT,
            HEADER_LAST_ERROR
        ]
    );
    assert_eq!(header(&x.headers, "trace").as_deref(), Some("t-1"));
    assert_eq!(header(&x.headers, HEADER_ATTEMPT).as_deref(), Some("1"));
    assert_eq!(
        header(&x.headers, HEADER_LAST_ERROR).as_deref(),
        Some("fatal: bad request")
    );
    let u = &dead["undecodable"][0];
    assert_eq!(u.value.as_deref(), Some(bad_utf8));
    assert!(
        header(&u.headers, HEADER_LAST_ERROR).is_some_and(|e| e.starts_with("fatal: undecodable value")),
        "{:?}",
        u.headers
    );
    assert_eq!(
        h.events_of("undecodable"),
        vec![(0, 1, Outcome::DeadLettered { fatal: true })]
    );
}

#[test]
fn exhausting_the_ladder_dead_letters_the_original_bytes_and_every_header() {
    let h = Harness::new(&[1000, 2000], RetryOptions::new(), &[]);
    let mut app = Headers::new();
    app.add("trace", "t-9").add_null("empty").add("trace", "t-10");
    h.driver
        .input_topic("req", StringSerde, StringSerde)
        .pipe_with_headers("down-z".into(), "a\0b".into(), 99, app.clone())
        .unwrap();
    h.advance_to(START + 10_000);
    assert_eq!(
        h.calls_of("down-z"),
        vec![(0, 1, START), (1, 2, START + 1000), (2, 3, START + 3000)]
    );
    let dead = h.read("req-dlq");
    assert_eq!(dead.len(), 1);
    let d = &dead[0];
    assert_eq!(d.key.as_deref(), Some(&b"down-z"[..]));
    assert_eq!(d.value.as_deref(), Some(&b"a\0b"[..]));
    assert_eq!(d.timestamp, 99);
    let mut want = app;
    want.add(HEADER_ORIGINAL_TOPIC, "req")
        .add(HEADER_ORIGINAL_PARTITION, "0")
        .add(HEADER_ORIGINAL_OFFSET, "0")
        .add(HEADER_ATTEMPT, "3")
        .add(HEADER_LAST_ERROR, "HTTP 503 (attempt 3)");
    assert_eq!(
        d.headers, want,
        "application headers first, in order, then the retry headers once"
    );
    assert!(header(&d.headers, HEADER_NEXT_AT).is_none());
    assert!(header(&d.headers, HEADER_REPLAYED_FROM).is_none());
    assert_eq!(h.waiting(), 0);
}

#[test]
fn due_records_are_attempted_in_due_order_within_the_bounds() {
    // One partition; at most two records per punctuation.
    let h = Harness::new(
        &[1000],
        RetryOptions::new().max_records_per_punctuation(2).in_memory(),
        &[],
    );
    let retry = h.driver.input_topic("req-retry-1", StringSerde, StringSerde);
    // Piped out of order: (key, due).
    let records = [
        ("ok-a", START + 500),
        ("ok-b", START + 300),
        ("ok-c", START + 400),
        ("ok-d", START + 300),
        ("ok-e", START + 100),
        ("ok-late", START + 5000),
    ];
    for (k, due) in records {
        let mut hd = Headers::new();
        hd.add(HEADER_ATTEMPT, "1").add(HEADER_NEXT_AT, due.to_string());
        retry.pipe_with_headers(k.into(), "v".into(), 0, hd).unwrap();
    }
    assert!(h.calls().is_empty(), "storing is not attempting");
    // The clock jumps past five due times at once: two per punctuation, earliest first
    // (ties by offset: b was piped before d).
    h.clock.store(START + 600, Ordering::SeqCst);
    h.driver.advance_wall_clock(Duration::from_millis(600)).unwrap();
    let order = |calls: Vec<Call>| calls.into_iter().map(|c| c.key).collect::<Vec<_>>();
    assert_eq!(order(h.calls()), ["ok-e", "ok-b"]);
    h.advance_to(START + 700);
    assert_eq!(order(h.calls()), ["ok-e", "ok-b", "ok-d", "ok-c"]);
    h.advance_to(START + 800);
    assert_eq!(order(h.calls()), ["ok-e", "ok-b", "ok-d", "ok-c", "ok-a"]);
    h.advance_to(START + 4900);
    assert_eq!(h.calls().len(), 5, "ok-late is not due");
    h.advance_to(START + 5000);
    assert_eq!(
        order(h.calls()),
        ["ok-e", "ok-b", "ok-d", "ok-c", "ok-a", "ok-late"]
    );
    for c in h.calls() {
        assert_eq!(c.number, 2);
        assert!(c.at >= c.due.unwrap(), "{c:?} attempted before its due time");
    }
}

#[test]
fn a_time_bound_of_zero_attempts_one_record_per_punctuation() {
    let h = Harness::new(
        &[1000],
        RetryOptions::new().max_punctuation_time(Duration::ZERO),
        &[],
    );
    for k in ["ok-1", "ok-2", "ok-3"] {
        let mut hd = Headers::new();
        hd.add(HEADER_NEXT_AT, START.to_string());
        h.driver
            .input_topic("req-retry-1", StringSerde, StringSerde)
            .pipe_with_headers(k.into(), "v".into(), 0, hd)
            .unwrap();
    }
    for (t, n) in [
        (START + 100, 1),
        (START + 200, 2),
        (START + 300, 3),
        (START + 400, 3),
    ] {
        h.advance_to(t);
        assert_eq!(h.calls().len(), n, "at {t}");
    }
}

#[test]
fn a_record_without_a_due_time_is_due_at_once_and_a_replay_starts_over() {
    let h = Harness::new(&[1000, 2000], RetryOptions::new(), &[]);
    // As the dead-letter tool replays: attempt 0, due now, replayed-from.
    let mut hd = Headers::new();
    hd.add(HEADER_ATTEMPT, "0")
        .add(HEADER_ORIGINAL_TOPIC, "req")
        .add(HEADER_ORIGINAL_PARTITION, "0")
        .add(HEADER_ORIGINAL_OFFSET, "17")
        .add(HEADER_REPLAYED_FROM, "req-dlq/0/3");
    let retry = h.driver.input_topic("req-retry-1", StringSerde, StringSerde);
    retry
        .pipe_with_headers("flaky1-r".into(), "v".into(), 0, hd)
        .unwrap();
    retry.pipe("ok-no-header".into(), "v".into()).unwrap();
    h.advance_to(START + 100);
    assert_eq!(h.calls_of("flaky1-r"), vec![(1, 1, START + 100)]);
    assert_eq!(h.calls_of("ok-no-header"), vec![(1, 1, START + 100)]);
    // The replayed record failed again: it moves on from retry 1 to retry 2, keeping its
    // original position, without the replay marker.
    let next = h.read("req-retry-2");
    assert_eq!(next.len(), 1);
    let hd = &next[0].headers;
    assert_eq!(header(hd, HEADER_ATTEMPT).as_deref(), Some("1"));
    assert_eq!(header(hd, HEADER_ORIGINAL_OFFSET).as_deref(), Some("17"));
    assert_eq!(header(hd, HEADER_NEXT_AT), Some((START + 100 + 2000).to_string()));
    assert!(header(hd, HEADER_REPLAYED_FROM).is_none());
    h.advance_to(START + 2100);
    assert_eq!(
        h.calls_of("flaky1-r"),
        vec![(1, 1, START + 100), (2, 2, START + 2100)]
    );
}

/// The changelog of a retry stage's store holds each waiting record once, byte for byte,
/// and its deletion once it is handled; a second instance that restores the store from
/// that changelog (as the runtime does when a task moves or after a crash) attempts the
/// record at its due time, once.
#[test]
fn waiting_records_are_restored_from_the_changelog() {
    let first = Harness::new(&[1000, 2000], RetryOptions::new(), &[]);
    let mut app = Headers::new();
    app.add("trace", "t-r");
    first
        .driver
        .input_topic("req", StringSerde, StringSerde)
        .pipe_with_headers("down-r".into(), "v-r".into(), 5, app)
        .unwrap();
    first.pipe("flaky1-s", "v-s");
    let store = first.nodes.stages[1].store.clone().unwrap();
    assert_eq!(store.name(), "req-retry-1-pending");
    let changelog = changelog_topic(APP, store.name());
    let entries = first
        .driver
        .output_topic(&changelog, PendingKeySerde, NullableSerde(PendingRecordSerde))
        .read_records()
        .unwrap();
    let retry_records = first.read("req-retry-1");
    assert_eq!(entries.len(), 2, "one put per waiting record: {entries:?}");
    assert_eq!(retry_records.len(), 2);
    for (entry, r) in entries.iter().zip(&retry_records) {
        let pending = entry.value.as_ref().expect("a put");
        assert_eq!(entry.key.due_at_ms, START + 1000);
        assert_eq!(pending.key, r.key);
        assert_eq!(pending.value, r.value);
        assert_eq!(pending.headers, r.headers);
        assert_eq!(pending.timestamp, r.timestamp);
    }
    // The first instance dies before the records are due: nothing was attempted again.
    assert_eq!(first.calls().len(), 2);
    let restored: Vec<(PendingKey, Option<PendingRecord>)> =
        entries.into_iter().map(|e| (e.key, e.value)).collect();
    drop(first);

    let second = Harness::new(&[1000, 2000], RetryOptions::new(), &[]);
    let kv = second
        .driver
        .store(&second.nodes.stages[1].store.clone().unwrap(), 0)
        .unwrap();
    for (key, value) in &restored {
        match value {
            Some(v) => kv.put(key, v).unwrap(),
            None => {
                kv.delete(key).unwrap();
            }
        }
    }
    second.advance_to(START + 900);
    assert!(second.calls().is_empty(), "not before the due time");
    second.advance_to(START + 4000);
    assert_eq!(
        second.calls_of("down-r"),
        vec![(1, 2, START + 1000), (2, 3, START + 3000)]
    );
    assert_eq!(second.calls_of("flaky1-s"), vec![(1, 2, START + 1000)]);
    let dead = second.read("req-dlq");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].value.as_deref(), Some(&b"v-r"[..]));
    assert_eq!(header(&dead[0].headers, "trace").as_deref(), Some("t-r"));
    assert_eq!(header(&dead[0].headers, HEADER_ATTEMPT).as_deref(), Some("3"));

    // The second instance's changelog: every put is followed by its deletion.
    let log = second
        .driver
        .output_topic(&changelog, PendingKeySerde, NullableSerde(PendingRecordSerde))
        .read_records()
        .unwrap();
    let mut state: BTreeMap<PendingKey, i32> = BTreeMap::new();
    for e in &log {
        *state.entry(e.key).or_default() += if e.value.is_some() { 1 } else { -1 };
    }
    assert_eq!(state.len(), 2);
    assert!(state.values().all(|&n| n == 0), "{state:?}");
    assert_eq!(second.waiting(), 0);
}

#[test]
fn each_stage_is_its_own_subtopology_with_a_logged_store() {
    let ladder = RetryLadder::new("req", &[Duration::from_secs(1), Duration::from_secs(2)]);
    let mut b = Topology::builder();
    let nodes = add_retry_ladder(
        &mut b,
        &ladder,
        StringSerde,
        StringSerde,
        |_: &Attempt<'_, String, String>| Ok(()),
        &RetryOptions::new(),
    );
    let t = b.build().unwrap();
    assert_eq!(t.subtopologies().len(), 3);
    assert_eq!(
        t.logged_stores().into_iter().map(|(_, s)| s).collect::<Vec<_>>(),
        ["req-retry-1-pending", "req-retry-2-pending"]
    );
    assert_eq!(nodes.stages[0].sinks, ["req-to-retry-1", "req-to-dlq"]);
    assert_eq!(
        nodes.stages[1].sinks,
        ["req-retry-1-to-retry-2", "req-retry-1-to-dlq"]
    );
    assert_eq!(nodes.stages[2].sinks, ["req-retry-2-to-dlq"]);
    let described = t.describe().to_string();
    assert!(
        described.contains("Processor: req-retry-1-attempt (stores: [req-retry-1-pending])"),
        "{described}"
    );
}

#[test]
fn a_dsl_program_hosts_the_ladder() {
    use streams_dsl::{Consumed, Produced, StreamsBuilder};

    let b = StreamsBuilder::new();
    b.stream(["orders"], Consumed::with(StringSerde, StringSerde))
        .map_values(|_, v: String| v.to_uppercase())
        .to("notify", Produced::with(StringSerde, StringSerde));
    let ladder = RetryLadder::new("notify", &[Duration::from_millis(500)]);
    let seen: Arc<Mutex<Vec<(String, u32)>>> = Arc::default();
    let log = seen.clone();
    b.retry_ladder(
        &ladder,
        StringSerde,
        StringSerde,
        move |a: &Attempt<'_, String, String>| {
            log.lock().unwrap().push((a.value().clone(), a.number()));
            if a.number() == 1 {
                Err(RetryError::retriable("once"))
            } else {
                Ok(())
            }
        },
        &RetryOptions::new().punctuate_every(Duration::from_millis(100)),
    );
    let mut config = DriverConfig::default().application_id(APP);
    config.start_wall_clock = START;
    let driver = TopologyTestDriver::new(b.build().unwrap(), config).unwrap();
    driver
        .input_topic("orders", StringSerde, StringSerde)
        .pipe("k".into(), "hello".into())
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [("HELLO".to_owned(), 1)]);
    for _ in 0..5 {
        driver.advance_wall_clock(Duration::from_millis(100)).unwrap();
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [("HELLO".to_owned(), 1), ("HELLO".to_owned(), 2)]
    );
}
