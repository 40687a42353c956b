//! Sliding-window aggregation in the TopologyTestDriver: Kafka Streams' window-creation
//! rules (left windows `[t - d, t]`, right windows `[t + 1, t + 1 + d]`, the shared early
//! window `[0, d]`), out-of-order and late records, the grace boundary, and a property test
//! against a brute-force model that recomputes every window from the record set.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    Consumed, DynSerde, Grouped, Materialized, Produced, SlidingWindows, StreamsBuilder,
    ValueAndTimestampSerde, WindowedSerde,
};
use streams_test_utils::{DriverConfig, TestOutputTopic, TopologyTestDriver};

const D: u64 = 10;

type Out = TestOutputTopic<WindowedSerde<String>, NullableSerde<U64Serde>>;

/// Sliding counts of difference `D` with `grace`, out to `counts`, and that topic.
fn count_driver(grace: u64) -> (TopologyTestDriver, Out) {
    let b = StreamsBuilder::new();
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .windowed_by_sliding(SlidingWindows::of_time_difference_with_grace(
            Duration::from_millis(D),
            Duration::from_millis(grace),
        ))
        .count(Materialized::as_("sliding-counts"))
        .to_stream()
        .to(
            "counts",
            Produced::with(
                WindowedSerde::new(StringSerde, Duration::from_millis(D)),
                NullableSerde(U64Serde),
            ),
        );
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let out = driver.output_topic(
        "counts",
        WindowedSerde::new(StringSerde, Duration::from_millis(D)),
        NullableSerde(U64Serde),
    );
    (driver, out)
}

/// `(start, end, count, timestamp)` of every update forwarded since the last call.
fn updates(out: &Out) -> Vec<(i64, i64, u64, i64)> {
    out.read_records()
        .unwrap()
        .into_iter()
        .map(|r| {
            let k = r.key;
            (k.start, k.end, r.value.unwrap(), r.timestamp)
        })
        .collect()
}

fn pipe(driver: &TopologyTestDriver, ts: i64) {
    driver
        .input_topic("in", StringSerde, StringSerde)
        .pipe_at("a".into(), "v".into(), ts)
        .unwrap();
}

#[test]
fn in_order_records_create_left_and_right_windows() {
    let (driver, out) = count_driver(100);
    pipe(&driver, 10);
    assert_eq!(updates(&out), [(0, 10, 1, 10)]);
    pipe(&driver, 15);
    // 10's right window [11, 21] now holds 15; 15's left window copies [0, 10] plus 15.
    assert_eq!(updates(&out), [(11, 21, 1, 15), (5, 15, 2, 15)]);
    pipe(&driver, 30);
    // Nothing within 10 before 30: a new left window only; 15's right window would be empty.
    assert_eq!(updates(&out), [(20, 30, 1, 30)]);
}

#[test]
fn out_of_order_records_update_existing_windows_and_create_right_windows() {
    let (driver, out) = count_driver(100);
    pipe(&driver, 30);
    pipe(&driver, 25);
    assert_eq!(
        updates(&out),
        [
            (20, 30, 1, 30),
            // 25 falls in [20, 30], which keeps 30 as its timestamp...
            (20, 30, 2, 30),
            // ...gets its own left window...
            (15, 25, 1, 25),
            // ...and a right window holding 30.
            (26, 36, 1, 30),
        ]
    );
}

#[test]
fn records_before_the_difference_share_the_window_from_zero() {
    let (driver, out) = count_driver(100);
    pipe(&driver, 5);
    pipe(&driver, 3);
    pipe(&driver, 12);
    assert_eq!(
        updates(&out),
        [
            (0, 10, 1, 5),
            (4, 14, 1, 5),
            (0, 10, 2, 5),
            (4, 14, 2, 12),
            (6, 16, 1, 12),
            (2, 12, 3, 12),
        ]
    );
}

#[test]
fn a_window_takes_records_until_stream_time_passes_its_end_plus_grace() {
    let (driver, out) = count_driver(5);
    pipe(&driver, 100);
    pipe(&driver, 95);
    assert_eq!(
        updates(&out),
        [
            (90, 100, 1, 100),
            (90, 100, 2, 100),
            // Stream time 100 = 95 + 5: [85, 95] is still open (inclusive end).
            (85, 95, 1, 95),
            (96, 106, 1, 100),
        ]
    );
    pipe(&driver, 101);
    assert_eq!(
        updates(&out),
        [(96, 106, 2, 101), (101, 111, 1, 101), (91, 101, 3, 101)]
    );
    // Stream time 101: [85, 95] closed, and 93's own left window [83, 93] too; the open
    // windows holding 93 take it, and its right window is created.
    pipe(&driver, 93);
    assert_eq!(
        updates(&out),
        [(91, 101, 4, 101), (90, 100, 3, 100), (94, 104, 3, 101)]
    );
    // 90's windows all end before 96: dropped.
    pipe(&driver, 85);
    assert_eq!(updates(&out), []);
    let store = driver
        .window_store::<DynSerde<String>, ValueAndTimestampSerde<DynSerde<u64>>>("sliding-counts")
        .unwrap();
    assert_eq!(
        store.fetch(&"a".to_owned(), 85).unwrap().map(|v| v.value),
        Some(1)
    );
    assert_eq!(store.fetch(&"a".to_owned(), 83).unwrap(), None);
}

/// Every window of the brute-force model: per key, the left window of each record
/// (`[max(0, t - d), ...]`), the right window of each record with a later record within
/// `d + 1` after it, each holding the values of the records in it, in arrival order.
fn model(records: &[(String, i64, String)], d: i64) -> BTreeMap<(String, i64), (String, i64)> {
    let mut starts: BTreeMap<(String, i64), ()> = BTreeMap::new();
    for (k, t, _) in records {
        starts.insert((k.clone(), (t - d).max(0)), ());
        if records
            .iter()
            .any(|(k2, t2, _)| k2 == k && *t2 > *t && *t2 <= t + 1 + d)
        {
            starts.insert((k.clone(), t + 1), ());
        }
    }
    starts
        .into_keys()
        .map(|(k, s)| {
            let inside: Vec<_> = records
                .iter()
                .filter(|(k2, t, _)| *k2 == k && (s..=s + d).contains(t))
                .collect();
            let agg = inside
                .iter()
                .map(|(_, _, v)| v.as_str())
                .collect::<Vec<_>>()
                .join(",");
            let ts = inside.iter().map(|(_, t, _)| *t).max().unwrap_or(-1);
            ((k, s), (agg, ts))
        })
        .collect()
}

fn run(records: &[(String, i64, String)], d: i64) -> BTreeMap<(String, i64), (String, i64)> {
    let b = StreamsBuilder::new();
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .windowed_by_sliding(SlidingWindows::of_time_difference_with_grace(
            Duration::from_millis(d as u64),
            Duration::from_secs(3600),
        ))
        .aggregate(
            String::new,
            |_, v, agg| if agg.is_empty() { v } else { format!("{agg},{v}") },
            Materialized::as_("concat")
                .with_value_serde(StringSerde)
                .in_memory(),
        );
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for (k, t, v) in records {
        input.pipe_at(k.clone(), v.clone(), *t).unwrap();
    }
    let store = driver
        .window_store::<DynSerde<String>, ValueAndTimestampSerde<DynSerde<String>>>("concat")
        .unwrap();
    let reader = store.read().unwrap();
    reader
        .all()
        .unwrap()
        .map(|e| {
            let (w, v) = e.unwrap();
            assert_eq!(w.end, w.start + d);
            ((w.key, w.start), (v.value, v.timestamp))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// With no record late, the store holds exactly the model's windows, each with the
    /// aggregate of its records in arrival order and their largest timestamp.
    #[test]
    fn sliding_windows_match_the_brute_force_model(
        d in 0i64..15,
        raw in prop::collection::vec((0usize..2, 0i64..60), 1..30),
    ) {
        let records: Vec<(String, i64, String)> = raw
            .iter()
            .enumerate()
            .map(|(i, (k, t))| (["a", "b"][*k].to_owned(), *t, format!("v{i}")))
            .collect();
        prop_assert_eq!(run(&records, d), model(&records, d));
    }
}
