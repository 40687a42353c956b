//! GlobalKTable in the TopologyTestDriver: the global store sub-topology, and streams on
//! several partitions enriched from a global table fed from a topic with a different
//! partition count.

use streams_core::serdes::StringSerde;
use streams_core::state::serde::NullableSerde;
use streams_dsl::{Consumed, DslError, DslIssue, DynSerde, Materialized, Produced, StreamsBuilder};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

/// Orders keyed by order id, valued `<user>:<item>`, joined with the users global table
/// by the user in the value.
fn enrich(left: bool) -> StreamsBuilder {
    let b = StreamsBuilder::new();
    let users = b.global_table(
        "users",
        Materialized::as_("users-store")
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde),
    );
    let orders = b.stream(["orders"], Consumed::with(StringSerde, StringSerde));
    let user_of = |_: &String, v: &String| v.split(':').next().unwrap_or_default().to_owned();
    if left {
        orders
            .named("with-user")
            .left_join_global(&users, user_of, |_, order, user: Option<String>| {
                format!("{order}/{}", user.as_deref().unwrap_or("?"))
            })
            .to("enriched", Produced::with(StringSerde, StringSerde));
    } else {
        orders
            .named("with-user")
            .join_global(&users, user_of, |_, order, user| format!("{order}/{user}"))
            .to("enriched", Produced::with(StringSerde, StringSerde));
    }
    b
}

fn driver(left: bool) -> TopologyTestDriver {
    let config = DriverConfig::default()
        .partitions("users", 3)
        .partitions("orders", 4)
        .partitions("enriched", 4);
    TopologyTestDriver::new(enrich(left).build().unwrap(), config).unwrap()
}

#[test]
fn global_table_compiles_to_a_global_store_sub_topology() {
    let b = enrich(false);
    let described = b.build().unwrap().describe().to_string();
    assert!(described.contains("for global store"), "{described}");
    assert!(
        described.contains("Source: users-global_source (topics: [users])"),
        "{described}"
    );
    assert!(
        described.contains("Processor: users-global_table (stores: [users-store])"),
        "{described}"
    );
    assert!(
        described.contains("Processor: with-user (stores: [])"),
        "{described}"
    );
    assert!(!described.contains("repartition"), "{described}");
}

#[test]
fn an_unnamed_global_store_is_named_after_its_topic() {
    let b = StreamsBuilder::new().require_names();
    let users = b.global_table("users", Materialized::with(StringSerde, StringSerde));
    assert_eq!(users.store_name(), "users-global-store");
    assert_eq!(users.node_name(), "users-global_table");
    let described = b.build().unwrap().describe().to_string();
    assert!(
        described.contains("(stores: [users-global-store])"),
        "{described}"
    );
}

#[test]
fn a_global_table_without_serdes_is_a_build_error() {
    let b = StreamsBuilder::new();
    b.global_table::<String, String>("users", Materialized::as_("users-store"));
    assert!(matches!(
        b.build(),
        Err(DslError::Invalid(issues)) if matches!(&issues[..], [DslIssue::MissingSerde { operator, .. }] if operator == "users-global_table")
    ));
}

#[test]
fn join_global_enriches_every_partition_and_drops_absent_keys() {
    let driver = driver(false);
    let users = driver.input_topic("users", StringSerde, NullableSerde(StringSerde));
    let orders = driver.input_topic("orders", StringSerde, StringSerde);
    let out = driver.output_topic("enriched", StringSerde, StringSerde);
    for u in 0..10 {
        users.pipe(format!("u{u}"), Some(format!("name{u}"))).unwrap();
    }
    // Order ids spread the orders over all four partitions; users 10.. are unknown.
    for o in 0..16 {
        orders.pipe(format!("o{o}"), format!("u{o}:item{o}")).unwrap();
    }
    let mut got = out.read_key_values().unwrap();
    got.sort();
    let mut want: Vec<_> = (0..10)
        .map(|o| (format!("o{o}"), format!("u{o}:item{o}/name{o}")))
        .collect();
    want.sort();
    assert_eq!(got, want);

    // A new value reaches every task; a tombstone removes the user.
    users.pipe("u1".into(), Some("renamed".into())).unwrap();
    users.pipe("u2".into(), None).unwrap();
    orders.pipe("o20".into(), "u1:again".into()).unwrap();
    orders.pipe("o21".into(), "u2:gone".into()).unwrap();
    orders.pipe("o22".into(), "u12:x".into()).unwrap();
    users.pipe("u12".into(), Some("late".into())).unwrap();
    orders.pipe("o23".into(), "u12:y".into()).unwrap();
    assert_eq!(
        out.read_key_values().unwrap(),
        [
            ("o20".to_owned(), "u1:again/renamed".to_owned()),
            ("o23".to_owned(), "u12:y/late".to_owned()),
        ]
    );
    let store = driver
        .kv_store::<DynSerde<String>, DynSerde<String>>("users-store")
        .unwrap();
    assert_eq!(store.get(&"u2".to_owned()).unwrap(), None);
    assert_eq!(store.get(&"u12".to_owned()).unwrap().as_deref(), Some("late"));
}

#[test]
fn left_join_global_keeps_absent_keys_with_none() {
    let driver = driver(true);
    let users = driver.input_topic("users", StringSerde, NullableSerde(StringSerde));
    let orders = driver.input_topic("orders", StringSerde, StringSerde);
    let out = driver.output_topic("enriched", StringSerde, StringSerde);
    users.pipe("u1".into(), Some("ann".into())).unwrap();
    users.pipe("u2".into(), Some("bob".into())).unwrap();
    users.pipe("u2".into(), None).unwrap();
    for (o, v) in [("o1", "u1:a"), ("o2", "u2:b"), ("o3", "u3:c"), ("o4", "u1:d")] {
        orders.pipe(o.into(), v.into()).unwrap();
    }
    let mut got = out.read_key_values().unwrap();
    got.sort();
    assert_eq!(
        got,
        [
            ("o1".to_owned(), "u1:a/ann".to_owned()),
            ("o2".to_owned(), "u2:b/?".to_owned()),
            ("o3".to_owned(), "u3:c/?".to_owned()),
            ("o4".to_owned(), "u1:d/ann".to_owned()),
        ]
    );
}

#[test]
fn a_rekeyed_stream_joins_a_global_table_without_repartitioning() {
    let b = StreamsBuilder::new();
    let users = b.global_table("users", Materialized::with(StringSerde, StringSerde));
    b.stream(["orders"], Consumed::with(StringSerde, StringSerde))
        .select_key(|_, v| v.clone())
        .join_global(&users, |k, _| k.clone(), |_, v, user| format!("{v}/{user}"))
        .to("enriched", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    let described = topology.describe().to_string();
    assert!(!described.contains("repartition"), "{described}");
    let driver = TopologyTestDriver::new(topology, DriverConfig::default().partitions("orders", 2)).unwrap();
    driver
        .input_topic("users", StringSerde, StringSerde)
        .pipe("u1".into(), "ann".into())
        .unwrap();
    driver
        .input_topic("orders", StringSerde, StringSerde)
        .pipe("o1".into(), "u1".into())
        .unwrap();
    assert_eq!(
        driver
            .output_topic("enriched", StringSerde, StringSerde)
            .read_key_values()
            .unwrap(),
        [("u1".to_owned(), "u1/ann".to_owned())]
    );
}
