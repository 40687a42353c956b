//! Aggregations over cached stores forward a key's update when the cache writes it down (at
//! a commit, or when the cache budget evicts it), as Kafka Streams does; without a cache,
//! every update at once. The driver commits only when told (`commit_every` large), so what
//! a commit forwards is visible.

use std::time::Duration;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{Consumed, Grouped, Materialized, Produced, SessionWindows, StreamsBuilder, TimeWindows};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

/// Counts per key of `in` to `out`, cached or not.
fn counts(cached: bool) -> streams_core::Topology {
    let b = StreamsBuilder::new();
    let store = Materialized::as_("counts");
    let store = if cached { store } else { store.without_caching() };
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::with(StringSerde, StringSerde))
        .count(store)
        .to_stream()
        .to("out", Produced::with(StringSerde, NullableSerde(U64Serde)));
    b.build().unwrap()
}

fn driver(topology: streams_core::Topology, cache_bytes: usize) -> TopologyTestDriver {
    let config = DriverConfig::default()
        .commit_every(1_000_000)
        .cache_max_bytes(cache_bytes);
    TopologyTestDriver::new(topology, config).unwrap()
}

#[test]
fn a_cached_count_forwards_each_key_once_per_commit_with_its_latest_timestamp() {
    let driver = driver(counts(true), 10 << 20);
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for (k, ts) in [("a", 1), ("b", 2), ("a", 3), ("a", 4)] {
        input.pipe_at(k.into(), "v".into(), ts).unwrap();
    }
    let out = driver.output_topic("out", StringSerde, NullableSerde(U64Serde));
    assert!(
        out.read_records().unwrap().is_empty(),
        "nothing before the commit"
    );
    driver.commit().unwrap();
    let got: Vec<_> = out
        .read_records()
        .unwrap()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    // In the order of the keys' last updates.
    assert_eq!(got, [("b".to_owned(), Some(1), 2), ("a".to_owned(), Some(3), 4)]);
    driver.commit().unwrap();
    assert!(
        out.read_records().unwrap().is_empty(),
        "a clean cache forwards nothing"
    );
    input.pipe_at("a".into(), "v".into(), 5).unwrap();
    driver.commit().unwrap();
    assert_eq!(out.read_key_values().unwrap(), [("a".to_owned(), Some(4))]);
}

#[test]
fn without_caching_every_update_is_forwarded_at_once() {
    let driver = driver(counts(false), 10 << 20);
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for k in ["a", "a", "a"] {
        input.pipe(k.into(), "v".into()).unwrap();
    }
    let out = driver.output_topic("out", StringSerde, NullableSerde(U64Serde));
    let values: Vec<_> = out
        .read_key_values()
        .unwrap()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(values, [Some(1), Some(2), Some(3)]);
}

#[test]
fn a_full_cache_forwards_what_it_evicts_before_the_commit() {
    // Room for a few entries only: keys written long ago are evicted and forwarded.
    let driver = driver(counts(true), 3 * 400);
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for i in 0..20 {
        input.pipe(format!("k{i}"), "v".into()).unwrap();
    }
    let out = driver.output_topic("out", StringSerde, NullableSerde(U64Serde));
    let early = out.read_key_values().unwrap();
    assert!(!early.is_empty(), "evictions forward before the commit");
    driver.commit().unwrap();
    let mut all: Vec<_> = early.into_iter().chain(out.read_key_values().unwrap()).collect();
    all.sort();
    let expected: Vec<_> = {
        let mut e: Vec<_> = (0..20).map(|i| (format!("k{i}"), Some(1))).collect();
        e.sort();
        e
    };
    assert_eq!(all, expected, "every key once, none lost, none twice");
}

#[test]
fn a_regrouped_table_gets_consistent_old_values_across_commits() {
    // Users -> region (a table), clicks counted per region through re-grouping: the
    // subtractor needs the region forwarded before, which is the one of the last commit.
    let b = StreamsBuilder::new();
    b.stream(["moves"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::with(StringSerde, StringSerde))
        .reduce(|_, latest| latest, Materialized::as_("user-region"))
        .group_by(
            |_, region| (region.clone(), 1u64),
            Grouped::with(StringSerde, U64Serde),
        )
        .reduce(|a, b| a + b, |a, b| a - b, Materialized::as_("region-users"))
        .to_stream()
        .to("per-region", Produced::with(StringSerde, NullableSerde(U64Serde)));
    let driver = driver(b.build().unwrap(), 10 << 20);
    let moves = driver.input_topic("moves", StringSerde, StringSerde);
    moves.pipe("u1".into(), "r1".into()).unwrap();
    moves.pipe("u2".into(), "r1".into()).unwrap();
    driver.commit().unwrap();
    // u1 moves twice between commits: r1 loses it once, r3 gains it once, r2 never sees it.
    moves.pipe("u1".into(), "r2".into()).unwrap();
    moves.pipe("u1".into(), "r3".into()).unwrap();
    driver.commit().unwrap();
    let out = driver.output_topic("per-region", StringSerde, NullableSerde(U64Serde));
    let mut finals = std::collections::BTreeMap::new();
    for (k, v) in out.read_key_values().unwrap() {
        finals.insert(k, v);
    }
    assert_eq!(finals.get("r1"), Some(&Some(1)));
    assert_eq!(finals.get("r2"), None, "{finals:?}");
    assert_eq!(finals.get("r3"), Some(&Some(1)));
}

#[test]
fn a_cached_windowed_count_forwards_each_window_once_per_commit() {
    let b = StreamsBuilder::new();
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::with(StringSerde, StringSerde))
        .windowed_by(
            TimeWindows::of_size_no_grace(Duration::from_millis(10)).advance_by(Duration::from_millis(5)),
        )
        .count(Materialized::as_("windowed"))
        .to_stream()
        .map(|w, n| (format!("{}@{}", w.key, w.start), n))
        .to("out", Produced::with(StringSerde, NullableSerde(U64Serde)));
    let driver = driver(b.build().unwrap(), 10 << 20);
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for ts in [6, 7, 8] {
        input.pipe_at("a".into(), "v".into(), ts).unwrap();
    }
    driver.commit().unwrap();
    let out = driver.output_topic("out", StringSerde, NullableSerde(U64Serde));
    // Two windows hold 6..8 (starting at 0 and 5), in the order they were last updated.
    assert_eq!(
        out.read_key_values().unwrap(),
        [("a@0".to_owned(), Some(3)), ("a@5".to_owned(), Some(3))]
    );
}

/// Session counts of `in` (gap 10 ms) to `out` as `key@start-end`, cached or not.
fn session_counts(cached: bool) -> streams_core::Topology {
    let b = StreamsBuilder::new();
    let store = Materialized::as_("sessions");
    let store = if cached { store } else { store.without_caching() };
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::with(StringSerde, StringSerde))
        .windowed_by_session(SessionWindows::of_inactivity_gap_no_grace(Duration::from_millis(
            10,
        )))
        .count(store)
        .to_stream()
        .map(|w, n| (format!("{}@{}-{}", w.key, w.start, w.end), n))
        .to("out", Produced::with(StringSerde, NullableSerde(U64Serde)));
    b.build().unwrap()
}

#[test]
fn a_cached_session_count_forwards_each_session_once_per_commit() {
    let driver = driver(session_counts(true), 10 << 20);
    let input = driver.input_topic("in", StringSerde, StringSerde);
    let out = driver.output_topic("out", StringSerde, NullableSerde(U64Serde));
    // One session growing 1 -> 3 -> 6 -> 9, and one of key b.
    for (k, ts) in [("a", 1), ("a", 3), ("b", 4), ("a", 6), ("a", 9)] {
        input.pipe_at(k.into(), "v".into(), ts).unwrap();
    }
    assert_eq!(out.read_key_values().unwrap(), [], "nothing before the commit");
    driver.commit().unwrap();
    // The sessions [1,1], [1,3] and [1,6], created and merged away before the commit,
    // are never forwarded, nor their deletions; the last one at its end.
    assert_eq!(
        out.read_records()
            .unwrap()
            .iter()
            .map(|r| (r.key.clone(), r.value, r.timestamp))
            .collect::<Vec<_>>(),
        [("b@4-4".to_owned(), Some(1), 4), ("a@1-9".to_owned(), Some(4), 9)]
    );
    // After the commit, merging the written session deletes it, once.
    input.pipe_at("a".into(), "v".into(), 12).unwrap();
    driver.commit().unwrap();
    assert_eq!(
        out.read_key_values().unwrap(),
        [("a@1-9".to_owned(), None), ("a@1-12".to_owned(), Some(5))]
    );
}

#[test]
fn an_uncached_session_count_forwards_every_merge() {
    let driver = driver(session_counts(false), 10 << 20);
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for ts in [1, 3] {
        input.pipe_at("a".into(), "v".into(), ts).unwrap();
    }
    let out = driver.output_topic("out", StringSerde, NullableSerde(U64Serde));
    assert_eq!(
        out.read_key_values().unwrap(),
        [
            ("a@1-1".to_owned(), Some(1)),
            ("a@1-1".to_owned(), None),
            ("a@1-3".to_owned(), Some(2))
        ]
    );
}

/// Two cached windowed counts (10 ms windows, no grace: a window expires 10 ms behind a
/// store's time) joined, as Nexmark's q8 joins them.
#[test]
fn a_join_of_cached_windowed_tables_finds_the_window_the_other_cache_still_holds() {
    let b = StreamsBuilder::new();
    let counts = |topic: &str| {
        b.stream([topic], Consumed::with(StringSerde, StringSerde))
            .group_by_key(Grouped::with(StringSerde, StringSerde))
            .windowed_by(TimeWindows::of_size_no_grace(Duration::from_millis(10)))
            .count(Materialized::as_(format!("{topic}-counts")))
    };
    let (a, c) = (counts("a"), counts("c"));
    a.join(&c, |_, x, y| format!("{x}/{y}"))
        .to_stream()
        .map(|w, v| (format!("{}@{}", w.key, w.start), v))
        .to("out", Produced::with(StringSerde, NullableSerde(StringSerde)));
    let driver = driver(b.build().unwrap(), 10 << 20);
    let (input_a, input_c) = (
        driver.input_topic("a", StringSerde, StringSerde),
        driver.input_topic("c", StringSerde, StringSerde),
    );
    // Key k in window 0 on both sides, then each side moves on to window 100 with
    // another key; one commit writes all of it down.
    input_a.pipe_at("k".into(), "v".into(), 1).unwrap();
    input_c.pipe_at("k".into(), "v".into(), 2).unwrap();
    input_a.pipe_at("x".into(), "v".into(), 100).unwrap();
    input_c.pipe_at("y".into(), "v".into(), 100).unwrap();
    driver.commit().unwrap();
    let out = driver.output_topic("out", StringSerde, NullableSerde(StringSerde));
    let joined = out.read_key_values().unwrap();
    // Kafka Streams finds k@0 in the other side's cache: the stores' time moves only with
    // what the cache writes down. Were it moved by every write, both lookups of k@0 would
    // find it expired.
    assert!(
        joined.contains(&("k@0".to_owned(), Some("1/1".to_owned()))),
        "{joined:?}"
    );
}
