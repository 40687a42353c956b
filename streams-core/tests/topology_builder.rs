//! The topology builder's validation (every error case), sub-topologies and describe().

mod common;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{Stores, Topology, TopologyIssue};
use streams_test_utils::processors;

/// Passes records through unchanged.
type Pass = processors::Pass<String, String>;

/// Takes `u64` keys: a type mismatch below a `String` source.
type TakesU64 = processors::Pass<u64, String>;

fn issues(b: &streams_core::TopologyBuilder) -> Vec<TopologyIssue> {
    b.build().expect_err("build must fail").0
}

#[test]
fn duplicate_names_are_rejected() {
    let mut b = Topology::builder();
    b.add_source("a", ["t1"], StringSerde, StringSerde)
        .add_processor("a", Pass::default, ["a"]);
    assert!(issues(&b).contains(&TopologyIssue::DuplicateName("a".into())));
}

#[test]
fn unknown_parent_and_missing_parent_are_rejected() {
    let mut b = Topology::builder();
    b.add_source("src", ["t"], StringSerde, StringSerde)
        .add_processor("p", Pass::default, ["nope"])
        .add_processor("orphan", Pass::default, Vec::<&str>::new());
    let found = issues(&b);
    assert!(
        found.contains(&TopologyIssue::UnknownParent {
            node: "p".into(),
            parent: "nope".into()
        }),
        "{found:?}"
    );
    assert!(
        found.contains(&TopologyIssue::NoParent("orphan".into())),
        "{found:?}"
    );
}

#[test]
fn sinks_cannot_be_parents() {
    let mut b = Topology::builder();
    b.add_source("src", ["t"], StringSerde, StringSerde)
        .add_sink("sink", "out", StringSerde, StringSerde, ["src"])
        .add_processor("p", Pass::default, ["sink"]);
    assert!(issues(&b).contains(&TopologyIssue::SinkAsParent {
        node: "p".into(),
        parent: "sink".into()
    }));
}

#[test]
fn cycles_are_rejected() {
    let mut b = Topology::builder();
    b.add_source("src", ["t"], StringSerde, StringSerde)
        .add_processor("a", Pass::default, ["src", "b"])
        .add_processor("b", Pass::default, ["a"]);
    assert!(issues(&b).iter().any(|i| matches!(i, TopologyIssue::Cycle(_))));
}

#[test]
fn type_mismatch_names_both_nodes_and_types() {
    let mut b = Topology::builder();
    b.add_source("src", ["t"], StringSerde, StringSerde)
        .add_processor("u64s", TakesU64::default, ["src"]);
    let err = b.build().unwrap_err().to_string();
    assert!(
        err.contains("`src` outputs Record<alloc::string::String, alloc::string::String>"),
        "{err}"
    );
    assert!(
        err.contains("`u64s` takes Record<u64, alloc::string::String>"),
        "{err}"
    );
}

#[test]
fn sink_input_types_are_checked() {
    let mut b = Topology::builder();
    b.add_source("src", ["t"], StringSerde, StringSerde)
        .add_sink("out", "o", U64Serde, StringSerde, ["src"]);
    assert!(
        issues(&b)
            .iter()
            .any(|i| matches!(i, TopologyIssue::TypeMismatch { child, .. } if child == "out"))
    );
}

#[test]
fn shared_topics_and_empty_sources_are_rejected() {
    let mut b = Topology::builder();
    b.add_source("a", ["t"], StringSerde, StringSerde)
        .add_source("b", ["t"], StringSerde, StringSerde)
        .add_source("c", Vec::<String>::new(), StringSerde, StringSerde);
    let found = issues(&b);
    assert!(
        found
            .iter()
            .any(|i| matches!(i, TopologyIssue::SharedSourceTopic { topic, .. } if topic == "t"))
    );
    assert!(found.contains(&TopologyIssue::NoTopics("c".into())));
}

#[test]
fn stores_must_be_connected_to_existing_processors() {
    let mut b = Topology::builder();
    b.add_source("src", ["t"], StringSerde, StringSerde)
        .add_processor("p", Pass::default, ["src"])
        .add_state_store(
            Stores::in_memory_kv("loose", StringSerde, StringSerde),
            Vec::<&str>::new(),
        )
        .add_state_store(
            Stores::in_memory_kv("ghost", StringSerde, StringSerde),
            ["nobody"],
        )
        .add_state_store(
            Stores::in_memory_kv("on-source", StringSerde, StringSerde),
            ["src"],
        )
        .connect_processor_and_state_stores("p", ["missing"]);
    let text = b.build().unwrap_err().to_string();
    assert!(
        text.contains("store `loose`: not connected to any processor"),
        "{text}"
    );
    assert!(
        text.contains("store `ghost`: connected to unknown processor `nobody`"),
        "{text}"
    );
    assert!(
        text.contains("store `on-source`: connected to `src`, which is not a processor"),
        "{text}"
    );
    assert!(text.contains("store `missing`: unknown store"), "{text}");
}

#[test]
fn subtopologies_join_by_edges_and_shared_stores() {
    let mut b = Topology::builder();
    b.add_source("s1", ["a"], StringSerde, StringSerde)
        .add_processor("p1", Pass::default, ["s1"])
        .add_source("s2", ["b"], StringSerde, StringSerde)
        .add_processor("p2", Pass::default, ["s2"])
        .add_source("s3", ["c"], StringSerde, StringSerde)
        .add_processor("p3", Pass::default, ["s3"])
        .add_state_store(
            Stores::in_memory_kv("shared", StringSerde, StringSerde),
            ["p1", "p2"],
        );
    let t = b.build().unwrap();
    let subs = t.subtopologies();
    assert_eq!(subs.len(), 2);
    assert_eq!(subs[0].source_topics, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(subs[1].source_topics, vec!["c".to_string()]);
    assert_eq!(t.subtopology_of_topic("b").unwrap().id, 0);
}

#[test]
fn describe_prints_kafka_streams_format() {
    let b = common::events_join_builder("web_hook_requests");
    let text = b.build().unwrap().describe().to_string();
    let expected = "Topologies:\n   Sub-topology: 0\n    Source: events (topics: [event_logs])\n      --> join\n    Processor: join (stores: [web_hooks_store])\n      --> out\n      <-- events\n    Sink: out (topic: web_hook_requests)\n      <-- join\n\n";
    assert_eq!(text, expected);
    // The diagrams: ids generated, names only in labels (tests/diagram_parsers.rs reads them
    // back with the real Mermaid and Graphviz parsers).
    let mermaid = b.build().unwrap().describe().to_mermaid();
    assert!(mermaid.starts_with("flowchart TB\n"));
    assert!(mermaid.contains("n0[\"Source: events\"]"), "{mermaid}");
    assert!(mermaid.contains("s0[(\"web_hooks_store\")]"), "{mermaid}");
    assert!(mermaid.contains("  n0 --> n1\n"), "{mermaid}");
    let dot = b.build().unwrap().describe().to_dot();
    assert!(dot.starts_with("digraph topology {\n"));
    assert!(dot.contains("n0 [label=\"Source: events\"];"), "{dot}");
    assert!(dot.contains("  n1 -> s0 [dir=none];\n"), "{dot}");
}
