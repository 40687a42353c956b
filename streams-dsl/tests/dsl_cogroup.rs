//! Cogrouped aggregations (`KGroupedStream::cogroup`) in the TopologyTestDriver: inputs of
//! different value types into one store, a re-keyed input repartitioned, naming, build
//! errors, a model check of random record sequences, and windowed cogroups.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    CogroupedKStream, Consumed, DslError, DslIssue, Grouped, KStream, KTable, Materialized, Produced,
    StreamsBuilder, TimeWindows, Windowed,
};
use streams_test_utils::{DriverConfig, TestOutputTopic, TopologyTestDriver};

/// Clicks (`user -> page`) count 1 each; purchases (`item -> "user:amount"`, re-keyed by
/// user) add their amount; refunds (`user -> amount`, a `u64` stream) subtract theirs.
fn totals(b: &StreamsBuilder, store: Materialized<String, String>) -> KTable<String, String> {
    let clicks = b
        .stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::as_("clicks"));
    let purchases = b
        .stream(["purchases"], Consumed::with(StringSerde, StringSerde))
        .group_by(
            |_, v| v.split(':').next().unwrap_or_default().to_owned(),
            Grouped::as_("purchases-by-user"),
        );
    let refunds = b
        .stream(["refunds"], Consumed::with(StringSerde, U64Serde))
        .group_by_key(Grouped::as_("refunds"));
    clicks
        .cogroup(|_, page, agg: String| format!("{agg}c({page})"))
        .cogroup(&purchases, |_, p, agg| {
            format!("{agg}p({})", p.split(':').nth(1).unwrap_or_default())
        })
        .cogroup(&refunds, |_, r, agg| format!("{agg}r({r})"))
        .aggregate(|| "|".to_owned(), store)
}

/// Writes `results` to `out` and runs `b`'s program under the application id `id`.
fn run(b: &StreamsBuilder, results: KStream<String, Option<String>>, id: &str) -> TopologyTestDriver {
    results.to("out", Produced::with(StringSerde, NullableSerde(StringSerde)));
    TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default().application_id(id)).unwrap()
}

/// The topic `out`.
fn out(d: &TopologyTestDriver) -> TestOutputTopic<StringSerde, NullableSerde<StringSerde>> {
    d.output_topic("out", StringSerde, NullableSerde(StringSerde))
}

/// The values of the topic `a` grouped by key and cogrouped into their concatenation.
fn concat_a(b: &StreamsBuilder) -> CogroupedKStream<String, String> {
    b.stream(["a"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .cogroup(|_, v, agg: String| agg + &v)
}

fn driver() -> TopologyTestDriver {
    let b = StreamsBuilder::new().require_names();
    let totals = totals(&b, Materialized::as_("totals").with_value_serde(StringSerde));
    run(&b, totals.to_stream(), "cg")
}

#[test]
fn every_input_updates_the_one_aggregate_of_its_key() {
    let d = driver();
    let clicks = d.input_topic("clicks", StringSerde, StringSerde);
    let purchases = d.input_topic("purchases", StringSerde, StringSerde);
    let refunds = d.input_topic("refunds", StringSerde, U64Serde);
    clicks.pipe("ann".into(), "home".into()).unwrap();
    purchases.pipe("book".into(), "ann:12".into()).unwrap();
    refunds.pipe("bob".into(), 3).unwrap();
    clicks.pipe("ann".into(), "cart".into()).unwrap();
    purchases.pipe("pen".into(), "bob:2".into()).unwrap();
    let out = out(&d).read_key_values().unwrap();
    let expected: Vec<(String, Option<String>)> = [
        ("ann", "|c(home)"),
        ("ann", "|c(home)p(12)"),
        ("bob", "|r(3)"),
        ("ann", "|c(home)p(12)c(cart)"),
        ("bob", "|r(3)p(2)"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned())))
    .collect();
    assert_eq!(out, expected);
}

#[test]
fn one_store_one_merge_node_and_a_repartition_topic_for_the_rekeyed_input() {
    let b = StreamsBuilder::new();
    let t = totals(&b, Materialized::as_("totals").with_value_serde(StringSerde));
    assert_eq!(t.node_name(), "totals");
    assert_eq!(t.store_name(), Some("totals"));
    let text = b.build().unwrap().describe().to_string();
    for line in [
        "Processor: totals-input-1 (stores: [totals])",
        "Processor: totals-input-2 (stores: [totals])",
        "Processor: totals-input-3 (stores: [totals])",
        "Processor: totals (stores: [])",
        "<-- totals-input-1, totals-input-2, totals-input-3",
        "Sink: purchases-by-user-sink (topic: purchases-by-user-repartition)",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    assert_eq!(text.matches("Sub-topology").count(), 2, "{text}");

    let b = StreamsBuilder::new();
    let t = concat_a(&b).aggregate(String::new, Materialized::new().with_value_serde(StringSerde));
    assert_eq!(t.node_name(), "a-source-cogroup");
    assert_eq!(t.store_name(), Some("a-source-cogroup-store"));
    assert!(b.build().is_ok());
}

#[test]
fn unnamed_or_serde_less_cogroups_are_build_errors() {
    let b = StreamsBuilder::new().require_names();
    concat_a(&b).aggregate(String::new, Materialized::new().with_value_serde(StringSerde));
    assert!(matches!(b.build(), Err(DslError::Invalid(i)) if matches!(i[..], [DslIssue::Unnamed { .. }])));

    let b = StreamsBuilder::new();
    concat_a(&b).aggregate(String::new, Materialized::as_("agg"));
    assert!(
        matches!(b.build(), Err(DslError::Invalid(i)) if matches!(i[..], [DslIssue::MissingSerde { .. }]))
    );
}

/// One record: a click, a purchase or a refund, for user `u<n>`.
#[derive(Debug, Clone)]
enum Input {
    Click(u8, u8),
    Purchase(u8, u8),
    Refund(u8, u8),
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        (0..4u8, 0..9u8).prop_map(|(u, p)| Input::Click(u, p)),
        (0..4u8, 0..9u8).prop_map(|(u, a)| Input::Purchase(u, a)),
        (0..4u8, 0..9u8).prop_map(|(u, a)| Input::Refund(u, a)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The aggregate of each key, as the output's last update and in the store, is every
    /// record of the key folded in input order, whichever input it came from.
    #[test]
    fn the_aggregate_folds_every_input_in_order(inputs in proptest::collection::vec(input(), 1..40)) {
        let d = driver();
        let clicks = d.input_topic("clicks", StringSerde, StringSerde);
        let purchases = d.input_topic("purchases", StringSerde, StringSerde);
        let refunds = d.input_topic("refunds", StringSerde, U64Serde);
        let mut expected: BTreeMap<String, String> = BTreeMap::new();
        for (i, r) in inputs.iter().enumerate() {
            let (user, part) = match r {
                Input::Click(u, p) => {
                    clicks.pipe(format!("u{u}"), format!("page{p}")).unwrap();
                    (*u, format!("c(page{p})"))
                }
                Input::Purchase(u, a) => {
                    purchases.pipe(format!("item{i}"), format!("u{u}:{a}")).unwrap();
                    (*u, format!("p({a})"))
                }
                Input::Refund(u, a) => {
                    refunds.pipe(format!("u{u}"), u64::from(*a)).unwrap();
                    (*u, format!("r({a})"))
                }
            };
            expected.entry(format!("u{user}")).or_insert_with(|| "|".to_owned()).push_str(&part);
        }
        let mut actual = BTreeMap::new();
        for (k, v) in out(&d).read_key_values().unwrap() {
            prop_assert!(v.is_some(), "an aggregation never deletes");
            actual.insert(k, v.unwrap_or_default());
        }
        prop_assert_eq!(actual, expected);
    }
}

/// Clicks (strings) and refunds (`u64`) per user and 10 ms tumbling window with 5 ms grace.
fn windowed_driver() -> TopologyTestDriver {
    let b = StreamsBuilder::new().require_names();
    let clicks = b
        .stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::as_("clicks"));
    let refunds = b
        .stream(["refunds"], Consumed::with(StringSerde, U64Serde))
        .group_by_key(Grouped::as_("refunds"));
    let totals = clicks
        .cogroup(|_, page, agg: String| format!("{agg}c({page})"))
        .cogroup(&refunds, |_, r, agg| format!("{agg}r({r})"))
        .windowed_by(TimeWindows::of_size_with_grace(
            Duration::from_millis(10),
            Duration::from_millis(5),
        ))
        .aggregate(
            || "|".to_owned(),
            Materialized::as_("windowed-totals").with_value_serde(StringSerde),
        )
        .to_stream()
        .map(|w: Windowed<String>, v| (format!("{}@{}/{}", w.key, w.start, w.end), v));
    run(&b, totals, "wcg")
}

#[test]
fn windowed_cogroup_aggregates_every_input_per_key_and_window() {
    let d = windowed_driver();
    let clicks = d.input_topic("clicks", StringSerde, StringSerde);
    let refunds = d.input_topic("refunds", StringSerde, U64Serde);
    clicks.pipe_at("ann".into(), "home".into(), 1).unwrap();
    refunds.pipe_at("ann".into(), 3, 4).unwrap();
    clicks.pipe_at("ann".into(), "cart".into(), 12).unwrap();
    refunds.pipe_at("ann".into(), 5, 9).unwrap(); // window [0, 10) is open until 15
    clicks.pipe_at("ann".into(), "late".into(), 21).unwrap();
    clicks.pipe_at("ann".into(), "too-late".into(), 8).unwrap(); // the clicks' stream time is 21
    let out = out(&d).read_records().unwrap();
    let got: Vec<(String, String, i64)> = out
        .into_iter()
        .map(|r| (r.key, r.value.unwrap_or_default(), r.timestamp))
        .collect();
    let expected: Vec<(String, String, i64)> = [
        ("ann@0/10", "|c(home)", 1),
        ("ann@0/10", "|c(home)r(3)", 4),
        ("ann@10/20", "|c(cart)", 12),
        ("ann@0/10", "|c(home)r(3)r(5)", 9),
        ("ann@20/30", "|c(late)", 21),
    ]
    .iter()
    .map(|(k, v, t)| ((*k).to_owned(), (*v).to_owned(), *t))
    .collect();
    assert_eq!(got, expected);
}

#[test]
fn windowed_cogroup_names_its_nodes_and_checks_retention() {
    let b = StreamsBuilder::new();
    let t = concat_a(&b)
        .windowed_by(TimeWindows::of_size_no_grace(Duration::from_millis(10)))
        .aggregate(String::new, Materialized::new().with_value_serde(StringSerde));
    assert_eq!(t.node_name(), "a-source-windowed_cogroup");
    assert_eq!(t.store_name(), Some("a-source-windowed_cogroup-store"));
    let text = b.build().unwrap().describe().to_string();
    assert!(
        text.contains(
            "Processor: a-source-windowed_cogroup-input-1 (stores: [a-source-windowed_cogroup-store])"
        ),
        "{text}"
    );

    let b = StreamsBuilder::new();
    concat_a(&b)
        .windowed_by(TimeWindows::of_size_no_grace(Duration::from_millis(10)))
        .aggregate(
            String::new,
            Materialized::as_("w")
                .with_value_serde(StringSerde)
                .with_retention(Duration::from_millis(5)),
        );
    assert!(
        matches!(b.build(), Err(DslError::Invalid(i)) if matches!(i[..], [DslIssue::RetentionTooShort { .. }]))
    );
}
