//! What a diagram must show, worked out from the topology's description, and its
//! comparison with what a parser built.

use std::collections::{BTreeMap, BTreeSet};

use streams_core::topology::TopologyDescription;

use crate::parsers::{Parsed, parse};

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
pub(crate) fn check(language: &str, text: &str, d: &TopologyDescription) -> Result<(), String> {
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

pub(crate) fn assert_exact(language: &str, text: &str, d: &TopologyDescription) {
    if let Err(e) = check(language, text, d) {
        panic!("{language} diagram does not show the topology: {e}\n--- diagram ---\n{text}");
    }
}
