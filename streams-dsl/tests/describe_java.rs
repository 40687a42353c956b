//! `describe()` against Kafka Streams 4.4.0, byte for byte.
//!
//! `tests/java-describe/` is a Java program that builds a set of topologies with Kafka
//! Streams 4.1.1 (Processor API and DSL) and prints each one's `describe()`. Every case
//! there has a twin here, built with our APIs under the same name; each test compares the
//! two texts and prints the first differing lines on failure.
//!
//! The Java program is built with Maven the first time (into `tests/java-describe/target/`,
//! reusing the local Maven repository; rebuilt when its sources change) and run once per
//! test binary, by `tests/common/java.rs`. Without `java` or `mvn` on the PATH the tests say
//! `SKIPPED` on stderr and pass, unless `STREAMS_REQUIRE_JAVA=1` (which `scripts/test.sh`
//! sets): then they fail. A failing Maven build always fails them, with Maven's output.
//!
//! The DSL twins name their nodes as our DSL does; the Java program gives Kafka Streams those
//! names with `Named`, `Consumed`, `Produced`, `Joined`, `Branched` and `Materialized`.
//! Where Kafka Streams cannot be given our name, the case lists a [`Rename`] applied to
//! Kafka's text before comparing; where its DSL builds other nodes, the Java program builds
//! ours another way (both are explained at the case, and in docs/processor-api.md).

mod common;

#[path = "describe_java/generated_names.rs"]
mod generated_names;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use common::java::{self, JavaProgram, Outcome};

use streams_core::serdes::StringSerde;
use streams_core::{SinkConfig, SourceConfig, Stores, Topology};
use streams_dsl::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};
use streams_test_utils::processors;

/// The Java program's main class.
const MAIN_CLASS: &str = "dev.streams.describe.DescribeTopologies";

// ---------------------------------------------------------------------------------------
// The twins of the Java program's cases.
// ---------------------------------------------------------------------------------------

/// Does nothing: `describe()` shows only names, edges and stores.
type Noop = processors::Discard<String, String, String, String>;

/// A global store's processor, which forwards nothing.
type Updater = processors::Discard<String, String>;

fn kv(name: &str) -> streams_core::state::KeyValueStoreBuilder<StringSerde, StringSerde> {
    Stores::in_memory_kv(name, StringSerde, StringSerde)
}

fn strings<T: Into<String>>(topics: impl IntoIterator<Item = T>) -> SourceConfig<StringSerde, StringSerde> {
    SourceConfig::new(topics, StringSerde, StringSerde)
}

fn built(b: &streams_core::TopologyBuilder) -> Topology {
    b.build().expect("the twin topology builds")
}

fn papi_chain() -> Topology {
    let mut b = Topology::builder();
    b.add_source("events", ["event_logs"], StringSerde, StringSerde)
        .add_processor("join", Noop::default, ["events"])
        .add_state_store(kv("web_hooks_store"), ["join"])
        .add_sink("out", "web_hook_requests", StringSerde, StringSerde, ["join"]);
    built(&b)
}

fn papi_branching() -> Topology {
    let mut b = Topology::builder();
    b.add_source_with("orders", strings(["orders-us", "orders-eu", "orders-apac"]))
        .add_source("payments", ["payments"], StringSerde, StringSerde)
        .add_processor("validate", Noop::default, ["orders"])
        .add_processor("audit", Noop::default, ["orders"])
        .add_processor("enrich", Noop::default, ["validate", "payments"])
        .add_sink(
            "valid-out",
            "valid-orders",
            StringSerde,
            StringSerde,
            ["validate"],
        )
        .add_sink_with(
            "routed",
            SinkConfig::extractor(
                |k: &String, _: &String| format!("orders-{k}"),
                StringSerde,
                StringSerde,
            )
            .extractor_name("RouteByRegion"),
            ["enrich"],
        )
        .add_processor("fanout", Noop::default, ["enrich"])
        .add_sink("fanout-a", "fanout-a", StringSerde, StringSerde, ["fanout"])
        .add_sink("fanout-b", "fanout-b", StringSerde, StringSerde, ["fanout"])
        .add_sink("audit-out", "audit", StringSerde, StringSerde, ["audit"])
        .add_source("clicks", ["clicks"], StringSerde, StringSerde)
        .add_processor("sessionize", Noop::default, ["clicks"])
        .add_sink(
            "sessions-out",
            "sessions",
            StringSerde,
            StringSerde,
            ["sessionize"],
        )
        .add_source("refunds", ["refunds"], StringSerde, StringSerde)
        .add_processor("refund-check", Noop::default, ["refunds"])
        .add_state_store(kv("products"), [] as [&str; 0])
        .add_state_store(kv("rates"), ["enrich"])
        .add_state_store(kv("customers"), ["enrich"])
        .add_state_store(kv("tariffs"), ["enrich"])
        .add_state_store(kv("sessions"), ["sessionize"])
        .add_state_store(kv("audit-log"), ["audit", "refund-check"])
        .add_state_store(kv("refund-ledger"), [] as [&str; 0])
        .connect_processor_and_state_stores("enrich", ["products"])
        .connect_processor_and_state_stores("refund-check", ["refund-ledger"]);
    built(&b)
}

fn papi_diamond() -> Topology {
    let mut b = Topology::builder();
    b.add_source("in", ["input"], StringSerde, StringSerde)
        .add_processor("left", Noop::default, ["in"])
        .add_processor("right", Noop::default, ["in"])
        .add_processor("both", Noop::default, ["left", "right"])
        .add_sink("side", "side-output", StringSerde, StringSerde, ["right"])
        .add_sink("out", "output", StringSerde, StringSerde, ["both"]);
    built(&b)
}

fn add_global(b: &mut streams_core::TopologyBuilder, name: &str) {
    b.add_global_store(
        kv(name).without_logging(),
        &format!("{name}-source"),
        strings([name]),
        &format!("{name}-updater"),
        Updater::default,
    );
}

fn papi_global_interleaved() -> Topology {
    let mut b = Topology::builder();
    b.add_source("a-in", ["a"], StringSerde, StringSerde).add_sink(
        "a-out",
        "a-copy",
        StringSerde,
        StringSerde,
        ["a-in"],
    );
    add_global(&mut b, "lookup");
    b.add_source("b-in", ["b"], StringSerde, StringSerde)
        .add_processor("b-proc", Noop::default, ["b-in"])
        .add_sink("b-out", "b-copy", StringSerde, StringSerde, ["b-proc"]);
    add_global(&mut b, "geo");
    built(&b)
}

fn papi_global_first() -> Topology {
    let mut b = Topology::builder();
    add_global(&mut b, "lookup");
    b.add_source("in", ["input"], StringSerde, StringSerde)
        .add_processor("use-lookup", Noop::default, ["in"])
        .add_sink("out", "output", StringSerde, StringSerde, ["use-lookup"]);
    built(&b)
}

fn papi_global_only() -> Topology {
    let mut b = Topology::builder();
    add_global(&mut b, "lookup");
    built(&b)
}

fn strings_in() -> Consumed<StringSerde, StringSerde> {
    Consumed::with(StringSerde, StringSerde)
}

fn strings_out() -> Produced<StringSerde, StringSerde> {
    Produced::with(StringSerde, StringSerde)
}

fn dsl(b: &StreamsBuilder) -> Topology {
    b.build().expect("the twin DSL program builds")
}

fn dsl_stateless() -> Topology {
    let b = StreamsBuilder::new();
    let words = b.stream(["words"], strings_in());
    let kept = words.filter(|_, v| !v.is_empty());
    kept.foreach(|_, _| {});
    let branches = kept
        .named("upper")
        .map_values(|_, v| v.to_uppercase())
        .split()
        .branch(|_, v| v.len() > 5)
        .branch(|_, v| v.len() > 2)
        .default_branch();
    branches[0].to("long-words", strings_out());
    branches[1].to("short-words", strings_out());
    branches[2].peek(|_, _| {}).to("tiny-words", strings_out());
    dsl(&b)
}

fn dsl_repartition_count() -> Topology {
    let b = StreamsBuilder::new();
    b.stream(["lines"], strings_in())
        .map(|_, v: String| (v.clone(), v))
        .group_by_key(Grouped::as_("words"))
        .count(Materialized::as_("counts"));
    dsl(&b)
}

fn string_table(name: &str) -> Materialized<String, String> {
    Materialized::as_(name)
        .with_key_serde(StringSerde)
        .with_value_serde(StringSerde)
}

fn dsl_stream_table_join() -> Topology {
    let b = StreamsBuilder::new();
    let users = b.table("users", string_table("users-store"));
    b.stream(["orders"], strings_in())
        .join(&users, |_, o, u| format!("{o}{u}"))
        .to("enriched-orders", strings_out());
    dsl(&b)
}

fn dsl_table_table_join() -> Topology {
    let b = StreamsBuilder::new();
    let names = b.table("names", string_table("names"));
    let ages = b.table("ages", string_table("ages"));
    names.join(&ages, |_, n, a| format!("{n}{a}"));
    dsl(&b)
}

fn dsl_global_table_join() -> Topology {
    let b = StreamsBuilder::new();
    let users = b.global_table("users", string_table("users-global-store"));
    b.stream(["clicks"], strings_in())
        .join_global(&users, |_, v: &String| v.clone(), |_, c, u| format!("{c}{u}"))
        .to("enriched-clicks", strings_out());
    dsl(&b)
}

/// A node name Kafka Streams' DSL gives where ours gives another, replaced in Kafka's text
/// before the comparison.
struct Rename {
    kafka: &'static str,
    ours: &'static str,
}

/// A case: its name in the Java program, our twin, and the names that differ by design.
struct Case {
    name: &'static str,
    build: fn() -> Topology,
    renames: &'static [Rename],
}

const CASES: &[Case] = &[
    Case {
        name: "papi-chain",
        build: papi_chain,
        renames: &[],
    },
    Case {
        name: "papi-branching",
        build: papi_branching,
        renames: &[],
    },
    Case {
        name: "papi-diamond",
        build: papi_diamond,
        renames: &[],
    },
    Case {
        name: "papi-global-interleaved",
        build: papi_global_interleaved,
        renames: &[],
    },
    Case {
        name: "papi-global-first",
        build: papi_global_first,
        renames: &[],
    },
    Case {
        name: "papi-global-only",
        build: papi_global_only,
        renames: &[],
    },
    Case {
        name: "dsl-stateless",
        build: dsl_stateless,
        renames: &[],
    },
    // Kafka Streams' groupByKey after a key change adds a null-key filter node
    // (`words-repartition-filter`) and names the pair `words-repartition-sink`/`-source`; our
    // sink leaves null keys out itself, and our pair is `words-sink`/`words-source`. The Java program
    // writes that pair itself (`to` and `stream`), so both describe the same graph.
    Case {
        name: "dsl-repartition-count",
        build: dsl_repartition_count,
        renames: &[],
    },
    // Kafka Streams' `table()` names its table node `<Consumed name>-table-source`; ours is
    // `<topic>-table`. The Java program reads the table with `stream().toTable()`, which
    // builds the same two nodes under names it is given.
    Case {
        name: "dsl-stream-table-join",
        build: dsl_stream_table_join,
        renames: &[],
    },
    // Kafka Streams names a table-table join's side nodes `<join name>-join-this` and
    // `-join-other`; ours are `<join name>-this` and `-other`.
    Case {
        name: "dsl-table-table-join",
        build: dsl_table_table_join,
        renames: &[
            Rename {
                kafka: "names-table-join-join-this",
                ours: "names-table-join-this",
            },
            Rename {
                kafka: "names-table-join-join-other",
                ours: "names-table-join-other",
            },
        ],
    },
    // Kafka Streams names a global table's source `<Consumed name>-source` (its processor
    // takes the Consumed name); ours are `<topic>-global_source` and `<topic>-global_table`.
    Case {
        name: "dsl-global-table-join",
        build: dsl_global_table_join,
        renames: &[Rename {
            kafka: "users-global_table-source",
            ours: "users-global_source",
        }],
    },
];

// ---------------------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------------------

#[test]
fn papi_chain_matches_kafka_streams() {
    check("papi-chain");
}

#[test]
fn papi_branching_matches_kafka_streams() {
    check("papi-branching");
}

#[test]
fn papi_diamond_matches_kafka_streams() {
    check("papi-diamond");
}

#[test]
fn papi_global_interleaved_matches_kafka_streams() {
    check("papi-global-interleaved");
}

#[test]
fn papi_global_first_matches_kafka_streams() {
    check("papi-global-first");
}

#[test]
fn papi_global_only_matches_kafka_streams() {
    check("papi-global-only");
}

#[test]
fn dsl_stateless_matches_kafka_streams() {
    check("dsl-stateless");
}

#[test]
fn dsl_repartition_count_matches_kafka_streams() {
    check("dsl-repartition-count");
}

#[test]
fn dsl_stream_table_join_matches_kafka_streams() {
    check("dsl-stream-table-join");
}

#[test]
fn dsl_table_table_join_matches_kafka_streams() {
    check("dsl-table-table-join");
}

#[test]
fn dsl_global_table_join_matches_kafka_streams() {
    check("dsl-global-table-join");
}

/// The Java program and this file list the same cases.
#[test]
fn every_kafka_case_has_a_twin() {
    let Some(kafka) = kafka_descriptions("every_kafka_case_has_a_twin") else {
        return;
    };
    let java: Vec<&str> = kafka.keys().map(String::as_str).collect();
    let mut ours: Vec<&str> = cases().map(|c| c.name).collect();
    ours.sort_unstable();
    assert_eq!(java, ours, "the Java program's cases and this file's differ");
}

/// Every case: the named twins here, then those of generated names.
fn cases() -> impl Iterator<Item = &'static Case> {
    CASES.iter().chain(generated_names::CASES)
}

/// Compares case `name`'s two descriptions.
fn check(name: &str) {
    let case = cases()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    let Some(kafka) = kafka_descriptions(name) else {
        return;
    };
    let Some(expected) = kafka.get(name) else {
        panic!("the Java program printed no case {name}");
    };
    let mut expected = expected.clone();
    for r in case.renames {
        expected = rename(&expected, r.kafka, r.ours);
    }
    let ours = (case.build)().describe().to_string();
    if let Some(diff) = generated_names::by_names(name, &(case.build)().describe(), &expected) {
        assert!(
            diff.is_empty(),
            "{name}: names differ from Kafka Streams 4.4.0 (NameDifferences)\n{diff}"
        );
        return;
    }
    if let Some(diff) = first_difference(&expected, &ours) {
        panic!(
            "{name}: describe() differs from Kafka Streams 4.4.0{}\n{diff}",
            if case.renames.is_empty() {
                ""
            } else {
                " (after the case's renames)"
            }
        );
    }
}

/// `text` with every whole-name occurrence of `from` replaced by `to`.
fn rename(text: &str, from: &str, to: &str) -> String {
    let in_name = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(in_name) || after.is_some_and(in_name) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

/// A unified-style diff of the first lines where `expected` (Kafka Streams) and `actual`
/// (ours) differ, with three lines of context; `None` when the texts are equal.
fn first_difference(expected: &str, actual: &str) -> Option<String> {
    if expected == actual {
        return None;
    }
    let e: Vec<&str> = expected.split('\n').collect();
    let a: Vec<&str> = actual.split('\n').collect();
    let first = e.iter().zip(&a).take_while(|(x, y)| x == y).count();
    let start = first.saturating_sub(3);
    const SHOWN: usize = 8;
    let e_end = (first + SHOWN).min(e.len());
    let a_end = (first + SHOWN).min(a.len());
    let mut out = String::from("--- Kafka Streams 4.4.0\n+++ streams-rs\n");
    out.push_str(&format!(
        "@@ -{},{} +{},{} @@ (first difference at line {}; lines quoted, so spaces show)\n",
        start + 1,
        e_end - start,
        start + 1,
        a_end - start,
        first + 1
    ));
    for line in &e[start..first] {
        out.push_str(&format!(" {line:?}\n"));
    }
    for line in &e[first..e_end] {
        out.push_str(&format!("-{line:?}\n"));
    }
    for line in &a[first..a_end] {
        out.push_str(&format!("+{line:?}\n"));
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------
// Building and running the Java program.
// ---------------------------------------------------------------------------------------

/// The Java program's descriptions by case name, built and run once per test binary;
/// `None` (after saying so) when Java or Maven is missing and not required.
///
/// # Panics
///
/// When the build or the run fails, or Java or Maven is missing and
/// [`java::REQUIRE_JAVA_ENV`] asks for them.
fn kafka_descriptions(test: &str) -> Option<&'static BTreeMap<String, String>> {
    static OUTPUT: OnceLock<Result<BTreeMap<String, String>, Outcome>> = OnceLock::new();
    let output = OUTPUT.get_or_init(|| {
        let stdout = JavaProgram::in_tests("java-describe", MAIN_CLASS, "describe_java").build_and_run()?;
        parse(&stdout).map_err(Outcome::Failed)
    });
    java::available(test, output)
}

/// The cases of the program's output: `=== BEGIN name ===`, the text, a newline of the
/// program's own and `=== END name ===`.
fn parse(stdout: &str) -> Result<BTreeMap<String, String>, String> {
    let mut cases = BTreeMap::new();
    let mut rest = stdout;
    while !rest.is_empty() {
        let bad = || format!("unexpected output from the Java program:\n{stdout}");
        let after_begin = rest.strip_prefix("=== BEGIN ").ok_or_else(bad)?;
        let (name, body) = after_begin.split_once(" ===\n").ok_or_else(bad)?;
        let end = format!("\n=== END {name} ===\n");
        let at = body.find(&end).ok_or_else(bad)?;
        cases.insert(name.to_owned(), body[..at].to_owned());
        rest = &body[at + end.len()..];
    }
    if cases.is_empty() {
        return Err(format!("the Java program printed no case:\n{stdout}"));
    }
    Ok(cases)
}
