//! `describe()`: the topology in Kafka Streams' text format, and as a Mermaid flowchart.

use std::fmt;

use super::Topology;
use super::spec::{NodeKind, SinkTarget};

/// One node as described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDescription {
    /// The node's name.
    pub name: String,
    /// `Source`, `Processor` or `Sink`.
    pub kind: &'static str,
    /// Source: the topics read; sink: the topic written; processor: the stores connected.
    pub detail: Vec<String>,
    /// The children's names.
    pub successors: Vec<String>,
    /// The parents' names.
    pub predecessors: Vec<String>,
}

/// One sub-topology as described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubTopologyDescription {
    /// Its number.
    pub id: u32,
    /// Whether it feeds a global store.
    pub global: bool,
    /// Its nodes, sources first.
    pub nodes: Vec<NodeDescription>,
}

/// The description of a topology. `Display` prints Kafka Streams' format, which existing
/// topology visualisers read; [`to_mermaid`](Self::to_mermaid) gives a Mermaid flowchart.
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
            .map(|sub| SubTopologyDescription {
                id: sub.id,
                global: sub.global,
                nodes: sub
                    .nodes
                    .iter()
                    .map(|&i| {
                        let def = &t.nodes[i];
                        let (kind, detail) = match &def.kind {
                            NodeKind::Source { topics, .. } => ("Source", topics.clone()),
                            NodeKind::Processor => ("Processor", t.stores_of(&def.name)),
                            NodeKind::Sink { target } => (
                                "Sink",
                                vec![match target {
                                    SinkTarget::Topic(topic) => topic.clone(),
                                    SinkTarget::Extractor(e) => (*e).to_owned(),
                                }],
                            ),
                        };
                        NodeDescription {
                            name: def.name.clone(),
                            kind,
                            detail,
                            successors: t
                                .children_of(i)
                                .iter()
                                .map(|&c| t.nodes[c].name.clone())
                                .collect(),
                            predecessors: def.parents.clone(),
                        }
                    })
                    .collect(),
            })
            .collect();
        Self { subtopologies }
    }
}

fn list(items: &[String]) -> String {
    items.join(", ")
}

impl fmt::Display for TopologyDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Topologies:")?;
        for sub in &self.subtopologies {
            if sub.global {
                writeln!(
                    f,
                    "  Sub-topology: {} for global store (will not generate tasks)",
                    sub.id
                )?;
            } else {
                writeln!(f, "   Sub-topology: {}", sub.id)?;
            }
            for n in &sub.nodes {
                match n.kind {
                    "Source" => writeln!(f, "    Source: {} (topics: [{}])", n.name, list(&n.detail))?,
                    "Sink" => writeln!(f, "    Sink: {} (topic: {})", n.name, list(&n.detail))?,
                    _ => writeln!(f, "    Processor: {} (stores: [{}])", n.name, list(&n.detail))?,
                }
                if n.kind != "Sink" {
                    let next = if n.successors.is_empty() {
                        "none".to_owned()
                    } else {
                        list(&n.successors)
                    };
                    writeln!(f, "      --> {next}")?;
                }
                if n.kind != "Source" {
                    writeln!(f, "      <-- {}", list(&n.predecessors))?;
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
