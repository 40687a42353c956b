//! The topologies under test: one built with every hostile name, and one description
//! changed by hand to hold what `build()` never gives.

use streams_core::serdes::StringSerde;
use streams_core::topology::TopologyDescription;
use streams_core::{SinkConfig, SourceConfig, Stores, Topology};

use crate::{Discard, Pass};

// ---------------------------------------------------------------------------------------
// Hostile topologies

/// Names that have broken diagrams, or could: keywords of both languages, quoting and
/// escaping characters, entity codes, HTML, Mermaid directives, icons, KaTeX and Markdown,
/// Graphviz's `\N` escapes, Mermaid's own entity markers, unicode, spaces at the ends, a
/// line break, and names like the generated ids.
const HOSTILE: &[&str] = &[
    "end",
    "subgraph",
    "graph",
    "flowchart",
    "style",
    "class",
    "classDef",
    "click",
    "default",
    "linkStyle",
    "direction",
    "digraph",
    "node",
    "edge",
    "strict",
    "say \"hi\"",
    "it's",
    r"back\slash\",
    "semi;colon",
    "#hash",
    "#quot;",
    "#35;",
    "<b>bold</b>",
    "&amp;",
    "&#38;",
    "<br>",
    "style:#;",
    "%%{init: {\"theme\": \"dark\"}}%%",
    "fa:fa-car",
    "$$x^2$$",
    "`code`",
    "\"`md`\"",
    r"\N \G \E \l \n",
    "ﬂ°°35¶ß",
    "日本",
    "emoji 😀🚀",
    " padded ",
    "multi\nline",
    "a-b",
    "a.b",
    "a_b",
    "a b",
    "n0",
    "t0",
    "s0",
    "sub0",
    "cluster_0",
    "topic_orders_v1",
    "store_s",
    "-->",
    "[x]",
    "(y)",
    "{z}",
    "|pipe|",
];

/// A built topology of three sub-topologies (one of a global store) whose every name is
/// hostile; `orders-v1` is written by the first and read by the second, `orders.v1` and
/// `orders-v1` are two topics, and some sinks have topic-name extractors.
pub(crate) fn hostile_topology() -> TopologyDescription {
    let mut b = Topology::builder();
    // Sub-topology 0: a source reading two look-alike topics, a chain of processors named
    // like keywords, fanning out to every other hostile name, with stores.
    b.add_source(
        "end",
        ["orders.v1", "t0", "Processor: n0"],
        StringSerde,
        StringSerde,
    )
    .add_processor("subgraph", Pass::default, ["end"])
    .add_processor("graph", Pass::default, ["subgraph"]);
    for &name in &HOSTILE[3..] {
        b.add_processor(name, Pass::default, ["graph"]);
    }
    b.add_state_store(
        Stores::in_memory_kv("store \"x\" <i>&amp;</i>", StringSerde, StringSerde),
        ["subgraph", "a-b"],
    )
    .add_state_store(Stores::in_memory_kv("s0", StringSerde, StringSerde), ["a.b"])
    .add_state_store(Stores::in_memory_kv("日本", StringSerde, StringSerde), ["日本"])
    .add_sink(
        "sink \"one\"",
        "orders-v1",
        StringSerde,
        StringSerde,
        ["a-b", "a.b"],
    )
    .add_sink("Sink: a_b", "topic_orders_v1", StringSerde, StringSerde, ["a_b"]);
    // Sub-topology 1: reads the topic the first writes.
    b.add_source("source #1 \\", ["orders-v1"], StringSerde, StringSerde)
        .add_processor("p1 😀", Pass::default, ["source #1 \\"])
        .add_state_store(
            Stores::in_memory_kv("%%store%%", StringSerde, StringSerde),
            ["p1 😀"],
        )
        .add_sink("n1", "orders.v1 ", StringSerde, StringSerde, ["p1 😀"]);
    // Sinks with topic-name extractors: two share one (one vertex), one is known by its
    // Rust type name (a closure's: `…::{{closure}}`), one is named like a topic.
    let route = |key: &String, _: &String| key.clone();
    let named = |name: &str| SinkConfig::extractor(route, StringSerde, StringSerde).extractor_name(name);
    b.add_sink_with("x0", named("Route \"by\" <key>"), ["p1 😀"])
        .add_sink_with("route 2", named("Route \"by\" <key>"), ["p1 😀"])
        .add_sink_with("orders-v1 router", named("orders-v1"), ["p1 😀"])
        .add_sink_with(
            "by type",
            SinkConfig::extractor(route, StringSerde, StringSerde),
            ["p1 😀"],
        );
    // Sub-topology 2: a global store.
    b.add_global_store(
        Stores::in_memory_kv("global \"store\"", StringSerde, StringSerde).without_logging(),
        "global-source",
        SourceConfig::new(["end"], StringSerde, StringSerde),
        "global\nupdater",
        Discard::default,
    );
    let d = b.build().expect("the hostile topology builds").describe();
    assert!(d.subtopologies.len() >= 3, "{d}");
    d
}

/// A description changed by hand, to hold what `build()` never gives: a successor that is
/// not described, a store shared by two sub-topologies, a repeated successor and an empty
/// sub-topology. (The description's types are reached through its public fields.)
pub(crate) fn handmade() -> TopologyDescription {
    let mut b = Topology::builder();
    b.add_source("src", ["in"], StringSerde, StringSerde)
        .add_processor("end", Pass::default, ["src"]);
    let mut d = b.build().expect("builds").describe();
    let template = d.subtopologies[0].clone();
    let n = |name: &str, kind: &'static str, detail: &[&str], successors: &[&str]| {
        let mut node = template.nodes[0].clone();
        node.name = name.into();
        node.kind = kind;
        node.detail = detail.iter().map(|s| (*s).into()).collect();
        node.successors = successors.iter().map(|s| (*s).into()).collect();
        node.predecessors = vec![];
        node
    };
    let sub = |id: u32, global: bool, nodes| {
        let mut sub = template.clone();
        sub.id = id;
        sub.global = global;
        sub.nodes = nodes;
        sub
    };
    d.subtopologies = vec![
        sub(
            0,
            false,
            vec![
                n("src", "Source", &["in"], &["end", "end", "ghost \"x\""]),
                n("end", "Processor", &["shared"], &[]),
            ],
        ),
        sub(
            7,
            false,
            vec![
                n("src2", "Source", &["in2"], &["p"]),
                n("p", "Processor", &["shared", "own"], &["out"]),
                n("out", "Sink", &["in"], &[]),
            ],
        ),
        sub(8, true, vec![]),
    ];
    d
}
