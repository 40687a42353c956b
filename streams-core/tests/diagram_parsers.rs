//! The topology diagrams read back by the real parsers of their languages: `to_mermaid()` by
//! Mermaid's flowchart parser and renderer, `to_dot()` by Graphviz, over topologies whose
//! node, topic and store names are hostile to both (keywords, quotes, backslashes, entity
//! look-alikes, HTML, directives, unicode, names that differ only by punctuation, names
//! that look like generated ids).
//!
//! For every diagram the parser must accept it, and what it built must be the topology:
//! one vertex per node, topic and store (a topic shared by two sub-topologies is one
//! vertex), each with its shape and with the exact name as the label the renderer draws;
//! every edge once with its direction; one cluster per sub-topology with its title and its
//! nodes and stores. The parsers must also reject known-bad input, and the comparison must
//! catch the merged vertices of name-derived ids, so that a pass means something.
//!
//! The parsers run in Node.js (18 or newer, with npm; missing Node fails the test, it never
//! skips): `tests/diagram-parsers/parse.mjs` with the npm packages pinned by
//! `tests/diagram-parsers/package-lock.json` (mermaid, jsdom, @hpcc-js/wasm-graphviz: the
//! Graphviz C sources compiled to WebAssembly). The first run installs them with `npm ci`
//! into `tests/diagram-parsers/node_modules` (git-ignored), again whenever the lockfile
//! changes.
//!
//! The tests are here; running the parsers is in `parsers`, the comparison of what they
//! built with the topology in `compare`, the topologies under test in `topologies`.

mod common;
#[path = "diagram_parsers/compare.rs"]
mod compare;
#[path = "diagram_parsers/parsers.rs"]
mod parsers;
#[path = "diagram_parsers/topologies.rs"]
mod topologies;

use streams_core::Topology;
use streams_core::serdes::StringSerde;
use streams_core::topology::TopologyDescription;
use streams_test_utils::processors;

use compare::{assert_exact, check};
use parsers::parse;
use topologies::{handmade, hostile_topology};

/// Passes records through unchanged.
type Pass = processors::Pass<String, String>;

/// Forwards nothing: a global store's updater.
type Discard = processors::Discard<String, String>;

// ---------------------------------------------------------------------------------------
// Tests

#[test]
fn mermaid_parser_reads_hostile_names_exactly() {
    for d in [hostile_topology(), handmade()] {
        assert_exact("mermaid", &d.to_mermaid(), &d);
    }
}

#[test]
fn dot_parser_reads_hostile_names_exactly() {
    for d in [hostile_topology(), handmade()] {
        assert_exact("dot", &d.to_dot(), &d);
    }
}

#[test]
fn one_topic_vertex_links_the_subtopologies() {
    let d = hostile_topology();
    let text = d.to_mermaid();
    let parsed = parse("mermaid", &text).expect("parses");
    let topic = parsed
        .vertices
        .iter()
        .filter(|(_, shape, label)| shape == "stadium" && label == "orders-v1")
        .map(|(id, _, _)| id)
        .collect::<Vec<_>>();
    assert_eq!(topic.len(), 1, "{text}");
    let into = parsed.edges.iter().filter(|(_, to, _)| to == topic[0]).count();
    let out_of = parsed
        .edges
        .iter()
        .filter(|(from, _, _)| from == topic[0])
        .count();
    assert_eq!((into, out_of), (1, 1), "{text}");
}

/// The checks have teeth: the parsers reject broken input, and a diagram with ids made
/// from names (as this export once made them) fails the comparison.
#[test]
fn broken_diagrams_are_caught() {
    for bad in [
        "flowchart TB\n  end --> x\n",
        "flowchart TB\n  a[\"x\"y\"]\n",
        "flowchart TB\n  subgraph s\n  a --> b\n",
    ] {
        assert!(parse("mermaid", bad).is_err(), "Mermaid accepted {bad:?}");
    }
    for bad in [
        "digraph { a -> ; }",
        "digraph { a [label=\"say \"hi\"\"]; }",
        "digraph { subgraph { a }",
    ] {
        assert!(parse("dot", bad).is_err(), "Graphviz accepted {bad:?}");
    }

    // Ids from names, as before: `a-b` and `a.b` become one vertex `a_b`.
    let legacy = |d: &TopologyDescription| {
        let id = |s: &str| s.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_");
        let mut out = String::from("flowchart TB\n");
        for n in d.subtopologies.iter().flat_map(|s| &s.nodes) {
            out.push_str(&format!("  {}[\"{}: {}\"]\n", id(&n.name), n.kind, n.name));
            for c in &n.successors {
                out.push_str(&format!("  {} --> {}\n", id(&n.name), id(c)));
            }
        }
        out
    };
    let mut b = Topology::builder();
    b.add_source("src", ["in"], StringSerde, StringSerde)
        .add_processor("a-b", Pass::default, ["src"])
        .add_processor("a.b", Pass::default, ["src"]);
    let d = b.build().expect("builds").describe();
    let merged = legacy(&d);
    assert!(parse("mermaid", &merged).is_ok(), "{merged}");
    assert!(
        check("mermaid", &merged, &d).is_err(),
        "merged vertices not caught:\n{merged}"
    );
    assert!(check("mermaid", &d.to_mermaid(), &d).is_ok());
    // And the hostile names break the old scheme outright.
    let h = hostile_topology();
    assert!(check("mermaid", &legacy(&h), &h).is_err());
}

/// The text itself, for a small topology: ids by kind and first appearance, labels as is.
#[test]
fn small_topology_text() {
    let d = common::events_join_builder("say \"hi\"")
        .build()
        .unwrap()
        .describe();
    assert_eq!(
        d.to_mermaid(),
        "flowchart TB\n\
         \x20 subgraph sub0[\"Sub-topology: 0\"]\n\
         \x20   n0[\"Source: events\"]\n\
         \x20   n1[\"Processor: join\"]\n\
         \x20   n2[\"Sink: out\"]\n\
         \x20   s0[(\"web_hooks_store\")]\n\
         \x20 end\n\
         \x20 t0([\"event_logs\"])\n\
         \x20 t1([\"say #34;hi#34;\"])\n\
         \x20 n0 --> n1\n\
         \x20 t0 --> n0\n\
         \x20 n1 --> n2\n\
         \x20 n1 --- s0\n\
         \x20 n2 --> t1\n"
    );
    assert_eq!(
        d.to_dot(),
        "digraph topology {\n\
         \x20 node [shape=box];\n\
         \x20 subgraph cluster_0 {\n\
         \x20   label=\"Sub-topology: 0\";\n\
         \x20   n0 [label=\"Source: events\"];\n\
         \x20   n1 [label=\"Processor: join\"];\n\
         \x20   n2 [label=\"Sink: out\"];\n\
         \x20   s0 [label=\"web_hooks_store\", shape=cylinder];\n\
         \x20 }\n\
         \x20 t0 [label=\"event_logs\", style=rounded];\n\
         \x20 t1 [label=\"say \\\"hi\\\"\", style=rounded];\n\
         \x20 n0 -> n1;\n\
         \x20 t0 -> n0;\n\
         \x20 n1 -> n2;\n\
         \x20 n1 -> s0 [dir=none];\n\
         \x20 n2 -> t1;\n\
         }\n"
    );
}
