//! `suppress` and emit-on-window-close in the TopologyTestDriver: final results per window
//! (exactly at `end + grace`), time limits, the buffer-full behaviours, the buffer restored
//! after a restart, and the two ways of getting final results agreeing.

use std::time::Duration;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    BufferConfig, Consumed, DslError, DslIssue, EmitStrategy, Grouped, KTable, Materialized, Produced,
    SlidingWindows, StreamsBuilder, Suppressed, TimeWindows, Windowed, WindowedSerde,
};
use streams_state::serde::BytesSerde;
use streams_test_utils::{DriverConfig, TestOutputTopic, TopologyTestDriver};

const SIZE: Duration = Duration::from_secs(10);
const GRACE: Duration = Duration::from_secs(5);

type WindowedOut = TestOutputTopic<WindowedSerde<String>, NullableSerde<U64Serde>>;

fn windowed_counts(b: &StreamsBuilder, emit: EmitStrategy) -> KTable<Windowed<String>, u64> {
    b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .windowed_by(TimeWindows::of_size_with_grace(SIZE, GRACE))
        .emit_strategy(emit)
        .count(Materialized::as_("counts").in_memory())
}

fn windowed_out(driver: &TopologyTestDriver) -> WindowedOut {
    driver.output_topic(
        "final",
        WindowedSerde::new(StringSerde, SIZE),
        NullableSerde(U64Serde),
    )
}

/// `(key, start, count, timestamp)` of every record read since the last call.
fn finals(out: &WindowedOut) -> Vec<(String, i64, u64, i64)> {
    out.read_records()
        .unwrap()
        .into_iter()
        .map(|r| (r.key.key, r.key.start, r.value.unwrap(), r.timestamp))
        .collect()
}

/// Final window counts, by `suppress` or by the emit strategy.
fn final_counts_driver(by_suppress: bool) -> (TopologyTestDriver, WindowedOut) {
    let b = StreamsBuilder::new();
    let table = if by_suppress {
        windowed_counts(&b, EmitStrategy::on_window_update())
            .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()).with_name("final-counts"))
    } else {
        windowed_counts(&b, EmitStrategy::on_window_close())
    };
    table.to_stream().to(
        "final",
        Produced::with(WindowedSerde::new(StringSerde, SIZE), NullableSerde(U64Serde)),
    );
    // Without a cache, as the Kafka Streams results these tests follow were taken: a
    // cached store's time moves only with what the cache writes down.
    let config = DriverConfig::default().cache_max_bytes(0);
    let driver = TopologyTestDriver::new(b.build().unwrap(), config).unwrap();
    let out = windowed_out(&driver);
    (driver, out)
}

fn click(driver: &TopologyTestDriver, key: &str, ts: i64) {
    driver
        .input_topic("clicks", StringSerde, StringSerde)
        .pipe_at(key.into(), "x".into(), ts)
        .unwrap();
}

#[test]
fn one_final_result_per_window_exactly_at_end_plus_grace() {
    for by_suppress in [true, false] {
        let (driver, out) = final_counts_driver(by_suppress);
        for (k, t) in [
            ("a", 1_000),
            ("a", 3_000),
            ("b", 4_000),
            ("a", 12_000),
            ("a", 14_999),
        ] {
            click(&driver, k, t);
        }
        assert_eq!(finals(&out), [], "by suppress: {by_suppress}");
        // Stream time 15s = end 10s + grace 5s: [0, 10s) closes.
        click(&driver, "c", 15_000);
        assert_eq!(
            finals(&out),
            [("a".into(), 0, 2, 3_000), ("b".into(), 0, 1, 4_000)],
            "by suppress: {by_suppress}"
        );
        // A late record changes nothing; nothing is forwarded twice.
        click(&driver, "a", 2_000);
        click(&driver, "c", 24_999);
        assert_eq!(finals(&out), [], "by suppress: {by_suppress}");
        click(&driver, "c", 25_000);
        assert_eq!(
            finals(&out),
            [("a".into(), 10_000, 2, 14_999), ("c".into(), 10_000, 1, 15_000)],
            "by suppress: {by_suppress}"
        );
    }
}

#[test]
fn emit_on_window_close_sliding_windows_forward_closed_windows_once() {
    let b = StreamsBuilder::new();
    let d = Duration::from_millis(10);
    b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .windowed_by_sliding(SlidingWindows::of_time_difference_with_grace(
            d,
            Duration::from_millis(5),
        ))
        .emit_strategy(EmitStrategy::on_window_close())
        .count(Materialized::as_("sliding").in_memory())
        .to_stream()
        .to(
            "final",
            Produced::with(WindowedSerde::new(StringSerde, d), NullableSerde(U64Serde)),
        );
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let out = driver.output_topic(
        "final",
        WindowedSerde::new(StringSerde, d),
        NullableSerde(U64Serde),
    );
    click(&driver, "a", 10);
    click(&driver, "a", 15);
    assert_eq!(finals_of(&out), []);
    // Stream time 30, close time 25: [0, 10], [5, 15] and 10's right window [11, 21] end
    // before it (inclusive ends: a window ending at 25 would stay open).
    click(&driver, "a", 30);
    assert_eq!(finals_of(&out), [(0, 1, 10), (5, 2, 15), (11, 1, 15)]);
    click(&driver, "a", 31);
    assert_eq!(finals_of(&out), []);
    // Close time 35: [20, 30] and [21, 31]; 40 went into [30, 40] and [31, 41] before.
    click(&driver, "a", 40);
    assert_eq!(finals_of(&out), [(20, 1, 30), (21, 2, 31)]);
    click(&driver, "a", 46);
    assert_eq!(finals_of(&out), [(30, 3, 40)]);
}

fn finals_of(out: &WindowedOut) -> Vec<(i64, u64, i64)> {
    finals(out).into_iter().map(|(_, s, c, t)| (s, c, t)).collect()
}

type CountOut = TestOutputTopic<StringSerde, NullableSerde<U64Serde>>;

/// Counts per key, suppressed by `suppressed`, out to `limited`.
fn limited_driver(suppressed: Suppressed<String>) -> (TopologyTestDriver, CountOut) {
    let b = StreamsBuilder::new();
    b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .count(Materialized::as_("per-key").in_memory())
        .suppress(suppressed.with_name("limited"))
        .to_stream()
        .to("limited", Produced::with(StringSerde, NullableSerde(U64Serde)));
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let out = driver.output_topic("limited", StringSerde, NullableSerde(U64Serde));
    (driver, out)
}

fn counts(out: &CountOut) -> Vec<(String, u64, i64)> {
    out.read_records()
        .unwrap()
        .into_iter()
        .map(|r| (r.key, r.value.unwrap(), r.timestamp))
        .collect()
}

#[test]
fn a_time_limit_forwards_the_latest_update_once_its_first_is_old_enough() {
    let limit = Duration::from_millis(100);
    let (driver, out) = limited_driver(Suppressed::until_time_limit(limit, BufferConfig::unbounded()));
    click(&driver, "k1", 0);
    click(&driver, "k2", 10);
    click(&driver, "k1", 50);
    click(&driver, "k1", 99);
    assert_eq!(counts(&out), []);
    // Stream time 100 = k1's first buffered update (0) + 100: its latest update goes out.
    click(&driver, "k3", 100);
    assert_eq!(counts(&out), [("k1".into(), 3, 99)]);
    click(&driver, "k1", 109);
    assert_eq!(counts(&out), []);
    click(&driver, "k3", 110);
    assert_eq!(counts(&out), [("k2".into(), 1, 10)]);
}

#[test]
fn a_full_buffer_emits_its_oldest_entries_early() {
    let limit = Duration::from_secs(3600);
    let (driver, out) = limited_driver(Suppressed::until_time_limit(limit, BufferConfig::max_records(2)));
    click(&driver, "k1", 0);
    click(&driver, "k2", 10);
    click(&driver, "k1", 20);
    assert_eq!(counts(&out), []);
    click(&driver, "k3", 30);
    assert_eq!(counts(&out), [("k1".into(), 2, 20)]);
    click(&driver, "k4", 40);
    assert_eq!(counts(&out), [("k2".into(), 1, 10)]);

    // An entry is Kafka Streams' estimate: 8 (time) + key (2) + value (8) + record context
    // (8 timestamp + 8 offset + topic `clicks` (6) + 4 partition) = 44 bytes.
    let (driver, out) = limited_driver(Suppressed::until_time_limit(limit, BufferConfig::max_bytes(88)));
    click(&driver, "k1", 0);
    click(&driver, "k2", 1);
    assert_eq!(counts(&out), []);
    click(&driver, "k3", 2);
    assert_eq!(counts(&out), [("k1".into(), 1, 0)]);
}

#[test]
fn a_full_buffer_that_shuts_down_fails_the_task_with_a_typed_error() {
    let config = BufferConfig::max_records(1).shut_down_when_full();
    let (driver, _) = limited_driver(Suppressed::until_time_limit(Duration::from_secs(1), config));
    click(&driver, "k1", 0);
    let err = driver
        .input_topic("clicks", StringSerde, StringSerde)
        .pipe_at("k2".into(), "x".into(), 1)
        .unwrap_err();
    let text = format!("{err:?} {err}");
    assert!(
        text.contains("BufferFull") || text.contains("buffer exceeded its capacity"),
        "{text}"
    );
}

#[test]
fn the_buffer_is_restored_after_a_restart() {
    let config = DriverConfig::default();
    let changelog = format!("{}-final-counts-store-changelog", config.application_id);
    let (driver, out) = final_counts_driver(true);
    for (k, t) in [("a", 1_000), ("b", 4_000), ("a", 12_000)] {
        click(&driver, k, t);
    }
    driver.commit().unwrap();
    assert_eq!(finals(&out), []);
    let records = driver
        .output_topic(&changelog, BytesSerde, NullableSerde(BytesSerde))
        .read_records()
        .unwrap();
    assert!(!records.is_empty(), "the buffer is changelogged");
    // Kafka Streams' format 3: every value marked `v` = 3 (tombstones are not), ending
    // with the buffer time: the end of the record's window (the key's last 8 bytes).
    for r in &records {
        let marks: Vec<_> = r.headers.iter().collect();
        match &r.value {
            Some(v) => {
                assert_eq!(marks, [("v", Some(&[3u8][..]))]);
                let start = i64::from_be_bytes(r.key[r.key.len() - 8..].try_into().unwrap());
                assert_eq!(v[v.len() - 8..], (start + 10_000).to_be_bytes());
            }
            None => assert!(marks.is_empty()),
        }
    }
    let entries: Vec<_> = records.into_iter().map(|r| (r.key, r.value)).collect();
    drop(driver);

    // A new instance restores the buffer from the changelog and emits what it held.
    let (driver, out) = final_counts_driver(true);
    let buffer = driver
        .kv_store::<BytesSerde, BytesSerde>("final-counts-store")
        .unwrap();
    for (k, v) in entries {
        match v {
            Some(v) => buffer.put(&k, &v).unwrap(),
            None => {
                buffer.delete(&k).unwrap();
            }
        }
    }
    click(&driver, "c", 15_000);
    assert_eq!(
        finals(&out),
        [("a".into(), 0, 1, 1_000), ("b".into(), 0, 1, 4_000)]
    );
}

#[test]
fn until_window_closes_needs_a_windowed_table_and_a_strict_buffer() {
    let b = StreamsBuilder::new();
    windowed_counts(&b, EmitStrategy::default())
        .suppress(Suppressed::until_window_closes(BufferConfig::max_records(5)).with_name("early"));
    let b2 = StreamsBuilder::new();
    b2.table(
        "t",
        Materialized::with(WindowedSerde::new(StringSerde, SIZE), StringSerde),
    )
    .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()).with_name("not-windowed"));
    for (builder, name) in [(b, "early"), (b2, "not-windowed")] {
        match builder.build() {
            Err(DslError::Invalid(issues)) => assert!(
                issues
                    .iter()
                    .any(|i| matches!(i, DslIssue::InvalidSuppression { operator, .. } if operator == name)),
                "{issues:?}"
            ),
            other => panic!("expected an invalid suppression, got {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn emit_on_window_close_skips_a_window_its_store_no_longer_retains() {
    // As Kafka Streams: the window store keeps windows `size + grace` (15 s) behind the
    // latest window written, so when stream time jumps from 25 s to 40 s the window
    // [20 s, 30 s) has expired before its final result is read; `suppress` keeps it.
    for (by_suppress, expected) in [(false, vec![]), (true, vec![("b".to_owned(), 20_000, 1, 25_000)])] {
        let (driver, out) = final_counts_driver(by_suppress);
        click(&driver, "b", 25_000);
        click(&driver, "a", 40_000);
        assert_eq!(finals(&out), expected, "by suppress: {by_suppress}");
    }
}

#[test]
fn emit_on_window_close_does_not_repeat_final_results_after_a_restart() {
    use streams_dsl::{DynSerde, ValueAndTimestampSerde};
    let (driver, out) = final_counts_driver(false);
    for (k, t) in [("a", 1_000), ("b", 12_000), ("a", 15_000)] {
        click(&driver, k, t);
    }
    assert_eq!(finals(&out), [("a".into(), 0, 1, 1_000)]);
    driver.commit().unwrap();
    type Store = streams_state::WindowStore<DynSerde<String>, ValueAndTimestampSerde<DynSerde<u64>>>;
    let windows: Vec<_> = {
        let store: Store = driver.window_store("counts").unwrap();
        let reader = store.read().unwrap();
        reader.all().unwrap().map(Result::unwrap).collect()
    };
    // The close time emitted up to, under the store's name, as Kafka Streams commits it.
    let emitted = driver.processor_metadata();
    assert_eq!(emitted, [("counts".to_owned(), 10_000)].into());
    drop(driver);

    // A new instance with the store restored and the committed metadata: [0, 10s) is not
    // emitted again, and [10s, 20s) is emitted when it closes.
    let (driver, out) = final_counts_driver(false);
    let store: Store = driver.window_store("counts").unwrap();
    for (w, v) in windows {
        store.put(&w.key, Some(&v), w.start).unwrap();
    }
    driver.resume_processor_metadata(&emitted);
    click(&driver, "c", 16_000);
    assert_eq!(finals(&out), []);
    click(&driver, "c", 25_000);
    assert_eq!(
        finals(&out),
        [
            ("a".into(), 10_000, 1, 15_000),
            ("b".into(), 10_000, 1, 12_000),
            ("c".into(), 10_000, 1, 16_000)
        ]
    );
}

#[test]
fn a_cached_store_still_holds_the_window_its_cache_has_not_written_down() {
    // Kafka Streams 4.4.0 with a 10 MB cache emits b@20000 here (without one it does not,
    // as the test above): the write at 40 s stays in the cache, so the store's time is
    // still 25 s when the final results are read.
    let b = StreamsBuilder::new();
    windowed_counts(&b, EmitStrategy::on_window_close())
        .to_stream()
        .to(
            "final",
            Produced::with(WindowedSerde::new(StringSerde, SIZE), NullableSerde(U64Serde)),
        );
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let out = windowed_out(&driver);
    click(&driver, "b", 25_000);
    click(&driver, "a", 40_000);
    assert_eq!(finals(&out), vec![("b".to_owned(), 20_000, 1, 25_000)]);
}

#[test]
fn emit_on_window_close_with_hopping_windows_follows_kafka_streams() {
    // The records and results of the hopping-count-emit-final case that Kafka Streams
    // 4.1.1 produces (10 ms windows advancing by 5 ms, 5 ms grace): a fetch happens only
    // when the close time crosses into other windows, and a window is read up to exactly
    // a retention (15 ms) behind the latest window written.
    let b = StreamsBuilder::new();
    let size = Duration::from_millis(10);
    b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .windowed_by(
            TimeWindows::of_size_with_grace(size, Duration::from_millis(5))
                .advance_by(Duration::from_millis(5)),
        )
        .emit_strategy(EmitStrategy::on_window_close())
        .count(Materialized::as_("hopping").in_memory().without_caching())
        .to_stream()
        .to(
            "final",
            Produced::with(WindowedSerde::new(StringSerde, size), NullableSerde(U64Serde)),
        );
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let out = driver.output_topic(
        "final",
        WindowedSerde::new(StringSerde, size),
        NullableSerde(U64Serde),
    );
    let mut got = Vec::new();
    for (k, t) in [
        ("a", 0),
        ("a", 3),
        ("b", 1),
        ("a", 12),
        ("a", 7),
        ("a", 16),
        ("a", 11),
        ("a", 4),
        ("a", 9),
        ("b", 25),
        ("a", 14),
        ("a", 18),
        ("a", 40),
        ("a", 29),
    ] {
        click(&driver, k, t);
        got.extend(finals(&out).into_iter().map(|f| (t, f)));
    }
    assert_eq!(
        got,
        [
            (16, ("a".into(), 0, 3, 7)),
            (16, ("b".into(), 0, 1, 1)),
            (25, ("a".into(), 10, 3, 16)),
            (40, ("b".into(), 25, 1, 25)),
        ]
    );
}
