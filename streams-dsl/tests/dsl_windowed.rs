//! Tumbling-window counts in the TopologyTestDriver: per-window results, late records
//! dropped after the grace period, expired windows removed from the store, the retention
//! of `Materialized::with_retention`, and `reduce`.

use std::time::Duration;

use streams_core::serdes::StringSerde;
use streams_dsl::{
    Consumed, DslError, DslIssue, DynSerde, Grouped, Materialized, StreamsBuilder, TimeWindows,
    ValueAndTimestampSerde,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

#[path = "common/window_counts.rs"]
mod window_counts;
use window_counts::{SIZE, count_topology, counts_topic, w};

fn driver() -> TopologyTestDriver {
    let windows = TimeWindows::of_size_with_grace(SIZE, Duration::from_secs(5));
    window_counts::count_driver(
        Consumed::with(StringSerde, StringSerde),
        windows,
        "clicks-per-10s",
    )
}

#[test]
fn counts_per_key_and_tumbling_window() {
    let driver = driver();
    let input = driver.input_topic("clicks", StringSerde, StringSerde);
    for (k, t) in [
        ("a", 1_000),
        ("a", 9_999),
        ("b", 5_000),
        ("a", 10_000),
        ("a", 12_000),
    ] {
        input.pipe_at(k.into(), "x".into(), t).unwrap();
    }
    let out = counts_topic(&driver);
    assert_eq!(
        out.read_key_values().unwrap(),
        [
            (w("a", 0), Some(1)),
            (w("a", 0), Some(2)),
            (w("b", 0), Some(1)),
            (w("a", 10_000), Some(1)),
            (w("a", 10_000), Some(2)),
        ]
    );
}

#[test]
fn late_records_are_dropped_and_expired_windows_leave_the_store() {
    let driver = driver();
    let input = driver.input_topic("clicks", StringSerde, StringSerde);
    input.pipe_at("a".into(), "x".into(), 1_000).unwrap();
    input.pipe_at("a".into(), "x".into(), 14_000).unwrap();
    // Window [0, 10s) is still open until 10s + 5s grace.
    input
        .pipe_at("a".into(), "late but in grace".into(), 2_000)
        .unwrap();
    input.pipe_at("a".into(), "x".into(), 15_000).unwrap();
    // Now it is closed.
    input.pipe_at("a".into(), "too late".into(), 3_000).unwrap();
    let out = counts_topic(&driver);
    let got = out.read_key_values().unwrap();
    assert_eq!(got.iter().filter(|(k, _)| k.start == 0).count(), 2, "{got:?}");

    let store = driver
        .window_store::<DynSerde<String>, ValueAndTimestampSerde<DynSerde<u64>>>("clicks-per-10s")
        .unwrap();
    assert_eq!(store.fetch(&"a".to_owned(), 0).unwrap().map(|v| v.value), Some(2));
    // Stream time far ahead: the punctuator removes windows older than size + grace.
    input.pipe_at("b".into(), "x".into(), 60_000).unwrap();
    assert_eq!(store.fetch(&"a".to_owned(), 0).unwrap().map(|v| v.value), None);
    assert_eq!(
        store.fetch(&"a".to_owned(), 10_000).unwrap().map(|v| v.value),
        None
    );
    assert_eq!(
        store.fetch(&"b".to_owned(), 60_000).unwrap().map(|v| v.value),
        Some(1)
    );
}

#[test]
fn a_longer_retention_keeps_windows_readable_and_a_shorter_one_is_a_build_error() {
    let build = |retention: Duration| {
        let b = StreamsBuilder::new();
        b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
            .group_by_key(Grouped::new())
            .windowed_by(TimeWindows::of_size_with_grace(SIZE, Duration::from_secs(5)))
            .reduce(
                |a, v| format!("{a}+{v}"),
                Materialized::as_("kept").with_retention(retention),
            );
        b.build()
    };
    let driver =
        TopologyTestDriver::new(build(Duration::from_secs(60)).unwrap(), DriverConfig::default()).unwrap();
    let input = driver.input_topic("clicks", StringSerde, StringSerde);
    input.pipe_at("a".into(), "x".into(), 1_000).unwrap();
    input.pipe_at("a".into(), "y".into(), 2_000).unwrap();
    input.pipe_at("b".into(), "z".into(), 50_000).unwrap();
    let store = driver
        .window_store::<DynSerde<String>, ValueAndTimestampSerde<DynSerde<String>>>("kept")
        .unwrap();
    // 50 s behind the latest window: out of the default 15 s retention, inside 60 s.
    assert_eq!(
        store.fetch(&"a".to_owned(), 0).unwrap().map(|v| v.value),
        Some("x+y".to_owned())
    );

    match build(Duration::from_secs(14)) {
        Err(DslError::Invalid(issues)) => assert!(
            matches!(&issues[..], [DslIssue::RetentionTooShort { operator, retention_ms: 14_000, least_ms: 15_000 }] if operator == "kept"),
            "{issues:?}"
        ),
        other => panic!("expected a retention error, got {:?}", other.map(|_| ())),
    }
}

/// A windowed key goes to its base key's partition whatever the window, as Kafka Streams'
/// `WindowedStreamPartitioner` places it, so every window of a key is in one partition.
#[test]
fn windowed_keys_are_partitioned_by_their_base_key() {
    let consumed = Consumed::with(StringSerde, StringSerde);
    let topology = count_topology(consumed, TimeWindows::of_size_no_grace(SIZE), "clicks-per-10s");
    let config = DriverConfig::default().partitions("counts", 8);
    let driver = TopologyTestDriver::new(topology, config).unwrap();
    let clicks = driver.input_topic("clicks", StringSerde, StringSerde);
    let keys = ["a", "b", "c", "user-7", "user-42"];
    for window in 0..6i64 {
        for (i, key) in keys.iter().enumerate() {
            clicks
                .pipe_at((*key).into(), "x".into(), window * 10_000 + i as i64)
                .unwrap();
        }
    }
    let out = counts_topic(&driver).read_records().unwrap();
    assert_eq!(out.len(), keys.len() * 6);
    for r in &out {
        assert_eq!(
            r.partition,
            streams_core::default_partition(r.key.key.as_bytes(), 8),
            "{:?}",
            r.key
        );
    }
}
