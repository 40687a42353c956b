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

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;
use streams_core::serdes::StringSerde;
use streams_core::topology::TopologyDescription;
use streams_core::{
    ProcessResult, Processor, ProcessorContext, Record, SinkConfig, SourceConfig, Stores, Topology,
};

/// Passes records through unchanged.
struct Pass;
impl Processor<String, String, String, String> for Pass {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        ctx.forward(r)
    }
}

/// Forwards nothing: a global store's updater.
struct Discard;
impl Processor<String, String, (), ()> for Discard {
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, _: Record<String, String>) -> ProcessResult {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The parsers

/// The directory of `parse.mjs` and its npm packages.
fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/diagram-parsers")
}

/// The tools directory, once Node.js is found and the packages are installed; a clear
/// panic otherwise.
fn parsers() -> &'static Path {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match READY.get_or_init(install) {
        Ok(dir) => dir,
        Err(e) => panic!("the diagram parsers are not available: {e}"),
    }
}

/// Checks Node.js and installs the npm packages when the installed ones are not those of
/// the lockfile (a copy of the lockfile in `node_modules` marks a complete install).
///
/// The install happens in a directory of its own and is then renamed into place, so that
/// two test processes installing at once cannot mix their files.
fn install() -> Result<PathBuf, String> {
    let dir = tools_dir();
    let out = Command::new("node").arg("--version").output().map_err(|e| {
        format!(
            "Node.js (`node`) could not be run ({e}): this test runs the real Mermaid and \
             Graphviz parsers in Node.js; install Node.js 18 or newer with npm \
             (Debian: apt-get install nodejs npm) and run it again"
        )
    })?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 18 {
        return Err(format!(
            "Node.js {version} is too old: the parsers need Node.js 18 or newer"
        ));
    }

    let lock = dir.join("package-lock.json");
    let stamp = |modules: &Path| modules.join(".streams-installed-lock.json");
    let lock_text = std::fs::read(&lock).map_err(|e| format!("{}: {e}", lock.display()))?;
    let target = dir.join("node_modules");
    if std::fs::read(stamp(&target)).ok().as_ref() == Some(&lock_text) {
        return Ok(dir);
    }

    let staging = dir.join(format!(".install-{}", std::process::id()));
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| io("creating the install directory", e))?;
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(dir.join(file), staging.join(file)).map_err(|e| io(file, e))?;
    }
    eprintln!(
        "diagram_parsers: installing the parsers (npm ci in {})",
        dir.display()
    );
    let started = std::time::Instant::now();
    let npm = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&staging)
        .output()
        .map_err(|e| format!("npm could not be run ({e}): install npm (Debian: apt-get install npm)"))?;
    if !npm.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(format!(
            "`npm ci` failed ({}): {}{}",
            npm.status,
            String::from_utf8_lossy(&npm.stdout),
            String::from_utf8_lossy(&npm.stderr)
        ));
    }
    let fresh = staging.join("node_modules");
    std::fs::write(stamp(&fresh), &lock_text).map_err(|e| io("writing the install stamp", e))?;
    if target.exists() {
        let old = dir.join(format!(".install-{}-old", std::process::id()));
        if std::fs::rename(&target, &old).is_ok() {
            let _ = std::fs::remove_dir_all(&old);
        }
    }
    let moved = std::fs::rename(&fresh, &target);
    let _ = std::fs::remove_dir_all(&staging);
    match moved {
        Ok(()) => {}
        // Another process put its install in place first: fine if it is complete.
        Err(_) if std::fs::read(stamp(&target)).ok().as_ref() == Some(&lock_text) => {}
        Err(e) => return Err(io("moving node_modules into place", e)),
    }
    eprintln!("diagram_parsers: installed in {:.1?}", started.elapsed());
    Ok(dir)
}

/// A diagram as its parser read it: vertices, edges, clusters, by the diagram's ids.
#[derive(Debug)]
struct Parsed {
    /// `(id, shape, label as drawn)`.
    vertices: Vec<(String, String, String)>,
    /// `(from, to, kind)`.
    edges: Vec<(String, String, String)>,
    /// `(id, title as drawn, member ids)`.
    clusters: Vec<(String, String, Vec<String>)>,
}

/// `text` read by the parser of `language` (`mermaid` or `dot`); `Err` with the parser's
/// message if it rejects it.
fn parse(language: &str, text: &str) -> Result<Parsed, String> {
    let dir = parsers();
    let mut child = Command::new("node")
        .arg("parse.mjs")
        .arg(language)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node parse.mjs");
    // parse.mjs reads all of its input before it writes anything.
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("writing the diagram to node");
    let out = child.wait_with_output().expect("node parse.mjs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {}
        Some(2) => return Err(stderr.into_owned()),
        _ => panic!("parse.mjs {language} failed ({}): {stderr}", out.status),
    }
    let json: Value = serde_json::from_slice(&out.stdout).expect("parse.mjs prints JSON");
    let s = |v: &Value| v.as_str().map(str::to_owned);
    let list = |key: &str| json[key].as_array().cloned().unwrap_or_default();
    Ok(Parsed {
        vertices: list("vertices")
            .iter()
            .map(|v| {
                let id = s(&v["id"]).expect("vertex id");
                let rendered = s(&v["rendered"]).unwrap_or_else(|| panic!("vertex {id} was not drawn"));
                (id, s(&v["shape"]).unwrap_or_default(), rendered)
            })
            .collect(),
        edges: list("edges")
            .iter()
            .map(|e| {
                let field = |k: &str| s(&e[k]).expect("edge field");
                (field("from"), field("to"), field("kind"))
            })
            .collect(),
        clusters: list("clusters")
            .iter()
            .map(|c| {
                let id = s(&c["id"]).expect("cluster id");
                let members = c["members"].as_array().cloned().unwrap_or_default();
                // Neither renderer draws an empty cluster: then its title as parsed.
                let title = s(&c["rendered"])
                    .or_else(|| members.is_empty().then(|| s(&c["label"])).flatten())
                    .unwrap_or_else(|| panic!("cluster {id} was not drawn"));
                (id, title, members.iter().filter_map(s).collect())
            })
            .collect(),
    })
}

// ---------------------------------------------------------------------------------------
// What a diagram must show

/// What a vertex stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Node,
    Topic,
    Store,
    Extractor,
}

/// A vertex as the reader sees it: what it stands for and its label, as drawn.
type Key = (Class, String);

/// The graph a diagram of `d` must show, worked out from the description alone.
#[derive(Debug, PartialEq, Eq)]
struct Expected {
    vertices: BTreeSet<Key>,
    /// `(from, to, directed)`.
    edges: BTreeSet<(Key, Key, bool)>,
    /// `(title, members)`.
    clusters: BTreeSet<(String, BTreeSet<Key>)>,
}

/// A name as Mermaid draws it: the export puts a U+2060 WORD JOINER (invisible) into the
/// few sequences Mermaid rewrites even in escaped text: `\n`, `$$`, `:fa-` and its entity
/// markers `ﬂ°` and `¶ß`.
fn mermaid_shows(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        out.push(c);
        let rest = &chars[i + 1..];
        if matches!(
            (c, rest.first()),
            ('\\', Some('n')) | ('ﬂ', Some('°')) | ('¶', Some('ß')) | ('$', Some('$'))
        ) || (c == ':' && rest.starts_with(&['f', 'a', '-']))
        {
            out.push('\u{2060}');
        }
    }
    out
}

/// A name as Graphviz draws it: as it is.
fn dot_shows(name: &str) -> String {
    name.to_owned()
}

fn expected(d: &TopologyDescription, shows: fn(&str) -> String) -> Expected {
    let node = |kind: &str, name: &str| (Class::Node, format!("{kind}: {}", shows(name)));
    let described: BTreeMap<&str, &str> = d
        .subtopologies
        .iter()
        .flat_map(|s| &s.nodes)
        .map(|n| (n.name.as_str(), n.kind))
        .collect();
    // A successor that is not described is drawn with its bare name.
    let by_name = |name: &str| {
        described
            .get(name)
            .map_or_else(|| (Class::Node, shows(name)), |kind| node(kind, name))
    };
    let mut vertices = BTreeSet::new();
    let mut edges = BTreeSet::new();
    let mut store_subs: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    for (i, sub) in d.subtopologies.iter().enumerate() {
        for n in &sub.nodes {
            let me = node(n.kind, &n.name);
            vertices.insert(me.clone());
            for s in &n.successors {
                vertices.insert(by_name(s));
                edges.insert((me.clone(), by_name(s), true));
            }
            for x in &n.detail {
                match n.kind {
                    "Source" => {
                        vertices.insert((Class::Topic, shows(x)));
                        edges.insert(((Class::Topic, shows(x)), me.clone(), true));
                    }
                    "Sink" => {
                        let class = if n.extractor {
                            Class::Extractor
                        } else {
                            Class::Topic
                        };
                        vertices.insert((class, shows(x)));
                        edges.insert((me.clone(), (class, shows(x)), true));
                    }
                    _ => {
                        vertices.insert((Class::Store, shows(x)));
                        edges.insert((me.clone(), (Class::Store, shows(x)), false));
                        store_subs.entry(x).or_default().insert(i);
                    }
                }
            }
        }
    }
    let clusters = d
        .subtopologies
        .iter()
        .enumerate()
        .map(|(i, sub)| {
            let title = if sub.global {
                format!("Sub-topology: {} for global store", sub.id)
            } else {
                format!("Sub-topology: {}", sub.id)
            };
            let nodes = sub.nodes.iter().map(|n| node(n.kind, &n.name));
            let stores = store_subs
                .iter()
                .filter(|(_, subs)| subs.len() == 1 && subs.contains(&i))
                .map(|(s, _)| (Class::Store, shows(s)));
            (title, nodes.chain(stores).collect())
        })
        .collect();
    Expected {
        vertices,
        edges,
        clusters,
    }
}

/// What the parser built, by vertex keys; `Err` if two vertices show the same thing.
fn actual(
    p: &Parsed,
    class_of: fn(&str) -> Option<Class>,
    directed: fn(&str) -> bool,
) -> Result<Expected, String> {
    let mut keys: BTreeMap<&str, Key> = BTreeMap::new();
    let mut vertices = BTreeSet::new();
    for (id, shape, label) in &p.vertices {
        let class = class_of(shape).ok_or_else(|| format!("vertex {id}: unexpected shape {shape:?}"))?;
        let key = (class, label.clone());
        if !vertices.insert(key.clone()) {
            return Err(format!("two vertices show {key:?}"));
        }
        if keys.insert(id, key).is_some() {
            return Err(format!("two vertices have id {id}"));
        }
    }
    let key = |id: &str| {
        keys.get(id)
            .cloned()
            .ok_or_else(|| format!("unknown vertex {id}"))
    };
    let mut edges = BTreeSet::new();
    for (from, to, kind) in &p.edges {
        let e = (key(from)?, key(to)?, directed(kind));
        if !edges.insert(e.clone()) {
            return Err(format!("edge {e:?} drawn twice"));
        }
    }
    let mut clusters = BTreeSet::new();
    for (_, title, members) in &p.clusters {
        let members = members.iter().map(|m| key(m)).collect::<Result<_, _>>()?;
        clusters.insert((title.clone(), members));
    }
    Ok(Expected {
        vertices,
        edges,
        clusters,
    })
}

fn mermaid_class(shape: &str) -> Option<Class> {
    match shape {
        "square" => Some(Class::Node),
        "stadium" => Some(Class::Topic),
        "cylinder" => Some(Class::Store),
        "hexagon" => Some(Class::Extractor),
        _ => None,
    }
}

fn dot_class(shape: &str) -> Option<Class> {
    match shape {
        "box" => Some(Class::Node),
        "box,rounded" => Some(Class::Topic),
        "cylinder" => Some(Class::Store),
        "hexagon" => Some(Class::Extractor),
        _ => None,
    }
}

/// Whether `text`, read by the parser of `language`, shows the topology `d` exactly.
fn check(language: &str, text: &str, d: &TopologyDescription) -> Result<(), String> {
    let parsed = parse(language, text)?;
    let (got, want) = match language {
        "mermaid" => (
            actual(&parsed, mermaid_class, |k| k == "arrow_point")?,
            expected(d, mermaid_shows),
        ),
        _ => (
            actual(&parsed, dot_class, |k| k == "arrow")?,
            expected(d, dot_shows),
        ),
    };
    let diff = |what: &str, w: &dyn std::fmt::Debug, g: &dyn std::fmt::Debug| {
        format!("{what} differ:\n  expected {w:#?}\n  parsed   {g:#?}")
    };
    if got.vertices != want.vertices {
        let missing: Vec<_> = want.vertices.difference(&got.vertices).collect();
        let extra: Vec<_> = got.vertices.difference(&want.vertices).collect();
        return Err(diff("vertices", &missing, &extra));
    }
    if got.edges != want.edges {
        let missing: Vec<_> = want.edges.difference(&got.edges).collect();
        let extra: Vec<_> = got.edges.difference(&want.edges).collect();
        return Err(diff("edges", &missing, &extra));
    }
    if got.clusters != want.clusters {
        return Err(diff("clusters", &want.clusters, &got.clusters));
    }
    Ok(())
}

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
fn hostile_topology() -> TopologyDescription {
    let mut b = Topology::builder();
    // Sub-topology 0: a source reading two look-alike topics, a chain of processors named
    // like keywords, fanning out to every other hostile name, with stores.
    b.add_source(
        "end",
        ["orders.v1", "t0", "Processor: n0"],
        StringSerde,
        StringSerde,
    )
    .add_processor("subgraph", || Pass, ["end"])
    .add_processor("graph", || Pass, ["subgraph"]);
    for &name in &HOSTILE[3..] {
        b.add_processor(name, || Pass, ["graph"]);
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
        .add_processor("p1 😀", || Pass, ["source #1 \\"])
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
        || Discard,
    );
    let d = b.build().expect("the hostile topology builds").describe();
    assert!(d.subtopologies.len() >= 3, "{d}");
    d
}

/// A description changed by hand, to hold what `build()` never gives: a successor that is
/// not described, a store shared by two sub-topologies, a repeated successor and an empty
/// sub-topology. (The description's types are reached through its public fields.)
fn handmade() -> TopologyDescription {
    let mut b = Topology::builder();
    b.add_source("src", ["in"], StringSerde, StringSerde)
        .add_processor("end", || Pass, ["src"]);
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

fn assert_exact(language: &str, text: &str, d: &TopologyDescription) {
    if let Err(e) = check(language, text, d) {
        panic!("{language} diagram does not show the topology: {e}\n--- diagram ---\n{text}");
    }
}

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
        .add_processor("a-b", || Pass, ["src"])
        .add_processor("a.b", || Pass, ["src"]);
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
    let mut b = Topology::builder();
    b.add_source("events", ["event_logs"], StringSerde, StringSerde)
        .add_processor("join", || Pass, ["events"])
        .add_state_store(
            Stores::in_memory_kv("web_hooks_store", StringSerde, StringSerde),
            ["join"],
        )
        .add_sink("out", "say \"hi\"", StringSerde, StringSerde, ["join"]);
    let d = b.build().unwrap().describe();
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
