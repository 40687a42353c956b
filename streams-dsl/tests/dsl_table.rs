//! KTable operators and stream-table joins in the TopologyTestDriver.

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{Consumed, DslError, DslIssue, DynSerde, Materialized, Produced, StreamsBuilder};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

#[path = "common/string_tables.rs"]
mod string_tables;
use string_tables::table;

type Updates = Vec<(String, Option<u64>)>;

fn up(p: &[(&str, Option<u64>)]) -> Updates {
    p.iter().map(|(k, v)| ((*k).into(), *v)).collect()
}

#[test]
fn table_keeps_the_latest_value_and_deletes_on_tombstones() {
    let b = StreamsBuilder::new();
    let table = b.table("prices", Materialized::with(StringSerde, U64Serde));
    assert_eq!(table.store_name(), Some("prices-table-store"));
    table
        .to_stream()
        .to("out", Produced::with(StringSerde, NullableSerde(U64Serde)));
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let input = driver.input_topic("prices", StringSerde, NullableSerde(U64Serde));
    input.pipe("a".into(), Some(1)).unwrap();
    input.pipe("a".into(), Some(2)).unwrap();
    input.pipe("b".into(), Some(5)).unwrap();
    input.pipe("b".into(), None).unwrap();
    let out = driver.output_topic("out", StringSerde, NullableSerde(U64Serde));
    assert_eq!(
        out.read_key_values().unwrap(),
        up(&[("a", Some(1)), ("a", Some(2)), ("b", Some(5)), ("b", None)])
    );
    let store = driver
        .kv_store::<DynSerde<String>, DynSerde<u64>>("prices-table-store")
        .unwrap();
    assert_eq!(store.get(&"a".into()).unwrap(), Some(2));
    assert_eq!(store.get(&"b".into()).unwrap(), None);
}

#[test]
fn table_filter_forwards_failing_updates_as_deletes_and_map_values_maps() {
    let b = StreamsBuilder::new();
    let table = table(&b, "prices", U64Serde);
    table
        .filter_as(|_, v| *v >= 10, Materialized::as_("expensive"))
        .to_stream()
        .to("expensive", Produced::with(StringSerde, NullableSerde(U64Serde)));
    table
        .map_values(|_, v| v * 2)
        .to_stream()
        .to("doubled", Produced::with(StringSerde, NullableSerde(U64Serde)));
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let input = driver.input_topic("prices", StringSerde, NullableSerde(U64Serde));
    input.pipe("a".into(), Some(12)).unwrap();
    input.pipe("a".into(), Some(3)).unwrap();
    input.pipe("b".into(), None).unwrap();
    let expensive = driver.output_topic("expensive", StringSerde, NullableSerde(U64Serde));
    assert_eq!(
        expensive.read_key_values().unwrap(),
        up(&[("a", Some(12)), ("a", None), ("b", None)])
    );
    let doubled = driver.output_topic("doubled", StringSerde, NullableSerde(U64Serde));
    assert_eq!(
        doubled.read_key_values().unwrap(),
        up(&[("a", Some(24)), ("a", Some(6)), ("b", None)])
    );
    let store = driver
        .kv_store::<DynSerde<String>, DynSerde<u64>>("expensive")
        .unwrap();
    assert_eq!(store.get(&"a".into()).unwrap(), None);
}

fn join_driver(left: bool) -> TopologyTestDriver {
    let b = StreamsBuilder::new();
    let users = table(&b, "users", StringSerde);
    let clicks = b.stream(["clicks"], Consumed::with(StringSerde, StringSerde));
    let joined = if left {
        clicks.left_join(&users, |_, page, user| {
            format!("{}@{page}", user.unwrap_or_else(|| "?".into()))
        })
    } else {
        clicks.join(&users, |_, page, user| format!("{user}@{page}"))
    };
    joined.to("out", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    assert_eq!(topology.subtopologies().len(), 1, "stream and table share a task");
    TopologyTestDriver::new(
        topology,
        DriverConfig::default()
            .partitions("users", 2)
            .partitions("clicks", 2),
    )
    .unwrap()
}

fn pipe_join_input(driver: &TopologyTestDriver) {
    let users = driver.input_topic("users", StringSerde, NullableSerde(StringSerde));
    let clicks = driver.input_topic("clicks", StringSerde, StringSerde);
    users.pipe_at("u1".into(), Some("ann".into()), 1).unwrap();
    clicks.pipe_at("u1".into(), "home".into(), 2).unwrap();
    clicks.pipe_at("u2".into(), "cart".into(), 3).unwrap();
    users.pipe_at("u1".into(), None, 4).unwrap();
    clicks.pipe_at("u1".into(), "exit".into(), 5).unwrap();
}

#[test]
fn stream_table_join_drops_records_without_a_table_row() {
    let driver = join_driver(false);
    pipe_join_input(&driver);
    let out = driver.output_topic("out", StringSerde, StringSerde);
    assert_eq!(
        out.read_key_values().unwrap(),
        [("u1".to_owned(), "ann@home".to_owned())]
    );
}

#[test]
fn stream_table_left_join_keeps_every_record() {
    let driver = join_driver(true);
    pipe_join_input(&driver);
    let out = driver.output_topic("out", StringSerde, StringSerde);
    let got: Vec<String> = out
        .read_key_values()
        .unwrap()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(got, ["ann@home", "?@cart", "?@exit"]);
}

#[test]
fn join_with_a_rekeyed_stream_repartitions_it_first() {
    let b = StreamsBuilder::new();
    let users = b.table("users", Materialized::with(StringSerde, StringSerde));
    b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .select_key(|_, v| v.clone())
        .join(&users, |_, v, u| format!("{u}:{v}"))
        .to("out", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    let text = topology.describe().to_string();
    assert!(
        text.contains("topic: clicks-source-select_key-group-repartition"),
        "{text}"
    );
    let driver = TopologyTestDriver::new(topology, DriverConfig::default()).unwrap();
    let users_in = driver.input_topic("users", StringSerde, NullableSerde(StringSerde));
    users_in.pipe("u9".into(), Some("zed".into())).unwrap();
    let clicks = driver.input_topic("clicks", StringSerde, StringSerde);
    clicks.pipe("whatever".into(), "u9".into()).unwrap();
    let out = driver.output_topic("out", StringSerde, StringSerde);
    assert_eq!(
        out.read_key_values().unwrap(),
        [("u9".to_owned(), "zed:u9".to_owned())]
    );
}

#[test]
fn joining_an_unmaterialized_table_is_a_build_error() {
    let b = StreamsBuilder::new();
    let users = b.table("users", Materialized::with(StringSerde, StringSerde));
    let active = users.filter(|_, v| !v.is_empty());
    b.stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .join(&active, |_, v, u| format!("{u}{v}"));
    match b.build() {
        Err(DslError::Invalid(issues)) => {
            assert!(
                matches!(&issues[..], [DslIssue::NotMaterialized { .. }]),
                "{issues:?}"
            )
        }
        other => panic!("expected NotMaterialized, got {other:?}"),
    }
}

fn table_join_driver(kind: &str) -> TopologyTestDriver {
    let b = StreamsBuilder::new();
    let names = table(&b, "names", StringSerde);
    let ages = table(&b, "ages", U64Serde);
    let joined = match kind {
        "join" => names.join(&ages, |_, n, a| format!("{n}:{a}")),
        "left" => names.left_join(&ages, |_, n, a| format!("{n}:{a:?}")),
        _ => names.outer_join(&ages, |_, n, a| format!("{n:?}:{a:?}")),
    };
    joined
        .to_stream()
        .to("out", Produced::with(StringSerde, NullableSerde(StringSerde)));
    let topology = b.build().unwrap();
    let text = topology.describe().to_string();
    assert!(
        text.contains("names-table-") && text.contains("-this (stores: [ages])"),
        "{text}"
    );
    TopologyTestDriver::new(topology, DriverConfig::default()).unwrap()
}

fn pipe_table_join_input(driver: &TopologyTestDriver) -> Vec<(String, Option<String>)> {
    let names = driver.input_topic("names", StringSerde, NullableSerde(StringSerde));
    let ages = driver.input_topic("ages", StringSerde, NullableSerde(U64Serde));
    names.pipe_at("k".into(), Some("ann".into()), 1).unwrap();
    ages.pipe_at("k".into(), Some(30), 2).unwrap();
    ages.pipe_at("j".into(), Some(7), 3).unwrap();
    names.pipe_at("k".into(), None, 4).unwrap();
    driver
        .output_topic("out", StringSerde, NullableSerde(StringSerde))
        .read_key_values()
        .unwrap()
}

fn kv(p: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    p.iter()
        .map(|(k, v)| ((*k).into(), v.map(str::to_owned)))
        .collect()
}

#[test]
fn table_table_inner_join_updates_from_both_sides() {
    let got = pipe_table_join_input(&table_join_driver("join"));
    assert_eq!(got, kv(&[("k", Some("ann:30")), ("k", None)]));
}

#[test]
fn table_table_left_join_keeps_rows_of_the_left_table() {
    let got = pipe_table_join_input(&table_join_driver("left"));
    assert_eq!(
        got,
        kv(&[("k", Some("ann:None")), ("k", Some("ann:Some(30)")), ("k", None)])
    );
}

#[test]
fn table_table_outer_join_keeps_rows_of_either_table() {
    let got = pipe_table_join_input(&table_join_driver("outer"));
    assert_eq!(
        got,
        kv(&[
            ("k", Some("Some(\"ann\"):None")),
            ("k", Some("Some(\"ann\"):Some(30)")),
            ("j", Some("None:Some(7)")),
            ("k", Some("None:Some(30)")),
        ])
    );
}

#[test]
fn a_join_forwards_nothing_for_a_deletion_that_changes_no_joined_row() {
    for kind in ["join", "left", "outer"] {
        let driver = table_join_driver(kind);
        let names = driver.input_topic("names", StringSerde, NullableSerde(StringSerde));
        let ages = driver.input_topic("ages", StringSerde, NullableSerde(U64Serde));
        names.pipe_at("absent".into(), None, 1).unwrap();
        ages.pipe_at("absent".into(), None, 2).unwrap();
        names.pipe_at("k".into(), Some("ann".into()), 3).unwrap();
        names.pipe_at("k".into(), None, 4).unwrap();
        let got = driver
            .output_topic("out", StringSerde, NullableSerde(StringSerde))
            .read_key_values()
            .unwrap();
        let expected = match kind {
            // No row on the other side: the inner join never had a row for `k`.
            "join" => kv(&[]),
            // The kept side's row came and went.
            "left" => kv(&[("k", Some("ann:None")), ("k", None)]),
            _ => kv(&[("k", Some("Some(\"ann\"):None")), ("k", None)]),
        };
        assert_eq!(got, expected, "{kind}");
    }
}
