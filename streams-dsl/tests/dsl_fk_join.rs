//! Foreign-key table-table joins (`join_foreign`, `left_join_foreign`) in the
//! TopologyTestDriver: update sequences of both sides, naming, build errors, and a model
//! check of random update sequences against the join recomputed from the final tables.

use std::collections::BTreeMap;

use proptest::prelude::*;
use streams_core::serdes::StringSerde;
use streams_core::state::serde::{BytesSerde, NullableSerde};
use streams_dsl::{DslError, DslIssue, KTable, Materialized, Produced, StreamsBuilder};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

#[path = "common/string_tables.rs"]
mod string_tables;
use string_tables::table;

type Out = Vec<(String, Option<String>)>;

fn out(p: &[(&str, Option<&str>)]) -> Out {
    p.iter().map(|(k, v)| ((*k).into(), v.map(Into::into))).collect()
}

/// The customer of an order `"<customer>:<amount>"`.
fn customer(order: &str) -> String {
    order.split(':').next().unwrap_or_default().to_owned()
}

fn tables(b: &StreamsBuilder) -> (KTable<String, String>, KTable<String, String>) {
    let orders = table(b, "orders", StringSerde);
    let customers = table(b, "customers", StringSerde);
    (orders, customers)
}

fn driver(left: bool) -> TopologyTestDriver {
    let b = StreamsBuilder::new().require_names();
    let (orders, customers) = tables(&b);
    let m = Materialized::as_("enriched").with_value_serde(StringSerde);
    let joined = if left {
        orders.left_join_foreign(
            &customers,
            |o: &String| customer(o),
            |o, c| format!("{o} by {}", c.unwrap_or("?".into())),
            m,
        )
    } else {
        orders.join_foreign(
            &customers,
            |o: &String| customer(o),
            |o, c| format!("{o} by {c}"),
            m,
        )
    };
    joined
        .to_stream()
        .to("out", Produced::with(StringSerde, NullableSerde(StringSerde)));
    TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default().application_id("fk")).unwrap()
}

/// A driver and how many joined updates were read from it so far.
struct Run {
    driver: TopologyTestDriver,
    seen: usize,
}

impl Run {
    fn new(left: bool) -> Self {
        Self {
            driver: driver(left),
            seen: 0,
        }
    }

    /// Pipes `(topic, key, value)` updates and returns the joined updates they caused.
    fn pipe(&mut self, updates: &[(&str, &str, Option<&str>)]) -> Out {
        let d = &self.driver;
        let orders = d.input_topic("orders", StringSerde, NullableSerde(StringSerde));
        let customers = d.input_topic("customers", StringSerde, NullableSerde(StringSerde));
        for (topic, k, v) in updates {
            let input = if *topic == "orders" { &orders } else { &customers };
            input.pipe((*k).into(), v.map(Into::into)).unwrap();
        }
        let all = d
            .output_topic("out", StringSerde, NullableSerde(StringSerde))
            .read_key_values()
            .unwrap();
        let new = all[self.seen..].to_vec();
        self.seen = all.len();
        new
    }
}

#[test]
fn inner_join_follows_both_sides_and_foreign_key_moves() {
    let mut d = Run::new(false);
    let o = "orders";
    let c = "customers";
    assert_eq!(
        d.pipe(&[(c, "c1", Some("Alice")), (o, "o1", Some("c1:10"))]),
        out(&[("o1", Some("c1:10 by Alice"))])
    );
    assert_eq!(d.pipe(&[(o, "o2", Some("c2:5"))]), out(&[]), "no customer c2 yet");
    assert_eq!(
        d.pipe(&[(c, "c2", Some("Bob"))]),
        out(&[("o2", Some("c2:5 by Bob"))])
    );
    assert_eq!(
        d.pipe(&[(c, "c1", Some("Alicia"))]),
        out(&[("o1", Some("c1:10 by Alicia"))])
    );
    assert_eq!(
        d.pipe(&[(o, "o1", Some("c2:10"))]),
        out(&[("o1", Some("c2:10 by Bob"))]),
        "a moved order joins its new customer only"
    );
    assert_eq!(
        d.pipe(&[(c, "c1", None)]),
        out(&[]),
        "c1 has no subscriber any more"
    );
    assert_eq!(d.pipe(&[(c, "c2", None)]), out(&[("o1", None), ("o2", None)]));
    assert_eq!(
        d.pipe(&[(o, "o2", None)]),
        out(&[("o2", None)]),
        "a deleted order is a tombstone"
    );
    assert_eq!(
        d.pipe(&[(o, "o3", Some("c9:1")), (o, "o3", Some("c9:2"))]),
        out(&[]),
        "same absent key"
    );
    assert_eq!(
        d.pipe(&[
            (c, "c3", Some("Cy")),
            (o, "o4", Some("c3:1")),
            (o, "o4", Some("c9:1"))
        ]),
        out(&[("o4", Some("c3:1 by Cy")), ("o4", None)]),
        "moving to an absent key deletes the joined row"
    );
}

/// A response as the right side writes it (Kafka Streams' `SubscriptionResponseWrapper`):
/// version 0 (its top bit set when the hash is absent), the hash (16 bytes, when
/// present), then the right value.
fn response(hash: Option<[u8; 16]>, value: &str) -> Vec<u8> {
    let mut out = Vec::new();
    match hash {
        Some(h) => {
            out.push(0);
            out.extend_from_slice(&h);
        }
        None => out.push(0x80),
    }
    out.extend_from_slice(value.as_bytes());
    out
}

#[test]
fn a_response_for_another_value_of_the_left_row_is_dropped() {
    let mut d = Run::new(false);
    let (o, c) = ("orders", "customers");
    assert_eq!(
        d.pipe(&[(c, "c1", Some("Alice")), (o, "o1", Some("c1:10"))])
            .len(),
        1
    );
    let responses = d
        .driver
        .input_topic("fk-enriched-subscription-response-topic", StringSerde, BytesSerde);
    // Answers to an outdated subscription of o1: a different value's hash, or the hash of
    // a deleted row: both stale, both dropped.
    responses
        .pipe("o1".into(), response(Some([7; 16]), "Mallory"))
        .unwrap();
    responses.pipe("o1".into(), response(None, "Mallory")).unwrap();
    assert_eq!(d.pipe(&[]), out(&[]), "stale responses change nothing");
    // An answer for a row that no longer exists, to its deletion: a tombstone.
    responses.pipe("o7".into(), response(None, "Mallory")).unwrap();
    assert_eq!(d.pipe(&[]), out(&[("o7", None)]));
    assert_eq!(
        d.pipe(&[(c, "c1", Some("Alicia"))]),
        out(&[("o1", Some("c1:10 by Alicia"))])
    );
}

#[test]
fn left_join_keeps_rows_without_a_match() {
    let mut d = Run::new(true);
    let (o, c) = ("orders", "customers");
    assert_eq!(
        d.pipe(&[(o, "o1", Some("c1:10"))]),
        out(&[("o1", Some("c1:10 by ?"))])
    );
    assert_eq!(
        d.pipe(&[(c, "c1", Some("Alice"))]),
        out(&[("o1", Some("c1:10 by Alice"))])
    );
    assert_eq!(
        d.pipe(&[(o, "o1", Some("c2:10"))]),
        out(&[("o1", Some("c2:10 by ?"))])
    );
    assert_eq!(
        d.pipe(&[(c, "c1", None), (c, "c2", Some("Bob"))]),
        out(&[("o1", Some("c2:10 by Bob"))])
    );
    assert_eq!(d.pipe(&[(c, "c2", None)]), out(&[("o1", Some("c2:10 by ?"))]));
    assert_eq!(
        d.pipe(&[(o, "o1", None), (o, "o9", None)]),
        out(&[("o1", None)]),
        "absent delete: nothing"
    );
}

#[test]
fn nodes_topics_and_stores_are_named_after_the_materialized_name() {
    let b = StreamsBuilder::new();
    let (orders, customers) = tables(&b);
    let joined = orders.join_foreign(
        &customers,
        |o: &String| customer(o),
        |o, c| o + &c,
        Materialized::as_("enriched").with_value_serde(StringSerde),
    );
    assert_eq!(joined.node_name(), "enriched");
    assert_eq!(joined.store_name(), Some("enriched"));
    let text = b.build().unwrap().describe().to_string();
    for name in [
        "Sink: enriched-subscription-registration-sink (topic: enriched-subscription-registration-topic)",
        "Source: enriched-subscription-registration-source (topics: [enriched-subscription-registration-topic])",
        "Processor: enriched-subscription-join (stores: [enriched-subscription-store, customers])",
        "Processor: enriched-foreign-join (stores: [enriched-subscription-store])",
        "Sink: enriched-subscription-response-sink (topic: enriched-subscription-response-topic)",
        "Processor: enriched (stores: [enriched, orders])",
    ] {
        assert!(text.contains(name), "{name} missing from\n{text}");
    }
    let b = StreamsBuilder::new();
    let (orders, customers) = tables(&b);
    let joined = orders.left_join_foreign(
        &customers,
        |o: &String| customer(o),
        |o, _| o,
        Materialized::new().with_value_serde(StringSerde),
    );
    assert_eq!(joined.node_name(), "orders-table-fk_left_join");
    assert_eq!(joined.store_name(), Some("orders-table-fk_left_join-store"));
    assert!(b.build().is_ok());
}

#[test]
fn unnamed_unmaterialized_or_serde_less_joins_are_build_errors() {
    let b = StreamsBuilder::new().require_names();
    let (orders, customers) = tables(&b);
    orders.join_foreign(
        &customers,
        |o: &String| customer(o),
        |o, c| o + &c,
        Materialized::new().with_value_serde(StringSerde),
    );
    assert!(matches!(b.build(), Err(DslError::Invalid(i)) if matches!(i[..], [DslIssue::Unnamed { .. }])));

    let b = StreamsBuilder::new();
    let (orders, customers) = tables(&b);
    orders.filter(|_, _| true).join_foreign(
        &customers,
        |o: &String| customer(o),
        |o, c| o + &c,
        Materialized::as_("j").with_value_serde(StringSerde),
    );
    assert!(
        matches!(b.build(), Err(DslError::Invalid(i)) if matches!(i[..], [DslIssue::NotMaterialized { .. }]))
    );

    let b = StreamsBuilder::new();
    let (orders, customers) = tables(&b);
    orders.join_foreign(
        &customers,
        |o: &String| customer(o),
        |o, c| o + &c,
        Materialized::as_("j"),
    );
    assert!(
        matches!(b.build(), Err(DslError::Invalid(i)) if matches!(i[..], [DslIssue::MissingSerde { .. }]))
    );
}

/// One update: an order (key `o<n>`, customer `c<m>`) or a customer (`c<m>`); `None`
/// deletes.
#[derive(Debug, Clone)]
enum Update {
    Order(u8, Option<(u8, u8)>),
    Customer(u8, Option<u8>),
}

fn update() -> impl Strategy<Value = Update> {
    prop_oneof![
        (0..5u8, proptest::option::weighted(0.8, (0..3u8, 0..4u8))).prop_map(|(k, v)| Update::Order(k, v)),
        (0..3u8, proptest::option::weighted(0.7, 0..4u8)).prop_map(|(k, v)| Update::Customer(k, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The joined table read from the output equals the join of the final tables.
    #[test]
    fn the_joined_table_is_the_join_of_the_final_tables(updates in proptest::collection::vec(update(), 1..40), left in any::<bool>()) {
        let d = driver(left);
        let orders_in = d.input_topic("orders", StringSerde, NullableSerde(StringSerde));
        let customers_in = d.input_topic("customers", StringSerde, NullableSerde(StringSerde));
        let (mut orders, mut customers) = (BTreeMap::new(), BTreeMap::new());
        for u in &updates {
            match u {
                Update::Order(k, v) => {
                    let v = v.map(|(c, a)| format!("c{c}:{a}"));
                    orders_in.pipe(format!("o{k}"), v.clone()).unwrap();
                    match v { Some(v) => orders.insert(format!("o{k}"), v), None => orders.remove(&format!("o{k}")) };
                }
                Update::Customer(k, v) => {
                    let v = v.map(|n| format!("name{n}"));
                    customers_in.pipe(format!("c{k}"), v.clone()).unwrap();
                    match v { Some(v) => customers.insert(format!("c{k}"), v), None => customers.remove(&format!("c{k}")) };
                }
            }
        }
        let mut expected = BTreeMap::new();
        for (k, o) in &orders {
            match (customers.get(&customer(o)), left) {
                (Some(c), _) => { expected.insert(k.clone(), format!("{o} by {c}")); }
                (None, true) => { expected.insert(k.clone(), format!("{o} by ?")); }
                (None, false) => {}
            }
        }
        let mut actual = BTreeMap::new();
        for (k, v) in d.output_topic("out", StringSerde, NullableSerde(StringSerde)).read_key_values().unwrap() {
            match v { Some(v) => actual.insert(k, v), None => actual.remove(&k) };
        }
        prop_assert_eq!(actual, expected);
    }
}

#[test]
fn derived_tables_join_by_foreign_key() {
    use streams_dsl::{Consumed, Grouped};
    // Left: orders over 10, kept in their own store; right: visits counted per customer.
    let b = StreamsBuilder::new();
    let (orders, _) = tables(&b);
    let big = orders.filter_as(
        |_, o| {
            o.split(':')
                .nth(1)
                .and_then(|a| a.parse::<u64>().ok())
                .unwrap_or(0)
                > 10
        },
        Materialized::as_("big-orders"),
    );
    let visits = b
        .stream(["visits"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .count(Materialized::as_("visits"));
    big.join_foreign(
        &visits,
        |o: &String| customer(o),
        |o, n| format!("{o} after {n} visits"),
        Materialized::as_("big-with-visits").with_value_serde(StringSerde),
    )
    .to_stream()
    .to("out", Produced::with(StringSerde, NullableSerde(StringSerde)));
    let d = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let orders_in = d.input_topic("orders", StringSerde, NullableSerde(StringSerde));
    let visits_in = d.input_topic("visits", StringSerde, StringSerde);
    visits_in.pipe("c1".into(), "home".into()).unwrap();
    orders_in.pipe("o1".into(), Some("c1:50".into())).unwrap();
    orders_in.pipe("o2".into(), Some("c1:5".into())).unwrap();
    visits_in.pipe("c1".into(), "cart".into()).unwrap();
    orders_in.pipe("o1".into(), Some("c1:7".into())).unwrap();
    let joined = d
        .output_topic("out", StringSerde, NullableSerde(StringSerde))
        .read_key_values()
        .unwrap();
    assert_eq!(
        joined,
        out(&[
            ("o1", Some("c1:50 after 1 visits")),
            ("o1", Some("c1:50 after 2 visits")),
            ("o1", None),
        ])
    );
}
