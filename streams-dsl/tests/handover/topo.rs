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

/// The topology both sides run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Topo {
    /// A count per key, in the store `counts`.
    Count,
    /// A count per key and 10-second window (an hour of grace), in the store `wcounts`.
    WindowedCount,
    /// A count per key and session of 5 s inactivity (an hour of grace), in the store
    /// `scounts`.
    SessionCount,
    /// The input read as a table (`latest`), re-grouped by value through the repartition
    /// topic `by-group`, and the keys per group counted in the store `gcounts`.
    TableRegroup,
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
    /// A count per key and 10-second window without grace, in the store `wcounts`, its
    /// final results only through the suppression `sup` (buffer store `sup-store`). Inputs
    /// move 1 s forward per round of keys (see [`input`]), so each third fills one window,
    /// which closes in the next third.
    SuppressedCount,
    /// The input left-joined with the stream `<input>-right` within 2 s, no grace, stores
    /// named `lj`. The right stream stays empty: each left record waits in the store
    /// `lj-left-shared-join-store` until its window has closed (3 or 4 rounds of keys
    /// later, see [`input`] and [`values_after`]) and goes out as `left+null`; the last
    /// rounds of each third wait for the next side.
    LeftJoin,
}

impl Topo {
    pub fn java_name(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::WindowedCount => "windowed-count",
            Self::SessionCount => "session-count",
            Self::TableRegroup => "table-regroup-count",
            Self::TableJoin => "table-join",
            Self::StreamJoin => "stream-join",
            Self::FkJoin => "fk-join",
            Self::SuppressedCount => "suppressed-count",
            Self::LeftJoin => "left-join",
        }
    }

    pub fn store(self) -> &'static str {
        match self {
            Self::Count => "counts",
            Self::WindowedCount => "wcounts",
            Self::SessionCount => "scounts",
            Self::TableRegroup => "gcounts",
            Self::TableJoin => "left",
            Self::StreamJoin => "sj-this-join-store",
            Self::FkJoin => "fk-subscription-store",
            Self::SuppressedCount => "sup-store",
            Self::LeftJoin => "lj-left-shared-join-store",
        }
    }

    /// How many input topics it reads: every input `i` is one record on each (but see
    /// [`Topo::left_record`]).
    pub fn inputs(self) -> usize {
        if matches!(
            self,
            Self::TableJoin | Self::StreamJoin | Self::FkJoin | Self::LeftJoin
        ) {
            2
        } else {
            1
        }
    }

    /// Whether input `i` has a record on the first input topic. The foreign-key join's left
    /// rows are written in the first third only: every later answer goes to a subscription
    /// Kafka Streams made, through this runtime and back, so each side must check the
    /// other's hashes.
    pub fn left_record(self, i: usize) -> bool {
        self != Self::FkJoin || i < PER_THIRD
    }

    /// Whether input `i` has a record on input topic `t`.
    pub fn has_record(self, t: usize, i: usize) -> bool {
        match t {
            0 => self.left_record(i),
            _ => self != Self::LeftJoin,
        }
    }

    /// The records of the first `n` inputs, over every input topic.
    pub fn records(self, n: usize) -> usize {
        (0..self.inputs())
            .map(|t| (0..n).filter(|&i| self.has_record(t, i)).count())
            .sum()
    }
}

/// Input `i`: key `k<i % KEYS>`, in one of three windows after `base`, in turn; for the
/// suppressed count, 1 s after the previous round of keys instead (its windows close).
pub fn input(topo: Topo, base: i64, i: usize) -> (String, i64) {
    let round = (i / KEYS) as i64;
    let at = match topo {
        Topo::SuppressedCount | Topo::LeftJoin => round * 1_000,
        _ => (round % 3) * 10_000,
    };
    // The left join's rounds share one time: every partition's stream time is the round's.
    let key_offset = if topo == Topo::LeftJoin {
        0
    } else {
        (i % KEYS) as i64
    };
    (format!("k{}", i % KEYS), base + at + key_offset)
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
    if topo == Topo::TableRegroup {
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
    // The suppressed count's windows out: those the last round's time closed (every
    // partition has a key in every round, and no grace).
    let closed = |at: i64| ((n.max(1) - 1) / KEYS) as i64 * 1_000 >= at - at % 10_000 + 10_000;
    for i in 0..n {
        let (key, at) = input(topo, 0, i);
        // Every input of a key in a window has the same time: one session per window.
        let key = match topo {
            Topo::Count => key,
            Topo::SuppressedCount if !closed(at) => continue,
            Topo::WindowedCount | Topo::SuppressedCount => format!("{key}@{}", at - at % 10_000),
            Topo::SessionCount => format!("{key}@{at}"),
            Topo::TableRegroup | Topo::TableJoin | Topo::StreamJoin | Topo::FkJoin | Topo::LeftJoin => {
                unreachable!("counted above")
            }
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
}
