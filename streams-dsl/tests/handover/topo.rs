//! The topologies of `handover_java.rs`, their inputs, and the outputs expected after each
//! third of the input.

use std::collections::BTreeMap;
use std::time::Duration;

/// The keys, `k0` to `k7`: a round of inputs is one record of each.
pub const KEYS: usize = 8;
/// The inputs of each third.
pub const PER_THIRD: usize = 80;
/// The windows of the windowed counts and the inner stream join.
pub const WINDOW: Duration = Duration::from_secs(10);
/// The windows of the emit-final count.
pub const FINAL_WINDOW: Duration = Duration::from_secs(5);

/// The topology both sides run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Topo {
    /// A count per key, in the store `counts`.
    Count,
    /// The Processor API with a versioned store `versions` (an hour of history): each input
    /// puts, as its key's version at its time, one more than the key's value as of that
    /// time, and sends it out. A key's inputs cycle through three times (see [`input`]), so
    /// each version counts on one written a cycle earlier: a chain through every side's
    /// versions, which breaks if a side did not restore the other's.
    Versioned,
    /// A count per key after a key-selecting step, every step unnamed: both sides generate
    /// Kafka Streams' names (this runtime with `with_kafka_streams_names`), so the store is
    /// `KSTREAM-AGGREGATE-STATE-STORE-0000000003` and it is fed through the repartition topic
    /// named after it.
    UnnamedCount,
    /// A count per key and 10-second window (an hour of grace), in the store `wcounts`.
    WindowedCount,
    /// A count per key and session of 5 s inactivity (an hour of grace), in the store
    /// `scounts`.
    SessionCount,
    /// The input read as a table (`latest`), re-grouped by value through the repartition
    /// topic `by-group`, and the keys per group counted in the store `gcounts`.
    TableRegroup,
    /// As [`Topo::TableRegroup`], every step unnamed: the table's store is
    /// `<input>-STATE-STORE-0000000000`, the count's `KTABLE-AGGREGATE-STATE-STORE-0000000004`,
    /// and the repartition topic is named after it.
    UnnamedTableRegroup,
    /// The input and `<input>-right` read as tables (`left`, `right`) and joined: String
    /// values `left+right`.
    TableJoin,
    /// The input and `<input>-right` joined as streams within 10 s (an hour of grace), in
    /// the window stores `sj-this-join-store` and `sj-other-join-store`.
    StreamJoin,
    /// The input and `<input>-right` read as tables (`left`, `right`), each left value
    /// `g<n>` joined with the right row `k<n>` by the foreign-key join `fk` (subscription
    /// store `fk-subscription-store`, its topics, result store `fk`): `left+right`.
    FkJoin,
    /// The input read as a stream and joined with `<input>-right` read as the table `right`:
    /// String values `left+right`. The table is written in the first third, and for odd
    /// keys in the second; the stream for even keys in the second third and for every key
    /// in the last, so no stream record races a table update of its key: each joins the
    /// rows the other side wrote.
    StreamTable,
    /// As [`Topo::StreamTable`], but `<input>-right` read as the global table `right`: no
    /// internal topic, no committed offset on the global topic; each side reads the table
    /// from the topic again and goes on from the other's offsets on the stream.
    GlobalJoin,
    /// A count per key and 10-second window without grace, in the store `wcounts`, its
    /// final results only through the suppression `sup` (buffer store `sup-store`). Inputs
    /// move 1 s forward per round of keys (see [`input`]), so each third fills one window,
    /// which closes in the next third.
    SuppressedCount,
    /// A count per key and 5-second window without grace, in the store `ecounts` kept an
    /// hour, final results only (`EmitStrategy::on_window_close`). Inputs move as the
    /// suppressed count's, so each third closes windows; the close time emitted up to is in
    /// the processor metadata committed with the offsets. A side that did not read the
    /// other's would emit the windows the store still holds again.
    EmitFinalCount,
    /// The input left-joined with the stream `<input>-right` within 2 s, no grace, stores
    /// named `lj`. The right stream stays empty: each left record waits in the store
    /// `lj-left-shared-join-store` until its window has closed (3 or 4 rounds of keys
    /// later, see [`input`] and [`values_after`]) and goes out as `left+null`; the last
    /// rounds of each third wait for the next side.
    LeftJoin,
    /// The input outer-joined with the stream `<input>-right` within 2 s, no grace, stores
    /// named `oj`. The right stream's keys are `x0` to `x7`, so no record finds a partner:
    /// each waits in the store `oj-outer-shared-join-store`, with both sides in it, and goes
    /// out as `left+null` or `null+right` once its window has closed. Each third ends with a
    /// round 50 s after the others, which closes every window before it (see [`input`]).
    OuterJoin,
}

impl Topo {
    pub fn java_name(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::Versioned => "versioned",
            Self::UnnamedCount => "unnamed-count",
            Self::WindowedCount => "windowed-count",
            Self::SessionCount => "session-count",
            Self::TableRegroup => "table-regroup-count",
            Self::UnnamedTableRegroup => "unnamed-table-regroup-count",
            Self::TableJoin => "table-join",
            Self::StreamJoin => "stream-join",
            Self::FkJoin => "fk-join",
            Self::StreamTable => "stream-table-join",
            Self::GlobalJoin => "global-join",
            Self::SuppressedCount => "suppressed-count",
            Self::EmitFinalCount => "emit-final-count",
            Self::LeftJoin => "left-join",
            Self::OuterJoin => "outer-join",
        }
    }

    pub fn store(self) -> &'static str {
        match self {
            Self::Count => "counts",
            Self::Versioned => "versions",
            Self::UnnamedCount => "KSTREAM-AGGREGATE-STATE-STORE-0000000003",
            Self::WindowedCount => "wcounts",
            Self::SessionCount => "scounts",
            Self::TableRegroup => "gcounts",
            Self::UnnamedTableRegroup => "KTABLE-AGGREGATE-STATE-STORE-0000000004",
            Self::TableJoin => "left",
            Self::StreamJoin => "sj-this-join-store",
            Self::FkJoin => "fk-subscription-store",
            Self::StreamTable | Self::GlobalJoin => "right",
            Self::SuppressedCount => "sup-store",
            Self::EmitFinalCount => "ecounts",
            Self::LeftJoin => "lj-left-shared-join-store",
            Self::OuterJoin => "oj-outer-shared-join-store",
        }
    }

    /// How many input topics it reads: every input `i` is one record on each (but see
    /// [`Topo::left_record`]).
    pub fn inputs(self) -> usize {
        if matches!(
            self,
            Self::TableJoin
                | Self::StreamJoin
                | Self::FkJoin
                | Self::StreamTable
                | Self::GlobalJoin
                | Self::LeftJoin
                | Self::OuterJoin
        ) {
            2
        } else {
            1
        }
    }

    /// Whether input `i` has a record on the first input topic. The foreign-key join's left
    /// rows are written in the first third only: every later answer goes to a subscription
    /// Kafka Streams made, through this runtime and back, so each side must check the
    /// other's hashes. The stream-table join's stream: see [`Topo::StreamTable`].
    pub fn left_record(self, i: usize) -> bool {
        let (third, key) = (i / PER_THIRD, i % KEYS);
        match self {
            Self::FkJoin => third == 0,
            Self::StreamTable | Self::GlobalJoin => third == 2 || (third == 1 && key % 2 == 0),
            _ => true,
        }
    }

    /// Whether input `i` has a record on the second input topic (of a topology that has one).
    pub fn right_record(self, i: usize) -> bool {
        let (third, key) = (i / PER_THIRD, i % KEYS);
        match self {
            Self::LeftJoin => false,
            Self::StreamTable | Self::GlobalJoin => third == 0 || (third == 1 && key % 2 == 1),
            _ => true,
        }
    }

    /// Whether input `i` has a record on input topic `t`.
    pub fn has_record(self, t: usize, i: usize) -> bool {
        match t {
            0 => self.left_record(i),
            _ => self.right_record(i),
        }
    }

    /// The records of the first `n` inputs whose offsets the group commits: over every
    /// input topic but a global table's.
    pub fn records(self, n: usize) -> usize {
        let committed = if self == Self::GlobalJoin {
            1
        } else {
            self.inputs()
        };
        (0..committed)
            .map(|t| (0..n).filter(|&i| self.has_record(t, i)).count())
            .sum()
    }
}

/// Input `i`: key `k<i % KEYS>`, in one of three windows after `base`, in turn; for the
/// suppressed count and the left join, 1 s after the previous round of keys instead (its
/// windows close); for the outer join, likewise from 100 s per third on, and the third's
/// last round 60 s into it, which closes every window before it whatever the passes over
/// the waiting records were.
pub fn input(topo: Topo, base: i64, i: usize) -> (String, i64) {
    let round = (i / KEYS) as i64;
    let at = match topo {
        Topo::SuppressedCount | Topo::EmitFinalCount | Topo::LeftJoin => round * 1_000,
        Topo::OuterJoin => {
            let (third, rounds) = ((i / PER_THIRD) as i64, (PER_THIRD / KEYS) as i64);
            let in_third = round % rounds;
            third * 100_000
                + if in_third == rounds - 1 {
                    60_000
                } else {
                    in_third * 1_000
                }
        }
        _ => (round % 3) * 10_000,
    };
    // The joins' rounds share one time: every partition's stream time is the round's.
    let key_offset = if matches!(topo, Topo::LeftJoin | Topo::OuterJoin) {
        0
    } else {
        (i % KEYS) as i64
    };
    (format!("k{}", i % KEYS), base + at + key_offset)
}

/// Input `i` on input topic `t`: as [`input`], but the outer join's right stream has the
/// keys `x0` to `x7`.
pub fn input_on(topo: Topo, base: i64, t: usize, i: usize) -> (String, i64) {
    let (key, at) = input(topo, base, i);
    if topo == Topo::OuterJoin && t == 1 {
        return (format!("x{}", &key[1..]), at);
    }
    (key, at)
}

/// The value of input `i` on input topic `t`: on the first a group, another one at each
/// update of the key; on the right table's topic, the update's number.
pub fn value(t: usize, i: usize) -> String {
    match t {
        0 => format!("g{}", (i / KEYS + i % KEYS) % 3),
        _ => format!("r{}", i / KEYS),
    }
}

/// The last values out after the first `n` inputs, keyed as the test's `Run::last_values` keys them.
pub fn values_after(topo: Topo, n: usize) -> BTreeMap<String, String> {
    if topo == Topo::Versioned {
        // Each key's versions by time; an input reads the newest at or before its time.
        let mut versions: BTreeMap<String, BTreeMap<i64, u64>> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for i in 0..n {
            let (key, at) = input(topo, 0, i);
            let history = versions.entry(key.clone()).or_default();
            let next = history.range(..=at).next_back().map_or(0, |(_, v)| *v) + 1;
            history.insert(at, next);
            out.insert(key, next.to_string());
        }
        return out;
    }
    if topo == Topo::TableJoin {
        // Both tables have every key updated by every input: the latest of each, joined.
        return (0..n)
            .map(|i| (input(topo, 0, i).0, format!("{}+{}", value(0, i), value(1, i))))
            .collect();
    }
    if topo == Topo::FkJoin {
        // Every left row, valued `g<n>`, joined with the latest right row `k<n>` (every
        // right key has a row from the first eight inputs on; left rows are written in
        // the first third only).
        let (mut left, mut right) = (BTreeMap::new(), BTreeMap::new());
        for i in 0..n {
            let (key, _) = input(topo, 0, i);
            if topo.left_record(i) {
                left.insert(key.clone(), value(0, i));
            }
            right.insert(key, value(1, i));
        }
        return left
            .into_iter()
            .filter_map(|(k, l)| {
                let r = right.get(&format!("k{}", &l[1..]))?;
                Some((k, format!("{l}+{r}")))
            })
            .collect();
    }
    if topo == Topo::LeftJoin {
        // Every round's left records wait; a record's turn to go out comes in a pass over
        // the waiting ones, which both implementations make before taking a record (round
        // `r`, time `now`) unless the time they track is within 2 s of `now`: the pass
        // emits what is older than `now - 2 s` and tracks the time of the last one it read
        // (a left join reads them all). Each side starts tracking afresh, at every third.
        let mut waiting = std::collections::BTreeSet::new();
        let (mut tracked, mut out) = (None::<i64>, 0u64);
        for round in 0..(n / KEYS) as i64 {
            if round % (PER_THIRD / KEYS) as i64 == 0 {
                tracked = None;
            }
            let now = round * 1_000;
            if tracked.is_none_or(|t| t + 2_000 < now) {
                waiting.retain(|&w: &i64| {
                    tracked = Some(w * 1_000);
                    let closed = w * 1_000 + 2_000 < now;
                    out += u64::from(closed);
                    !closed
                });
            }
            waiting.insert(round);
            tracked = Some(tracked.map_or(now, |t| t.min(now)));
        }
        return (0..KEYS)
            .map(|k| (format!("k{k}"), out.to_string()))
            .filter(|_| out > 0)
            .collect();
    }
    if matches!(topo, Topo::StreamTable | Topo::GlobalJoin) {
        // Each stream record joined with its key's latest table row, which is never
        // written in the same third as a stream record of the key.
        let (mut out, mut right) = (BTreeMap::new(), BTreeMap::new());
        for i in 0..n {
            let (key, _) = input(topo, 0, i);
            if topo.right_record(i) {
                right.insert(key.clone(), value(1, i));
            }
            if let Some(r) = right.get(&key).filter(|_| topo.left_record(i)) {
                out.insert(key, format!("{}+{r}", value(0, i)));
            }
        }
        return out;
    }
    if topo == Topo::OuterJoin {
        // Every record of every round but the last goes out unmatched: the last round
        // closed the windows of all before it.
        let out = (n / KEYS).saturating_sub(1);
        return (0..KEYS)
            .flat_map(|k| [format!("k{k}"), format!("x{k}")])
            .map(|key| (key, out.to_string()))
            .filter(|_| out > 0)
            .collect();
    }
    if topo == Topo::StreamJoin {
        // Every input is a record on both sides, at the same time: a key's pairs are those
        // of its inputs within 10 s of each other.
        let mut pairs: BTreeMap<String, u64> = BTreeMap::new();
        for i in 0..n {
            for j in 0..n {
                let ((ki, ti), (kj, tj)) = (input(topo, 0, i), input(topo, 0, j));
                if ki == kj && (ti - tj).abs() <= 10_000 {
                    *pairs.entry(ki).or_default() += 1;
                }
            }
        }
        return pairs.into_iter().map(|(k, n)| (k, n.to_string())).collect();
    }
    counts_after(topo, n)
        .into_iter()
        .map(|(k, n)| (k, n.to_string()))
        .collect()
}

/// The counts after the first `n` inputs, keyed as the test's `Run::last_values` keys them.
fn counts_after(topo: Topo, n: usize) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    if matches!(topo, Topo::TableRegroup | Topo::UnnamedTableRegroup) {
        // The keys of the table per group, as they are after each update.
        let mut latest = BTreeMap::new();
        for i in 0..n {
            let (key, _) = input(topo, 0, i);
            if let Some(old) = latest.insert(key, value(0, i)) {
                *counts.get_mut(&old).expect("a counted group") -= 1;
            }
            *counts.entry(value(0, i)).or_default() += 1;
        }
        return counts;
    }
    // The suppressed and emit-final counts' windows out: those the last round's time
    // closed (every partition has a key in every round, and no grace).
    let size = match topo {
        Topo::EmitFinalCount => FINAL_WINDOW.as_millis() as i64,
        _ => WINDOW.as_millis() as i64,
    };
    let closed = |at: i64| ((n.max(1) - 1) / KEYS) as i64 * 1_000 >= at - at % size + size;
    for i in 0..n {
        let (key, at) = input(topo, 0, i);
        // Every input of a key in a window has the same time: one session per window.
        let key = match topo {
            Topo::Count | Topo::UnnamedCount => key,
            Topo::SuppressedCount | Topo::EmitFinalCount if !closed(at) => continue,
            Topo::WindowedCount | Topo::SuppressedCount | Topo::EmitFinalCount => {
                format!("{key}@{}", at - at % size)
            }
            Topo::SessionCount => format!("{key}@{at}"),
            _ => unreachable!("counted above"),
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
}
