//! The records a task has read but not yet processed, one queue per input partition, and
//! the choice of which comes next: the head with the smallest timestamp, so a task with
//! several input partitions processes its records in timestamp order.
//!
//! Timestamp order across partitions holds only while every partition has records queued.
//! A task whose partitions the host registered ([`RecordQueues::expect`]) therefore waits
//! while one of them is empty, as Kafka Streams does (`max.task.idle.ms`, KIP-353 and
//! KIP-695), by what the host knows of that partition ([`Fetched`]):
//! - the broker holds records the consumer has not handed over yet, or nothing is known:
//!   the task waits for them, at most [`IdlePolicy::behind`];
//! - the consumer has everything the broker had: the task waits [`IdlePolicy::idle`] for
//!   producers to send more (zero by default: it goes on at once).
//!
//! Once a wait has run out the task goes on without that partition until it has records
//! again ("enforced processing"). A task whose partitions were never registered (the
//! topology test driver, a global task) never waits.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::model::record::RawRecord;

/// What the host knows of an input partition whose queue is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fetched {
    /// The consumer has fetched nothing of it yet, or its position is unknown.
    Unknown,
    /// The broker holds records the consumer has not handed over yet.
    Behind,
    /// The consumer has handed over everything the broker had at its last fetch.
    CaughtUp,
}

/// How long an empty input partition holds its task back (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdlePolicy {
    /// For a caught-up partition; `None` never waits at all, not even for records
    /// already on the broker (Kafka Streams' `max.task.idle.ms=-1`).
    pub idle: Option<Duration>,
    /// For a partition whose records are on the broker but not fetched yet, or whose
    /// position is unknown. Bounded, where Kafka Streams waits without end: a partition
    /// whose leader is gone, or whose end is an open transaction of a stopped producer
    /// (librdkafka reports the high watermark, not the last stable offset), must not stop
    /// the task's other partitions for good.
    pub behind: Duration,
}

/// Never waits: records go on in timestamp order among those queued.
pub(crate) const NEVER_IDLE: IdlePolicy = IdlePolicy {
    idle: None,
    behind: Duration::ZERO,
};

/// The outcome of [`RecordQueues::pop_ready`].
pub(crate) enum Pop {
    /// The next record in timestamp order, with its extracted timestamp.
    Record(i64, RawRecord),
    /// Nothing is queued.
    Empty,
    /// Records are queued, but an empty partition holds the task back.
    Waiting,
}

/// One input partition's queue.
pub(crate) struct PartitionQueue {
    pub topic: Arc<str>,
    pub partition: i32,
    records: VecDeque<(i64, RawRecord)>,
    /// Registered by the host: the task waits while this queue is empty.
    expected: bool,
    /// The offset after the last record queued (or where the partition starts).
    next: Option<i64>,
    /// Since when the queue has been empty with its partition behind (or unknown).
    behind_since: Option<Instant>,
    /// Since when the queue has been empty with its partition caught up.
    idle_since: Option<Instant>,
}

impl PartitionQueue {
    fn new(topic: Arc<str>, partition: i32) -> Self {
        Self {
            topic,
            partition,
            records: VecDeque::new(),
            expected: false,
            next: None,
            behind_since: None,
            idle_since: None,
        }
    }
}

/// The queues of a task.
#[derive(Default)]
pub(crate) struct RecordQueues {
    queues: Vec<PartitionQueue>,
    /// Whether some queue is registered (the fast path skips the waiting rules otherwise).
    synced: bool,
}

impl RecordQueues {
    fn index(&mut self, topic: &Arc<str>, partition: i32) -> usize {
        match self
            .queues
            .iter()
            .position(|q| q.partition == partition && *q.topic == **topic)
        {
            Some(i) => i,
            None => {
                self.queues.push(PartitionQueue::new(topic.clone(), partition));
                self.queues.len() - 1
            }
        }
    }

    /// Registers `topic`-`partition` as an input of the task, starting at `start` when
    /// known: from now on the task waits while its queue is empty (see the module doc).
    pub fn expect(&mut self, topic: Arc<str>, partition: i32, start: Option<i64>) {
        let i = self.index(&topic, partition);
        let q = &mut self.queues[i];
        q.expected = true;
        q.next = q.next.or(start);
        self.synced = true;
    }

    pub fn push(&mut self, timestamp: i64, record: RawRecord) {
        let idx = self.index(&record.topic, record.partition);
        let q = &mut self.queues[idx];
        q.next = Some(record.offset + 1);
        q.behind_since = None;
        q.idle_since = None;
        q.records.push_back((timestamp, record));
    }

    /// The next record in timestamp order across partitions (ties: the partition added
    /// first), with its extracted timestamp; no registered partition holds it back.
    pub fn pop(&mut self) -> Option<(i64, RawRecord)> {
        let q = self
            .queues
            .iter_mut()
            .filter(|q| !q.records.is_empty())
            .min_by_key(|q| q.records.front().map_or(i64::MAX, |r| r.0))?;
        q.records.pop_front()
    }

    /// As [`RecordQueues::pop`], unless an empty registered partition holds the task back
    /// under `policy`: `fetched(topic, partition, next offset)` says what the host knows of
    /// it (asked only for empty registered queues).
    pub fn pop_ready(
        &mut self,
        policy: &IdlePolicy,
        fetched: &mut dyn FnMut(&str, i32, Option<i64>) -> Fetched,
    ) -> Pop {
        if self.synced
            && policy.idle.is_some()
            && self.queues.iter().any(|q| !q.records.is_empty())
            && self.holds_back(policy, fetched)
        {
            return Pop::Waiting;
        }
        match self.pop() {
            Some((ts, r)) => Pop::Record(ts, r),
            None => Pop::Empty,
        }
    }

    /// Whether an empty registered queue holds the task back.
    fn holds_back(
        &mut self,
        policy: &IdlePolicy,
        fetched: &mut dyn FnMut(&str, i32, Option<i64>) -> Fetched,
    ) -> bool {
        let idle = policy.idle.unwrap_or_default();
        let mut now = None;
        for q in self
            .queues
            .iter_mut()
            .filter(|q| q.expected && q.records.is_empty())
        {
            let (since, limit) = match fetched(&q.topic, q.partition, q.next) {
                Fetched::CaughtUp => {
                    q.behind_since = None;
                    if idle.is_zero() {
                        continue;
                    }
                    (&mut q.idle_since, idle)
                }
                Fetched::Behind | Fetched::Unknown => {
                    q.idle_since = None;
                    (&mut q.behind_since, policy.behind)
                }
            };
            let now = *now.get_or_insert_with(Instant::now);
            let since = *since.get_or_insert(now);
            if now.duration_since(since) < limit {
                return true;
            }
        }
        false
    }

    /// How many records are queued.
    pub fn len(&self) -> usize {
        self.queues.iter().map(|q| q.records.len()).sum()
    }

    /// Drops the queued records of every partition (and their registrations).
    pub fn clear(&mut self) {
        self.queues.clear();
        self.synced = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(topic: &Arc<str>, partition: i32, offset: i64) -> RawRecord {
        RawRecord {
            topic: topic.clone(),
            partition,
            offset,
            key: None,
            value: None,
            timestamp: 0,
            headers: Default::default(),
        }
    }

    const POLICY: IdlePolicy = IdlePolicy {
        idle: Some(Duration::ZERO),
        behind: Duration::from_secs(3600),
    };

    fn queues() -> (RecordQueues, Arc<str>, Arc<str>) {
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let mut q = RecordQueues::default();
        q.expect(a.clone(), 0, Some(10));
        q.expect(b.clone(), 0, Some(20));
        (q, a, b)
    }

    fn offset(p: Pop) -> Option<i64> {
        match p {
            Pop::Record(_, r) => Some(r.offset),
            Pop::Empty | Pop::Waiting => None,
        }
    }

    #[test]
    fn an_empty_partition_behind_holds_the_task_back_until_its_records_come() {
        let (mut q, a, b) = queues();
        q.push(5, record(&a, 0, 10));
        let mut asked = Vec::new();
        let mut behind = |t: &str, p: i32, next: Option<i64>| {
            asked.push((t.to_owned(), p, next));
            Fetched::Behind
        };
        assert!(matches!(q.pop_ready(&POLICY, &mut behind), Pop::Waiting));
        assert_eq!(asked, [("b".to_owned(), 0, Some(20))]);
        q.push(3, record(&b, 0, 20));
        // Both queued: timestamp order, and nobody is asked.
        let mut never = |_: &str, _: i32, _: Option<i64>| -> Fetched { unreachable!() };
        assert_eq!(offset(q.pop_ready(&POLICY, &mut never)), Some(20));
        // `b` is empty again, at its next offset.
        let mut caught_up = |_: &str, _: i32, next: Option<i64>| {
            assert_eq!(next, Some(21));
            Fetched::CaughtUp
        };
        assert_eq!(offset(q.pop_ready(&POLICY, &mut caught_up)), Some(10));
        assert!(matches!(q.pop_ready(&POLICY, &mut caught_up), Pop::Empty));
    }

    #[test]
    fn an_unknown_partition_holds_the_task_back_for_the_bounded_wait_only() {
        let (mut q, a, _) = queues();
        q.push(5, record(&a, 0, 10));
        let bounded = IdlePolicy {
            idle: Some(Duration::ZERO),
            behind: Duration::from_millis(30),
        };
        let mut unknown = |_: &str, _: i32, _: Option<i64>| Fetched::Unknown;
        assert!(matches!(q.pop_ready(&bounded, &mut unknown), Pop::Waiting));
        let started = Instant::now();
        while matches!(q.pop_ready(&bounded, &mut unknown), Pop::Waiting) {
            std::thread::yield_now();
        }
        assert!(started.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn a_positive_idle_time_waits_for_a_caught_up_partition() {
        let (mut q, a, _) = queues();
        q.push(5, record(&a, 0, 10));
        let idle = IdlePolicy {
            idle: Some(Duration::from_secs(3600)),
            behind: Duration::ZERO,
        };
        let mut caught_up = |_: &str, _: i32, _: Option<i64>| Fetched::CaughtUp;
        assert!(matches!(q.pop_ready(&idle, &mut caught_up), Pop::Waiting));
        // A behind partition with a zero bound does not wait.
        let mut behind = |_: &str, _: i32, _: Option<i64>| Fetched::Behind;
        assert_eq!(offset(q.pop_ready(&idle, &mut behind)), Some(10));
    }

    #[test]
    fn no_idling_and_unregistered_queues_never_wait() {
        let (mut q, a, _) = queues();
        q.push(5, record(&a, 0, 10));
        let never_idle = IdlePolicy {
            idle: None,
            behind: Duration::from_secs(3600),
        };
        let mut behind = |_: &str, _: i32, _: Option<i64>| Fetched::Behind;
        assert_eq!(offset(q.pop_ready(&never_idle, &mut behind)), Some(10));
        let mut plain = RecordQueues::default();
        plain.push(1, record(&a, 0, 1));
        assert_eq!(offset(plain.pop_ready(&POLICY, &mut behind)), Some(1));
    }
}
