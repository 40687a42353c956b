//! The timestamps of table updates, as Kafka Streams forwards them: a table source, `filter`
//! and `map_values` forward the record's; an aggregation the largest of the key's records
//! so far; a table-table join the larger of both sides'. The stores keep each value's
//! timestamp, readable through `streams_dsl::timestamped`.

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::Serde;
use streams_core::state::serde::NullableSerde;
use streams_dsl::{DynSerde, Grouped, KTable, Materialized, Produced, StreamsBuilder, timestamped};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

#[path = "common/key_counts.rs"]
mod key_counts;
use key_counts::count_by_key;

fn strings() -> Materialized<String, String> {
    Materialized::new()
        .with_key_serde(StringSerde)
        .with_value_serde(StringSerde)
}

fn driver(b: StreamsBuilder) -> TopologyTestDriver {
    TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap()
}

/// `(key, value, timestamp)` of every record on `topic`, values of `values` (nullable).
fn read<VS: Serde + Clone + 'static>(
    driver: &TopologyTestDriver,
    topic: &str,
    values: VS,
) -> Vec<(String, Option<VS::Target>, i64)> {
    let out = driver.output_topic(topic, StringSerde, NullableSerde(values));
    let records = out.read_records().unwrap();
    records
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect()
}

#[test]
fn an_aggregation_forwards_the_largest_timestamp_of_its_key() {
    let b = StreamsBuilder::new();
    count_by_key(&b);
    let driver = driver(b);
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for (k, ts) in [("a", 20), ("a", 10), ("b", 5), ("a", 30)] {
        input.pipe_at(k.into(), "x".into(), ts).unwrap();
    }
    let got = read(&driver, "counts", U64Serde);
    assert_eq!(
        got,
        [
            ("a".into(), Some(1), 20),
            ("a".into(), Some(2), 20),
            ("b".into(), Some(1), 5),
            ("a".into(), Some(3), 30)
        ]
    );
    let counts = driver
        .kv_store::<DynSerde<String>, DynSerde<u64>>("counts")
        .unwrap();
    assert_eq!(counts.get(&"a".into()).unwrap(), Some(3));
    let stamped = timestamped(&counts).get(&"a".into()).unwrap().unwrap();
    assert_eq!((stamped.value, stamped.timestamp), (3, 30));
}

#[test]
fn a_table_forwards_each_record_s_timestamp_and_a_join_the_larger_side_s() {
    let b = StreamsBuilder::new();
    let left: KTable<String, String> = b.table("left", strings().named("left-store"));
    let right: KTable<String, String> = b.table("right", strings());
    left.filter(|_, v| !v.is_empty()).to_stream().to(
        "filtered",
        Produced::with(StringSerde, NullableSerde(StringSerde)),
    );
    left.join(&right, |_, l, r| format!("{l}/{r}"))
        .to_stream()
        .to("joined", Produced::with(StringSerde, NullableSerde(StringSerde)));
    let driver = driver(b);
    let l = driver.input_topic("left", StringSerde, StringSerde);
    let r = driver.input_topic("right", StringSerde, StringSerde);
    l.pipe_at("k".into(), "l1".into(), 50).unwrap();
    r.pipe_at("k".into(), "r1".into(), 10).unwrap();
    l.pipe_at("k".into(), "l2".into(), 5).unwrap();
    r.pipe_at("k".into(), "r2".into(), 70).unwrap();
    assert_eq!(
        read(&driver, "filtered", StringSerde),
        [
            ("k".into(), Some("l1".into()), 50),
            ("k".into(), Some("l2".into()), 5)
        ],
        "a table source keeps the record's timestamp, even an older one"
    );
    assert_eq!(
        read(&driver, "joined", StringSerde),
        [
            ("k".into(), Some("l1/r1".into()), 50),
            ("k".into(), Some("l2/r1".into()), 10),
            ("k".into(), Some("l2/r2".into()), 70)
        ]
    );
    let store = driver
        .kv_store::<DynSerde<String>, DynSerde<String>>("left-store")
        .unwrap();
    let stamped = timestamped(&store).get(&"k".into()).unwrap().unwrap();
    assert_eq!((stamped.value.as_str(), stamped.timestamp), ("l2", 5));
}

#[test]
fn a_regrouped_aggregation_forwards_the_largest_timestamp_of_its_group() {
    let b = StreamsBuilder::new();
    let users: KTable<String, String> = b.table("users", strings());
    users
        .group_by(
            |_, region| (region.clone(), 1u64),
            Grouped::with(StringSerde, U64Serde).named("by-region"),
        )
        .reduce(|a, v| a + v, |a, v| a - v, Materialized::as_("regions"))
        .to_stream()
        .to("regions", Produced::with(StringSerde, NullableSerde(U64Serde)));
    let driver = driver(b);
    let input = driver.input_topic("users", StringSerde, StringSerde);
    input.pipe_at("u1".into(), "eu".into(), 40).unwrap();
    input.pipe_at("u2".into(), "eu".into(), 15).unwrap();
    input.pipe_at("u1".into(), "us".into(), 25).unwrap();
    let got = read(&driver, "regions", U64Serde);
    assert_eq!(
        got,
        [
            ("eu".into(), Some(1), 40),
            ("eu".into(), Some(2), 40),
            ("eu".into(), Some(1), 40),
            ("us".into(), Some(1), 25)
        ]
    );
}
