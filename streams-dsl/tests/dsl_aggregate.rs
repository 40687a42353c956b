//! Grouping, repartitioning and aggregation in the TopologyTestDriver, with word count end
//! to end.

use streams_core::Topology;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    Consumed, DslError, DslIssue, DynSerde, Grouped, KStream, Materialized, Produced, StreamsBuilder,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

fn strings() -> Consumed<StringSerde, StringSerde> {
    Consumed::with(StringSerde, StringSerde)
}

/// Lines in `lines`, per-word counts out to `counts`, the count kept in the store `counts`.
fn word_count(b: &StreamsBuilder) {
    b.stream(["lines"], strings())
        .flat_map_values(|_, line| line.split_whitespace().map(str::to_lowercase).collect::<Vec<_>>())
        .group_by(
            |_, word| word.clone(),
            Grouped::as_("words").with_key_serde(StringSerde),
        )
        .count(Materialized::as_("counts"))
        .to_stream()
        .to(
            "word-counts",
            Produced::with(StringSerde, NullableSerde(U64Serde)),
        );
}

#[test]
fn word_count_end_to_end() {
    let b = StreamsBuilder::new();
    word_count(&b);
    let topology = b.build().unwrap();
    let text = topology.describe().to_string();
    assert!(
        text.contains("Sink: words-sink (topic: words-repartition)"),
        "{text}"
    );
    assert!(
        text.contains("Source: words-source (topics: [words-repartition])"),
        "{text}"
    );
    assert!(text.contains("Processor: counts (stores: [counts])"), "{text}");
    assert_eq!(topology.subtopologies().len(), 2, "{text}");

    let config = DriverConfig::default()
        .application_id("wc")
        .partitions("lines", 2)
        .partitions("wc-words-repartition", 3);
    let driver = TopologyTestDriver::new(topology, config).unwrap();
    let input = driver.input_topic("lines", StringSerde, StringSerde);
    input.pipe("1".into(), "the quick fox".into()).unwrap();
    input.pipe("2".into(), "The lazy dog".into()).unwrap();
    input.pipe("3".into(), "the end".into()).unwrap();

    let mut updates = driver
        .output_topic("word-counts", StringSerde, NullableSerde(U64Serde))
        .read_key_values()
        .unwrap();
    let the: Vec<_> = updates
        .iter()
        .filter(|(k, _)| k == "the")
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(the, [Some(1), Some(2), Some(3)]);
    updates.sort();
    updates.dedup_by(|a, b| a.0 == b.0);
    assert_eq!(updates.len(), 6);

    let mut total = 0;
    for p in 0..3 {
        let store = driver
            .kv_store_at::<DynSerde<String>, DynSerde<u64>>("counts", p)
            .unwrap();
        if let Some(n) = store.get(&"the".into()).unwrap() {
            total += n;
        }
    }
    assert_eq!(total, 3);
    let changelog = driver.output_topic("wc-counts-changelog", StringSerde, U64Serde);
    assert!(!changelog.is_empty());
}

/// A DSL aggregate's store is timestamped, and its changelog is written as Kafka Streams'
/// `ChangeLoggingTimestampedKeyValueBytesStore` writes it: the plain value, with the
/// aggregate's timestamp (the largest of the key's records) as the record's timestamp.
#[test]
fn a_count_changelog_holds_plain_values_stamped_with_the_aggregate_time() {
    let b = StreamsBuilder::new();
    b.stream(["clicks"], strings())
        .group_by_key(Grouped::new())
        .count(Materialized::as_("counts"))
        .to_stream()
        .to(
            "click-counts",
            Produced::with(StringSerde, NullableSerde(U64Serde)),
        );
    let config = DriverConfig::default().application_id("cl");
    let driver = TopologyTestDriver::new(b.build().unwrap(), config).unwrap();
    let input = driver.input_topic("clicks", StringSerde, StringSerde);
    for (key, at) in [("a", 10), ("b", 20), ("a", 30), ("a", 25)] {
        input.pipe_at(key.into(), "x".into(), at).unwrap();
    }
    let changelog: Vec<(String, u64, i64)> = driver
        .output_topic("cl-counts-changelog", StringSerde, U64Serde)
        .read_records()
        .unwrap()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    let expected = [("a", 1, 10), ("b", 1, 20), ("a", 2, 30), ("a", 3, 30)];
    let expected: Vec<(String, u64, i64)> = expected.iter().map(|&(k, n, t)| (k.to_owned(), n, t)).collect();
    assert_eq!(changelog, expected);
}

fn sum_topology(b: &StreamsBuilder) {
    let grouped = b
        .stream(["nums"], Consumed::with(StringSerde, U64Serde))
        .group_by_key(Grouped::new());
    grouped
        .reduce(|a, b| a + b, Materialized::as_("sums").in_memory())
        .to_stream()
        .to("sums", Produced::with(StringSerde, NullableSerde(U64Serde)));
    grouped
        .aggregate(
            String::new,
            |_, n, acc: String| format!("{acc}{n},"),
            Materialized::as_("lists").with_value_serde(StringSerde),
        )
        .to_stream()
        .to("lists", Produced::with(StringSerde, NullableSerde(StringSerde)));
}

#[test]
fn reduce_and_aggregate_by_key_without_repartition() {
    let b = StreamsBuilder::new();
    sum_topology(&b);
    let topology = b.build().unwrap();
    assert_eq!(
        topology.subtopologies().len(),
        1,
        "group_by_key on an unchanged key"
    );
    let driver = TopologyTestDriver::new(topology, DriverConfig::default()).unwrap();
    let input = driver.input_topic("nums", StringSerde, U64Serde);
    for (k, n) in [("a", 1), ("b", 10), ("a", 2)] {
        input.pipe(k.into(), n).unwrap();
    }
    let sums = driver
        .output_topic("sums", StringSerde, NullableSerde(U64Serde))
        .read_key_values()
        .unwrap();
    assert_eq!(
        sums,
        [
            ("a".into(), Some(1)),
            ("b".into(), Some(10)),
            ("a".into(), Some(3))
        ]
    );
    let lists = driver
        .output_topic("lists", StringSerde, NullableSerde(StringSerde))
        .read_key_values()
        .unwrap();
    assert_eq!(lists.last(), Some(&("a".into(), Some("1,2,".into()))));
    let store = driver
        .kv_store::<DynSerde<String>, DynSerde<String>>("lists")
        .unwrap();
    assert_eq!(store.get(&"b".into()).unwrap(), Some("10,".into()));
}

#[test]
fn group_by_key_after_a_key_change_repartitions() {
    let b = StreamsBuilder::new();
    b.stream(["in"], strings())
        .select_key(|_, v| v.clone())
        .group_by_key(Grouped::new().with_key_serde(StringSerde))
        .count(Materialized::new());
    let topology = b.build().unwrap();
    let text = topology.describe().to_string();
    assert!(
        text.contains("topic: in-source-select_key-group-repartition"),
        "{text}"
    );
    assert!(
        text.contains("stores: [in-source-select_key-group-source-count-store]"),
        "{text}"
    );
}

#[test]
fn a_missing_serde_is_a_build_error() {
    let b = StreamsBuilder::new();
    b.stream(["in"], strings())
        .map(|k, v| (v.len() as u64, k))
        .group_by_key(Grouped::new())
        .count(Materialized::new());
    match b.build() {
        Err(DslError::Invalid(issues)) => {
            assert!(
                issues
                    .iter()
                    .any(|i| matches!(i, DslIssue::MissingSerde { what: "key", .. })),
                "{issues:?}"
            );
        }
        other => panic!("expected a missing serde, got {other:?}"),
    }
}

fn names(t: &Topology) -> (Vec<String>, Vec<String>) {
    let mut stores: Vec<String> = t.logged_stores().into_iter().map(|(_, s)| s).collect();
    let mut topics: Vec<String> = t
        .subtopologies()
        .iter()
        .flat_map(|s| s.source_topics.iter().chain(&s.sink_topics).cloned())
        .collect();
    stores.sort();
    topics.sort();
    topics.dedup();
    (stores, topics)
}

fn unnamed_pipeline(b: &StreamsBuilder) {
    pipeline_with(b, |_| {});
}

/// The unnamed word count, with `extra` applied to the source stream before it.
fn pipeline_with(b: &StreamsBuilder, extra: impl FnOnce(&KStream<String, String>)) {
    let lines = b.stream(["lines"], strings());
    extra(&lines);
    lines
        .flat_map_values(|_, l| l.split(' ').map(str::to_owned).collect::<Vec<_>>())
        .group_by(|_, w| w.clone(), Grouped::new())
        .count(Materialized::new());
}

#[test]
fn adding_an_unrelated_operator_renames_no_store_or_topic() {
    let before = StreamsBuilder::new();
    unnamed_pipeline(&before);
    let before = before.build().unwrap();
    let (stores_before, topics_before) = names(&before);
    assert_eq!(
        stores_before,
        ["lines-source-flat_map_values-select_key-group-source-count-store"]
    );
    assert_eq!(
        topics_before,
        [
            "lines",
            "lines-source-flat_map_values-select_key-group-repartition"
        ]
    );

    let after = StreamsBuilder::new();
    // Another stream with a stateful pipeline of its own, built first...
    let other = after.stream(["other"], strings());
    other
        .filter(|_, v| !v.is_empty())
        .to("filtered", Produced::with(StringSerde, StringSerde));
    other
        .group_by(|_, v| v.clone(), Grouped::new())
        .count(Materialized::new());
    // ...and siblings on the pipeline's own source stream, added before the pipeline,
    // including another aggregation.
    pipeline_with(&after, |lines| {
        lines.peek(|_, _| {});
        lines
            .map_values(|_, v| v.len() as u64)
            .filter(|_, n| *n > 0)
            .group_by_key(Grouped::new())
            .reduce(|a, b| a + b, Materialized::new().with_value_serde(U64Serde));
    });
    let after = after.build().unwrap();

    let (stores_after, topics_after) = names(&after);
    for s in &stores_before {
        assert!(stores_after.contains(s), "store {s} renamed: {stores_after:?}");
    }
    for t in &topics_before {
        assert!(topics_after.contains(t), "topic {t} renamed: {topics_after:?}");
    }
    assert_eq!(stores_after.len(), stores_before.len() + 2);
}

#[test]
fn require_names_rejects_unnamed_stateful_operators() {
    let b = StreamsBuilder::new().require_names();
    unnamed_pipeline(&b);
    let Err(DslError::Invalid(issues)) = b.build() else {
        panic!("expected unnamed operators to be rejected");
    };
    let what: Vec<_> = issues
        .iter()
        .filter_map(|i| match i {
            DslIssue::Unnamed { what, .. } => Some(*what),
            _ => None,
        })
        .collect();
    assert_eq!(what, ["a repartition topic", "a store"]);

    let named = StreamsBuilder::new().require_names();
    word_count(&named);
    named.build().unwrap();
}

#[test]
fn a_name_used_twice_is_a_build_error() {
    let b = StreamsBuilder::new();
    let s = b.stream(["in"], strings());
    s.clone().named("x").filter(|_, _| true);
    s.clone().named("x").filter(|_, _| true);
    assert!(matches!(b.build(), Err(DslError::Invalid(i)) if i == [DslIssue::DuplicateName("x".into())]));
}

#[test]
fn repartition_always_goes_through_a_named_topic() {
    let b = StreamsBuilder::new();
    let s = b.stream(["in"], strings());
    s.repartition(Grouped::as_("spread"))
        .to("out", Produced::with(StringSerde, StringSerde));
    s.repartition(Grouped::new()).foreach(|_, _| {});
    let topology = b.build().unwrap();
    let text = topology.describe().to_string();
    assert!(
        text.contains("Sink: spread-sink (topic: spread-repartition)"),
        "{text}"
    );
    assert!(text.contains("topic: in-source-through-repartition"), "{text}");
    // The driver runs the topic as `<application.id>-spread-repartition`.
    let config = DriverConfig::default().partitions("test-driver-spread-repartition", 4);
    let driver = TopologyTestDriver::new(topology, config).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for i in 0..8 {
        input.pipe(format!("k{i}"), format!("v{i}")).unwrap();
    }
    let got = driver
        .output_topic("out", StringSerde, StringSerde)
        .read_key_values()
        .unwrap();
    assert_eq!(got.len(), 8);
    assert_eq!(
        driver.task_ids().len(),
        1 + 4 + 1,
        "one input task, four for the named topic, one for the other"
    );
}

#[test]
fn a_repartition_topic_can_have_a_fixed_partition_count() {
    let b = StreamsBuilder::new();
    let five = std::num::NonZeroU16::new(5).unwrap();
    b.stream(["in"], strings())
        .repartition(Grouped::as_("spread").with_number_of_partitions(five))
        .to("out", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    assert_eq!(
        topology.repartition_partitions().get("spread-repartition"),
        Some(&5)
    );
    // The driver gives the topic its count: one task per partition reads it.
    let driver = TopologyTestDriver::new(topology, DriverConfig::default()).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for i in 0..20 {
        input.pipe(format!("k{i}"), format!("v{i}")).unwrap();
    }
    let got = driver
        .output_topic("out", StringSerde, StringSerde)
        .read_key_values()
        .unwrap();
    assert_eq!(got.len(), 20);
    assert_eq!(
        driver.task_ids().len(),
        1 + 5,
        "one input task, five for the topic"
    );
}
