//! A re-grouped table on the Kafka runtime against the real broker: user rows on a topic of
//! two partitions are counted and summed per region through a repartition topic of two
//! partitions, while rows move between regions (their old and new records then go to
//! different partitions) and are deleted. Skipped without a broker
//! (`STREAMS_TEST_BOOTSTRAP`), failed then if `STREAMS_REQUIRE_KAFKA=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{Grouped, Materialized, Produced, StreamsBuilder};
use streams_test_utils::kafka::{self, ConsumedRecord, ProduceRecord};

#[path = "common/kafka.rs"]
mod broker;

/// The last `u64` per key of `records` (each key is written by one task, in order).
fn latest(records: &[ConsumedRecord]) -> BTreeMap<String, u64> {
    let mut latest = BTreeMap::new();
    for r in records {
        let bytes: [u8; 8] = r.value.as_deref().unwrap_or_default().try_into().unwrap();
        latest.insert(r.key_str().unwrap(), u64::from_be_bytes(bytes));
    }
    latest
}

#[test]
fn regrouped_counts_and_sums_on_the_broker_through_two_partitions() {
    let Some(bootstrap) =
        kafka::require_kafka("regrouped_counts_and_sums_on_the_broker_through_two_partitions")
    else {
        return;
    };
    let app_id = kafka::unique_name("dsl-regroup");
    let users = kafka::unique_name("users");
    let counts = kafka::unique_name("region-counts");
    let sums = kafka::unique_name("region-sums");
    for topic in [&users, &counts, &sums] {
        kafka::create_topic(&bootstrap, topic, 2, &[]).unwrap();
    }

    let b = StreamsBuilder::new();
    let grouped = b
        .table(&users, Materialized::with(StringSerde, StringSerde))
        .group_by(
            |_, v: &String| {
                let (region, amount) = v.split_once(':').unwrap_or(("?", "0"));
                (region.to_owned(), amount.parse::<u64>().unwrap_or(0))
            },
            Grouped::with(StringSerde, U64Serde).named("by-region"),
        );
    grouped
        .count(Materialized::as_("region-counts"))
        .to_stream()
        .to(&counts, Produced::with(StringSerde, NullableSerde(U64Serde)));
    grouped
        .reduce(|a, v| a + v, |a, v| a - v, Materialized::as_("region-sums"))
        .to_stream()
        .to(&sums, Produced::with(StringSerde, NullableSerde(U64Serde)));
    let topology = b.build().unwrap();

    // 40 users in 4 regions; then 20 of them move (to the next region, new amount), 10 of
    // them twice, and 8 others are deleted.
    let region = |i: usize| format!("r{}", i % 4);
    let mut rows: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let mut records = Vec::new();
    let mut set = |user: usize, r: String, amount: u64, records: &mut Vec<ProduceRecord>| {
        records.push(ProduceRecord::new(format!("u{user}"), format!("{r}:{amount}")));
        rows.insert(format!("u{user}"), (r, amount));
    };
    for i in 0..40 {
        set(i, region(i), i as u64, &mut records);
    }
    for i in 0..20 {
        set(i, region(i + 1), 100 + i as u64, &mut records);
    }
    for i in 0..10 {
        set(i, region(i + 2), 200 + i as u64, &mut records);
    }
    for i in 30..38 {
        records.push(ProduceRecord::tombstone(format!("u{i}")));
        rows.remove(&format!("u{i}"));
    }
    let mut expected_counts = BTreeMap::new();
    let mut expected_sums = BTreeMap::new();
    for (r, amount) in rows.values() {
        *expected_counts.entry(r.clone()).or_insert(0) += 1;
        *expected_sums.entry(r.clone()).or_insert(0) += amount;
    }
    kafka::produce(&bootstrap, &users, &records, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    let mut app = broker::start(
        topology,
        broker::config_unpurged(&bootstrap, &app_id, state.path()),
    );
    let repartition = format!("{app_id}-by-region-repartition");
    kafka::wait_for_topic(&bootstrap, &repartition, 2, Duration::from_secs(10)).unwrap();

    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (c, s) = (
            latest(&broker::read_all(&bootstrap, &counts)),
            latest(&broker::read_all(&bootstrap, &sums)),
        );
        if c == expected_counts && s == expected_sums {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "counts {c:?} (expected {expected_counts:?}), sums {s:?} (expected {expected_sums:?})"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // The regions are spread over both partitions of the repartition topic, so the moves
    // sent a row's old and new records to different partitions.
    let mut partitions_of: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for r in broker::read_all(&bootstrap, &repartition) {
        partitions_of
            .entry(r.key_str().unwrap())
            .or_default()
            .insert(r.partition);
    }
    assert_eq!(partitions_of.len(), 4, "{partitions_of:?}");
    assert!(partitions_of.values().all(|p| p.len() == 1), "{partitions_of:?}");
    let used: BTreeSet<i32> = partitions_of.values().flatten().copied().collect();
    assert_eq!(used.len(), 2, "{partitions_of:?}");
    assert!(app.close(Duration::from_secs(60)));
}
