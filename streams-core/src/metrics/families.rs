//! Every metric family of an application, registered once in its registry.
//!
//! Names follow Kafka Streams' groups and metric names, snake_case, with a `streams_`
//! prefix: `stream-thread-metrics/process-total` is `streams_thread_process_records_total`.
//! Kafka Streams' `*-rate`, `*-avg` and `*-max` metrics are not separate series here: they
//! are `rate()` over the `_total` counters and quantiles of the `_seconds` histograms.

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
};

/// Labels of the client level.
pub(crate) const CLIENT: &[&str] = &["application_id"];
/// Labels of the thread level.
pub(crate) const THREAD: &[&str] = &["application_id", "thread_id"];
/// Labels of the task level.
pub(crate) const TASK: &[&str] = &["application_id", "thread_id", "task_id"];

/// Latency buckets from 1 µs to about 30 s.
fn latency_buckets() -> Vec<f64> {
    prometheus::exponential_buckets(1e-6, 4.0, 13).unwrap_or_default()
}

pub(crate) struct Families {
    // Client.
    pub client_state: IntGaugeVec,
    pub alive_threads: IntGaugeVec,
    pub topology_info: IntGaugeVec,
    // Thread.
    pub thread_process_records: IntCounterVec,
    pub thread_poll_records: HistogramVec,
    pub thread_poll_latency: HistogramVec,
    pub thread_process_latency: HistogramVec,
    pub thread_commit_latency: HistogramVec,
    pub thread_punctuate_latency: HistogramVec,
    pub thread_commits: IntCounterVec,
    pub thread_tasks_created: IntCounterVec,
    pub thread_tasks_closed: IntCounterVec,
    pub thread_tasks_corrupted: IntCounterVec,
    pub thread_producer_resets: IntCounterVec,
    pub thread_standby_tasks: IntGaugeVec,
    pub thread_input_pauses: IntCounterVec,
    pub thread_blocked_seconds: prometheus::CounterVec,
    pub thread_commit_phase_seconds: prometheus::CounterVec,
    pub thread_produce_queue_full_seconds: prometheus::CounterVec,
    pub producer_errors: IntCounterVec,
    pub consumer_errors: IntCounterVec,
    pub offset_resets: IntCounterVec,
    pub revoked_partitions: IntCounterVec,
    pub skipped_offsets: IntCounterVec,
    pub dead_letter_records: IntCounterVec,
    // Task.
    pub task_process_records: IntCounterVec,
    pub task_dropped_records: IntCounterVec,
    pub task_redelivered_records: IntCounterVec,
    pub task_punctuations: IntCounterVec,
    pub task_records_lag: IntGaugeVec,
    pub task_cache_size: IntGaugeVec,
    pub task_restore_records: IntCounterVec,
    pub task_restore_remaining: IntGaugeVec,
    pub task_standby_records: IntCounterVec,
    pub task_standby_lag: IntGaugeVec,
    // Processor node.
    pub node_records_in: IntCounterVec,
    pub node_records_forwarded: IntCounterVec,
    pub node_process_latency: HistogramVec,
    // Store.
    pub store_operations: IntCounterVec,
    pub store_latency: HistogramVec,
    pub store_open_iterators: IntGaugeVec,
    pub store_oldest_iterator: IntGaugeVec,
    pub store_estimated_keys: IntGaugeVec,
    pub store_memtable_bytes: IntGaugeVec,
    pub store_block_cache_usage: IntGaugeVec,
    pub store_pending_compaction: IntGaugeVec,
}

fn with(labels: &[&str], extra: &[&'static str]) -> Vec<String> {
    labels.iter().chain(extra).map(|s| (*s).to_owned()).collect()
}

struct Reg<'a> {
    registry: &'a Registry,
    error: Option<prometheus::Error>,
}

impl Reg<'_> {
    fn keep<C: prometheus::core::Collector + Clone + 'static>(&mut self, c: C) -> C {
        if let Err(e) = self.registry.register(Box::new(c.clone())) {
            self.error.get_or_insert(e);
        }
        c
    }

    fn counter(&mut self, name: &str, help: &str, labels: &[String]) -> prometheus::Result<IntCounterVec> {
        let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        Ok(self.keep(IntCounterVec::new(Opts::new(name, help), &refs)?))
    }

    /// A counter of seconds (a float, unlike the integer counts of [`Reg::counter`]).
    fn seconds_counter(
        &mut self,
        name: &str,
        help: &str,
        labels: &[String],
    ) -> prometheus::Result<prometheus::CounterVec> {
        let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        Ok(self.keep(prometheus::CounterVec::new(Opts::new(name, help), &refs)?))
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &[String]) -> prometheus::Result<IntGaugeVec> {
        let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        Ok(self.keep(IntGaugeVec::new(Opts::new(name, help), &refs)?))
    }

    fn histogram(
        &mut self,
        name: &str,
        help: &str,
        labels: &[String],
        buckets: Vec<f64>,
    ) -> prometheus::Result<HistogramVec> {
        let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        Ok(self.keep(HistogramVec::new(
            HistogramOpts::new(name, help).buckets(buckets),
            &refs,
        )?))
    }
}

impl Families {
    /// Creates and registers every family in `registry`.
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let mut r = Reg {
            registry,
            error: None,
        };
        let client = with(CLIENT, &[]);
        let thread = with(THREAD, &[]);
        let task = with(TASK, &[]);
        let node = with(TASK, &["processor_node_id"]);
        let store = with(TASK, &["store"]);
        let store_op = with(TASK, &["store", "operation"]);
        let lat = latency_buckets;
        let families = Self {
            client_state: r.gauge(
                "streams_client_state",
                "1 for the application's current state, 0 for the others.",
                &with(CLIENT, &["state"]),
            )?,
            alive_threads: r.gauge(
                "streams_client_alive_stream_threads",
                "Stream threads currently running.",
                &client,
            )?,
            topology_info: r.gauge(
                "streams_client_topology_info",
                "Always 1; the topology description (Kafka Streams' format) is a label.",
                &with(CLIENT, &["topology_description"]),
            )?,
            thread_process_records: r.counter(
                "streams_thread_process_records_total",
                "Records processed by the thread's tasks.",
                &thread,
            )?,
            thread_poll_records: r.histogram(
                "streams_thread_poll_records",
                "Records returned by one poll of the thread's loop.",
                &thread,
                vec![0.0, 1.0, 10.0, 100.0, 250.0, 500.0, 1000.0],
            )?,
            thread_poll_latency: r.histogram(
                "streams_thread_poll_latency_seconds",
                "Time a poll of the thread's loop took (including waiting for records).",
                &thread,
                lat(),
            )?,
            thread_process_latency: r.histogram(
                "streams_thread_process_latency_seconds",
                "Time processing one polled batch took.",
                &thread,
                lat(),
            )?,
            thread_commit_latency: r.histogram(
                "streams_thread_commit_latency_seconds",
                "Time a commit of all the thread's tasks took.",
                &thread,
                lat(),
            )?,
            thread_punctuate_latency: r.histogram(
                "streams_thread_punctuate_latency_seconds",
                "Time one round of wall-clock punctuation took.",
                &thread,
                lat(),
            )?,
            thread_commits: r.counter("streams_thread_commit_total", "Commits of the thread.", &thread)?,
            thread_tasks_created: r.counter(
                "streams_thread_task_created_total",
                "Tasks created (or resumed) by the thread.",
                &thread,
            )?,
            thread_tasks_closed: r.counter(
                "streams_thread_task_closed_total",
                "Tasks closed by the thread.",
                &thread,
            )?,
            thread_tasks_corrupted: r.counter(
                "streams_thread_task_corrupted_total",
                "Tasks whose local state was found corrupt (opening, restoring or running) and rebuilt from their changelogs.",
                &thread,
            )?,
            thread_producer_resets: r.counter(
                "streams_thread_producer_resets_total",
                "Transactional producers made again after the old one was fenced or could not abort its transaction (exactly-once).",
                &thread,
            )?,
            thread_standby_tasks: r.gauge(
                "streams_thread_standby_tasks",
                "Standby tasks the thread keeps (warm replicas of tasks' stores, tailing their changelogs).",
                &thread,
            )?,
            thread_input_pauses: r.counter(
                "streams_thread_input_paused_total",
                "Times the input partitions of a task that takes no records for now (an async processor's buffer is full) were paused.",
                &thread,
            )?,
            thread_blocked_seconds: r.seconds_counter(
                "streams_thread_blocked_seconds_total",
                "Time the thread spent blocked on Kafka: waiting in poll, for room in the producer's queue, flushing the producer, committing.",
                &thread,
            )?,
            thread_commit_phase_seconds: r.seconds_counter(
                "streams_thread_commit_phase_seconds_total",
                "Time the thread's commits spent in each phase: flushing stores and caches, \
                 waiting for the producer, committing offsets or the transaction.",
                &with(THREAD, &["phase"]),
            )?,
            thread_produce_queue_full_seconds: r.seconds_counter(
                "streams_thread_produce_queue_full_seconds_total",
                "Time the thread's sends waited for room in the producer's full queue \
                 (also counted in streams_thread_blocked_seconds_total).",
                &thread,
            )?,
            producer_errors: r.counter(
                "streams_thread_producer_errors_total",
                "Records the thread's producer failed to deliver.",
                &thread,
            )?,
            consumer_errors: r.counter(
                "streams_thread_consumer_errors_total",
                "Errors the thread's consumer reported from poll.",
                &thread,
            )?,
            revoked_partitions: r.counter(
                "streams_thread_revoked_partitions_total",
                "Partitions revoked from the thread's consumer by rebalances (or lost when it left the group).",
                &thread,
            )?,
            offset_resets: r.counter(
                "streams_thread_offset_resets_total",
                "Source partitions whose position was out of range and reset by auto.offset.reset.",
                &thread,
            )?,
            skipped_offsets: r.counter(
                "streams_thread_skipped_offsets_total",
                "Source offsets skipped by offset resets (records deleted before they were read).",
                &thread,
            )?,
            dead_letter_records: r.counter(
                "streams_thread_dead_letter_records_total",
                "Records sent to the dead-letter topic, by reason (deserialization, processing, production).",
                &with(THREAD, &["reason"]),
            )?,
            task_process_records: r.counter(
                "streams_task_process_records_total",
                "Records processed by the task.",
                &task,
            )?,
            task_dropped_records: r.counter(
                "streams_task_dropped_records_total",
                "Records dropped by the task (negative timestamps, skipped by a log-and-continue handler, skipped by a processor: null keys or values in the DSL, late window records).",
                &task,
            )?,
            task_redelivered_records: r.counter(
                "streams_task_redelivered_records_total",
                "Records delivered again at an offset the task had already processed or queued, and dropped (the consumer went back while the task kept running).",
                &task,
            )?,
            task_punctuations: r.counter(
                "streams_task_punctuate_total",
                "Punctuations run by the task.",
                &task,
            )?,
            task_records_lag: r.gauge(
                "streams_task_records_lag",
                "End offset of an input partition minus the task's next offset to process.",
                &with(TASK, &["topic", "partition"]),
            )?,
            task_cache_size: r.gauge(
                "streams_task_cache_size_bytes",
                "Bytes held by the record caches of the task's stores.",
                &task,
            )?,
            task_restore_records: r.counter(
                "streams_task_restore_records_total",
                "Changelog records restored into the task's stores.",
                &task,
            )?,
            task_restore_remaining: r.gauge(
                "streams_task_restore_remaining_records",
                "Changelog records left to restore before the task processes.",
                &task,
            )?,
            task_standby_records: r.counter(
                "streams_task_standby_records_total",
                "Changelog records applied to the stores of the standby task.",
                &task,
            )?,
            task_standby_lag: r.gauge(
                "streams_task_standby_lag_records",
                "Changelog end offsets minus the standby task's positions, summed over its changelog partitions.",
                &task,
            )?,
            node_records_in: r.counter(
                "streams_processor_node_records_in_total",
                "Records handed to the processor node.",
                &node,
            )?,
            node_records_forwarded: r.counter(
                "streams_processor_node_records_forwarded_total",
                "Records the processor node forwarded to its children.",
                &node,
            )?,
            node_process_latency: r.histogram(
                "streams_processor_node_process_latency_seconds",
                "Time the node took per record, children included (recording level DEBUG).",
                &node,
                lat(),
            )?,
            store_operations: r.counter(
                "streams_store_operations_total",
                "Operations on the store, by operation (put, get, delete, range, prefix_scan, ...).",
                &store_op,
            )?,
            store_latency: r.histogram(
                "streams_store_operation_latency_seconds",
                "Latency of store operations (recording level DEBUG); iterators: time to open.",
                &store_op,
                lat(),
            )?,
            store_open_iterators: r.gauge(
                "streams_store_open_iterators",
                "Iterators over the store currently open.",
                &store,
            )?,
            store_oldest_iterator: r.gauge(
                "streams_store_oldest_iterator_open_since_seconds",
                "Unix time the oldest open iterator was opened; 0 when none is open.",
                &store,
            )?,
            store_estimated_keys: r.gauge(
                "streams_store_estimated_keys",
                "RocksDB's estimate of the keys in the store.",
                &store,
            )?,
            store_memtable_bytes: r.gauge(
                "streams_store_memtable_bytes",
                "Bytes in the store's RocksDB memtables.",
                &store,
            )?,
            store_block_cache_usage: r.gauge(
                "streams_store_block_cache_usage_bytes",
                "Bytes of RocksDB block cache in use (the cache may be shared by stores).",
                &store,
            )?,
            store_pending_compaction: r.gauge(
                "streams_store_pending_compaction_bytes",
                "RocksDB's estimate of bytes compaction has to rewrite.",
                &store,
            )?,
        };
        match r.error {
            Some(e) => Err(e),
            None => Ok(families),
        }
    }
}

/// A histogram child, or none when the family is recorded at DEBUG only and the level is INFO.
pub(crate) fn maybe(debug: bool, vec: &HistogramVec, labels: &[&str]) -> Option<Histogram> {
    debug.then(|| vec.with_label_values(labels))
}

/// A counter child.
pub(crate) fn counter(vec: &IntCounterVec, labels: &[&str]) -> IntCounter {
    vec.with_label_values(labels)
}
