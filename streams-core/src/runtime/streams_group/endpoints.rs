//! The group's endpoint map (`PartitionsByUserEndpoint` of the heartbeat response): which
//! instance, named by its `application.server`, owns which active and standby tasks, as
//! the group coordinator sees it. Interactive queries find remote stores with it when the
//! application runs under `group.protocol=streams` (`query/discovery.rs`).
//!
//! Invariants:
//! - the coordinator sends the map with an epoch, and again only when its epoch differs from
//!   the one the member sent back; every member of the instance (one per stream thread)
//!   offers what it receives, and the latest offer replaces the map whole. Epochs are not
//!   compared across offers: a coordinator that took over the group may number them anew;
//! - the map names partitions, not tasks: a task `(sub-topology, partition)` is listed once
//!   for each source and repartition source topic of its sub-topology. A partition of a
//!   topic no sub-topology reads (another topology's, during an upgrade) is left out;
//! - an instance with several stream threads is several members with one endpoint: their
//!   tasks are merged. A standby of a task the same endpoint runs as active is not listed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::model::TaskId;
use crate::runtime::streams_group::codec::EndpointPartitions;
use crate::runtime::streams_group::topology::GroupTopology;

/// The tasks one endpoint hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EndpointTasks {
    /// The tasks its members run as active.
    pub active: BTreeSet<TaskId>,
    /// The standby tasks its members keep (of tasks it does not run).
    pub standby: BTreeSet<TaskId>,
}

/// The last endpoint map any member of this instance received; empty until one arrives.
#[derive(Debug, Default)]
pub(crate) struct GroupEndpoints {
    hosts: Mutex<Option<BTreeMap<String, EndpointTasks>>>,
}

impl GroupEndpoints {
    /// Replaces the map with `map`, read against `topology` (the topology the members sent).
    pub(crate) fn offer(&self, map: &[EndpointPartitions], topology: &GroupTopology) {
        let hosts = read_map(map, topology);
        if let Ok(mut h) = self.hosts.lock() {
            *h = Some(hosts);
        }
    }

    /// The map by endpoint (`host:port`), or `None` before the first one arrived.
    pub(crate) fn hosts(&self) -> Option<BTreeMap<String, EndpointTasks>> {
        self.hosts.lock().ok().and_then(|h| h.clone())
    }
}

/// The tasks of each endpoint in `map`.
fn read_map(map: &[EndpointPartitions], topology: &GroupTopology) -> BTreeMap<String, EndpointTasks> {
    let mut reader: BTreeMap<&str, u32> = BTreeMap::new();
    for s in &topology.subtopologies {
        let Ok(id) = s.id.parse::<u32>() else { continue };
        let repartition = s.repartition_source_topics.iter().map(|t| &t.name);
        for topic in s.source_topics.iter().chain(repartition) {
            reader.insert(topic, id);
        }
    }
    let tasks = |lists: &[(String, Vec<i32>)]| -> BTreeSet<TaskId> {
        lists
            .iter()
            .filter_map(|(topic, partitions)| Some((reader.get(topic.as_str())?, partitions)))
            .flat_map(|(&subtopology, partitions)| {
                partitions.iter().map(move |&partition| TaskId {
                    subtopology,
                    partition,
                })
            })
            .collect()
    };
    let mut hosts: BTreeMap<String, EndpointTasks> = BTreeMap::new();
    for e in map {
        let (host, port) = &e.endpoint;
        let h = hosts.entry(format!("{host}:{port}")).or_default();
        h.active.extend(tasks(&e.active));
        h.standby.extend(tasks(&e.standby));
    }
    for h in hosts.values_mut() {
        let active = &h.active;
        h.standby.retain(|t| !active.contains(t));
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::streams_group::topology::{GroupSubtopology, TopicInfo};

    fn sub(id: &str, sources: &[&str], repartition: &[&str]) -> GroupSubtopology {
        GroupSubtopology {
            id: id.into(),
            source_topics: sources.iter().map(|s| s.to_string()).collect(),
            repartition_source_topics: repartition
                .iter()
                .map(|s| TopicInfo {
                    name: s.to_string(),
                    ..TopicInfo::default()
                })
                .collect(),
            ..GroupSubtopology::default()
        }
    }

    fn t(subtopology: u32, partition: i32) -> TaskId {
        TaskId {
            subtopology,
            partition,
        }
    }

    fn tps(list: &[(&str, &[i32])]) -> Vec<(String, Vec<i32>)> {
        list.iter().map(|(t, p)| (t.to_string(), p.to_vec())).collect()
    }

    #[test]
    fn partitions_of_every_source_topic_read_as_one_task_each() {
        let topology = GroupTopology {
            epoch: 0,
            subtopologies: vec![sub("0", &["in-a", "in-b"], &[]), sub("1", &[], &["app-rep"])],
        };
        let map = [
            EndpointPartitions {
                endpoint: ("h1".into(), 8080),
                active: tps(&[("in-a", &[0, 2]), ("in-b", &[0, 2]), ("app-rep", &[1])]),
                standby: tps(&[("in-a", &[1]), ("in-b", &[1])]),
            },
            // A second member (stream thread) of the same instance, and a partition of a
            // topic the topology does not read.
            EndpointPartitions {
                endpoint: ("h1".into(), 8080),
                active: tps(&[("app-rep", &[0]), ("elsewhere", &[5])]),
                standby: tps(&[("app-rep", &[1])]),
            },
            EndpointPartitions {
                endpoint: ("h2".into(), 9090),
                active: tps(&[("in-a", &[1]), ("in-b", &[1])]),
                standby: Vec::new(),
            },
        ];
        let e = GroupEndpoints::default();
        assert_eq!(e.hosts(), None, "nothing before the first map");
        e.offer(&map, &topology);
        let hosts = e.hosts().unwrap();
        assert_eq!(hosts.keys().collect::<Vec<_>>(), ["h1:8080", "h2:9090"]);
        let h1 = &hosts["h1:8080"];
        assert_eq!(h1.active, BTreeSet::from([t(0, 0), t(0, 2), t(1, 0), t(1, 1)]));
        assert_eq!(
            h1.standby,
            BTreeSet::from([t(0, 1)]),
            "a standby of a task the endpoint runs is not one"
        );
        assert_eq!(hosts["h2:9090"].active, BTreeSet::from([t(0, 1)]));
        // The next map replaces this one whole.
        e.offer(&map[2..], &topology);
        assert_eq!(e.hosts().unwrap().keys().collect::<Vec<_>>(), ["h2:9090"]);
    }
}
