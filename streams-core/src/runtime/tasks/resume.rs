//! Whether a suspended task may resume when its partitions come back.
//!
//! A revocation suspends a thread's tasks (`TaskManager::revoke`): it commits them and
//! keeps their stores open, so that a task assigned straight back (an eager rebalance
//! revokes everything and hands most of it back) resumes where it was instead of being
//! rebuilt. That is only right if no other member processed the task in between. Within one
//! rebalance none can; but a thread that fell out of its group (its session timed out while
//! a broker was down) and joins again may be handed back a task that another member ran and
//! committed meanwhile, and a task this thread was still restoring may have computed its
//! end offset before that member's writes. Resumed, either one's state misses what the
//! other member did, while the task starts at the offsets that member committed: counts
//! written twice, the final one short (a leader-bounce run on three brokers showed it).
//!
//! So every assignment is checked against what this thread last knew of the partitions it
//! assigns: the offsets a suspended task committed (where it consumed a partition), else
//! the start offsets of the assignment it was created in. A task whose partition now starts
//! anywhere else, or whose expected offset is unknown, is marked *moved*; the next
//! creation closes it as taken by another member and builds it again from its changelog
//! (a restoration from its checkpoint, short when little changed).

use rdkafka::{Offset, TopicPartitionList};

use crate::engine::TaskId;
use crate::runtime::tasks::TaskManager;

impl TaskManager {
    /// Notes the start offsets of an assignment (`start`: explicit offsets per partition;
    /// `whole`: the whole assignment, as an eager rebalance gives it) and marks the
    /// suspended or restoring tasks it hands back that moved on elsewhere.
    pub(crate) fn note_start_offsets(&mut self, start: &TopicPartitionList, whole: bool) {
        let topology = self.settings.factory.topology().clone();
        let mut now = Vec::new();
        let mut times = Vec::new();
        for e in start.elements() {
            let Offset::Offset(offset) = e.offset() else {
                continue;
            };
            let (topic, partition) = (e.topic().to_owned(), e.partition());
            if let Some(sub) = topology.subtopology_of_topic(&topic) {
                let id = TaskId {
                    subtopology: sub.id,
                    partition,
                };
                if self.suspended.contains(&id) && self.expected_start(id, &topic, partition) != Some(offset)
                {
                    tracing::info!(task = %id, topic = %topic, partition, offset,
                        "a suspended task's input was committed elsewhere since: it is built again from its changelog");
                    self.moved.insert(id);
                }
            }
            let committed = crate::runtime::topics::offset_metadata::decode(e.metadata());
            if committed.time.is_some() || !committed.processors.is_empty() {
                times.push(((topic.clone(), partition), committed));
            }
            now.push(((topic, partition), offset));
        }
        if whole {
            self.assigned_at.clear();
            self.committed_meta.clear();
        }
        self.assigned_at.extend(now);
        self.committed_meta.extend(times);
    }

    /// Where this thread expects `topic`-`partition` of task `id` to start: the offset the
    /// task committed for it, else where the assignment that created the task started it.
    fn expected_start(&self, id: TaskId, topic: &str, partition: i32) -> Option<i64> {
        let committed = self.tasks.get(&id).and_then(|task| {
            task.committable_offsets()
                .into_iter()
                .find(|(t, p, _)| t == topic && *p == partition)
                .map(|(_, _, next)| next)
        });
        committed.or_else(|| self.assigned_at.get(&(topic.to_owned(), partition)).copied())
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::{Offset, TopicPartitionList};

    use crate::runtime::tasks::standby::tests::Setup;

    /// The task's input partition, starting at `offset`.
    fn at(s: &Setup, offset: i64) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&s.input, 0, Offset::Offset(offset))
            .unwrap();
        tpl
    }

    /// An eager assignment of the input partition at `offset`, turned into tasks; waits
    /// until none restores. Whether the task was restored.
    fn assign(s: &mut Setup, offset: i64) -> bool {
        let start = at(s, offset);
        s.tm.note_start_offsets(&start, true);
        s.tm.set_pending(&start);
        s.tm.create_pending(&s.consumer).unwrap();
        let rebuilt = s.tm.is_restoring();
        s.run_restored();
        rebuilt
    }

    /// A suspended task handed back at the offsets it committed resumes as it was; handed
    /// back after another member committed its input (and wrote its changelog), it is built
    /// again and restores what that member wrote.
    #[test]
    fn a_suspended_task_whose_input_moved_on_is_built_again_from_its_changelog() {
        let Some(mut s) = Setup::new("resume", true) else {
            return;
        };
        assert!(assign(&mut s, 0), "a new task restores");

        s.tm.revoke(&s.consumer, &s.assignment()).unwrap();
        assert!(!assign(&mut s, 0), "handed straight back: resumed");
        let restored = s.restored_records();

        s.tm.revoke(&s.consumer, &s.assignment()).unwrap();
        // Meanwhile another member runs the task: it writes 20 changelog records and
        // commits the input up to offset 7.
        s.write_transaction(20, true);
        assert!(assign(&mut s, 7), "moved on elsewhere: built again");
        assert_eq!(
            s.restored_records() - restored,
            20,
            "the other member's writes are restored"
        );
    }
}
