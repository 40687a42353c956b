//! Internal topics: topics a topology both writes and reads (repartition topics), named
//! relative to the application, as Kafka Streams does.
//!
//! A topology is built before it knows its `application.id`; a topic marked with
//! [`TopologyBuilder::internal_topic`] keeps its relative name (`count-repartition`) in the
//! builder and in `describe()`. The host that runs the topology (the runtime, the test
//! driver) calls [`Topology::with_application_id`], which renames every use of the topic to
//! `<application.id>-<topic>` — sources, sinks, sub-topologies, fixed partition counts —
//! and keeps the mapping, by which a sink node resolves its topic when it is initialized
//! (its destination was captured when it was added).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::spec::{NodeKind, SinkTarget};
use super::{Topology, TopologyBuilder};

impl TopologyBuilder {
    /// Names `topic` relative to the application: wherever this topology reads or writes
    /// it, it runs as `<application.id>-<topic>`. For repartition topics, whose names must
    /// not collide between applications.
    pub fn internal_topic(&mut self, topic: &str) -> &mut Self {
        self.internal_topics.insert(topic.to_owned());
        self
    }
}

impl Topology {
    /// This topology with its internal topics named for application `app_id` (see
    /// [`TopologyBuilder::internal_topic`]). The runtime and the test driver call it; calling
    /// it again changes nothing.
    pub fn with_application_id(mut self, app_id: &str) -> Topology {
        if self.internal_topics.is_empty() {
            return self;
        }
        let renamed: BTreeMap<String, String> = std::mem::take(&mut self.internal_topics)
            .into_iter()
            .map(|t| {
                let full = format!("{app_id}-{t}");
                (t, full)
            })
            .collect();
        let rename = |t: &mut String| {
            if let Some(full) = renamed.get(t.as_str()) {
                t.clone_from(full);
            }
        };
        for node in &mut self.nodes {
            match &mut node.kind {
                NodeKind::Source { topics, .. } => topics.iter_mut().for_each(rename),
                NodeKind::Sink {
                    target: SinkTarget::Topic(t),
                } => rename(t),
                _ => {}
            }
        }
        for sub in &mut self.subtopologies {
            sub.source_topics.iter_mut().for_each(rename);
            sub.sink_topics.iter_mut().for_each(rename);
        }
        self.repartition_partitions = std::mem::take(&mut self.repartition_partitions)
            .into_iter()
            .map(|(mut t, n)| {
                rename(&mut t);
                (t, n)
            })
            .collect();
        let mut all = (*self.renamed).clone();
        all.extend(renamed);
        self.renamed = Arc::new(all);
        self
    }

    /// The run-time names of internal topics, by relative name (empty until
    /// [`with_application_id`](Self::with_application_id)).
    pub(crate) fn renamed_topics(&self) -> &Arc<BTreeMap<String, String>> {
        &self.renamed
    }
}
