//! Hopping-window counts in the TopologyTestDriver: a record counted in every overlapping
//! window, late records dropped per window, expired windows removed, invalid advances
//! reported at build.

use std::time::Duration;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    Consumed, DslError, DslIssue, DynSerde, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows,
    ValueAndTimestampSerde, Windowed, WindowedSerde,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

const SIZE: Duration = Duration::from_secs(10);
const ADVANCE: Duration = Duration::from_secs(5);

fn driver() -> TopologyTestDriver {
    let b = StreamsBuilder::new();
    b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .windowed_by(TimeWindows::of_size_with_grace(SIZE, Duration::from_secs(2)).advance_by(ADVANCE))
        .count(Materialized::as_("clicks-10s-every-5s"))
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

fn output(driver: &TopologyTestDriver) -> Vec<(Windowed<String>, Option<u64>)> {
    driver
        .output_topic(
            "counts",
            WindowedSerde::new(StringSerde, SIZE),
            NullableSerde(U64Serde),
        )
        .read_key_values()
        .unwrap()
}

#[test]
fn hopping_windows_count_a_record_in_every_window_holding_it() {
    let driver = driver();
    let input = driver.input_topic("clicks", StringSerde, StringSerde);
    for (k, t) in [("a", 1_000), ("a", 6_000), ("b", 12_000)] {
        input.pipe_at(k.into(), "x".into(), t).unwrap();
    }
    assert_eq!(
        output(&driver),
        [
            // 1s is in [0s, 10s) only: no window starts before 0 (Kafka's windowsFor).
            (w("a", 0), Some(1)),
            // 6s is in [0s, 10s) and [5s, 15s).
            (w("a", 0), Some(2)),
            (w("a", 5_000), Some(1)),
            (w("b", 5_000), Some(1)),
            (w("b", 10_000), Some(1)),
        ]
    );
    let store = driver
        .window_store::<DynSerde<String>, ValueAndTimestampSerde<DynSerde<u64>>>("clicks-10s-every-5s")
        .unwrap();
    assert_eq!(store.fetch(&"a".to_owned(), 0).unwrap().map(|v| v.value), Some(2));
    assert_eq!(
        store.fetch(&"a".to_owned(), 5_000).unwrap().map(|v| v.value),
        Some(1)
    );
    assert_eq!(
        store.fetch(&"a".to_owned(), 10_000).unwrap().map(|v| v.value),
        None
    );
}

#[test]
fn hopping_windows_drop_late_records_per_window_and_expire() {
    let driver = driver();
    let input = driver.input_topic("clicks", StringSerde, StringSerde);
    input.pipe_at("a".into(), "x".into(), 1_000).unwrap();
    // Stream time 11s: [0s, 10s) is open until 12s (10s + 2s grace)...
    input.pipe_at("a".into(), "x".into(), 11_000).unwrap();
    // ...so a record at 4s is counted in [0s, 10s) only.
    input.pipe_at("a".into(), "in grace".into(), 4_000).unwrap();
    // Stream time 12s closes [0s, 10s) (exactly at end + grace): a record at 8s still
    // counts in [5s, 15s).
    input.pipe_at("b".into(), "x".into(), 12_000).unwrap();
    input.pipe_at("a".into(), "late for one".into(), 8_000).unwrap();
    // Too late for every window holding it: dropped.
    input.pipe_at("a".into(), "too late".into(), 2_000).unwrap();
    let got = output(&driver);
    let a: Vec<_> = got.iter().filter(|(k, _)| k.key == "a").cloned().collect();
    assert_eq!(
        a,
        [
            (w("a", 0), Some(1)),
            (w("a", 5_000), Some(1)),
            (w("a", 10_000), Some(1)),
            (w("a", 0), Some(2)),
            (w("a", 5_000), Some(2)),
        ]
    );

    let store = driver
        .window_store::<DynSerde<String>, ValueAndTimestampSerde<DynSerde<u64>>>("clicks-10s-every-5s")
        .unwrap();
    assert_eq!(store.fetch(&"a".to_owned(), 0).unwrap().map(|v| v.value), Some(2));
    assert_eq!(
        store.fetch(&"a".to_owned(), 5_000).unwrap().map(|v| v.value),
        Some(2)
    );
    // Stream time far ahead: windows that started more than size + grace ago are removed.
    input.pipe_at("b".into(), "x".into(), 60_000).unwrap();
    for start in [0, 5_000, 10_000] {
        assert_eq!(
            store.fetch(&"a".to_owned(), start).unwrap().map(|v| v.value),
            None,
            "window {start}"
        );
    }
    assert_eq!(
        store.fetch(&"b".to_owned(), 55_000).unwrap().map(|v| v.value),
        Some(1)
    );
    assert_eq!(
        store.fetch(&"b".to_owned(), 60_000).unwrap().map(|v| v.value),
        Some(1)
    );
}

#[test]
fn hopping_aggregate_sums_per_window() {
    let b = StreamsBuilder::new();
    b.stream(["amounts"], Consumed::with(StringSerde, U64Serde))
        .group_by_key(Grouped::new())
        .windowed_by(TimeWindows::of_size_no_grace(SIZE).advance_by(ADVANCE))
        .aggregate(
            || 0u64,
            |_, v, sum| sum + v,
            Materialized::as_("sums").with_value_serde(U64Serde),
        )
        .to_stream()
        .to(
            "sums-out",
            Produced::with(WindowedSerde::new(StringSerde, SIZE), NullableSerde(U64Serde)),
        );
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let input = driver.input_topic("amounts", StringSerde, U64Serde);
    input.pipe_at("a".into(), 3, 5_000).unwrap();
    input.pipe_at("a".into(), 4, 9_000).unwrap();
    let store = driver
        .window_store::<DynSerde<String>, ValueAndTimestampSerde<DynSerde<u64>>>("sums")
        .unwrap();
    assert_eq!(store.fetch(&"a".to_owned(), 0).unwrap().map(|v| v.value), Some(7));
    assert_eq!(
        store.fetch(&"a".to_owned(), 5_000).unwrap().map(|v| v.value),
        Some(7)
    );
    assert_eq!(
        store.fetch(&"a".to_owned(), 0).unwrap().map(|v| v.timestamp),
        Some(9_000),
        "a window's timestamp is its latest record's"
    );
}

#[test]
fn an_advance_of_zero_or_above_the_size_is_a_build_error() {
    for advance in [Duration::ZERO, Duration::from_secs(11)] {
        let b = StreamsBuilder::new();
        b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
            .group_by_key(Grouped::new())
            .windowed_by(TimeWindows::of_size_no_grace(SIZE).advance_by(advance))
            .count(Materialized::as_("bad"));
        match b.build() {
            Err(DslError::Invalid(issues)) => {
                assert!(
                    matches!(&issues[..], [DslIssue::InvalidWindows { operator, .. }] if operator == "bad"),
                    "{issues:?}"
                )
            }
            other => panic!("expected an invalid-windows error, got {:?}", other.map(|_| ())),
        }
    }
}
