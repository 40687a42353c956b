//! The records a task has read but not yet processed, one queue per input partition, and
//! the choice of which comes next: the head with the smallest timestamp, so a task with
//! several input partitions processes its records in timestamp order.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::model::record::RawRecord;

/// One input partition's queue.
pub(crate) struct PartitionQueue {
    pub topic: Arc<str>,
    pub partition: i32,
    records: VecDeque<(i64, RawRecord)>,
}

/// The queues of a task.
#[derive(Default)]
pub(crate) struct RecordQueues {
    queues: Vec<PartitionQueue>,
}

impl RecordQueues {
    pub fn push(&mut self, timestamp: i64, record: RawRecord) {
        let idx = match self
            .queues
            .iter()
            .position(|q| q.partition == record.partition && *q.topic == *record.topic)
        {
            Some(i) => i,
            None => {
                self.queues.push(PartitionQueue {
                    topic: record.topic.clone(),
                    partition: record.partition,
                    records: VecDeque::new(),
                });
                self.queues.len() - 1
            }
        };
        self.queues[idx].records.push_back((timestamp, record));
    }

    /// The next record in timestamp order across partitions (ties: the partition added
    /// first), with its extracted timestamp.
    pub fn pop(&mut self) -> Option<(i64, RawRecord)> {
        let q = self
            .queues
            .iter_mut()
            .filter(|q| !q.records.is_empty())
            .min_by_key(|q| q.records.front().map_or(i64::MAX, |r| r.0))?;
        q.records.pop_front()
    }

    /// How many records are queued.
    pub fn len(&self) -> usize {
        self.queues.iter().map(|q| q.records.len()).sum()
    }

    /// Drops the queued records of every partition.
    pub fn clear(&mut self) {
        self.queues.clear();
    }
}
