//! Null keys and values in the DSL, whatever the serde: an aggregation skips them and counts
//! them as dropped; a stateless operator passes them on and the sink writes them as null;
//! a repartition topic leaves null keys out. (The differential test compares every operator's
//! null handling with Kafka Streams on random inputs; these pin the parts it cannot see.)

use streams_core::RecordingLevel;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

#[path = "common/key_counts.rs"]
mod key_counts;
use key_counts::count_by_key;

type Nullable = NullableSerde<StringSerde>;

/// The total of the series of metric `name` in Prometheus' text format.
fn total(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

fn driver(b: &StreamsBuilder) -> TopologyTestDriver {
    let config = DriverConfig::default()
        .application_id("nulls")
        .metrics(RecordingLevel::Info);
    TopologyTestDriver::new(b.build().unwrap(), config).unwrap()
}

#[test]
fn an_aggregation_skips_null_keys_and_values_and_counts_them_as_dropped() {
    let b = StreamsBuilder::new();
    count_by_key(&b);
    let driver = driver(&b);
    let input = driver.input_topic("in", Nullable::default(), Nullable::default());
    input.pipe(Some("a".into()), Some("x".into())).unwrap();
    input.pipe(Some("a".into()), None).unwrap(); // a tombstone: not counted
    input.pipe(None, Some("y".into())).unwrap(); // a null key: not counted
    input.pipe(Some("a".into()), Some(String::new())).unwrap(); // empty, not null: counted
    let out = driver.output_topic("counts", StringSerde, NullableSerde(U64Serde));
    assert_eq!(
        out.read_key_values().unwrap(),
        [("a".to_owned(), Some(1)), ("a".to_owned(), Some(2))]
    );
    let text = driver.metrics().unwrap().encode();
    assert_eq!(total(&text, "streams_task_dropped_records_total"), 2.0, "{text}");
}

#[test]
fn a_stateless_operator_passes_nulls_on_and_the_sink_writes_them_as_null() {
    let b = StreamsBuilder::new();
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .filter(|_, _| true)
        .to("out", Produced::with(StringSerde, StringSerde));
    let driver = driver(&b);
    let input = driver.input_topic("in", Nullable::default(), Nullable::default());
    input.pipe(None, None).unwrap();
    input.pipe(Some("k".into()), Some(String::new())).unwrap();
    let out = driver.output_topic("out", Nullable::default(), Nullable::default());
    assert_eq!(
        out.read_key_values().unwrap(),
        [(None, None), (Some("k".to_owned()), Some(String::new()))],
        "a null stays null, an empty string stays empty"
    );
}

#[test]
fn map_values_replaces_a_null_value_but_keeps_a_null_key() {
    let b = StreamsBuilder::new();
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .map_values(|_, v| format!("<{v}>"))
        .to("out", Produced::with(StringSerde, StringSerde));
    let driver = driver(&b);
    let input = driver.input_topic("in", Nullable::default(), Nullable::default());
    input.pipe(None, None).unwrap();
    let out = driver.output_topic("out", Nullable::default(), Nullable::default());
    assert_eq!(out.read_key_values().unwrap(), [(None, Some("<>".to_owned()))]);
}

#[test]
fn a_repartition_topic_leaves_null_keys_out() {
    let b = StreamsBuilder::new();
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .repartition(Grouped::as_("through"))
        .to("out", Produced::with(StringSerde, StringSerde));
    let driver = driver(&b);
    let input = driver.input_topic("in", Nullable::default(), Nullable::default());
    input.pipe(None, Some("dropped".into())).unwrap();
    input.pipe(Some("k".into()), None).unwrap();
    let out = driver.output_topic("out", Nullable::default(), Nullable::default());
    assert_eq!(out.read_key_values().unwrap(), [(Some("k".to_owned()), None)]);
    let text = driver.metrics().unwrap().encode();
    assert_eq!(total(&text, "streams_task_dropped_records_total"), 1.0, "{text}");
}

#[test]
fn a_foreign_key_join_skips_a_null_foreign_key_and_counts_it_as_dropped() {
    let b = StreamsBuilder::new();
    let table = |topic: &str| {
        b.table(
            topic,
            Materialized::as_(topic)
                .with_key_serde(StringSerde)
                .with_value_serde(StringSerde),
        )
    };
    let (orders, customers) = (table("orders"), table("customers"));
    // An order "<customer>:<amount>"; no customer before the colon is a null foreign key.
    orders
        .join_foreign(
            &customers,
            |o: &String| {
                o.split_once(':')
                    .map(|(c, _)| c.to_owned())
                    .filter(|c| !c.is_empty())
            },
            |o, c| format!("{o} by {c}"),
            Materialized::as_("enriched").with_value_serde(StringSerde),
        )
        .to_stream()
        .to("out", Produced::with(StringSerde, NullableSerde(StringSerde)));
    let driver = driver(&b);
    let customers = driver.input_topic("customers", StringSerde, Nullable::default());
    let orders = driver.input_topic("orders", StringSerde, Nullable::default());
    customers.pipe("c1".into(), Some("Alice".into())).unwrap();
    orders.pipe("o1".into(), Some(":5".into())).unwrap(); // null foreign key: dropped
    orders.pipe("o1".into(), Some("c1:6".into())).unwrap(); // joins
    orders.pipe("o1".into(), Some(":7".into())).unwrap(); // null again: the result deleted
    orders.pipe("o1".into(), None).unwrap(); // deleted while null: dropped
    let out = driver.output_topic("out", StringSerde, NullableSerde(StringSerde));
    assert_eq!(
        out.read_key_values().unwrap(),
        [
            ("o1".to_owned(), Some("c1:6 by Alice".to_owned())),
            ("o1".to_owned(), None)
        ]
    );
    let text = driver.metrics().unwrap().encode();
    assert_eq!(total(&text, "streams_task_dropped_records_total"), 2.0, "{text}");
}
