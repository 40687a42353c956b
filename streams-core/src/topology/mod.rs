//! Topologies: the graph of sources, processors and sinks with their stores, built and
//! validated by [`TopologyBuilder`], described in Kafka Streams' text format by
//! [`Topology::describe`].
//!
//! A built topology is split into **sub-topologies**: the connected components of the graph,
//! where nodes are connected by edges and by sharing a store. Each sub-topology runs as one
//! task per partition of its source topics.

mod builder;
mod describe;
mod diagram;
mod internal;
pub(crate) mod nodes;
pub(crate) mod spec;
mod typed;
mod validate;

use std::collections::BTreeSet;

pub use crate::processor::{
    ConnectableStore, SessionStoreRef, StoreRef, TypedStoreRef, VersionedStoreRef, WindowStoreRef,
};
pub use builder::{SinkConfig, SourceConfig, TopologyBuilder};
pub use describe::{DescribedNames, NameDifferences, TopologyDescription};
pub use spec::{OffsetReset, SourceValues, TimestampExtractor};
pub use typed::NodeRef;

use spec::{NodeDef, NodeKind, StoreDef};

/// A connected part of the topology; one task per partition runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubTopology {
    /// Its number, as in `describe()`.
    pub id: u32,
    /// The nodes' indices in the topology, sources first, then in the order added.
    pub(crate) nodes: Vec<usize>,
    /// The topics its sources read.
    pub source_topics: Vec<String>,
    /// The topics its sinks write (topic-name extractors are not listed).
    pub sink_topics: Vec<String>,
    /// The indices of its stores in the topology.
    pub(crate) stores: Vec<usize>,
    /// Whether it is the sub-topology of a global store (runs as a global task, not per
    /// partition).
    pub global: bool,
}

/// A validated topology, ready to run in the runtime or in the test driver.
#[derive(Clone)]
pub struct Topology {
    pub(crate) nodes: Vec<NodeDef>,
    pub(crate) stores: Vec<StoreDef>,
    pub(crate) subtopologies: Vec<SubTopology>,
    children: Vec<Vec<usize>>,
    /// Internal topics still named relative to the application.
    internal_topics: BTreeSet<String>,
    /// Internal topics' run-time names, by relative name.
    renamed: std::sync::Arc<std::collections::BTreeMap<String, String>>,
    pub(crate) repartition_partitions: std::collections::BTreeMap<String, i32>,
    /// Every (processor, store) connection in the order it was made.
    pub(crate) store_links: Vec<(String, String)>,
    /// Stores restored from a source topic: store → (topic, value layout).
    source_changelogs: std::collections::BTreeMap<String, (String, SourceValues)>,
}

impl Topology {
    /// A new builder.
    pub fn builder() -> TopologyBuilder {
        TopologyBuilder::default()
    }

    /// The partition counts fixed with
    /// [`TopologyBuilder::set_repartition_partitions`], by topic.
    pub fn repartition_partitions(&self) -> &std::collections::BTreeMap<String, i32> {
        &self.repartition_partitions
    }

    /// The sub-topologies (including those of global stores).
    pub fn subtopologies(&self) -> &[SubTopology] {
        &self.subtopologies
    }

    /// The sub-topology numbered `id`.
    pub fn subtopology(&self, id: u32) -> Option<&SubTopology> {
        self.subtopologies.iter().find(|s| s.id == id)
    }

    /// The children of node `index`, in the order they were added.
    pub(crate) fn children_of(&self, index: usize) -> &[usize] {
        &self.children[index]
    }

    /// The stores connected to the node named `name`.
    pub(crate) fn stores_of(&self, name: &str) -> Vec<String> {
        self.stores
            .iter()
            .filter(|s| s.processors.iter().any(|p| p == name))
            .map(|s| s.builder.name().to_owned())
            .collect()
    }

    /// Every topic read by a source of a non-global sub-topology.
    pub fn source_topics(&self) -> BTreeSet<String> {
        self.subtopologies
            .iter()
            .filter(|s| !s.global)
            .flat_map(|s| s.source_topics.iter().cloned())
            .collect()
    }

    /// The sub-topology that reads `topic`.
    pub fn subtopology_of_topic(&self, topic: &str) -> Option<&SubTopology> {
        self.subtopologies
            .iter()
            .find(|s| s.source_topics.iter().any(|t| t == topic))
    }

    /// The names of the stores that write a changelog, with their sub-topology.
    pub fn logged_stores(&self) -> Vec<(u32, String)> {
        let mut v = Vec::new();
        for sub in &self.subtopologies {
            for &s in &sub.stores {
                let b = &self.stores[s].builder;
                if b.logging_config().is_some() && !self.stores[s].global {
                    v.push((sub.id, b.name().to_owned()));
                }
            }
        }
        v
    }

    /// The source topic store `name` is restored from instead of a changelog (see
    /// [`TopologyBuilder::use_source_topic_as_changelog`]), if any.
    pub fn source_changelog(&self, name: &str) -> Option<&str> {
        self.source_changelogs.get(name).map(|(t, _)| t.as_str())
    }

    /// How store `name`, restored from a source topic, holds the topic's values.
    pub(crate) fn source_values(&self, name: &str) -> Option<SourceValues> {
        self.source_changelogs.get(name).map(|(_, v)| *v)
    }

    /// The changelog topic configuration of store `name` (`None` if not logged).
    pub fn changelog_config(&self, name: &str) -> Option<std::collections::BTreeMap<String, String>> {
        self.store_def(name)
            .and_then(|s| s.builder.logging_config().cloned())
    }

    /// Store `name` of the topology, if there is one.
    pub(crate) fn store_def(&self, name: &str) -> Option<&StoreDef> {
        self.stores.iter().find(|s| s.builder.name() == name)
    }

    /// Where `offset.reset` sends the consumer of `topic` when there is no committed offset.
    pub fn offset_reset(&self, topic: &str) -> OffsetReset {
        self.nodes
            .iter()
            .find_map(|n| match &n.kind {
                NodeKind::Source {
                    topics, offset_reset, ..
                } if topics.iter().any(|t| t == topic) => Some(*offset_reset),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The topology in Kafka Streams' `describe()` form; `to_string()` gives the text, the
    /// same, byte for byte, as Kafka Streams 4.1's `TopologyDescription.toString()` for the
    /// same topology (see [`TopologyDescription`]).
    pub fn describe(&self) -> TopologyDescription {
        TopologyDescription::of(self)
    }
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.describe())
    }
}

/// The changelog topic of `store` in application `app_id`.
pub fn changelog_topic(app_id: &str, store: &str) -> String {
    format!("{app_id}-{store}-changelog")
}
