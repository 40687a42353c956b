//! The engine, for hosts (the runtime and streams-test-utils' driver); applications do not
//! need it.
//!
//! A task is one (sub-topology, partition): it owns the node instances, stores and record
//! queues of its sub-topology for that partition and runs records through them. Every host
//! runs the same task code; hosts differ only in where records come from and where produced
//! records go.
//!
//! A host builds tasks with a [`TaskFactory`]: first a task's stores ([`TaskFactory::stores`],
//! each logged store writing its changelog to a sink the host makes, see [`SinkMaker`]), then
//! the [`Task`] around them ([`TaskFactory::task`]) with the host's [`RecordCollector`] and,
//! optionally, a [`TaskObserver`] (the Prometheus metrics give one:
//! [`ThreadMetrics::task_observer`](crate::metrics::ThreadMetrics::task_observer)). It then
//! feeds the task records ([`Task::add_records`], [`Task::process_one`]), punctuates
//! ([`Task::punctuate`]), commits ([`Task::flush`]) and closes it ([`Task::close`]); a task's
//! stores are read through [`StoreSlot`]s ([`Task::stores`]).

mod collector;
mod factory;
mod failure;
mod graph;
mod observer;
mod queue;
mod shared;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use streams_state::StoreError;

pub use self::collector::{RecordCollector, SendError};
pub use self::factory::{SinkMaker, TaskFactory, TaskStore};
use self::graph::Graph;
use self::observer::NodeMeta;
pub use self::observer::{DLQ_REASONS, NodeCounts, NodeTimer, TaskCounters, TaskObserver, TaskReport};
pub(crate) use self::queue::{Fetched, IdlePolicy};
use self::queue::{NEVER_IDLE, Pop, RecordQueues};
pub use self::shared::StoreSlot;
use self::shared::{CurrentRecord, TaskShared};
pub(crate) use crate::model::TaskId;
use crate::model::error::StreamsError;
use crate::model::handlers::ErrorPolicy;
use crate::model::record::RawRecord;
use crate::processor::PunctuationType;
use crate::topology::Topology;
use crate::topology::spec::{NodeKind, TimestampExtractor};

/// Where an input partition's queued records end (see [`Task::add_records`]).
struct Queued {
    topic: Arc<str>,
    partition: i32,
    /// The offset after the last record queued.
    next: i64,
    /// The last record offered was a re-delivery.
    in_redelivery: bool,
}

/// The queued positions of a task's input partitions: a few entries, scanned.
#[derive(Default)]
struct QueuedPositions(Vec<Queued>);

impl QueuedPositions {
    /// Whether `r` is at an offset task `task` has already queued (and so processed, or
    /// will): a re-delivery, to be dropped. Offsets of one partition only grow, and a task's
    /// state holds every record it queued, so a record behind that position can only be one
    /// seen before: the consumer went back (a partition restarted from an older position
    /// while the task kept running). Processing it again would apply it twice to the state
    /// and produce its output twice, even under exactly-once. The first record of each run
    /// of re-deliveries is logged.
    fn redelivered(&mut self, task: TaskId, r: &RawRecord) -> bool {
        let Some(q) = self
            .0
            .iter_mut()
            .find(|q| q.partition == r.partition && *q.topic == *r.topic)
        else {
            self.0.push(Queued {
                topic: r.topic.clone(),
                partition: r.partition,
                next: r.offset + 1,
                in_redelivery: false,
            });
            return false;
        };
        if r.offset >= q.next {
            q.next = r.offset + 1;
            q.in_redelivery = false;
            return false;
        }
        if !q.in_redelivery {
            q.in_redelivery = true;
            tracing::warn!(
                task = %task,
                topic = %r.topic,
                partition = r.partition,
                offset = r.offset,
                queued_up_to = q.next,
                "record delivered again: dropped (already processed or queued)"
            );
        }
        true
    }

    /// Forgets `topic`-`partition`: its next record starts a new sequence.
    fn forget(&mut self, topic: &str, partition: i32) {
        self.0
            .retain(|q| !(q.partition == partition && *q.topic == *topic));
    }
}

struct SourceEntry {
    node: usize,
    extractor: Option<TimestampExtractor>,
}

/// A running task: one (sub-topology, partition). Built by a [`TaskFactory`]; lives on one
/// thread (it is not `Send`).
pub struct Task {
    shared: TaskShared,
    graph: Graph,
    /// Source node of each input topic: a handful at most, so a scan beats hashing the
    /// topic name of every record.
    sources: Vec<(Arc<str>, SourceEntry)>,
    queues: RecordQueues,
    /// Next offset to commit per input partition (topic, partition, offset); a few
    /// entries, updated in place per record without allocating.
    consumed: Vec<(String, i32, i64)>,
    /// Per input partition, where its queued records end (see [`Task::add_records`]).
    queued: QueuedPositions,
    policy: ErrorPolicy,
    pub(crate) counters: TaskCounters,
    initialized: bool,
    observer: Option<Box<dyn TaskObserver>>,
}

impl Task {
    /// Creates the nodes of `subtopology` for `partition` around its `stores`. Processors
    /// are not initialized yet: call [`Task::initialize`]. Built by the [`TaskFactory`].
    // Only the factory calls this, which holds half of the parts.
    #[allow(clippy::too_many_arguments)]
    fn new(
        topology: &Topology,
        id: TaskId,
        app_id: Arc<str>,
        collector: Box<dyn RecordCollector>,
        mut built: Vec<TaskStore>,
        policy: ErrorPolicy,
        wall_clock: i64,
        timestamp: Arc<std::sync::atomic::AtomicI64>,
        mut observer: Option<Box<dyn TaskObserver>>,
    ) -> Result<Self, StreamsError> {
        let sub = topology
            .subtopology(id.subtopology)
            .ok_or_else(|| StreamsError::Usage(format!("no sub-topology {}", id.subtopology)))?;
        let index: HashMap<usize, usize> = sub
            .nodes
            .iter()
            .enumerate()
            .map(|(local, &g)| (g, local))
            .collect();
        let mut nodes = Vec::with_capacity(sub.nodes.len());
        let mut meta = Vec::with_capacity(sub.nodes.len());
        let mut sources: Vec<(Arc<str>, SourceEntry)> = Vec::new();
        for (local, &g) in sub.nodes.iter().enumerate() {
            let def = &topology.nodes[g];
            nodes.push(RefCell::new((def.factory)()));
            meta.push(NodeMeta {
                name: def.name.clone(),
                children: topology
                    .children_of(g)
                    .iter()
                    .filter_map(|c| index.get(c).copied())
                    .collect(),
                stores: topology.stores_of(&def.name),
                counts: Default::default(),
                timer: observer.as_mut().and_then(|o| o.watch_node(&def.name)),
            });
            if let NodeKind::Source {
                topics, extractor, ..
            } = &def.kind
            {
                for t in topics {
                    sources.push((
                        Arc::from(t.as_str()),
                        SourceEntry {
                            node: local,
                            extractor: extractor.clone(),
                        },
                    ));
                }
            }
        }
        let mut stores = Vec::new();
        for &s in &sub.stores {
            let def = &topology.stores[s];
            let name = def.builder.name();
            let position = built
                .iter()
                .position(|s| s.name == name)
                .ok_or_else(|| StoreError::Closed {
                    store: name.to_owned(),
                })?;
            let mut store = built.swap_remove(position).store;
            if let Some(o) = observer.as_mut() {
                store = o.wrap_store(def.builder.name(), store);
            }
            stores.push(StoreSlot {
                name: def.builder.name().to_owned(),
                store: Rc::new(RefCell::new(store)),
                builder: def.builder.clone(),
                global: def.global,
            });
        }
        let shared = TaskShared::new(
            app_id,
            id,
            stores,
            collector,
            wall_clock,
            timestamp,
            topology.renamed_topics().clone(),
        );
        shared
            .drop_refused_outputs
            .set(policy.production == crate::model::handlers::ErrorHandling::LogAndContinue);
        Ok(Self {
            shared,
            graph: Graph { nodes, meta },
            sources,
            queues: RecordQueues::default(),
            consumed: Vec::new(),
            queued: QueuedPositions::default(),
            policy,
            counters: TaskCounters::default(),
            initialized: false,
            observer,
        })
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.shared.task_id
    }

    /// The task's counters, totals since it was built.
    pub fn counters(&self) -> TaskCounters {
        self.counters
    }

    /// The task's own stores (not the global stores it reads).
    pub fn stores(&self) -> &[StoreSlot] {
        &self.shared.stores
    }

    /// Lets the task's processors read `globals`, the global stores (owned by the global
    /// task). Call before [`Task::initialize`].
    pub fn with_globals(&mut self, globals: &[StoreSlot]) {
        self.shared.globals = globals.to_vec();
    }

    /// Initializes every node (processors look up stores and schedule punctuators here).
    pub fn initialize(&mut self) -> Result<(), StreamsError> {
        if self.initialized {
            return Ok(());
        }
        for i in 0..self.graph.nodes.len() {
            self.shared.reset_failure();
            let result = self.graph.run(&self.shared, i, |n, cx| n.init(cx));
            self.call_error(result)?;
        }
        self.initialized = true;
        Ok(())
    }

    /// Queues records read from an input partition. Records with a negative timestamp are
    /// dropped (and counted), as Kafka Streams does.
    pub fn add_records(&mut self, records: impl IntoIterator<Item = RawRecord>) {
        for r in records {
            // The source (borrowed from `sources`) stays in hand while the positions
            // update: one topic lookup per record.
            let Some((_, source)) = self.sources.iter().find(|(t, _)| **t == *r.topic) else {
                continue;
            };
            if self.queued.redelivered(self.shared.task_id, &r) {
                self.counters.redelivered += 1;
                continue;
            }
            let partition_time = self.shared.stream_time.get();
            let ts = source
                .extractor
                .as_ref()
                .map_or(r.timestamp, |f| f(&r, partition_time));
            if ts < 0 {
                tracing::warn!(task = %self.id(), topic = %r.topic, offset = r.offset, "dropping record with negative timestamp {ts}");
                self.counters.dropped += 1;
                let (partition, next) = (r.partition, r.offset + 1);
                self.mark_consumed(&r.topic, partition, next);
                continue;
            }
            self.queues.push(ts, r);
        }
    }

    /// Forgets the queued position of `topic`-`partition`: the host moved the partition
    /// on purpose (an offset reset), and its next records start a new sequence.
    pub fn forget_position(&mut self, topic: &str, partition: i32) {
        self.queued.forget(topic, partition);
    }

    /// Registers `topic`-`partition` (starting at `start`, when known) as an input of the
    /// task: from now on the task waits while it has no records queued, as
    /// [`Task::process_next`] describes.
    pub(crate) fn expect_partition(&mut self, topic: Arc<str>, partition: i32, start: Option<i64>) {
        self.queues.expect(topic, partition, start);
    }

    /// Processes the next queued record, if any; then runs the stream-time punctuators that
    /// became due. Returns whether a record was processed.
    pub fn process_one(&mut self) -> Result<bool, StreamsError> {
        self.process_next(&NEVER_IDLE, &mut |_, _, _| Fetched::CaughtUp)
    }

    /// As [`Task::process_one`], except that an empty input partition registered with
    /// [`Task::expect_partition`] holds the task back under `policy`; `fetched` says what
    /// the host knows of such a partition (see `queue.rs`).
    pub(crate) fn process_next(
        &mut self,
        policy: &IdlePolicy,
        fetched: &mut dyn FnMut(&str, i32, Option<i64>) -> Fetched,
    ) -> Result<bool, StreamsError> {
        if self.shared.backpressure.get() {
            return Ok(false);
        }
        let Pop::Record(ts, raw) = self.queues.pop_ready(policy, fetched) else {
            return Ok(false);
        };
        let Some((topic, node)) = self
            .sources
            .iter()
            .find(|(t, _)| **t == *raw.topic)
            .map(|(t, s)| (t.clone(), s.node))
        else {
            return Ok(false);
        };
        if ts > self.shared.stream_time.get() {
            self.shared.stream_time.set(ts);
        }
        self.shared.set_timestamp(ts);
        *self.shared.record.borrow_mut() = Some(CurrentRecord {
            topic,
            partition: raw.partition,
            offset: raw.offset,
        });
        let offset = raw.offset;
        // Until it is processed, the next offset of its partition is this record's.
        let consumed = self.mark_consumed(&raw.topic, raw.partition, offset);
        let mut slot = Some(raw);
        self.shared.reset_failure();
        let result = self.graph.process(&self.shared, node, &mut slot);
        self.counters.dropped += self.shared.dropped.replace(0);
        match result {
            Ok(()) if self.shared.fault.borrow().is_none() => self.counters.processed += 1,
            result => {
                let coordinates = slot
                    .as_ref()
                    .map(|r| (r.topic.to_string(), r.partition, r.offset));
                if let Some(failure) = self.failure(result.err(), coordinates) {
                    self.handle_failure(failure, slot)?;
                }
            }
        }
        self.consumed[consumed].2 = offset + 1;
        self.punctuate(PunctuationType::StreamTime, self.shared.stream_time.get())?;
        Ok(true)
    }

    /// Runs the punctuators of `kind` due at `now`. Returns how many ran.
    pub fn punctuate(&mut self, kind: PunctuationType, now: i64) -> Result<usize, StreamsError> {
        if kind == PunctuationType::WallClock {
            self.shared.wall_clock.set(now);
        }
        if now == i64::MIN {
            return Ok(0);
        }
        let due = self.shared.due(kind, now);
        if due.is_empty() {
            return Ok(0);
        }
        let saved = self.shared.record.borrow_mut().take();
        self.shared.set_timestamp(now);
        for &(node, id) in &due {
            self.shared.reset_failure();
            let result = self
                .graph
                .run(&self.shared, node, |n, cx| n.punctuate(cx, id, now));
            self.call_error(result)?;
            self.counters.punctuations += 1;
        }
        self.counters.dropped += self.shared.dropped.replace(0);
        *self.shared.record.borrow_mut() = saved;
        Ok(due.len())
    }

    /// Whether a processor asked for a commit since the last call (and clears the request).
    pub(crate) fn take_commit_request(&mut self) -> bool {
        self.shared.commit_requested.replace(false)
    }

    /// Lets every node forward what it holds back ([`Processor::flush`], in topological
    /// order, upstream first), without flushing the stores: [`Task::flush`] does both.
    ///
    /// [`Processor::flush`]: crate::processor::Processor::flush
    pub fn forward_held(&mut self) -> Result<(), StreamsError> {
        if !self.initialized {
            return Ok(());
        }
        let saved = self.shared.record.borrow_mut().take();
        let mut result = Ok(());
        for i in 0..self.graph.nodes.len() {
            self.shared.reset_failure();
            let run = self.graph.run(&self.shared, i, |n, cx| n.flush(cx));
            result = self.call_error(run);
            if result.is_err() {
                break;
            }
        }
        self.counters.dropped += self.shared.dropped.replace(0);
        *self.shared.record.borrow_mut() = saved;
        result
    }

    /// Lets every node forward what it holds back ([`Processor::flush`], in topological
    /// order), then flushes every store (caches down, then the store and its changelog
    /// sink).
    ///
    /// [`Processor::flush`]: crate::processor::Processor::flush
    pub fn flush(&mut self) -> Result<(), StreamsError> {
        self.forward_held()?;
        for slot in &self.shared.stores {
            let mut store = slot.store.try_borrow_mut().map_err(|_| StoreError::Borrowed {
                store: slot.name.clone(),
                message: "store still borrowed at commit".into(),
            })?;
            store.flush()?;
        }
        Ok(())
    }

    /// The task's stream time: the largest timestamp of the records it processed, or the
    /// one it resumed from; `None` before either.
    pub(crate) fn stream_time(&self) -> Option<i64> {
        let t = self.shared.stream_time.get();
        (t != i64::MIN).then_some(t)
    }

    /// Starts the stream time at `time` (committed with the task's input offsets), unless
    /// it is past it already.
    pub(crate) fn resume_stream_time(&self, time: i64) {
        if time > self.shared.stream_time.get() {
            self.shared.stream_time.set(time);
        }
    }

    /// The processors' metadata, committed with each input offset.
    pub fn processor_metadata(&self) -> BTreeMap<String, i64> {
        self.shared.processor_metadata.borrow().clone()
    }

    /// Starts with the processor metadata committed for the task's partitions, keeping
    /// the largest value of each key (as Kafka Streams merges it).
    pub fn resume_processor_metadata(&self, committed: &BTreeMap<String, i64>) {
        let mut metadata = self.shared.processor_metadata.borrow_mut();
        for (key, &value) in committed {
            let entry = metadata.entry(key.clone()).or_insert(value);
            *entry = (*entry).max(value);
        }
    }

    /// The offsets to commit: for each input partition, the offset after the last record
    /// processed (or dropped), or the offset of the oldest record still held (worked on off
    /// the task thread) when that is smaller.
    pub(crate) fn committable_offsets(&self) -> Vec<(String, i32, i64)> {
        let holds = self.shared.holds.borrow();
        let mut v: Vec<_> = self
            .consumed
            .iter()
            .map(|(t, p, next)| {
                let next = holds.min_held(t, *p).map_or(*next, |held| held.min(*next));
                (t.clone(), *p, next)
            })
            .collect();
        v.sort();
        v
    }

    /// Whether a node asked not to be fed records for now (see
    /// [`ProcessorContext::set_backpressure`](crate::ProcessorContext::set_backpressure)).
    pub fn is_backpressured(&self) -> bool {
        self.shared.backpressure.get()
    }

    /// How many records wait in the task's queues.
    pub fn queued(&self) -> usize {
        self.queues.len()
    }

    /// How many records are held back from commits (worked on off the task thread).
    pub fn held(&self) -> usize {
        self.shared.holds.borrow().len()
    }

    /// Records `next` as the offset to commit for `topic`-`partition`; returns the
    /// entry's index.
    fn mark_consumed(&mut self, topic: &str, partition: i32, next: i64) -> usize {
        match self
            .consumed
            .iter()
            .position(|(t, p, _)| *p == partition && t == topic)
        {
            Some(i) => {
                self.consumed[i].2 = next;
                i
            }
            None => {
                self.consumed.push((topic.to_owned(), partition, next));
                self.consumed.len() - 1
            }
        }
    }

    /// Hands the task's counts to its observer, if it has one. Returns the counters added
    /// since the last call (zero without an observer).
    pub fn publish(&mut self) -> TaskCounters {
        let Some(observer) = self.observer.as_mut() else {
            return TaskCounters::default();
        };
        let mut cached_bytes = 0u64;
        for slot in &self.shared.stores {
            if let Ok(store) = slot.store.try_borrow() {
                cached_bytes += store.stats().cached_bytes.unwrap_or(0);
            }
        }
        observer.publish(TaskReport {
            counters: self.counters,
            cached_bytes,
            nodes: &self.graph.meta,
        })
    }

    /// Tells the task's observer the lag of input partition `topic`-`partition`.
    pub(crate) fn observe_lag(&mut self, topic: &str, partition: i32, lag: i64) {
        if let Some(o) = self.observer.as_mut() {
            o.lag(topic, partition, lag);
        }
    }

    /// Closes processors and stores. A clean close flushes the stores first; a dirty close
    /// (after a failure or a fenced transaction) drops queued records and closes without
    /// flushing.
    pub fn close(&mut self, clean: bool) -> Result<(), StreamsError> {
        let mut first_error = None;
        if clean && let Err(e) = self.flush() {
            first_error.get_or_insert(e);
        }
        for i in 0..self.graph.nodes.len() {
            self.shared.reset_failure();
            let result = self.graph.run(&self.shared, i, |n, _| n.close());
            if let Err(e) = self.call_error(result) {
                first_error.get_or_insert(e);
            }
        }
        self.queues.clear();
        for slot in &self.shared.stores {
            if let Ok(mut s) = slot.store.try_borrow_mut()
                && let Err(e) = s.close()
            {
                first_error.get_or_insert(e.into());
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
