//! Pre-resolved metric handles of a thread, a task and a processor node.
//!
//! Label values are bound once, when the thread, task or node is created; recording is then
//! an atomic add on a handle, or (tasks and processor nodes) a plain add in the engine that
//! the task's [`TaskObserver`] publishes about once a second. Dropping a thread's or a task's
//! handles removes its series from the registry, so a closed task leaves no stale series
//! behind.

use std::collections::HashMap;

use prometheus::{Counter, Histogram, IntCounter, IntGauge};
use streams_state::KeyValueStore;

use super::Metrics;
use super::families::{counter, maybe};
use super::store::MeteredKeyValueStore;
use crate::engine::{DLQ_REASONS, NodeTimer, TaskCounters, TaskObserver, TaskReport};
use crate::model::TaskId;

/// A phase of a stream thread's commit, the `phase` label of
/// `streams_thread_commit_phase_seconds_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitPhase {
    /// Flushing the tasks' caches and stores (and their changelog records).
    FlushStores,
    /// Waiting until the producer has delivered everything sent so far.
    FlushProducer,
    /// At-least-once: committing the consumed offsets to the group.
    CommitOffsets,
    /// Exactly-once: adding the consumed offsets to the transaction.
    SendOffsets,
    /// Exactly-once: committing the transaction (EndTxn), after the producer's flush.
    CommitTransaction,
    /// Exactly-once: the stores applying the writes they held, with their checkpoints.
    CommitStores,
    /// Exactly-once: beginning the next transaction.
    BeginTransaction,
}

impl CommitPhase {
    /// Every phase, in order.
    pub(crate) const ALL: [CommitPhase; 7] = [
        Self::FlushStores,
        Self::FlushProducer,
        Self::CommitOffsets,
        Self::SendOffsets,
        Self::CommitTransaction,
        Self::CommitStores,
        Self::BeginTransaction,
    ];

    /// The label value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::FlushStores => "flush_stores",
            Self::FlushProducer => "flush_producer",
            Self::CommitOffsets => "commit_offsets",
            Self::SendOffsets => "send_offsets",
            Self::CommitTransaction => "commit_transaction",
            Self::CommitStores => "commit_stores",
            Self::BeginTransaction => "begin_transaction",
        }
    }
}

impl ThreadMetrics {
    /// Adds the time since `*since` to `phase` and restarts `*since`.
    pub(crate) fn lap(&self, phase: CommitPhase, since: &mut std::time::Instant) {
        let now = std::time::Instant::now();
        let took = now - *since;
        self.commit_phases[phase as usize].inc_by(took.as_secs_f64());
        if took >= SLOW_COMMIT_PHASE {
            // A broker paused or unreachable shows here first: the log says which step waited.
            tracing::warn!(
                phase = phase.label(),
                took_ms = took.as_millis() as u64,
                "slow commit step"
            );
        }
        *since = now;
    }
}

/// A commit step that takes this long is logged (a WARN naming the step).
const SLOW_COMMIT_PHASE: std::time::Duration = std::time::Duration::from_secs(5);

/// The metrics of one stream thread, made by [`Metrics::thread`].
///
/// A host outside this crate (streams-test-utils' driver) records through two calls: each
/// task it builds gets [`ThreadMetrics::task_observer`], and what a task publishes
/// ([`Task::publish`](crate::engine::Task::publish)) goes to [`ThreadMetrics::add`].
/// Dropping it removes the thread's series.
pub struct ThreadMetrics {
    metrics: Metrics,
    thread: String,
    pub(crate) process_records: IntCounter,
    pub(crate) poll_records: Histogram,
    pub(crate) poll_latency: Histogram,
    pub(crate) process_latency: Histogram,
    pub(crate) commit_latency: Histogram,
    pub(crate) punctuate_latency: Histogram,
    pub(crate) commits: IntCounter,
    pub(crate) tasks_created: IntCounter,
    pub(crate) tasks_closed: IntCounter,
    pub(crate) tasks_corrupted: IntCounter,
    pub(crate) producer_resets: IntCounter,
    pub(crate) standby_tasks: IntGauge,
    pub(crate) input_pauses: IntCounter,
    pub(crate) blocked_seconds: Counter,
    /// Indexed by [`CommitPhase`].
    pub(crate) commit_phases: [Counter; CommitPhase::ALL.len()],
    pub(crate) produce_queue_full_seconds: Counter,
    pub(crate) producer_errors: IntCounter,
    pub(crate) consumer_errors: IntCounter,
    pub(crate) offset_resets: IntCounter,
    pub(crate) revoked_partitions: IntCounter,
    pub(crate) skipped_offsets: IntCounter,
    pub(crate) dead_letters: [IntCounter; 3],
}

impl ThreadMetrics {
    pub(super) fn new(metrics: &Metrics, thread: &str) -> Self {
        let f = metrics.families();
        let l = [metrics.application_id(), thread];
        Self {
            metrics: metrics.clone(),
            thread: thread.to_owned(),
            process_records: counter(&f.thread_process_records, &l),
            poll_records: f.thread_poll_records.with_label_values(&l),
            poll_latency: f.thread_poll_latency.with_label_values(&l),
            process_latency: f.thread_process_latency.with_label_values(&l),
            commit_latency: f.thread_commit_latency.with_label_values(&l),
            punctuate_latency: f.thread_punctuate_latency.with_label_values(&l),
            commits: counter(&f.thread_commits, &l),
            tasks_created: counter(&f.thread_tasks_created, &l),
            tasks_closed: counter(&f.thread_tasks_closed, &l),
            tasks_corrupted: counter(&f.thread_tasks_corrupted, &l),
            producer_resets: counter(&f.thread_producer_resets, &l),
            standby_tasks: f.thread_standby_tasks.with_label_values(&l),
            input_pauses: counter(&f.thread_input_pauses, &l),
            blocked_seconds: f.thread_blocked_seconds.with_label_values(&l),
            produce_queue_full_seconds: f.thread_produce_queue_full_seconds.with_label_values(&l),
            commit_phases: CommitPhase::ALL.map(|p| {
                f.thread_commit_phase_seconds
                    .with_label_values(&[l[0], l[1], p.label()])
            }),
            producer_errors: counter(&f.producer_errors, &l),
            consumer_errors: counter(&f.consumer_errors, &l),
            offset_resets: counter(&f.offset_resets, &l),
            revoked_partitions: counter(&f.revoked_partitions, &l),
            skipped_offsets: counter(&f.skipped_offsets, &l),
            dead_letters: DLQ_REASONS.map(|r| counter(&f.dead_letter_records, &[l[0], l[1], r])),
        }
    }

    /// Adds what a task published ([`Task::publish`](crate::engine::Task::publish)) to the
    /// thread's totals.
    pub fn add(&self, task: &TaskCounters) {
        self.process_records.inc_by(task.processed);
        for (c, n) in self.dead_letters.iter().zip(task.dead_lettered_by) {
            c.inc_by(n);
        }
    }

    /// The metrics of task `id` on this thread.
    pub(crate) fn task(&self, id: TaskId) -> TaskMetrics {
        TaskMetrics::new(&self.metrics, &self.thread, id)
    }

    /// The metrics of standby task `id` on this thread.
    pub(crate) fn standby(&self, id: TaskId) -> StandbyMetrics {
        StandbyMetrics::new(&self.metrics, &self.thread, id)
    }

    /// The observer recording the metrics of task `id` on this thread, for
    /// [`TaskFactory::task`](crate::engine::TaskFactory::task). Dropping it (with its task)
    /// removes the task's series.
    pub fn task_observer(&self, id: TaskId) -> Box<dyn TaskObserver> {
        Box::new(self.task(id))
    }
}

impl Drop for ThreadMetrics {
    fn drop(&mut self) {
        let f = self.metrics.families();
        let l = [self.metrics.application_id(), self.thread.as_str()];
        let _ = f.thread_process_records.remove_label_values(&l);
        let _ = f.thread_poll_records.remove_label_values(&l);
        let _ = f.thread_poll_latency.remove_label_values(&l);
        let _ = f.thread_process_latency.remove_label_values(&l);
        let _ = f.thread_commit_latency.remove_label_values(&l);
        let _ = f.thread_punctuate_latency.remove_label_values(&l);
        let _ = f.thread_commits.remove_label_values(&l);
        let _ = f.thread_tasks_created.remove_label_values(&l);
        let _ = f.thread_tasks_closed.remove_label_values(&l);
        let _ = f.thread_tasks_corrupted.remove_label_values(&l);
        let _ = f.thread_producer_resets.remove_label_values(&l);
        let _ = f.thread_standby_tasks.remove_label_values(&l);
        let _ = f.thread_input_pauses.remove_label_values(&l);
        let _ = f.thread_blocked_seconds.remove_label_values(&l);
        let _ = f.thread_produce_queue_full_seconds.remove_label_values(&l);
        for p in CommitPhase::ALL {
            let _ = f
                .thread_commit_phase_seconds
                .remove_label_values(&[l[0], l[1], p.label()]);
        }
        let _ = f.producer_errors.remove_label_values(&l);
        let _ = f.consumer_errors.remove_label_values(&l);
        let _ = f.offset_resets.remove_label_values(&l);
        let _ = f.revoked_partitions.remove_label_values(&l);
        let _ = f.skipped_offsets.remove_label_values(&l);
        for r in DLQ_REASONS {
            let _ = f.dead_letter_records.remove_label_values(&[l[0], l[1], r]);
        }
    }
}

/// The metrics of one standby task; dropping them removes its series.
pub(crate) struct StandbyMetrics {
    metrics: Metrics,
    thread: String,
    task: String,
    /// Changelog records applied to the standby's stores.
    pub records: IntCounter,
    /// Changelog end offsets minus the standby's positions, summed.
    pub lag: IntGauge,
}

impl StandbyMetrics {
    fn new(metrics: &Metrics, thread: &str, id: TaskId) -> Self {
        let f = metrics.families();
        let task = id.to_string();
        let l = [metrics.application_id(), thread, task.as_str()];
        Self {
            records: counter(&f.task_standby_records, &l),
            lag: f.task_standby_lag.with_label_values(&l),
            metrics: metrics.clone(),
            thread: thread.to_owned(),
            task,
        }
    }
}

impl Drop for StandbyMetrics {
    fn drop(&mut self) {
        let f = self.metrics.families();
        let l = [
            self.metrics.application_id(),
            self.thread.as_str(),
            self.task.as_str(),
        ];
        let _ = f.task_standby_records.remove_label_values(&l);
        let _ = f.task_standby_lag.remove_label_values(&l);
    }
}

/// The metrics of one task, with the names of its nodes and stores (to remove their series
/// when the task closes).
pub(crate) struct TaskMetrics {
    metrics: Metrics,
    thread: String,
    task: String,
    pub process_records: IntCounter,
    pub dropped_records: IntCounter,
    pub redelivered_records: IntCounter,
    pub punctuations: IntCounter,
    pub cache_size: IntGauge,
    pub restore_records: IntCounter,
    pub restore_remaining: IntGauge,
    lag: HashMap<(String, i32), IntGauge>,
    nodes: Vec<NodeMetrics>,
    stores: Vec<String>,
    /// The task's counters when last published, to publish deltas.
    published: TaskCounters,
}

impl TaskMetrics {
    fn new(metrics: &Metrics, thread: &str, id: TaskId) -> Self {
        let f = metrics.families();
        let task = id.to_string();
        let l = [metrics.application_id(), thread, task.as_str()];
        Self {
            metrics: metrics.clone(),
            thread: thread.to_owned(),
            process_records: counter(&f.task_process_records, &l),
            dropped_records: counter(&f.task_dropped_records, &l),
            redelivered_records: counter(&f.task_redelivered_records, &l),
            punctuations: counter(&f.task_punctuations, &l),
            cache_size: f.task_cache_size.with_label_values(&l),
            restore_records: counter(&f.task_restore_records, &l),
            restore_remaining: f.task_restore_remaining.with_label_values(&l),
            task,
            lag: HashMap::new(),
            nodes: Vec::new(),
            stores: Vec::new(),
            published: TaskCounters::default(),
        }
    }

    fn labels(&self) -> [&str; 3] {
        [self.metrics.application_id(), &self.thread, &self.task]
    }

    /// Whether latency histograms are recorded.
    pub fn debug(&self) -> bool {
        self.metrics.recording_level() == super::RecordingLevel::Debug
    }

    /// The metrics of store `name`.
    pub fn store(&mut self, name: &str) -> super::store::StoreMetrics {
        let m = super::store::StoreMetrics::new(&self.metrics, self.labels(), name, self.debug());
        self.stores.push(name.to_owned());
        m
    }

    /// Sets the lag of input partition `topic`-`partition`.
    pub fn set_lag(&mut self, topic: &str, partition: i32, lag: i64) {
        let key = (topic.to_owned(), partition);
        if !self.lag.contains_key(&key) {
            let f = self.metrics.families();
            let [a, t, k] = self.labels();
            let p = partition.to_string();
            let g = f.task_records_lag.with_label_values(&[a, t, k, topic, &p]);
            self.lag.insert(key.clone(), g);
        }
        if let Some(g) = self.lag.get(&key) {
            g.set(lag);
        }
    }
}

impl Drop for TaskMetrics {
    fn drop(&mut self) {
        let f = self.metrics.families();
        let l = self.labels();
        let _ = f.task_process_records.remove_label_values(&l);
        let _ = f.task_dropped_records.remove_label_values(&l);
        let _ = f.task_redelivered_records.remove_label_values(&l);
        let _ = f.task_punctuations.remove_label_values(&l);
        let _ = f.task_cache_size.remove_label_values(&l);
        let _ = f.task_restore_records.remove_label_values(&l);
        let _ = f.task_restore_remaining.remove_label_values(&l);
        for (topic, partition) in self.lag.keys() {
            let p = partition.to_string();
            let _ = f
                .task_records_lag
                .remove_label_values(&[l[0], l[1], l[2], topic, &p]);
        }
        for node in &self.nodes {
            let nl = [l[0], l[1], l[2], node.name.as_str()];
            let _ = f.node_records_in.remove_label_values(&nl);
            let _ = f.node_records_forwarded.remove_label_values(&nl);
            let _ = f.node_process_latency.remove_label_values(&nl);
        }
        for store in &self.stores {
            super::store::remove_store_series(f, l, store);
        }
    }
}

/// The registry counters of one processor node in one task; the engine counts, publishing
/// adds its counts here.
struct NodeMetrics {
    name: String,
    records_in: IntCounter,
    forwarded: IntCounter,
}

impl TaskObserver for TaskMetrics {
    fn watch_node(&mut self, name: &str) -> Option<NodeTimer> {
        let f = self.metrics.families();
        let [a, t, k] = self.labels();
        let l = [a, t, k, name];
        let node = NodeMetrics {
            name: name.to_owned(),
            records_in: counter(&f.node_records_in, &l),
            forwarded: counter(&f.node_records_forwarded, &l),
        };
        let latency = maybe(self.debug(), &f.node_process_latency, &l);
        self.nodes.push(node);
        let latency = latency?;
        Some(Box::new(move |seconds| latency.observe(seconds)))
    }

    fn wrap_store(&mut self, name: &str, store: Box<dyn KeyValueStore>) -> Box<dyn KeyValueStore> {
        Box::new(MeteredKeyValueStore::new(store, self.store(name)))
    }

    fn publish(&mut self, report: TaskReport<'_>) -> TaskCounters {
        for (counts, node) in report.nodes().zip(&self.nodes) {
            node.records_in.inc_by(counts.records_in.replace(0));
            node.forwarded.inc_by(counts.forwarded.replace(0));
        }
        let delta = report.counters.since(&self.published);
        self.process_records.inc_by(delta.processed);
        self.dropped_records.inc_by(delta.dropped);
        self.redelivered_records.inc_by(delta.redelivered);
        self.punctuations.inc_by(delta.punctuations);
        self.published = report.counters;
        self.cache_size
            .set(i64::try_from(report.cached_bytes).unwrap_or(i64::MAX));
        delta
    }

    fn lag(&mut self, topic: &str, partition: i32, lag: i64) {
        self.set_lag(topic, partition, lag);
    }
}
