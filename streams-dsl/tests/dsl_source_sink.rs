//! Source and sink options in the TopologyTestDriver: `Consumed` timestamp extractors
//! (event time from the value drives windows), `Produced` partitioners, and a user
//! processor that range-scans a table's store through its typed handle.

use std::time::Duration;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::KvStore;
use streams_core::state::serde::NullableSerde;
use streams_core::{ProcessResult, Processor, ProcessorContext, Record};
use streams_dsl::{
    Consumed, DynSerde, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows, Windowed,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

#[path = "common/window_counts.rs"]
mod window_counts;
use window_counts::{counts_topic, w};

#[path = "common/string_tables.rs"]
mod string_tables;
use string_tables::table;

/// Values are `"<event time>,<payload>"`; the record timestamps are far from them.
fn event_time(value: &str) -> Option<i64> {
    value.split_once(',')?.0.parse().ok()
}

fn windowed_count(consumed: Consumed<StringSerde, StringSerde>) -> TopologyTestDriver {
    let windows = TimeWindows::of_size_with_grace(window_counts::SIZE, Duration::ZERO);
    window_counts::count_driver(consumed, windows, "clicks-per-10s")
}

/// `(window, count, timestamp)` of every record on topic `counts`.
fn counts(driver: &TopologyTestDriver) -> Vec<(Windowed<String>, Option<u64>, i64)> {
    let records = counts_topic(driver).read_records().unwrap();
    records
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect()
}

fn pipe_clicks(driver: &TopologyTestDriver) {
    let input = driver.input_topic("clicks", StringSerde, StringSerde);
    // Record timestamps all fall in one window; event times span three.
    for (k, v, t) in [
        ("a", "1000,x", 500_000),
        ("a", "12000,x", 500_001),
        ("a", "3000,late", 500_002),
        ("b", "25000,x", 500_003),
    ] {
        input.pipe_at(k.into(), v.into(), t).unwrap();
    }
}

#[test]
fn a_typed_extractor_windows_by_the_event_time_in_the_value() {
    let consumed = Consumed::with(StringSerde, StringSerde).with_typed_timestamp_extractor(
        |_k: &String, v: &String, partition_time| event_time(v).unwrap_or(partition_time),
    );
    let driver = windowed_count(consumed);
    pipe_clicks(&driver);
    let got = counts(&driver);
    // The record at event time 3000 comes after stream time reached 12000: with no grace
    // its window [0, 10000) is closed, so it is dropped.
    assert_eq!(
        got,
        [
            (w("a", 0), Some(1), 1_000),
            (w("a", 10_000), Some(1), 12_000),
            (w("b", 20_000), Some(1), 25_000),
        ]
    );
}

#[test]
fn without_an_extractor_the_record_timestamp_counts() {
    let driver = windowed_count(Consumed::with(StringSerde, StringSerde));
    pipe_clicks(&driver);
    let keys: Vec<_> = counts(&driver).into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(
        keys,
        [w("a", 500_000), w("a", 500_000), w("a", 500_000), w("b", 500_000)]
    );
}

#[test]
fn a_raw_extractor_reads_the_bytes_and_a_negative_time_drops_the_record() {
    let consumed = Consumed::with(StringSerde, StringSerde).with_timestamp_extractor(|raw, _| {
        let value = raw.value.as_deref().unwrap_or_default();
        std::str::from_utf8(value).ok().and_then(event_time).unwrap_or(-1)
    });
    let b = StreamsBuilder::new();
    b.stream(["in"], consumed)
        .to("out", Produced::with(StringSerde, StringSerde));
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    input.pipe_at("a".into(), "7,x".into(), 100).unwrap();
    input.pipe_at("a".into(), "no time".into(), 100).unwrap();
    input.pipe_at("a".into(), "9,y".into(), 100).unwrap();
    let out = driver.output_topic("out", StringSerde, StringSerde);
    let got = out.read_values_with_timestamps().unwrap();
    assert_eq!(got, [("7,x".to_owned(), 7), ("9,y".to_owned(), 9)]);
}

#[test]
fn a_produced_partitioner_chooses_the_partitions() {
    let b = StreamsBuilder::new();
    b.stream(["in"], Consumed::with(StringSerde, U64Serde)).to(
        "out",
        Produced::with(StringSerde, U64Serde).with_partitioner(|_: &str, _: &String, v: &u64, n: i32| {
            // Odd values to the last partition; even ones to the default (murmur2 of the key).
            (v % 2 == 1).then_some(n - 1)
        }),
    );
    let config = DriverConfig::default().partitions("out", 4);
    let driver = TopologyTestDriver::new(b.build().unwrap(), config).unwrap();
    let input = driver.input_topic("in", StringSerde, U64Serde);
    for (k, v) in [("a", 1), ("b", 3), ("a", 2), ("k", 4), ("z", 5)] {
        input.pipe(k.into(), v).unwrap();
    }
    let out = driver.output_topic("out", StringSerde, U64Serde);
    let got: Vec<_> = out
        .read_records()
        .unwrap()
        .into_iter()
        .map(|r| (r.key, r.value, r.partition))
        .collect();
    let murmur = |k: &str| streams_core::default_partition(k.as_bytes(), 4);
    assert_eq!(
        got,
        [
            ("a".to_owned(), 1, 3),
            ("b".to_owned(), 3, 3),
            ("a".to_owned(), 2, murmur("a")),
            ("k".to_owned(), 4, murmur("k")),
            ("z".to_owned(), 5, 3),
        ]
    );
    // The default spreads these keys: the partitioner, not chance, put odd values on 3.
    assert_ne!(murmur("a"), 3);
}

/// For each order `"<customer>"` → amount, forwards the customer's addresses: the table's
/// keys are `"<customer>/<address id>"`, found by a prefix scan of the table's store.
struct Addresses {
    table: KvStore<DynSerde<String>, DynSerde<String>>,
}

impl Processor<String, u64, String, String> for Addresses {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, u64>,
    ) -> ProcessResult {
        let prefix = format!("{}/", r.key);
        // The table's store is typed with the DSL's type-erased serdes; its keys were
        // written by `StringSerde`, whose byte order is the string order.
        let table = self.table.with_key_serde(StringSerde);
        let rows: Vec<_> = table
            .read()?
            .prefix_scan(&prefix, &StringSerde)?
            .collect::<Result<_, _>>()?;
        for (k, address) in rows {
            ctx.forward(Record::new(k, format!("{address}:{}", r.value), r.timestamp))?;
        }
        Ok(())
    }
}

#[test]
fn a_user_processor_prefix_scans_a_tables_store_by_its_typed_handle() {
    let b = StreamsBuilder::new();
    let table = table(&b, "addresses", StringSerde);
    let store = table
        .store_ref()
        .expect("a table read from a topic has a store handle");
    assert_eq!(store.name(), "addresses");
    let handle = store.clone();
    b.stream(["orders"], Consumed::with(StringSerde, U64Serde))
        .process_with(
            move |ctx| {
                Ok(Addresses {
                    table: ctx.store(&handle)?,
                })
            },
            &[&store],
        )
        .to("shipments", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    assert!(
        topology.describe().to_string().contains("(stores: [addresses])"),
        "{}",
        topology.describe()
    );
    let driver = TopologyTestDriver::new(topology, DriverConfig::default()).unwrap();
    let addresses = driver.input_topic("addresses", StringSerde, NullableSerde(StringSerde));
    addresses.pipe("c1/1".into(), Some("home".into())).unwrap();
    addresses.pipe("c1/2".into(), Some("work".into())).unwrap();
    addresses.pipe("c10/1".into(), Some("other".into())).unwrap();
    addresses.pipe("c2/1".into(), Some("shop".into())).unwrap();
    addresses.pipe("c1/2".into(), None).unwrap();
    let orders = driver.input_topic("orders", StringSerde, U64Serde);
    orders.pipe("c1".into(), 5).unwrap();
    orders.pipe("c2".into(), 7).unwrap();
    orders.pipe("c3".into(), 9).unwrap();
    let out = driver.output_topic("shipments", StringSerde, StringSerde);
    assert_eq!(
        out.read_key_values().unwrap(),
        [
            ("c1/1".to_owned(), "home:5".to_owned()),
            ("c2/1".to_owned(), "shop:7".to_owned()),
        ]
    );
}

#[test]
fn an_aggregation_table_has_no_typed_handle_yet_but_a_table_read_from_a_topic_has() {
    let b = StreamsBuilder::new();
    let counts = b
        .stream(["in"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .count(Materialized::as_("counts"));
    assert!(counts.store_ref().is_none());
    let table = b.table("t", Materialized::with(StringSerde, U64Serde));
    assert_eq!(
        table.store_ref().map(|s| s.name().to_owned()).as_deref(),
        Some("t-table-store")
    );
}

#[test]
fn optimized_tables_restore_from_their_topic_instead_of_a_changelog() {
    let program = |b: StreamsBuilder| {
        let users = table(&b, "users", StringSerde);
        b.table(
            "unlogged",
            Materialized::as_("unlogged")
                .with_key_serde(StringSerde)
                .with_value_serde(StringSerde)
                .without_logging(),
        );
        b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
            .join(&users, |_, c, u| format!("{c}@{u}"))
            .to("out", Produced::with(StringSerde, StringSerde));
        b.build().unwrap()
    };
    let plain = program(StreamsBuilder::new());
    assert_eq!(plain.source_changelog("users"), None);
    assert!(plain.logged_stores().iter().any(|(_, s)| s == "users"));

    let optimized = program(StreamsBuilder::new().with_optimization("all".parse().unwrap()));
    assert_eq!(optimized.source_changelog("users"), Some("users"));
    // A store without logging is not restored at all, optimized or not.
    assert_eq!(optimized.source_changelog("unlogged"), None);
    assert!(optimized.logged_stores().is_empty());
    // The program runs the same.
    assert_eq!(optimized.describe().to_string(), plain.describe().to_string());
    let driver = TopologyTestDriver::new(optimized, DriverConfig::default()).unwrap();
    driver
        .input_topic("users", StringSerde, NullableSerde(StringSerde))
        .pipe("u1".into(), Some("ann".into()))
        .unwrap();
    driver
        .input_topic("clicks", StringSerde, StringSerde)
        .pipe("u1".into(), "c".into())
        .unwrap();
    let out = driver.output_topic("out", StringSerde, StringSerde);
    assert_eq!(
        out.read_key_values().unwrap(),
        [("u1".to_owned(), "c@ann".to_owned())]
    );
}

/// Two `stream()` calls of one topic read through one source node, as Kafka Streams
/// merges them: each stream sees every record once.
#[test]
fn two_streams_of_one_topic_share_its_source() {
    let b = StreamsBuilder::new();
    let plain = Consumed::with(StringSerde, StringSerde);
    b.stream(["in"], plain.clone())
        .filter(|_, v| v.starts_with('a'))
        .to("a", Produced::with(StringSerde, StringSerde));
    b.stream(["in"], plain)
        .map_values(|_, v| v.to_uppercase())
        .to("upper", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    assert_eq!(topology.describe().to_string().matches("Source:").count(), 1);
    let driver = TopologyTestDriver::new(topology, DriverConfig::default()).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for v in ["ab", "cd", "ax"] {
        input.pipe("k".into(), v.into()).unwrap();
    }
    let read = |topic| {
        let out = driver.output_topic(topic, StringSerde, StringSerde);
        out.read_key_values()
            .unwrap()
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>()
    };
    assert_eq!(read("a"), ["ab", "ax"]);
    assert_eq!(read("upper"), ["AB", "CD", "AX"]);
}

/// Streams of one topic that cannot share a source (other types here) fail the build.
#[test]
fn streams_of_one_topic_with_other_types_fail_the_build() {
    let b = StreamsBuilder::new();
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .to("a", Produced::with(StringSerde, StringSerde));
    b.stream(["in"], Consumed::with(StringSerde, U64Serde))
        .to("b", Produced::with(StringSerde, U64Serde));
    let err = b.build().unwrap_err().to_string();
    assert!(
        err.contains("topic `in` is read by both `in-source` and `in-source-2`"),
        "{err}"
    );
}

/// A stream that shares an earlier stream's source takes no node name: giving both the
/// same name is no duplicate.
#[test]
fn a_shared_source_takes_no_name_of_its_own() {
    let b = StreamsBuilder::new();
    let named = Consumed::with(StringSerde, StringSerde).named("clicks");
    b.stream(["in"], named.clone())
        .to("a", Produced::with(StringSerde, StringSerde));
    b.stream(["in"], named)
        .to("b", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    assert!(
        topology
            .describe()
            .to_string()
            .contains("Source: clicks (topics: [in])"),
        "{}",
        topology.describe()
    );
}
