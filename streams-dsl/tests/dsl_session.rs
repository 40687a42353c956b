//! Session windows in the TopologyTestDriver: sessions growing forwards and backwards,
//! sessions merged by a bridging record (with a deletion for each merged session), late
//! records dropped exactly at `end + gap + grace`, `count`/`reduce`/`aggregate`, final
//! results on window close, `suppress`, naming, and a property test against a brute-force
//! model of the sessions. Stores are uncached (cached ones: `dsl_cache_forwarding.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::Serde;
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    BufferConfig, Consumed, DslError, DslIssue, EmitStrategy, Grouped, KGroupedStream, Materialized,
    Produced, SessionWindowedSerde, SessionWindows, StreamsBuilder, Suppressed, Windowed,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn grouped(b: &StreamsBuilder) -> KGroupedStream<String, String> {
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
}

type Update<V> = (String, i64, i64, Option<V>, i64);

/// Session-windowed string keys and nullable values of `values`.
fn produced<VS: Serde + Clone>(values: VS) -> Produced<SessionWindowedSerde<String>, NullableSerde<VS>> {
    Produced::with(SessionWindowedSerde::new(StringSerde), NullableSerde(values))
}

fn driver_of(b: &StreamsBuilder) -> TopologyTestDriver {
    TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap()
}

/// Pipes `(key, timestamp, value)` records into topic `in`.
fn pipe_all(driver: &TopologyTestDriver, records: &[(String, i64, u64)]) {
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for (k, t, v) in records {
        input.pipe_at(k.clone(), v.to_string(), *t).unwrap();
    }
}

/// `(key, start, end, value, timestamp)` of every record on `topic`.
fn read<V: Clone + 'static>(
    driver: &TopologyTestDriver,
    topic: &str,
    serde: impl Serde<Target = V> + Clone + 'static,
) -> Vec<Update<V>> {
    driver
        .output_topic(
            topic,
            SessionWindowedSerde::new(StringSerde),
            NullableSerde(serde),
        )
        .read_records()
        .unwrap()
        .into_iter()
        .map(|r| (r.key.key, r.key.start, r.key.end, r.value, r.timestamp))
        .collect()
}

/// The updates on topic `out` since the last call.
struct Tail<'a> {
    driver: &'a TopologyTestDriver,
    seen: std::cell::Cell<usize>,
}

impl<'a> Tail<'a> {
    fn new(driver: &'a TopologyTestDriver) -> Self {
        Self {
            driver,
            seen: std::cell::Cell::new(0),
        }
    }

    fn next(&self) -> Vec<Update<u64>> {
        let all = read(self.driver, "out", U64Serde);
        let new = all[self.seen.get()..].to_vec();
        self.seen.set(all.len());
        new
    }
}

fn u(k: &str, start: i64, end: i64, v: Option<u64>) -> Update<u64> {
    (k.to_owned(), start, end, v, end)
}

/// A store without caching: every update is forwarded.
fn uncached<V: 'static>(name: &str) -> Materialized<String, V> {
    Materialized::as_(name).without_caching()
}

/// Counts per session of `gap` and `grace` (ms) to topic `out`.
fn count_driver(gap: u64, grace: u64, emit: EmitStrategy) -> TopologyTestDriver {
    let b = StreamsBuilder::new();
    grouped(&b)
        .windowed_by_session(SessionWindows::of_inactivity_gap_with_grace(ms(gap), ms(grace)))
        .emit_strategy(emit)
        .count(uncached("sessions"))
        .to_stream()
        .to("out", produced(U64Serde));
    driver_of(&b)
}

fn pipe(driver: &TopologyTestDriver, k: &str, t: i64) {
    driver
        .input_topic("in", StringSerde, StringSerde)
        .pipe_at(k.into(), "1".into(), t)
        .unwrap();
}

#[test]
fn a_bridging_record_merges_two_sessions_and_deletes_them() {
    // A long grace keeps every session readable (retention = gap + grace).
    let driver = count_driver(10, 100, EmitStrategy::on_window_update());
    let tail = Tail::new(&driver);
    pipe(&driver, "a", 0);
    pipe(&driver, "a", 5);
    pipe(&driver, "b", 6);
    pipe(&driver, "a", 20);
    assert_eq!(
        tail.next(),
        [
            u("a", 0, 0, Some(1)),
            u("a", 0, 0, None),
            u("a", 0, 5, Some(2)),
            u("b", 6, 6, Some(1)),
            u("a", 20, 20, Some(1)),
        ]
    );
    // 12 is within the gap of both [0, 5] and [20, 20]: one session [0, 20] of 4 records.
    pipe(&driver, "a", 12);
    assert_eq!(
        tail.next(),
        [u("a", 0, 5, None), u("a", 20, 20, None), u("a", 0, 20, Some(4)),]
    );
    // Exactly the gap after the end still extends the session; one more does not.
    pipe(&driver, "a", 30);
    pipe(&driver, "b", 17);
    assert_eq!(
        tail.next(),
        [
            u("a", 0, 20, None),
            u("a", 0, 30, Some(5)),
            u("b", 17, 17, Some(1)),
        ]
    );
}

#[test]
fn out_of_order_records_extend_a_session_backwards_and_inside() {
    let driver = count_driver(10, 100, EmitStrategy::on_window_update());
    let tail = Tail::new(&driver);
    pipe(&driver, "a", 50);
    pipe(&driver, "a", 42);
    pipe(&driver, "a", 45);
    pipe(&driver, "a", 50);
    assert_eq!(
        tail.next(),
        [
            u("a", 50, 50, Some(1)),
            u("a", 50, 50, None),
            u("a", 42, 50, Some(2)),
            // Inside the session: the same session key, deleted and written again.
            u("a", 42, 50, None),
            u("a", 42, 50, Some(3)),
            u("a", 42, 50, None),
            u("a", 42, 50, Some(4)),
        ]
    );
}

#[test]
fn a_record_at_the_same_time_as_a_single_record_session_overwrites_it() {
    let driver = count_driver(10, 0, EmitStrategy::on_window_update());
    let tail = Tail::new(&driver);
    pipe(&driver, "a", 7);
    pipe(&driver, "a", 7);
    assert_eq!(
        tail.next(),
        [u("a", 7, 7, Some(1)), u("a", 7, 7, Some(2))],
        "the merged session is [t, t]: nothing is removed"
    );
}

#[test]
fn late_records_are_dropped_exactly_when_end_plus_gap_plus_grace_is_before_stream_time() {
    // gap 10, grace 5: at stream time 100 the close time is 85.
    let driver = count_driver(10, 5, EmitStrategy::on_window_update());
    let tail = Tail::new(&driver);
    pipe(&driver, "a", 100);
    pipe(&driver, "b", 85); // end 85 == close: accepted
    pipe(&driver, "c", 84); // end 84 < close: dropped
    pipe(&driver, "e", 90);
    pipe(&driver, "e", 82); // late alone, but merged into [82, 90], which is open
    assert_eq!(
        tail.next(),
        [
            u("a", 100, 100, Some(1)),
            u("b", 85, 85, Some(1)),
            u("e", 90, 90, Some(1)),
            u("e", 90, 90, None),
            u("e", 82, 90, Some(2)),
        ]
    );
    pipe(&driver, "a", 106); // close 91
    pipe(&driver, "e", 83); // [82, 90] ended before 91: dropped
    pipe(&driver, "f", 91); // accepted
    assert_eq!(
        tail.next(),
        [
            u("a", 100, 100, None),
            u("a", 100, 106, Some(2)),
            u("f", 91, 91, Some(1)),
        ]
    );
}

#[test]
fn sessions_ending_before_the_retention_are_not_merged_as_in_kafka_streams() {
    // Retention gap + grace = 15: at the latest end 100, a session ending at 85 is no
    // longer read, though a record at 85 was still accepted.
    let driver = count_driver(10, 5, EmitStrategy::on_window_update());
    let tail = Tail::new(&driver);
    pipe(&driver, "a", 100);
    pipe(&driver, "b", 85);
    pipe(&driver, "b", 86); // within the gap of [85, 85], which is not read: a new session
    assert_eq!(
        tail.next(),
        [
            u("a", 100, 100, Some(1)),
            u("b", 85, 85, Some(1)),
            u("b", 86, 86, Some(1)),
        ]
    );
}

#[test]
fn reduce_and_aggregate_merge_in_store_order() {
    let b = StreamsBuilder::new();
    let sessions =
        grouped(&b).windowed_by_session(SessionWindows::of_inactivity_gap_with_grace(ms(10), ms(100)));
    sessions
        .reduce(|a, v| format!("{a}+{v}"), uncached("reduced"))
        .to_stream()
        .to("reduced", produced(StringSerde));
    sessions
        .aggregate(
            || "i".to_owned(),
            |_, v, agg| format!("{agg}.{v}"),
            |k, agg, other| format!("({agg}|{k}:{other})"),
            uncached("aggregated").with_value_serde(StringSerde),
        )
        .to_stream()
        .to("aggregated", produced(StringSerde));
    let driver = driver_of(&b);
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for (v, t) in [("x", 0), ("y", 20), ("z", 10)] {
        input.pipe_at("k".into(), v.into(), t).unwrap();
    }
    let s = |start, end, v: Option<&str>| ("k".to_owned(), start, end, v.map(str::to_owned), end);
    assert_eq!(
        read(&driver, "reduced", StringSerde),
        [
            s(0, 0, Some("x")),
            s(20, 20, Some("y")),
            s(0, 0, None),
            s(20, 20, None),
            s(0, 20, Some("x+y+z")),
        ]
    );
    assert_eq!(
        read(&driver, "aggregated", StringSerde),
        [
            s(0, 0, Some("i.x")),
            s(20, 20, Some("i.y")),
            s(0, 0, None),
            s(20, 20, None),
            s(0, 20, Some("((i|k:i.x)|k:i.y).z")),
        ]
    );
}

#[test]
fn on_window_close_forwards_each_session_once_after_end_plus_gap_plus_grace() {
    let driver = count_driver(10, 5, EmitStrategy::on_window_close());
    let tail = Tail::new(&driver);
    pipe(&driver, "a", 0);
    pipe(&driver, "a", 5);
    pipe(&driver, "b", 3);
    assert!(tail.next().is_empty());
    pipe(&driver, "a", 20); // close 5: sessions ending before 5
    assert_eq!(tail.next(), [u("b", 3, 3, Some(1))]);
    pipe(&driver, "c", 21); // close 6
    assert_eq!(tail.next(), [u("a", 0, 5, Some(2))]);
    pipe(&driver, "a", 30); // close 15: nothing ends in [6, 14]
    pipe(&driver, "a", 21); // merged into [20, 30]
    assert!(tail.next().is_empty());
    pipe(&driver, "z", 100); // close 85: by end
    assert_eq!(tail.next(), [u("c", 21, 21, Some(1)), u("a", 20, 30, Some(3))]);
    pipe(&driver, "z", 99); // no progress: nothing
    pipe(&driver, "y", 200);
    assert_eq!(tail.next(), [u("z", 99, 100, Some(2))]);
}

#[test]
fn final_results_come_by_end_then_start_then_key() {
    let driver = count_driver(10, 0, EmitStrategy::on_window_close());
    let tail = Tail::new(&driver);
    pipe(&driver, "a", 5);
    pipe(&driver, "b", 0);
    pipe(&driver, "b", 5);
    pipe(&driver, "c", 5);
    pipe(&driver, "z", 16); // close 6
    assert_eq!(
        tail.next(),
        [
            u("b", 0, 5, Some(2)),
            u("a", 5, 5, Some(1)),
            u("c", 5, 5, Some(1))
        ]
    );
}

#[test]
fn final_results_are_not_repeated_after_a_restart() {
    use streams_dsl::DynSerde;
    type Store = streams_core::state::SessionStore<DynSerde<String>, DynSerde<u64>>;
    let driver = count_driver(10, 5, EmitStrategy::on_window_close());
    let tail = Tail::new(&driver);
    for (k, t) in [("a", 0), ("a", 5), ("b", 3), ("a", 20)] {
        pipe(&driver, k, t);
    }
    assert_eq!(tail.next(), [u("b", 3, 3, Some(1))]);
    driver.commit().unwrap();
    let sessions: Vec<_> = {
        let store: Store = driver.session_store("sessions").unwrap();
        let reader = store.read().unwrap();
        reader.all().unwrap().map(Result::unwrap).collect()
    };
    let spans: Vec<_> = sessions
        .iter()
        .map(|(w, _)| (w.key.as_str(), w.start, w.end))
        .collect();
    assert_eq!(
        spans,
        [("a", 0, 5), ("a", 20, 20)],
        "[3, 3] is past the retention"
    );
    let times = driver.processor_metadata();
    assert_eq!(
        times.keys().collect::<Vec<_>>(),
        ["sessions"],
        "the emitted close time is kept"
    );
    drop(driver);

    // A new instance with both stores restored: [3, 3] is not emitted again; [0, 5] is
    // when it closes, and a record at 30 still merges with [20, 20].
    let driver = count_driver(10, 5, EmitStrategy::on_window_close());
    let tail = Tail::new(&driver);
    let store: Store = driver.session_store("sessions").unwrap();
    for (w, v) in &sessions {
        store.put(w, v).unwrap();
    }
    driver.resume_processor_metadata(&times);
    pipe(&driver, "c", 21);
    assert_eq!(tail.next(), [u("a", 0, 5, Some(2))]);
    pipe(&driver, "a", 30);
    pipe(&driver, "z", 100);
    assert_eq!(tail.next(), [u("c", 21, 21, Some(1)), u("a", 20, 30, Some(2))]);
}

#[test]
fn suppress_until_window_closes_forwards_final_sessions() {
    let b = StreamsBuilder::new();
    grouped(&b)
        .windowed_by_session(SessionWindows::of_inactivity_gap_with_grace(ms(10), ms(5)))
        .count(Materialized::as_("sessions"))
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_stream()
        .to("out", produced(U64Serde));
    let driver = driver_of(&b);
    let tail = Tail::new(&driver);
    pipe(&driver, "a", 0);
    pipe(&driver, "a", 5);
    pipe(&driver, "b", 19);
    assert!(tail.next().is_empty());
    pipe(&driver, "b", 20); // stream time 20 = end 5 + gap 10 + grace 5
    assert_eq!(tail.next(), [u("a", 0, 5, Some(2))]);
    pipe(&driver, "c", 35);
    assert_eq!(tail.next(), [u("b", 19, 20, Some(2))]);
}

#[test]
fn nodes_and_stores_are_named_by_the_naming_rule() {
    let b = StreamsBuilder::new();
    let sessions = grouped(&b).windowed_by_session(SessionWindows::of_inactivity_gap_no_grace(ms(10)));
    let counted = sessions.count(Materialized::new());
    let reduced = sessions.reduce(|a, _| a, Materialized::new());
    let aggregated = sessions.aggregate(
        || 0u64,
        |_, _, a| a,
        |_, a, b| a + b,
        Materialized::new().with_value_serde(U64Serde),
    );
    let closed = sessions
        .clone()
        .emit_strategy(EmitStrategy::on_window_close())
        .count(Materialized::as_("final"));
    assert_eq!(counted.node_name(), "in-source-session_count");
    assert_eq!(counted.store_name(), Some("in-source-session_count-store"));
    assert_eq!(reduced.node_name(), "in-source-session_reduce");
    assert_eq!(aggregated.node_name(), "in-source-session_aggregate");
    assert_eq!(closed.node_name(), "final");
    let described = b.build().unwrap().describe().to_string();
    assert!(
        described.contains("Processor: in-source-session_count (stores: [in-source-session_count-store])"),
        "{described}"
    );
    assert!(
        described.contains("Processor: final (stores: [final])"),
        "{described}"
    );
}

#[test]
fn a_retention_below_gap_plus_grace_is_a_build_error() {
    let b = StreamsBuilder::new();
    grouped(&b)
        .windowed_by_session(SessionWindows::of_inactivity_gap_with_grace(ms(10), ms(5)))
        .count(Materialized::as_("short").with_retention(ms(14)));
    match b.build() {
        Err(DslError::Invalid(issues)) => assert_eq!(
            issues,
            [DslIssue::RetentionTooShort {
                operator: "short".into(),
                retention_ms: 14,
                least_ms: 15,
            }]
        ),
        other => panic!("expected a retention issue, got {other:?}"),
    }
}

/// The final sessions of the brute-force model: each accepted record joins every visible
/// session of its key within `gap` of it. A record is accepted iff the session it would
/// make ends at or after `stream time - gap - grace`; a session is visible while its end
/// is after `latest end - (gap + grace)`. Values: (count, sum).
fn model(records: &[(String, i64, u64)], gap: i64, grace: i64) -> BTreeMap<Windowed<String>, (u64, u64)> {
    // Per key: sessions as the accepted records in them.
    let mut sessions: BTreeMap<String, Vec<Vec<(i64, u64)>>> = BTreeMap::new();
    let (mut observed, mut max_end) = (i64::MIN, i64::MIN);
    for (k, t, v) in records {
        observed = observed.max(*t);
        let of_key = sessions.entry(k.clone()).or_default();
        let span = |s: &Vec<(i64, u64)>| {
            let times = s.iter().map(|(t, _)| *t);
            (times.clone().min().unwrap(), times.max().unwrap())
        };
        let (joined, kept): (Vec<_>, Vec<_>) = of_key.drain(..).partition(|s| {
            let (start, end) = span(s);
            end > max_end.saturating_sub(gap + grace) && end >= t - gap && start <= t + gap
        });
        let mut merged: Vec<(i64, u64)> = joined.iter().flatten().copied().collect();
        merged.push((*t, *v));
        let (_, end) = span(&merged);
        *of_key = kept;
        if end < observed - gap - grace {
            of_key.extend(joined); // dropped
        } else {
            max_end = max_end.max(end);
            of_key.push(merged);
        }
    }
    let mut out = BTreeMap::new();
    for (k, of_key) in sessions {
        for s in of_key {
            let start = s.iter().map(|(t, _)| *t).min().unwrap();
            let end = s.iter().map(|(t, _)| *t).max().unwrap();
            let sum = s.iter().map(|(_, v)| v).sum();
            let key = Windowed {
                key: k.clone(),
                start,
                end,
            };
            out.insert(key, (s.len() as u64, sum));
        }
    }
    out
}

/// The final table: the latest update per session key, deletions removing it.
fn table<V>(updates: Vec<Update<V>>) -> BTreeMap<Windowed<String>, V> {
    let mut t = BTreeMap::new();
    for (key, start, end, v, _) in updates {
        let w = Windowed { key, start, end };
        match v {
            Some(v) => t.insert(w, v),
            None => t.remove(&w),
        };
    }
    t
}

fn run(records: &[(String, i64, u64)], gap: i64, grace: i64) -> BTreeMap<Windowed<String>, (u64, u64)> {
    let b = StreamsBuilder::new();
    let sessions = grouped(&b).windowed_by_session(SessionWindows::of_inactivity_gap_with_grace(
        ms(gap as u64),
        ms(grace as u64),
    ));
    let out = produced(U64Serde);
    sessions
        .count(uncached("count").in_memory())
        .to_stream()
        .to("count", out.clone());
    sessions
        .aggregate(
            || 0u64,
            |_, v: String, sum| sum + v.parse::<u64>().unwrap_or(0),
            |_, a, b| a + b,
            uncached("sum").with_value_serde(U64Serde).in_memory(),
        )
        .to_stream()
        .to("sum", out);
    let driver = driver_of(&b);
    pipe_all(&driver, records);
    let counts = table(read(&driver, "count", U64Serde));
    let sums = table(read(&driver, "sum", U64Serde));
    assert_eq!(counts.keys().collect::<Vec<_>>(), sums.keys().collect::<Vec<_>>());
    counts
        .into_iter()
        .map(|(k, c)| {
            let s = sums[&k];
            (k, (c, s))
        })
        .collect()
}

/// The sessions forwarded with final results only, after a far later record closes all of
/// them; each must be forwarded once.
fn run_final(records: &[(String, i64, u64)], gap: i64, grace: i64) -> BTreeMap<Windowed<String>, u64> {
    let driver = count_driver(gap as u64, grace as u64, EmitStrategy::on_window_close());
    pipe_all(&driver, records);
    pipe_all(&driver, &[("z".into(), 1_000_000, 0)]);
    let mut out = BTreeMap::new();
    for (key, start, end, v, ts) in read(&driver, "out", U64Serde) {
        assert_eq!(ts, end);
        let previous = out.insert(Windowed { key, start, end }, v.unwrap());
        assert!(previous.is_none(), "a session forwarded twice");
    }
    out
}

/// Generated `(key index, timestamp, value)` with keys `a` and `b`.
fn keyed(raw: &[(usize, i64, u64)]) -> Vec<(String, i64, u64)> {
    raw.iter()
        .map(|(k, t, v)| (["a", "b"][*k].to_owned(), *t, *v))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The final table (latest value per session, deletions removing) is the model's.
    #[test]
    fn sessions_match_the_brute_force_model(
        gap in 1i64..12,
        grace in 0i64..20,
        raw in prop::collection::vec((0usize..2, 0i64..80, 0u64..5), 1..40),
    ) {
        let records = keyed(&raw);
        prop_assert_eq!(run(&records, gap, grace), model(&records, gap, grace));
    }

    /// With final results only, each of the model's sessions is forwarded once, with its
    /// final count.
    #[test]
    fn final_results_are_the_model_sessions(
        gap in 1i64..12,
        grace in 0i64..20,
        raw in prop::collection::vec((0usize..2, 0i64..80, 0u64..5), 1..40),
    ) {
        let records = keyed(&raw);
        let expected: BTreeMap<_, _> = model(&records, gap, grace)
            .into_iter()
            .map(|(k, (count, _))| (k, count))
            .collect();
        prop_assert_eq!(run_final(&records, gap, grace), expected);
    }
}
