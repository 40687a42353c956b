//! The group topology a member sends when it joins a streams group: what the group
//! coordinator needs to know of the application to compute tasks and place them.
//!
//! Invariants:
//! - one subtopology per non-global sub-topology of ours, id = our `u32` id in decimal, so
//!   a task the coordinator names (`"1"`, partition 3) is our `TaskId { 1, 3 }`;
//! - `source_topics` holds only the external topics a sub-topology reads; the repartition
//!   topics it reads (written by a sink of the same topology) are in
//!   `repartition_source_topics`, with their partition count where the runtime's topic plan
//!   fixed it (0: the coordinator derives it); the repartition topics it writes are in
//!   `repartition_sink_topics`;
//! - the changelog of every logged store is named as the runtime creates it
//!   (`<application.id>-<store>-changelog`) with partition count 0 (the coordinator uses
//!   the sub-topology's task count);
//! - every sub-topology reading more than one topic has one copartition group of all its
//!   topics: the runtime runs one task per partition over all of them, so they must be
//!   co-partitioned (the runtime checks the same before it starts).

use std::collections::{BTreeMap, BTreeSet};

use crate::runtime::topics::InternalTopic;
use crate::topology::{Topology, changelog_topic};

/// The topology of a streams group (the `Topology` field of the join heartbeat).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GroupTopology {
    /// The topology epoch; 0 until topology upgrades are supported.
    pub epoch: i32,
    /// The sub-topologies, by id.
    pub subtopologies: Vec<GroupSubtopology>,
}

/// One sub-topology as the coordinator sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GroupSubtopology {
    /// Our sub-topology id, in decimal.
    pub id: String,
    /// External topics read.
    pub source_topics: Vec<String>,
    /// Source patterns (none: our sources name their topics).
    pub source_topic_regex: Vec<String>,
    /// The changelogs of its logged stores.
    pub state_changelog_topics: Vec<TopicInfo>,
    /// Repartition topics written.
    pub repartition_sink_topics: Vec<String>,
    /// Repartition topics read.
    pub repartition_source_topics: Vec<TopicInfo>,
    /// Sets of topics that must be co-partitioned (indices into the arrays above).
    pub copartition_groups: Vec<CopartitionGroup>,
}

/// An internal topic of a sub-topology.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TopicInfo {
    pub name: String,
    /// 0: the coordinator decides.
    pub partitions: i32,
    /// 0: the broker's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// Topics that must have the same partition count: indices into a sub-topology's
/// `source_topics`, `source_topic_regex` and `repartition_source_topics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CopartitionGroup {
    pub source_topics: Vec<i16>,
    pub source_topic_regex: Vec<i16>,
    pub repartition_source_topics: Vec<i16>,
}

impl GroupTopology {
    /// The group topology of `topology` (already renamed for `app_id`, see
    /// [`Topology::with_application_id`]); `internal` is the runtime's topic plan, which
    /// gives the repartition topics' partition counts and the changelogs' configurations.
    pub(crate) fn of(topology: &Topology, app_id: &str, internal: &[InternalTopic]) -> GroupTopology {
        let subs: Vec<_> = topology.subtopologies().iter().filter(|s| !s.global).collect();
        let read: BTreeSet<&String> = subs.iter().flat_map(|s| &s.source_topics).collect();
        let written: BTreeSet<&String> = subs.iter().flat_map(|s| &s.sink_topics).collect();
        let planned: BTreeMap<&str, &InternalTopic> = internal.iter().map(|t| (t.name.as_str(), t)).collect();
        let info = |name: &str, partitions: Option<i32>| TopicInfo {
            name: name.to_owned(),
            partitions: partitions.unwrap_or(0),
            replication_factor: 0,
            configs: planned
                .get(name)
                .map(|t| t.config.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
        };
        let logged = topology.logged_stores();
        let subtopologies = subs
            .iter()
            .map(|sub| {
                let (repartition, external): (Vec<&String>, Vec<&String>) =
                    sub.source_topics.iter().partition(|t| written.contains(t));
                let repartition_source_topics: Vec<TopicInfo> = repartition
                    .iter()
                    .map(|t| {
                        let fixed = planned.get(t.as_str()).map(|p| p.partitions);
                        info(
                            t,
                            fixed.or_else(|| topology.repartition_partitions().get(*t).copied()),
                        )
                    })
                    .collect();
                let mut copartition_groups = Vec::new();
                if external.len() + repartition.len() > 1 {
                    copartition_groups.push(CopartitionGroup {
                        source_topics: (0..external.len() as i16).collect(),
                        source_topic_regex: Vec::new(),
                        repartition_source_topics: (0..repartition.len() as i16).collect(),
                    });
                }
                GroupSubtopology {
                    id: sub.id.to_string(),
                    source_topics: external.into_iter().cloned().collect(),
                    source_topic_regex: Vec::new(),
                    state_changelog_topics: logged
                        .iter()
                        .filter(|(s, _)| *s == sub.id)
                        .map(|(_, store)| info(&changelog_topic(app_id, store), None))
                        .collect(),
                    repartition_sink_topics: sub
                        .sink_topics
                        .iter()
                        .filter(|t| read.contains(t))
                        .cloned()
                        .collect(),
                    repartition_source_topics,
                    copartition_groups,
                }
            })
            .collect();
        GroupTopology {
            epoch: 0,
            subtopologies,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stores;
    use crate::runtime::tasks::standby::tests::Hold;
    use crate::serdes::{StringSerde, U64Serde};

    fn info(name: &str, partitions: i32, configs: &[(&str, &str)]) -> TopicInfo {
        TopicInfo {
            name: name.into(),
            partitions,
            replication_factor: 0,
            configs: configs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
        }
    }

    #[test]
    fn sub_topologies_name_their_topics_as_the_runtime_creates_them() {
        let mut b = Topology::builder();
        b.internal_topic("rep")
            .add_source("src", ["in-a", "in-b"], StringSerde, StringSerde)
            .add_processor("count", Hold::default, ["src"])
            .add_state_store(Stores::persistent_kv("counts", StringSerde, U64Serde), ["count"])
            .add_sink("to-rep", "rep", StringSerde, U64Serde, ["count"])
            .add_source("from-rep", ["rep"], StringSerde, U64Serde)
            .add_sink("out", "out", StringSerde, U64Serde, ["from-rep"]);
        let topology = b.build().expect("valid").with_application_id("app");
        let plan = [
            InternalTopic {
                name: "app-rep".into(),
                partitions: 4,
                config: BTreeMap::from([("cleanup.policy".into(), "delete".into())]),
            },
            InternalTopic {
                name: "app-counts-changelog".into(),
                partitions: 4,
                config: BTreeMap::from([("cleanup.policy".into(), "compact".into())]),
            },
        ];
        let g = GroupTopology::of(&topology, "app", &plan);
        assert_eq!(
            g,
            GroupTopology {
                epoch: 0,
                subtopologies: vec![
                    GroupSubtopology {
                        id: "0".into(),
                        source_topics: vec!["in-a".into(), "in-b".into()],
                        state_changelog_topics: vec![info(
                            "app-counts-changelog",
                            0,
                            &[("cleanup.policy", "compact")]
                        )],
                        repartition_sink_topics: vec!["app-rep".into()],
                        copartition_groups: vec![CopartitionGroup {
                            source_topics: vec![0, 1],
                            ..Default::default()
                        }],
                        ..Default::default()
                    },
                    GroupSubtopology {
                        id: "1".into(),
                        repartition_source_topics: vec![info("app-rep", 4, &[("cleanup.policy", "delete")])],
                        ..Default::default()
                    },
                ],
            }
        );
    }
}
