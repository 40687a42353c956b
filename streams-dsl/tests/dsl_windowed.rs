//! Tumbling-window counts in the TopologyTestDriver: per-window results, late records
//! dropped after the grace period, expired windows removed from the store.

use std::time::Duration;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    Consumed, DynSerde, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows, ValueAndTimestampSerde,
    Windowed, WindowedSerde,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

const SIZE: Duration = Duration::from_secs(10);

fn driver() -> TopologyTestDriver {
    let b = StreamsBuilder::new();
    b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .windowed_by(TimeWindows::of_size_with_grace(SIZE, Duration::from_secs(5)))
        .count(Materialized::as_("clicks-per-10s"))
        .to_stream()
        .to(
            "counts",
            Produced::with(WindowedSerde::new(StringSerde, SIZE), NullableSerde(U64Serde)),
        );
    TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap()
}

fn w(key: &str, start: i64) -> Windowed<String> {
    Windowed {
        key: key.into(),
        start,
        end: start + 10_000,
    }
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
    let out = driver.output_topic(
        "counts",
        WindowedSerde::new(StringSerde, SIZE),
        NullableSerde(U64Serde),
    );
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
    let out = driver.output_topic(
        "counts",
        WindowedSerde::new(StringSerde, SIZE),
        NullableSerde(U64Serde),
    );
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
