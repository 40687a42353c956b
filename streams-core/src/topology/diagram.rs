//! The topology as a diagram: a Mermaid flowchart ([`TopologyDescription::to_mermaid`]) or a
//! Graphviz digraph ([`TopologyDescription::to_dot`]) of a [`TopologyDescription`].
//!
//! Both formats draw the same graph: one cluster per sub-topology holding its nodes (and the
//! stores only its nodes use), one vertex per topic outside the clusters, shared by every
//! sub-topology that reads or writes it, so the diagram shows how data flows between
//! sub-topologies through topics. A sink with a topic-name extractor points to a vertex of
//! the extractor's name instead (the topics it picks are known only at run time).
//!
//! # Invariants
//!
//! * **Ids never come from names.** Every vertex gets a generated id, numbered in order of
//!   first appearance within its kind: `n0, n1, …` for nodes, `t0, …` for topics, `s0, …`
//!   for stores, `x0, …` for topic-name extractors; clusters are `sub0, …` (Mermaid) or
//!   `cluster_0, …` (DOT), numbered by position in
//!   [`TopologyDescription::subtopologies`]. The prefixes never make one another (`s` +
//!   digits is not `sub` + digits), none is a keyword of either language, so
//!   ids are valid and distinct whatever the names: `a-b`, `a.b` and `a_b` are three
//!   vertices, a processor named `t0` or `end` is just a label, and a topic and a node of
//!   the same name are two vertices. The same name within one kind is one vertex: a node is
//!   known by its name (as successors refer to it), a topic, store or extractor likewise.
//! * **Labels carry names exactly.** Nodes are labelled `Source: name`, `Processor: name`
//!   or `Sink: name`; topics and stores by their name; clusters `Sub-topology: N`. Names are
//!   escaped for each format, so that the text a renderer shows is the name, character for
//!   character (see [`mermaid_label`] and [`dot_label`]), with three exceptions: a line
//!   feed is drawn as a line break (Graphviz drops one at the very end of a name); a NUL,
//!   which neither HTML nor Graphviz can carry, is drawn as U+FFFD; and in Mermaid, the
//!   few sequences it rewrites even in escaped text (`\n`, `$$`, `:fa-`, its entity
//!   markers) get an invisible U+2060 WORD JOINER between their first two characters.
//! * **Deterministic.** The same description gives the same text; edges come in the
//!   description's order, each once.
//!
//! `streams-core/tests/diagram_parsers.rs` checks all of this with the real parsers
//! (Mermaid's, and Graphviz's compiled to WebAssembly) over hostile names.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};

use super::describe::{SubTopologyDescription, TopologyDescription};

impl TopologyDescription {
    /// The topology as a [Mermaid](https://mermaid.js.org/syntax/flowchart.html) flowchart:
    /// one subgraph per sub-topology, nodes as rectangles labelled `Kind: name`, topics as
    /// stadiums (outside the subgraphs, one per topic), stores as cylinders, a sink's
    /// topic-name extractor as a hexagon, `-->` for the data flow and `---` between a
    /// processor and its stores.
    ///
    /// Ids are generated (`n0`, `t0`, `s0`, `x0`, `sub0`, …) and labels are quoted strings
    /// with every character outside letters, digits, inner spaces and `_-.,/()'!?+` written
    /// as a Mermaid entity code (`#34;` for `"`), so any name parses and shows as itself
    /// (the few sequences Mermaid rewrites even when escaped, such as `\n` or `$$`, get an
    /// invisible word joiner between their characters; a line feed is a line break). The
    /// same name within one kind (node, topic, store, extractor) is one vertex: a topic read
    /// by one sub-topology and written by another is drawn once, between them.
    ///
    /// ```
    /// # use streams_core::topology::TopologyDescription;
    /// let empty = TopologyDescription { subtopologies: vec![] };
    /// assert_eq!(empty.to_mermaid(), "flowchart TB\n");
    /// ```
    pub fn to_mermaid(&self) -> String {
        Mermaid(&Graph::of(self)).to_string()
    }

    /// The topology as a [Graphviz](https://graphviz.org/doc/info/lang.html) digraph (DOT):
    /// one `cluster_N` subgraph per sub-topology, nodes as boxes labelled `Kind: name`,
    /// topics as rounded boxes (outside the clusters, one per topic), stores as cylinders,
    /// topic-name extractors as hexagons, arrows for the data flow and plain lines
    /// (`dir=none`) between a processor and its stores. Render it with `dot -Tsvg`.
    ///
    /// Ids are generated as for [`to_mermaid`](Self::to_mermaid); labels are quoted strings
    /// with `"` and `\` escaped, `&` written `&amp;` (Graphviz decodes HTML entities in
    /// labels), a line break as `\n` and other control characters as `&#N;`, so any name
    /// shows as itself.
    ///
    /// ```
    /// # use streams_core::topology::TopologyDescription;
    /// let empty = TopologyDescription { subtopologies: vec![] };
    /// assert_eq!(empty.to_dot(), "digraph topology {\n  node [shape=box];\n}\n");
    /// ```
    pub fn to_dot(&self) -> String {
        Dot(&Graph::of(self)).to_string()
    }
}

/// A node's kind, as [`NodeDescription::kind`](super::describe::NodeDescription::kind)
/// names it; anything but `Source` or `Sink` is drawn as a processor, as `describe()`
/// prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Source,
    Processor,
    Sink,
}

impl Kind {
    fn of(kind: &str) -> Self {
        match kind {
            "Source" => Kind::Source,
            "Sink" => Kind::Sink,
            _ => Kind::Processor,
        }
    }

    /// The label's prefix: fixed text that needs no escaping in either format.
    fn prefix(self) -> &'static str {
        match self {
            Kind::Source => "Source: ",
            Kind::Processor => "Processor: ",
            Kind::Sink => "Sink: ",
        }
    }
}

/// A vertex id; `Display` gives the generated id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Id {
    Node(usize),
    Topic(usize),
    Store(usize),
    Extractor(usize),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Node(i) => write!(f, "n{i}"),
            Id::Topic(i) => write!(f, "t{i}"),
            Id::Store(i) => write!(f, "s{i}"),
            Id::Extractor(i) => write!(f, "x{i}"),
        }
    }
}

/// The names of one kind of vertex, each with a number (its position) and some data.
struct Names<'a, T> {
    index: HashMap<&'a str, usize>,
    names: Vec<(&'a str, T)>,
}

impl<'a, T: Default> Names<'a, T> {
    fn new() -> Self {
        Self {
            index: HashMap::new(),
            names: Vec::new(),
        }
    }

    /// The number of `name`, given the next free one if it is new.
    fn id(&mut self, name: &'a str) -> usize {
        let next = self.names.len();
        let i = *self.index.entry(name).or_insert(next);
        if i == next {
            self.names.push((name, T::default()));
        }
        i
    }
}

/// Where a store is drawn: in the cluster of the only sub-topology using it, or outside.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Place {
    #[default]
    Outside,
    In(usize),
    Shared,
}

/// The graph both formats draw: vertices numbered by kind, clusters, edges.
struct Graph<'a> {
    /// Node names with kind and cluster; `None` for a name only seen as a successor.
    nodes: Names<'a, Option<(Kind, usize)>>,
    topics: Names<'a, ()>,
    stores: Names<'a, Place>,
    /// The topic-name extractors of sinks, by name.
    extractors: Names<'a, ()>,
    /// The clusters' titles, by position.
    clusters: Vec<String>,
    /// `(from, to, directed)`, each once, in the description's order.
    edges: Vec<(Id, Id, bool)>,
}

impl<'a> Graph<'a> {
    fn of(d: &'a TopologyDescription) -> Self {
        let mut g = Graph {
            nodes: Names::new(),
            topics: Names::new(),
            stores: Names::new(),
            extractors: Names::new(),
            clusters: d.subtopologies.iter().map(title).collect(),
            edges: Vec::new(),
        };
        // Nodes first, so node ids follow the description's order.
        for (c, sub) in d.subtopologies.iter().enumerate() {
            for n in &sub.nodes {
                let i = g.nodes.id(&n.name);
                let info = &mut g.nodes.names[i].1;
                if info.is_none() {
                    *info = Some((Kind::of(n.kind), c));
                }
            }
        }
        let mut seen = HashSet::new();
        let mut edge = |edges: &mut Vec<_>, e: (Id, Id, bool)| {
            if seen.insert(e) {
                edges.push(e);
            }
        };
        for (c, sub) in d.subtopologies.iter().enumerate() {
            for n in &sub.nodes {
                let from = Id::Node(g.nodes.id(&n.name));
                for s in &n.successors {
                    let to = Id::Node(g.nodes.id(s));
                    edge(&mut g.edges, (from, to, true));
                }
                match Kind::of(n.kind) {
                    Kind::Source => {
                        for t in &n.detail {
                            edge(&mut g.edges, (Id::Topic(g.topics.id(t)), from, true));
                        }
                    }
                    Kind::Sink => {
                        for t in &n.detail {
                            let to = if n.extractor {
                                Id::Extractor(g.extractors.id(t))
                            } else {
                                Id::Topic(g.topics.id(t))
                            };
                            edge(&mut g.edges, (from, to, true));
                        }
                    }
                    Kind::Processor => {
                        for s in &n.detail {
                            let i = g.stores.id(s);
                            let place = &mut g.stores.names[i].1;
                            *place = match *place {
                                Place::Outside => Place::In(c),
                                Place::In(other) if other == c => Place::In(c),
                                _ => Place::Shared,
                            };
                            edge(&mut g.edges, (from, Id::Store(i), false));
                        }
                    }
                }
            }
        }
        g
    }

    /// Writes the clusters, each opened by `open` (with its number and title), its vertices
    /// indented by four spaces and closed by the line `close`; then the vertices outside
    /// every cluster, indented by two; then the edges (from, to, directed).
    fn write_body(
        &self,
        f: &mut fmt::Formatter<'_>,
        open: impl Fn(&mut fmt::Formatter<'_>, usize, &str) -> fmt::Result,
        close: &str,
        vertex: impl Fn(&mut fmt::Formatter<'_>, &str, (Id, &str, &str)) -> fmt::Result,
        edge: impl Fn(&mut fmt::Formatter<'_>, Id, Id, bool) -> fmt::Result,
    ) -> fmt::Result {
        for (c, title) in self.clusters.iter().enumerate() {
            open(f, c, title)?;
            for v in self.members(Some(c)) {
                vertex(f, "    ", v)?;
            }
            writeln!(f, "{close}")?;
        }
        for v in self.members(None) {
            vertex(f, "  ", v)?;
        }
        for &(from, to, directed) in &self.edges {
            edge(f, from, to, directed)?;
        }
        Ok(())
    }

    /// The vertices declared inside cluster `c` (`None`: outside every cluster), each with
    /// its label's prefix and name.
    fn members(&self, c: Option<usize>) -> impl Iterator<Item = (Id, &'static str, &'a str)> + '_ {
        let nodes = self
            .nodes
            .names
            .iter()
            .enumerate()
            .filter(move |(_, (_, info))| info.map(|(_, cluster)| cluster) == c)
            .map(|(i, (name, info))| (Id::Node(i), info.map_or("", |(kind, _)| kind.prefix()), *name));
        let topics = self
            .topics
            .names
            .iter()
            .enumerate()
            .filter(move |_| c.is_none())
            .map(|(i, (name, _))| (Id::Topic(i), "", *name));
        let stores = self
            .stores
            .names
            .iter()
            .enumerate()
            .filter(move |(_, (_, place))| match place {
                Place::In(cluster) => c == Some(*cluster),
                _ => c.is_none(),
            })
            .map(|(i, (name, _))| (Id::Store(i), "", *name));
        let extractors = self
            .extractors
            .names
            .iter()
            .enumerate()
            .filter(move |_| c.is_none())
            .map(|(i, (name, _))| (Id::Extractor(i), "", *name));
        nodes.chain(topics).chain(stores).chain(extractors)
    }
}

/// A cluster's title: the sub-topology's number, as `describe()` prints it.
fn title(sub: &SubTopologyDescription) -> String {
    if sub.global {
        format!("Sub-topology: {} for global store", sub.id)
    } else {
        format!("Sub-topology: {}", sub.id)
    }
}

/// Prints a [`Graph`] as a Mermaid flowchart.
struct Mermaid<'g, 'a>(&'g Graph<'a>);

impl fmt::Display for Mermaid<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.0;
        let vertex = |f: &mut fmt::Formatter<'_>, indent: &str, (id, prefix, name): (Id, &str, &str)| {
            let label = mermaid_label(prefix, name);
            match id {
                Id::Node(_) => writeln!(f, "{indent}{id}[\"{label}\"]"),
                Id::Topic(_) => writeln!(f, "{indent}{id}([\"{label}\"])"),
                Id::Store(_) => writeln!(f, "{indent}{id}[(\"{label}\")]"),
                Id::Extractor(_) => writeln!(f, "{indent}{id}{{{{\"{label}\"}}}}"),
            }
        };
        writeln!(f, "flowchart TB")?;
        g.write_body(
            f,
            // The title is fixed text and a number: nothing to escape.
            |f, c, title| writeln!(f, "  subgraph sub{c}[\"{title}\"]"),
            "  end",
            vertex,
            |f, from, to, directed| writeln!(f, "  {from} {} {to}", if directed { "-->" } else { "---" }),
        )
    }
}

/// Prints a [`Graph`] as a Graphviz digraph.
struct Dot<'g, 'a>(&'g Graph<'a>);

impl fmt::Display for Dot<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.0;
        let vertex = |f: &mut fmt::Formatter<'_>, indent: &str, (id, prefix, name): (Id, &str, &str)| {
            let label = dot_label(prefix, name);
            match id {
                Id::Node(_) => writeln!(f, "{indent}{id} [label=\"{label}\"];"),
                Id::Topic(_) => writeln!(f, "{indent}{id} [label=\"{label}\", style=rounded];"),
                Id::Store(_) => writeln!(f, "{indent}{id} [label=\"{label}\", shape=cylinder];"),
                Id::Extractor(_) => writeln!(f, "{indent}{id} [label=\"{label}\", shape=hexagon];"),
            }
        };
        writeln!(f, "digraph topology {{")?;
        writeln!(f, "  node [shape=box];")?;
        let cluster = |f: &mut fmt::Formatter<'_>, c: usize, title: &str| {
            writeln!(f, "  subgraph cluster_{c} {{")?;
            writeln!(f, "    label=\"{title}\";")
        };
        g.write_body(f, cluster, "  }", vertex, |f, from, to, directed| {
            if directed {
                writeln!(f, "  {from} -> {to};")
            } else {
                writeln!(f, "  {from} -> {to} [dir=none];")
            }
        })?;
        writeln!(f, "}}")
    }
}

/// `prefix` (fixed text, kept as is) then `name`, escaped for a quoted Mermaid label.
///
/// Kept as they are: ASCII letters and digits, `_-.,/()'!?+`, letters and digits of other
/// scripts, and spaces not at either end of the label. Everything else becomes an entity
/// code `#N;` (N the decimal code point), which Mermaid turns into the HTML entity `&#N;`.
/// This keeps out of the label every character Mermaid reads specially: `"` (ends the
/// string), `#` and `;` (entity codes), `&`, `<`, `>` (HTML), `:` (the `style`/`classDef`
/// rewriting), `%` (directives), a backtick (Markdown strings), control characters, and
/// the marker characters `ﬂ`, `°`, `¶`, `ß` Mermaid encodes entities with. Spaces at the
/// ends are encoded because Mermaid trims labels.
///
/// Mermaid unescapes a label before it draws it and then still rewrites a few sequences
/// in the unescaped text: `\n` (a line break), `ﬂ°` and `¶ß` (its entity markers),
/// `:fa-` (a Font Awesome icon) and `$$` (KaTeX). Within those, an invisible U+2060 WORD
/// JOINER separates the two characters (`\`, U+2060, `n`), so the label still reads as
/// the name. A line feed in a name is drawn as a line break.
fn mermaid_label(prefix: &str, name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(prefix.len() + name.len());
    out.push_str(prefix);
    let last = chars.len().saturating_sub(1);
    for (i, &c) in chars.iter().enumerate() {
        let at_edge = (i == 0 && prefix.is_empty()) || i == last;
        let plain = c.is_ascii_alphanumeric()
            || matches!(
                c,
                '_' | '-' | '.' | ',' | '/' | '(' | ')' | '\'' | '!' | '?' | '+'
            )
            || (c == ' ' && !at_edge)
            || (!c.is_ascii() && c.is_alphanumeric() && !matches!(c, 'ß' | 'ﬂ'));
        if plain {
            out.push(c);
        } else {
            let code = if c == '\0' { 0xFFFD } else { u32::from(c) };
            let _ = write!(out, "#{code};");
        }
        let rest = &chars[i + 1..];
        let rewritten = match (c, rest.first()) {
            ('\\', Some('n')) | ('ﬂ', Some('°')) | ('¶', Some('ß')) | ('$', Some('$')) => true,
            (':', _) => rest.starts_with(&['f', 'a', '-']),
            _ => false,
        };
        if rewritten {
            out.push_str("#8288;");
        }
    }
    out
}

/// `prefix` (fixed text, kept as is) then `name`, escaped for a quoted DOT label.
///
/// The DOT parser reads `\"` as `"`; Graphviz then reads `\\` as `\` (so `\N`, `\G`, `\l`
/// in a name stay text), `\n` as a line break and HTML entities, so `&` is written `&amp;`
/// and control characters other than the line feed as `&#N;`.
fn dot_label(prefix: &str, name: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + name.len());
    out.push_str(prefix);
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '&' => out.push_str("&amp;"),
            '\n' => out.push_str("\\n"),
            '\0' => out.push_str("&#65533;"),
            c if c.is_control() => {
                let _ = write!(out, "&#{};", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}
