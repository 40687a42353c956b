//! Differential tests: every DSL operator against Kafka Streams 4.4.0, record by record.
//!
//! Each case is one topology written twice, once with Kafka Streams' DSL in
//! `tests/java-diff/` and once with ours here, fed the same input
//! (`tests/diff-cases/<case>.json`: out-of-order and late records, tombstones, repeated
//! keys, wall-clock advances) through each side's `TopologyTestDriver`. The output records
//! (topic, key, value, timestamp, and the input step that produced them) must be equal; a
//! failure prints the first differing records with context. Kafka Streams runs without a
//! record cache (`statestore.cache.max.bytes=0`), so it forwards every update as ours does.
//! The harness is `tests/common/diff.rs`; building and running the Java program (once per
//! test binary, skipped without `java` or `mvn` unless `STREAMS_REQUIRE_JAVA=1`) is
//! `tests/common/java.rs`.
//!
//! Inputs are strings (keys and values, a null value a tombstone); outputs are strings or
//! counts (`U64Serde`, Kafka's `Serdes.Long()`). Windowed keys are written as
//! `key@start/end` by a mapping step before `to()`, on both sides.
//!
//! Adding a case for a new operator takes three things, all named after the case:
//! 1. a method in `tests/java-diff/src/main/java/dev/streams/diff/DiffCases.java`
//!    (`add("name", b -> ..., str("out-topic"), lng("counts"))`);
//! 2. a `#[test]` function here calling `check("name", &[known differences], &[outputs], |b| ...)`
//!    with our twin;
//! 3. the input `tests/diff-cases/name.json`.
//!
//! `every_case_runs_on_both_sides` checks that the Java program's cases and the case files
//! are the same set. A difference we keep on purpose, or cannot fix here, is listed at its
//! case as a [`Known`] difference with the reason: the case then compares everything else
//! and fails if the difference disappears (so the list stays true).

mod common;
#[path = "common/diff.rs"]
mod diff;
#[path = "differential_java/fk_cogroup.rs"]
mod fk_cogroup;
#[path = "differential_java/joins.rs"]
mod joins;
#[path = "common/random.rs"]
mod random;
#[path = "differential_java/session.rs"]
mod session;
#[path = "differential_java/windowed.rs"]
mod windowed;

use diff::Values::{Long, Str};
use diff::check;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    Consumed, GlobalKTable, Grouped, KGroupedStream, KGroupedTable, KStream, KTable, Materialized, Produced,
    StreamsBuilder, Windowed,
};

type S = StringSerde;

fn input(b: &StreamsBuilder, topic: &str) -> KStream<String, String> {
    b.stream([topic], Consumed::with(StringSerde, StringSerde))
}

/// Topic `in`, grouped by its key.
fn grouped_input(b: &StreamsBuilder) -> KGroupedStream<String, String> {
    input(b, "in").group_by_key(Grouped::new())
}

fn strings() -> Produced<S, S> {
    Produced::with(StringSerde, StringSerde)
}

/// Table updates: `None` is written as a tombstone.
fn nullable_strings() -> Produced<S, NullableSerde<S>> {
    Produced::with(StringSerde, NullableSerde(StringSerde))
}

fn counts() -> Produced<S, NullableSerde<U64Serde>> {
    Produced::with(StringSerde, NullableSerde(U64Serde))
}

fn string_store() -> Materialized<String, String> {
    Materialized::new()
        .with_key_serde(StringSerde)
        .with_value_serde(StringSerde)
}

fn table(b: &StreamsBuilder, topic: &str) -> KTable<String, String> {
    b.table(topic, string_store())
}

fn global(b: &StreamsBuilder, topic: &str) -> GlobalKTable<String, String> {
    b.global_table(topic, string_store())
}

/// `key@start/end`, as the Java program prints a `Windowed<String>`.
fn windowed(k: &Windowed<String>) -> String {
    format!("{}@{}/{}", k.key, k.start, k.end)
}

/// A windowed key as `serde` writes it to a topic, in hex (as the Java program prints it).
fn key_bytes<S2>(serde: &S2, k: &Windowed<String>) -> String
where
    S2: streams_core::state::Serde<Target = Windowed<String>>,
{
    let bytes = serde.serialize(k).expect("a windowed key serializes");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writing a windowed table's updates with keys as [`windowed`] prints them.
trait ToWindowed<V> {
    /// Writes every update to `topic` with `produced`.
    fn to_windowed<VS>(&self, topic: &str, produced: Produced<S, VS>)
    where
        VS: streams_core::state::Serde<Target = Option<V>> + Clone;
}

impl<V: Clone + 'static> ToWindowed<V> for KTable<Windowed<String>, V> {
    fn to_windowed<VS>(&self, topic: &str, produced: Produced<S, VS>)
    where
        VS: streams_core::state::Serde<Target = Option<V>> + Clone,
    {
        self.to_stream().map(|k, v| (windowed(&k), v)).to(topic, produced);
    }
}

/// Kafka Streams' `String.valueOf` of an absent join partner.
fn or_null(v: Option<String>) -> String {
    v.unwrap_or_else(|| "null".to_owned())
}

// ---- stateless stream operators ----

#[test]
fn filter() {
    check("filter", &[], &[("kept", Str), ("dropped", Str)], |b| {
        let s = input(b, "in");
        s.filter(|_, v| v.chars().count() > 2).to("kept", strings());
        s.filter_not(|_, v| v.chars().count() > 2)
            .to("dropped", strings());
    });
}

#[test]
fn map() {
    check(
        "map",
        &[],
        &[("swapped", Str), ("upper", Str), ("rekeyed", Str)],
        |b| {
            let s = input(b, "in");
            s.map(|k, v| (v, k)).to("swapped", strings());
            s.map_values(|k, v| format!("{k}:{}", v.to_uppercase()))
                .to("upper", strings());
            s.select_key(|k, v| format!("{k}-{}", v.chars().count()))
                .to("rekeyed", strings());
        },
    );
}

#[test]
fn flat_map() {
    check("flat-map", &[], &[("pairs", Str), ("parts", Str)], |b| {
        let s = input(b, "in");
        s.flat_map(|k, v| {
            v.split(',')
                .enumerate()
                .map(|(i, p)| (format!("{k}{i}"), p.to_owned()))
                .collect::<Vec<_>>()
        })
        .to("pairs", strings());
        s.flat_map_values(|_, v| v.split(',').map(str::to_owned).collect::<Vec<_>>())
            .to("parts", strings());
    });
}

#[test]
fn peek_merge() {
    check("peek-merge", &[], &[("merged", Str)], |b| {
        let left = input(b, "left").peek(|_, _| {});
        let right = input(b, "right").map_values(|_, v| format!("r:{v}"));
        left.merge(&right).to("merged", strings());
    });
}

#[test]
fn split() {
    check(
        "split",
        &[],
        &[("starts-a", Str), ("long", Str), ("other", Str)],
        |b| {
            let branches = input(b, "in")
                .split()
                .branch(|_, v| v.starts_with('a'))
                .branch(|_, v| v.chars().count() > 3)
                .default_branch();
            for (branch, topic) in branches.iter().zip(["starts-a", "long", "other"]) {
                branch.to(topic, strings());
            }
        },
    );
}

#[test]
fn repartition() {
    check("repartition", &[], &[("out", Str)], |b| {
        input(b, "in")
            .repartition(Grouped::as_("through"))
            .map_values(|_, v| format!("{v}!"))
            .to("out", strings());
    });
}

// ---- grouping and aggregation ----

#[test]
fn group_by_key_count() {
    check("group-by-key-count", &[], &[("counts", Long)], |b| {
        grouped_input(b)
            .count(Materialized::new())
            .to_stream()
            .to("counts", counts());
    });
}

#[test]
fn group_by_key_reduce() {
    check("group-by-key-reduce", &[], &[("reduced", Str)], |b| {
        grouped_input(b)
            .reduce(|a, v| format!("{a}+{v}"), Materialized::new())
            .to_stream()
            .to("reduced", nullable_strings());
    });
}

#[test]
fn group_by_key_aggregate() {
    check("group-by-key-aggregate", &[], &[("lengths", Long)], |b| {
        grouped_input(b)
            .aggregate(
                || 0u64,
                |_, v, a| a + v.chars().count() as u64,
                Materialized::new().with_value_serde(U64Serde),
            )
            .to_stream()
            .to("lengths", counts());
    });
}

#[test]
fn group_by_count() {
    check("group-by-count", &[], &[("value-counts", Long)], |b| {
        input(b, "in")
            .group_by(|_, v| v.clone(), Grouped::as_("by-value"))
            .count(Materialized::new())
            .to_stream()
            .to("value-counts", counts());
    });
}

#[test]
fn map_group_by_key_count() {
    check("map-group-by-key-count", &[], &[("counts", Long)], |b| {
        input(b, "in")
            .map(|k, v| (v, k))
            .group_by_key(Grouped::as_("swapped"))
            .count(Materialized::new())
            .to_stream()
            .to("counts", counts());
    });
}

// ---- tables ----

#[test]
fn table_to_stream() {
    check("table-to-stream", &[], &[("updates", Str)], |b| {
        table(b, "t").to_stream().to("updates", nullable_strings());
    });
}

#[test]
fn table_to_stream_count() {
    check("table-to-stream-count", &[], &[("counts", Long)], |b| {
        table(b, "t")
            .to_stream()
            .group_by_key(Grouped::new())
            .count(Materialized::new())
            .to_stream()
            .to("counts", counts());
    });
}

#[test]
fn table_filter() {
    check("table-filter", &[], &[("filtered", Str)], |b| {
        table(b, "t")
            .filter(|_, v| v.chars().count() > 2)
            .to_stream()
            .to("filtered", nullable_strings());
    });
}

#[test]
fn table_filter_materialized() {
    check("table-filter-materialized", &[], &[("filtered", Str)], |b| {
        table(b, "t")
            .filter_as(|_, v| v.chars().count() > 2, Materialized::as_("filtered-store"))
            .to_stream()
            .to("filtered", nullable_strings());
    });
}

#[test]
fn table_map_values() {
    check("table-map-values", &[], &[("mapped", Str)], |b| {
        table(b, "t")
            .map_values(|k, v| format!("{k}={v}"))
            .to_stream()
            .to("mapped", nullable_strings());
    });
}

#[test]
fn table_map_values_materialized() {
    check("table-map-values-materialized", &[], &[("mapped", Str)], |b| {
        table(b, "t")
            .map_values_as(
                |k, v| format!("{k}={v}"),
                Materialized::as_("mapped-store").with_value_serde(StringSerde),
            )
            .to_stream()
            .to("mapped", nullable_strings());
    });
}

// ---- re-grouped tables: the key is the value's length ----

fn by_length(b: &StreamsBuilder, value: fn(&String, &String) -> String) -> KGroupedTable<String, String> {
    table(b, "t").group_by(
        move |k, v| (v.chars().count().to_string(), value(k, v)),
        Grouped::as_("by-length"),
    )
}

#[test]
fn table_group_by_count() {
    check("table-group-by-count", &[], &[("counts", Long)], |b| {
        by_length(b, |k, _| k.clone())
            .count(Materialized::new())
            .to_stream()
            .to("counts", counts());
    });
}

#[test]
fn table_group_by_reduce() {
    check("table-group-by-reduce", &[], &[("reduced", Str)], |b| {
        by_length(b, |k, v| format!("{k}{v}"))
            .reduce(
                |a, v| format!("{a}+{v}"),
                |a, v| format!("{a}-{v}"),
                Materialized::new(),
            )
            .to_stream()
            .to("reduced", nullable_strings());
    });
}

/// The Java program runs exactly the cases that have an input file.
#[test]
fn every_case_runs_on_both_sides() {
    let Some(java) = diff::java_cases("every_case_runs_on_both_sides") else {
        return;
    };
    assert_eq!(
        java,
        diff::case_files(),
        "the Java program's cases and tests/diff-cases/ differ"
    );
}
