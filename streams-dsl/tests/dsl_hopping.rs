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

#[path = "common/window_counts.rs"]
mod window_counts;
use window_counts::{SIZE, counts_topic, w};

const ADVANCE: Duration = Duration::from_secs(5);

fn driver() -> TopologyTestDriver {
    let windows = TimeWindows::of_size_with_grace(SIZE, Duration::from_secs(2)).advance_by(ADVANCE);
    window_counts::count_driver(
        Consumed::with(StringSerde, StringSerde),
        windows,
        "clicks-10s-every-5s",
    )
}

fn output(driver: &TopologyTestDriver) -> Vec<(Windowed<String>, Option<u64>)> {
    counts_topic(driver).read_key_values().unwrap()
}

type Store = streams_state::WindowStore<DynSerde<String>, ValueAndTimestampSerde<DynSerde<u64>>>;

fn store(driver: &TopologyTestDriver, name: &str) -> Store {
    driver.window_store(name).unwrap()
}

/// Asserts the aggregate `store` holds for each `(key, window start, aggregate)`.
fn assert_stored<const N: usize>(store: &Store, expected: [(&str, i64, Option<u64>); N]) {
    for (key, start, aggregate) in expected {
        let got = store.fetch(&key.to_owned(), start).unwrap().map(|v| v.value);
        assert_eq!(got, aggregate, "{key} in the window at {start}");
    }
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
    let store = store(&driver, "clicks-10s-every-5s");
    assert_stored(
        &store,
        [("a", 0, Some(2)), ("a", 5_000, Some(1)), ("a", 10_000, None)],
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

    let store = store(&driver, "clicks-10s-every-5s");
    assert_stored(&store, [("a", 0, Some(2)), ("a", 5_000, Some(2))]);
    // Stream time far ahead: windows that started more than size + grace ago are removed.
    input.pipe_at("b".into(), "x".into(), 60_000).unwrap();
    assert_stored(
        &store,
        [
            ("a", 0, None),
            ("a", 5_000, None),
            ("a", 10_000, None),
            ("b", 55_000, Some(1)),
            ("b", 60_000, Some(1)),
        ],
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
    let store = store(&driver, "sums");
    assert_stored(&store, [("a", 0, Some(7)), ("a", 5_000, Some(7))]);
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
