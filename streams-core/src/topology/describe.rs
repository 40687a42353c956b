//! `describe()`: the topology in Kafka Streams' text format.

mod names;
mod order;

use std::collections::HashMap;
use std::fmt;

use super::Topology;
use super::spec::{NodeKind, SinkTarget};
pub use names::{DescribedNames, NameDifferences};
use order::{DEFAULT_CAPACITY, NodeSet, compare_nodes, copy_capacity, hash_set_order};

/// One node as described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDescription {
    /// The node's name.
    pub name: String,
    /// `Source`, `Processor` or `Sink`.
    pub kind: &'static str,
    /// Source: the topics read; sink: the topic written, or the name of its topic-name
    /// extractor (see [`extractor`](Self::extractor)); processor: the stores connected.
    /// In Kafka Streams' order (see [`TopologyDescription`]).
    pub detail: Vec<String>,
    /// Whether this is a sink whose `detail` names a topic-name extractor, not a topic.
    pub extractor: bool,
    /// The children's names, in Kafka Streams' order.
    pub successors: Vec<String>,
    /// The parents' names, in Kafka Streams' order.
    pub predecessors: Vec<String>,
}

/// One sub-topology as described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubTopologyDescription {
    /// Its number.
    pub id: u32,
    /// Whether it feeds a global store; then its nodes are the store's source and its
    /// processor, which Kafka Streams shows with the first of the source's topics and the
    /// first of the processor's stores.
    pub global: bool,
    /// Its nodes, in Kafka Streams' order: those with more paths downstream first, then by
    /// name.
    pub nodes: Vec<NodeDescription>,
}

/// The description of a topology. `Display` prints Kafka Streams' format, the same, byte for
/// byte, as `TopologyDescription.toString()` of Kafka Streams 4.1 for the same topology, so
/// that tools reading that text read ours (streams-dsl's `describe_java` test compares the
/// two); [`to_mermaid`](Self::to_mermaid) gives a Mermaid flowchart.
///
/// The order of everything listed is Kafka Streams' too. Sub-topologies (global stores
/// included) are numbered and listed in the order of their first node added. Within one,
/// nodes come by their *size*, the number of paths from the node downstream counting
/// itself, largest first, then by name. A node's successors and predecessors are ordered by
/// size and name as the sizes were while Kafka Streams connected the nodes, which can differ
/// from the final sizes. A source's topics and a processor's stores come in the iteration
/// order of a Java `HashSet`, by the Java hash code of the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyDescription {
    /// The sub-topologies, in order.
    pub subtopologies: Vec<SubTopologyDescription>,
}

impl TopologyDescription {
    pub(crate) fn of(t: &Topology) -> Self {
        let subtopologies = t
            .subtopologies
            .iter()
            .map(|sub| {
                // The nodes in the order they were added, as Kafka Streams groups them.
                let mut members = sub.nodes.clone();
                members.sort_unstable();
                let nodes = if sub.global {
                    global_nodes(t, &members)
                } else {
                    ordered_nodes(t, &members)
                };
                SubTopologyDescription {
                    id: sub.id,
                    global: sub.global,
                    nodes,
                }
            })
            .collect();
        Self { subtopologies }
    }
}

/// The stores connected to processor `name` in the order of Kafka Streams' set of them: a
/// Java hash set filled in the order the connections were made.
fn store_set(t: &Topology, name: &str) -> Vec<String> {
    let mut connected = t.stores_of(name);
    connected.sort_by_key(|s| {
        t.store_links
            .iter()
            .position(|(p, store)| p == name && store == s)
            .unwrap_or(usize::MAX)
    });
    hash_set_order(&connected, DEFAULT_CAPACITY)
        .into_iter()
        .map(|i| connected[i].clone())
        .collect()
}

/// The stores of processor `name` as `describe()` lists them: Kafka Streams copies its set
/// into a new hash set first.
fn stores_in_order(t: &Topology, name: &str) -> Vec<String> {
    let set = store_set(t, name);
    hash_set_order(&set, copy_capacity(set.len()))
        .into_iter()
        .map(|i| set[i].clone())
        .collect()
}

/// Node `i` described, with what Kafka Streams shows of it, and no edges yet.
fn node(t: &Topology, i: usize) -> NodeDescription {
    let def = &t.nodes[i];
    let (kind, detail, extractor) = match &def.kind {
        NodeKind::Source { topics, .. } => {
            let in_order = hash_set_order(topics, copy_capacity(topics.len()))
                .into_iter()
                .map(|i| topics[i].clone())
                .collect();
            ("Source", in_order, false)
        }
        NodeKind::Processor => ("Processor", stores_in_order(t, &def.name), false),
        NodeKind::Sink {
            target: SinkTarget::Topic(topic),
        } => ("Sink", vec![topic.clone()], false),
        NodeKind::Sink {
            target: SinkTarget::Extractor(name),
        } => ("Sink", vec![name.clone()], true),
    };
    NodeDescription {
        name: def.name.clone(),
        kind,
        detail,
        extractor,
        successors: Vec::new(),
        predecessors: Vec::new(),
    }
}

/// The positions in `members` in the order Kafka Streams iterates them: its node groups
/// are hash sets of names, copied into a hash map by name.
fn group_order(t: &Topology, members: &[usize]) -> Vec<usize> {
    let names: Vec<&str> = members.iter().map(|&i| t.nodes[i].name.as_str()).collect();
    let grouped = hash_set_order(&names, DEFAULT_CAPACITY);
    let regrouped: Vec<&str> = grouped.iter().map(|&k| names[k]).collect();
    hash_set_order(&regrouped, DEFAULT_CAPACITY)
        .into_iter()
        .map(|k| grouped[k])
        .collect()
}

/// The nodes of an ordinary sub-topology, with their edges, in Kafka Streams' order.
fn ordered_nodes(t: &Topology, members: &[usize]) -> Vec<NodeDescription> {
    let names: Vec<&str> = members.iter().map(|&i| t.nodes[i].name.as_str()).collect();
    let local: HashMap<&str, usize> = names.iter().enumerate().map(|(k, &n)| (n, k)).collect();
    let n = members.len();
    let mut sizes = vec![1i32; n];
    let mut successors = vec![NodeSet::default(); n];
    let mut predecessors = vec![NodeSet::default(); n];
    let visit = group_order(t, members);
    // Kafka Streams connects each node to its parents in this order, adding to both sets
    // and then adding the child's size to the parent and to everything upstream of it.
    for &child in &visit {
        for parent in &t.nodes[members[child]].parents {
            let Some(&parent) = local.get(parent.as_str()) else {
                continue;
            };
            let cmp = |a, b| compare_nodes(a, b, &sizes, &names);
            predecessors[child].insert(parent, cmp);
            successors[parent].insert(child, cmp);
            let delta = sizes[child];
            add_upstream(&mut sizes, &predecessors, parent, delta);
        }
    }
    let mut all = NodeSet::default();
    for &k in &visit {
        all.insert(k, |a, b| compare_nodes(a, b, &sizes, &names));
    }
    let name_all = |set: &NodeSet| set.nodes().into_iter().map(|k| names[k].to_owned()).collect();
    all.nodes()
        .into_iter()
        .map(|k| NodeDescription {
            successors: name_all(&successors[k]),
            predecessors: name_all(&predecessors[k]),
            ..node(t, members[k])
        })
        .collect()
}

/// Adds `delta` to `from` and, once per path, to every node upstream of it along the
/// predecessor sets as they are now (what Kafka Streams does recursively, in linear time).
fn add_upstream(sizes: &mut [i32], predecessors: &[NodeSet], from: usize, delta: i32) {
    // paths[k]: the number of paths from k down to `from`, over the nodes upstream of it.
    let ups: Vec<Vec<usize>> = predecessors.iter().map(NodeSet::nodes).collect();
    let mut pending = vec![0usize; sizes.len()];
    let mut seen = vec![false; sizes.len()];
    let mut stack = vec![from];
    seen[from] = true;
    while let Some(k) = stack.pop() {
        for &u in &ups[k] {
            pending[u] += 1;
            if !seen[u] {
                seen[u] = true;
                stack.push(u);
            }
        }
    }
    let mut paths = vec![0i32; sizes.len()];
    paths[from] = 1;
    let mut ready = vec![from];
    while let Some(k) = ready.pop() {
        sizes[k] = sizes[k].wrapping_add(delta.wrapping_mul(paths[k]));
        for &u in &ups[k] {
            paths[u] = paths[u].wrapping_add(paths[k]);
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.push(u);
            }
        }
    }
}

/// The two nodes of a global store's sub-topology as Kafka Streams shows them: its source
/// with the first of its topics, and its processor with the first of its stores.
fn global_nodes(t: &Topology, members: &[usize]) -> Vec<NodeDescription> {
    let names: Vec<&str> = members.iter().map(|&i| t.nodes[i].name.as_str()).collect();
    let grouped: Vec<usize> = hash_set_order(&names, DEFAULT_CAPACITY)
        .into_iter()
        .map(|k| members[k])
        .collect();
    let source = grouped
        .iter()
        .copied()
        .find(|&i| t.nodes[i].global && t.nodes[i].is_source());
    let Some(source) = source else {
        return ordered_nodes(t, members);
    };
    let Some(processor) = grouped.iter().copied().find(|&i| i != source) else {
        return ordered_nodes(t, members);
    };
    let mut source_node = node(t, source);
    if let NodeKind::Source { topics, .. } = &t.nodes[source].kind {
        source_node.detail = topics.iter().take(1).cloned().collect();
    }
    source_node.successors = vec![t.nodes[processor].name.clone()];
    let mut processor_node = node(t, processor);
    if let NodeKind::Processor = t.nodes[processor].kind {
        processor_node.detail = store_set(t, &t.nodes[processor].name);
        processor_node.detail.truncate(1);
    }
    processor_node.predecessors = vec![t.nodes[source].name.clone()];
    vec![source_node, processor_node]
}

/// The names, comma-separated, or `none`.
struct Names<'a>(&'a [String]);

impl fmt::Display for Names<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        f.write_str(&self.0.join(", "))
    }
}

impl fmt::Display for NodeDescription {
    /// The node as Kafka Streams prints it: its line, then `      --> ` successors (not for
    /// a sink) and `      <-- ` predecessors (not for a source); no final newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let detail = self.detail.join(", ");
        match self.kind {
            "Source" => write!(
                f,
                "Source: {} (topics: [{detail}])\n      --> {}",
                self.name,
                Names(&self.successors)
            ),
            "Sink" if self.extractor => write!(
                f,
                "Sink: {} (extractor class: {detail})\n      <-- {}",
                self.name,
                Names(&self.predecessors)
            ),
            "Sink" => write!(
                f,
                "Sink: {} (topic: {detail})\n      <-- {}",
                self.name,
                Names(&self.predecessors)
            ),
            _ => write!(
                f,
                "Processor: {} (stores: [{detail}])\n      --> {}\n      <-- {}",
                self.name,
                Names(&self.successors),
                Names(&self.predecessors)
            ),
        }
    }
}

impl fmt::Display for SubTopologyDescription {
    /// The sub-topology's header and nodes. An ordinary one ends with an empty line, a
    /// global store's does not, as in Kafka Streams.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.global {
            writeln!(
                f,
                "Sub-topology: {} for global store (will not generate tasks)",
                self.id
            )?;
        } else {
            writeln!(f, "Sub-topology: {}", self.id)?;
        }
        for n in &self.nodes {
            writeln!(f, "    {n}")?;
        }
        if !self.global {
            writeln!(f)?;
        }
        Ok(())
    }
}

impl fmt::Display for TopologyDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Kafka Streams writes "Topologies:", a newline and a space, then each sub-topology
        // after two spaces: ordinary ones and global stores in two lists by number, merged
        // by taking the ordinary one whenever its number is the next expected.
        let mut ordinary: Vec<&SubTopologyDescription> =
            self.subtopologies.iter().filter(|s| !s.global).collect();
        let mut global: Vec<&SubTopologyDescription> =
            self.subtopologies.iter().filter(|s| s.global).collect();
        ordinary.sort_by_key(|s| s.id);
        global.sort_by_key(|s| s.id);
        f.write_str("Topologies:\n ")?;
        let (mut o, mut g) = (ordinary.iter().peekable(), global.iter().peekable());
        let mut expected = 0u32;
        while let (Some(next_o), Some(next_g)) = (o.peek(), g.peek()) {
            if next_o.id == expected {
                write!(f, "  {next_o}")?;
                o.next();
            } else {
                write!(f, "  {next_g}")?;
                g.next();
            }
            expected = expected.wrapping_add(1);
        }
        for s in o.chain(g) {
            write!(f, "  {s}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::serdes::StringSerde;
    use crate::{SinkConfig, Topology};

    fn route(key: &String, _: &String) -> String {
        format!("out-{key}")
    }

    #[test]
    fn extractor_sinks_show_the_extractor_by_type_name_or_given_name() {
        let mut b = Topology::builder();
        b.add_source("in", ["input"], StringSerde, StringSerde)
            .add_sink_with(
                "by-type",
                SinkConfig::extractor(route, StringSerde, StringSerde),
                ["in"],
            )
            .add_sink_with(
                "by-name",
                SinkConfig::extractor(route, StringSerde, StringSerde).extractor_name("RouteByKey"),
                ["in"],
            );
        let text = b.build().unwrap().describe().to_string();
        assert!(
            text.contains(
                "    Sink: by-type (extractor class: streams_core::topology::describe::tests::route)\n      <-- in\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("    Sink: by-name (extractor class: RouteByKey)\n      <-- in\n"),
            "{text}"
        );
        assert!(text.contains("      --> by-name, by-type\n"), "{text}");
    }

    #[test]
    fn an_empty_description_is_the_header_alone() {
        let empty = super::TopologyDescription {
            subtopologies: Vec::new(),
        };
        assert_eq!(empty.to_string(), "Topologies:\n ");
    }
}
