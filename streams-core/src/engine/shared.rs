//! The state of a task that its nodes share while a record runs through them: the current
//! record's metadata and time, the clocks, the punctuation schedules, the stores and the
//! record collector.
//!
//! Everything here is single-threaded (`Cell`/`RefCell`): a task and its nodes live on one
//! stream thread. No lock is taken on the per-record path.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use streams_state::{KvStore, Serde, SharedKeyValueStore, StoreBuilder, StoreError};

use super::TaskId;
use super::collector::RecordCollector;
use crate::model::record::RecordMetadata;
use crate::processor::ThreadWaker;
use crate::processor::holds::HoldRegistry;
use crate::processor::node::ConnectedStore;
use crate::processor::{Cancellable, PunctuationType, ScheduleId, StoreRef};
use streams_state::SerdeError;

/// The record being processed: its topic shared with the task's source table, so setting
/// it per record allocates nothing.
#[derive(Clone)]
pub(crate) struct CurrentRecord {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
}

impl CurrentRecord {
    /// The public form.
    pub fn metadata(&self) -> RecordMetadata {
        RecordMetadata {
            topic: self.topic.to_string(),
            partition: self.partition,
            offset: self.offset,
        }
    }
}

/// One store of a task, as [`Task::stores`](super::Task::stores) lists them. Cloning it
/// shares the store.
#[derive(Clone)]
pub struct StoreSlot {
    pub(crate) name: String,
    pub(crate) store: SharedKeyValueStore,
    pub(crate) builder: Arc<dyn StoreBuilder>,
    pub(crate) global: bool,
}

/// One punctuation schedule.
pub(crate) struct Schedule {
    pub id: ScheduleId,
    pub node: usize,
    pub interval: i64,
    pub kind: PunctuationType,
    /// When it fires next; `None` for a stream-time schedule made before any record.
    pub next: Option<i64>,
    pub cancelled: Rc<Cell<bool>>,
}

pub(crate) struct TaskShared {
    pub app_id: Arc<str>,
    pub task_id: TaskId,
    pub record: RefCell<Option<CurrentRecord>>,
    /// Shared with the changelog sinks of the task's stores, which stamp records with it.
    pub current_timestamp: Arc<AtomicI64>,
    pub stream_time: Cell<i64>,
    pub wall_clock: Cell<i64>,
    pub schedules: RefCell<Vec<Schedule>>,
    next_schedule: Cell<u64>,
    pub commit_requested: Cell<bool>,
    pub stores: Vec<StoreSlot>,
    /// The global stores of the topology, owned by the global task of this thread (or
    /// driver) and readable from every processor; never flushed or closed by this task.
    pub globals: Vec<StoreSlot>,
    pub collector: RefCell<Box<dyn RecordCollector>>,
    /// The run-time names of the topology's internal topics, by relative name.
    pub internal_topics: Arc<BTreeMap<String, String>>,
    /// The innermost node whose call failed in the current call into the graph.
    pub failed_node: Cell<Option<usize>>,
    /// The fault recorded in the current call into the graph (see `failure.rs`).
    pub fault: RefCell<Option<Fault>>,
    /// Offsets held back from commits (records still worked on off the task thread).
    pub holds: Rc<RefCell<HoldRegistry>>,
    /// A node asked not to be fed records for now.
    pub backpressure: Cell<bool>,
    /// Wakes the thread running the task (see [`ThreadWaker`]).
    pub waker: ThreadWaker,
    /// Values the task's processors share, by name (see
    /// [`ProcessorContext::task_shared`](crate::ProcessorContext::task_shared)).
    pub values: RefCell<BTreeMap<String, Rc<dyn std::any::Any>>>,
    /// The processors' metadata, committed with the task's input offsets (see
    /// [`ProcessorContext::processor_metadata`](crate::ProcessorContext::processor_metadata)).
    pub processor_metadata: RefCell<BTreeMap<String, i64>>,
    /// The task runs under exactly-once.
    pub exactly_once: Cell<bool>,
    /// The production handler says `log_and_continue`: a sink drops an output record the
    /// producer refuses for good, and the input's processing goes on.
    pub drop_refused_outputs: Cell<bool>,
    /// Records its nodes dropped (output records the producer refused, input records a
    /// node skipped), counted into the task's dropped records.
    pub dropped: Cell<u64>,
}

impl TaskShared {
    pub fn new(
        app_id: Arc<str>,
        task_id: TaskId,
        stores: Vec<StoreSlot>,
        collector: Box<dyn RecordCollector>,
        wall_clock: i64,
        current_timestamp: Arc<AtomicI64>,
        internal_topics: Arc<BTreeMap<String, String>>,
    ) -> Self {
        Self {
            app_id,
            task_id,
            record: RefCell::new(None),
            current_timestamp,
            stream_time: Cell::new(i64::MIN),
            wall_clock: Cell::new(wall_clock),
            schedules: RefCell::new(Vec::new()),
            next_schedule: Cell::new(0),
            commit_requested: Cell::new(false),
            stores,
            globals: Vec::new(),
            collector: RefCell::new(collector),
            internal_topics,
            failed_node: Cell::new(None),
            fault: RefCell::new(None),
            holds: Rc::default(),
            backpressure: Cell::new(false),
            waker: ThreadWaker::default(),
            values: RefCell::new(BTreeMap::new()),
            processor_metadata: RefCell::new(BTreeMap::new()),
            exactly_once: Cell::new(false),
            drop_refused_outputs: Cell::new(false),
            dropped: Cell::new(0),
        }
    }

    /// The timestamp of the record being processed (or of the punctuation running).
    pub fn timestamp(&self) -> i64 {
        self.current_timestamp.load(Ordering::Relaxed)
    }

    pub fn set_timestamp(&self, ts: i64) {
        self.current_timestamp.store(ts, Ordering::Relaxed);
    }

    pub fn schedule(&self, node: usize, interval: i64, kind: PunctuationType) -> Cancellable {
        let id = ScheduleId(self.next_schedule.get());
        self.next_schedule.set(id.0 + 1);
        let next = match kind {
            PunctuationType::WallClock => Some(self.wall_clock.get().saturating_add(interval)),
            PunctuationType::StreamTime => {
                let st = self.stream_time.get();
                (st != i64::MIN).then(|| st.saturating_add(interval))
            }
        };
        let cancelled = Rc::new(Cell::new(false));
        self.schedules.borrow_mut().push(Schedule {
            id,
            node,
            interval,
            kind,
            next,
            cancelled: cancelled.clone(),
        });
        Cancellable::new(id, cancelled)
    }

    /// The schedules of `kind` due at `now`, advancing each to its next time (missed
    /// intervals are skipped, not replayed). Cancelled schedules are dropped.
    pub fn due(&self, kind: PunctuationType, now: i64) -> Vec<(usize, ScheduleId)> {
        let mut schedules = self.schedules.borrow_mut();
        schedules.retain(|s| !s.cancelled.get());
        schedules
            .iter_mut()
            .filter_map(|s| (s.kind == kind && s.fire(now)).then_some((s.node, s.id)))
            .collect()
    }
}

impl Schedule {
    /// Whether it is due at `now`; if so it moves to its next time (missed intervals are
    /// skipped, not replayed). A wall clock set back (its next time more than one interval
    /// ahead of `now`) moves it to one interval from `now`: a clock jump delays a
    /// punctuation by at most one interval, instead of stopping it until the clock has
    /// caught up again.
    fn fire(&mut self, now: i64) -> bool {
        match self.next {
            None => {
                self.next = Some(now.saturating_add(self.interval));
                false
            }
            Some(next) if now >= next => {
                let mut following = next.saturating_add(self.interval);
                if following <= now {
                    following = now.saturating_add(self.interval);
                }
                self.next = Some(following);
                true
            }
            Some(next)
                if self.kind == PunctuationType::WallClock && next.saturating_sub(now) > self.interval =>
            {
                self.next = Some(now.saturating_add(self.interval));
                false
            }
            Some(_) => false,
        }
    }
}

impl StoreSlot {
    /// The store's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The typed handle of this store through `store`'s serdes; `None` when `store` names
    /// another store.
    pub fn open<KS, VS>(&self, store: &StoreRef<KS, VS>) -> Option<KvStore<KS, VS>>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        (store.name() == self.name).then(|| store.open(self.store.clone()))
    }

    /// This store as a node reaches it.
    pub(crate) fn connected(&self) -> ConnectedStore<'_> {
        ConnectedStore {
            name: &self.name,
            store: &self.store,
            builder: &self.builder,
        }
    }

    /// The typed handle of this store, if `KS`/`VS` are the serdes it was built with.
    pub fn typed<KS, VS>(&self) -> Result<KvStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        self.connected().typed()
    }

    /// The typed handle of this store as its builder makes it (e.g. a
    /// [`WindowStore`](streams_state::WindowStore)), if it is an `H`.
    pub fn handle<H: 'static>(&self) -> Result<H, StoreError> {
        self.connected().handle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(kind: PunctuationType, interval: i64, next: i64) -> Schedule {
        Schedule {
            id: ScheduleId(0),
            node: 0,
            interval,
            kind,
            next: Some(next),
            cancelled: Rc::new(Cell::new(false)),
        }
    }

    #[test]
    fn a_wall_clock_set_back_delays_a_punctuation_by_at_most_one_interval() {
        let mut s = schedule(PunctuationType::WallClock, 1_000, 10_000);
        assert!(s.fire(10_000));
        assert_eq!(s.next, Some(11_000));
        // The clock goes back an hour: the schedule follows it rather than waiting an hour.
        let back = 10_500 - 3_600_000;
        assert!(!s.fire(back));
        assert_eq!(s.next, Some(back + 1_000));
        assert!(s.fire(back + 1_000));
        // A small step back within the interval changes nothing.
        assert!(!s.fire(back + 1_900));
        assert_eq!(s.next, Some(back + 2_000));
    }

    #[test]
    fn a_wall_clock_set_forward_fires_once_and_skips_the_missed_intervals() {
        let mut s = schedule(PunctuationType::WallClock, 1_000, 11_000);
        assert!(s.fire(3_611_000));
        assert_eq!(s.next, Some(3_612_000));
        assert!(!s.fire(3_611_500));
    }

    #[test]
    fn stream_time_schedules_wait_for_stream_time() {
        // Stream time does not go back; a schedule far ahead is left where it is.
        let mut s = schedule(PunctuationType::StreamTime, 1_000, 100_000);
        assert!(!s.fire(5_000));
        assert_eq!(s.next, Some(100_000));
        assert!(s.fire(100_000));
    }
}

/// A fault recorded while a record ran, with the index of the node it happened in.
#[derive(Debug)]
pub(crate) enum Fault {
    /// A source could not deserialize the record.
    Deserialize {
        node: usize,
        what: &'static str,
        source: SerdeError,
    },
    /// A sink could not serialize or send a record.
    Produce {
        node: usize,
        topic: String,
        message: String,
        retriable: bool,
    },
}
