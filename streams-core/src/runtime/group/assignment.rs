//! Applying a streams group's task assignment (`group.protocol=streams`, KIP-1071) to a
//! stream thread.
//!
//! Under the streams protocol the broker assigns *tasks* to the thread's group member
//! (`streams_group/`), and nothing joins a consumer group: the thread's consumer is
//! assigned partitions by the runtime. Each new target assignment from the member is
//! applied between two loop iterations, through the same steps a cooperative rebalance
//! callback takes (see `thread/mod.rs`):
//! - partitions of active tasks no longer assigned are revoked first: the thread commits,
//!   suspends the tasks (they close once the rest of the assignment is known) and drops
//!   the records it polled from them;
//! - then the partitions of new active tasks are assigned at their committed offsets, and
//!   their tasks created (restored by the state updater);
//! - standby (and warm-up) tasks become the thread's standby tasks, kept warm by the state
//!   updater;
//! - only then does the member report the new set as owned, so the broker never hands a
//!   task to another member while this thread may still process or commit it.
//!
//! A member that lost its membership (fenced, or its session expired) loses its tasks: they
//! are closed without committing (under exactly-once the open transaction is aborted), as
//! their new owner may already be processing them; the member joins again and receives a
//! new assignment.

use std::collections::{BTreeMap, BTreeSet};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

use crate::model::TaskId;
use crate::model::error::StreamsError;
use crate::runtime::client::errors::kafka_err;
use crate::runtime::group::lend::lend;
use crate::runtime::group::rebalance::ThreadContext;
use crate::runtime::streams_group::{MemberEvent, StreamsMember, TaskAssignment};
use crate::runtime::tasks::TaskManager;
use crate::topology::Topology;

/// The input partitions of each task: the source topics of every non-global
/// sub-topology (all of a sub-topology's sources have the same partition count).
pub(crate) struct TaskPartitions {
    sources: BTreeMap<u32, Vec<String>>,
}

impl TaskPartitions {
    /// The source topics of `topology`'s sub-topologies.
    pub fn of(topology: &Topology) -> Self {
        Self {
            sources: topology
                .subtopologies()
                .iter()
                .filter(|s| !s.global)
                .map(|s| (s.id, s.source_topics.clone()))
                .collect(),
        }
    }

    /// The input partitions of `tasks`; a task of an unknown sub-topology has none.
    pub fn partitions<'a>(&self, tasks: impl IntoIterator<Item = &'a TaskId>) -> BTreeSet<(String, i32)> {
        let mut out = BTreeSet::new();
        for t in tasks {
            for topic in self.sources.get(&t.subtopology).into_iter().flatten() {
                out.insert((topic.clone(), t.partition));
            }
        }
        out
    }
}

fn list(partitions: &BTreeSet<(String, i32)>) -> Result<TopicPartitionList, StreamsError> {
    let mut tpl = TopicPartitionList::new();
    for (t, p) in partitions {
        tpl.add_partition_offset(t, *p, Offset::Invalid)
            .map_err(|e| kafka_err("partitions", e))?;
    }
    Ok(tpl)
}

/// Takes the member's pending event, if any, and applies it to the thread's consumer and
/// tasks `tm`. Returns whether there was one.
pub(crate) fn apply_pending(
    consumer: &BaseConsumer<ThreadContext>,
    tm: &mut TaskManager,
    member: &StreamsMember,
    tasks: &TaskPartitions,
) -> Result<bool, StreamsError> {
    let Some(event) = member.poll_event() else {
        return Ok(false);
    };
    match event {
        MemberEvent::Assigned(target) => assign(consumer, tm, member, tasks, &target)?,
        MemberEvent::Lost => {
            lose(consumer, tm)?;
            member.loss_handled();
        }
    }
    Ok(true)
}

fn assign(
    consumer: &BaseConsumer<ThreadContext>,
    tm: &mut TaskManager,
    member: &StreamsMember,
    tasks: &TaskPartitions,
    target: &TaskAssignment,
) -> Result<(), StreamsError> {
    let want = tasks.partitions(&target.active);
    let have: BTreeSet<(String, i32)> = consumer
        .assignment()
        .map_err(|e| kafka_err("assignment", e))?
        .elements()
        .iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
        .collect();
    let revoked: BTreeSet<_> = have.difference(&want).cloned().collect();
    callback(
        consumer,
        tm,
        RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS,
        &revoked,
    )?;
    let added: BTreeSet<_> = want.difference(&have).cloned().collect();
    callback(
        consumer,
        tm,
        RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS,
        &added,
    )?;
    let mut standbys: BTreeSet<TaskId> = target.standby.union(&target.warmup).copied().collect();
    standbys.retain(|t| !target.active.contains(t));
    tm.set_standbys(&standbys)?;
    tracing::info!(
        thread = %consumer.context().name,
        active = target.active.len(),
        standby = target.standby.len(),
        warmup = target.warmup.len(),
        revoked = revoked.len(),
        added = added.len(),
        "task assignment applied"
    );
    member.owned(target);
    Ok(())
}

/// Runs the consumer context's rebalance callback (`kind`: assign or revoke) for
/// `partitions`, unless there are none, with `tm` lent to it.
fn callback(
    consumer: &BaseConsumer<ThreadContext>,
    tm: &mut TaskManager,
    kind: RDKafkaRespErr,
    partitions: &BTreeSet<(String, i32)>,
) -> Result<(), StreamsError> {
    if !partitions.is_empty() {
        let mut tpl = list(partitions)?;
        lend(tm, || consumer.context().rebalance(consumer, kind, &mut tpl));
    }
    Ok(())
}

/// The membership was lost: every task is closed without committing and every partition
/// unassigned. Standby tasks stay: they only read committed changelog records.
fn lose<C: ConsumerContext>(consumer: &BaseConsumer<C>, tm: &mut TaskManager) -> Result<(), StreamsError> {
    tracing::warn!("group membership lost (fenced or session expired): closing the tasks without committing");
    tm.lose_all(consumer)?;
    consumer
        .unassign()
        .map_err(|e| kafka_err("unassigning after a lost membership", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_covers_its_partition_of_every_source_topic_of_its_subtopology() {
        let tasks = TaskPartitions {
            sources: BTreeMap::from([
                (0, vec!["a".to_owned(), "b".to_owned()]),
                (1, vec!["app-x-repartition".to_owned()]),
            ]),
        };
        let got = tasks.partitions(&[
            TaskId {
                subtopology: 0,
                partition: 2,
            },
            TaskId {
                subtopology: 1,
                partition: 0,
            },
            TaskId {
                subtopology: 7,
                partition: 0,
            },
        ]);
        let want: BTreeSet<(String, i32)> = [("a", 2), ("b", 2), ("app-x-repartition", 0)]
            .into_iter()
            .map(|(t, p)| (t.to_owned(), p))
            .collect();
        assert_eq!(got, want);
    }
}
