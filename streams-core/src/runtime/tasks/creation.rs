//! Turning an assignment into running tasks: a new task's stores are built and handed to
//! the state updater (`updater.rs`); once they are restored, the task is built around them
//! and starts processing.
//!
//! Invariants:
//! - A task is in at most one of `tasks` (running), `restoring` (its stores are with the
//!   updater) and `waiting` (its state directory is still held by another thread).
//! - The input partitions of a restoring or waiting task are paused; records fetched for
//!   it before the pause are held, in order, and given to the task when it runs. An
//!   assignment that restarts partitions from their committed offsets (eager rebalance,
//!   rewind after an aborted transaction) drops the held records and pauses again.
//! - Every hand-over to the updater has its own sequence number: a report about a
//!   hand-over that was since revoked (or replaced) is recognised and its stores closed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use streams_state::StoreError;

use crate::engine::TaskId;
use crate::engine::TaskStore;
use crate::metrics::TaskMetrics;
use crate::model::error::StreamsError;
use crate::model::record::RawRecord;
use crate::runtime::client::errors::kafka_err;
use crate::runtime::produce::producer::to_kafka_headers;
use crate::runtime::produce::sinks::{KafkaChangelogSink, KafkaCollector};
use crate::runtime::restore::updater::{Event, RestoreJob};
use crate::runtime::streams_group::StreamsMember;
use crate::runtime::tasks::TaskManager;
use crate::runtime::topics::resets::mock_retention_error;

/// A task whose stores the state updater is restoring.
pub(crate) struct Restoring {
    /// The sequence number of the current hand-over.
    seq: u64,
    /// The stream time the task's changelog writers stamp records with.
    timestamp: Arc<AtomicI64>,
    pub metrics: TaskMetrics,
    /// Records fetched for the task before its partitions were paused.
    pub held: Vec<RawRecord>,
    wiped_for_gap: bool,
    /// Where the stores restored from a source topic stop: the committed offset of that
    /// topic, by store name (see [`restore_bounds`]).
    bounds: Vec<(String, i64)>,
}

impl Restoring {
    /// The entry of a task whose stores were a standby's, handed over as hand-over `seq`
    /// (see `standby.rs`).
    pub(in crate::runtime) fn promoted(
        seq: u64,
        timestamp: Arc<AtomicI64>,
        metrics: TaskMetrics,
        held: Vec<RawRecord>,
        bounds: Vec<(String, i64)>,
    ) -> Self {
        Self {
            seq,
            timestamp,
            metrics,
            held,
            wiped_for_gap: false,
            bounds,
        }
    }

    /// The sequence number of the current hand-over.
    pub(in crate::runtime) fn seq(&self) -> u64 {
        self.seq
    }
}

impl TaskManager {
    /// Closes, without committing, the running and restoring tasks that `wanted` does not
    /// name.
    fn drop_unassigned(&mut self, wanted: &BTreeSet<TaskId>) {
        let stale: Vec<TaskId> = self
            .tasks
            .keys()
            .filter(|id| !wanted.contains(id))
            .copied()
            .collect();
        for id in stale {
            if let Some(mut task) = self.tasks.remove(&id) {
                tracing::warn!(task = %id, "closing a task the assignment no longer names, without committing");
                self.settings.offset_sums.stopped(id);
                if let Err(e) = task.close(false) {
                    tracing::warn!(task = %id, error = %e, "closing task dirty");
                }
                self.metrics.tasks_closed.inc();
            }
        }
        let stale: Vec<TaskId> = self
            .restoring
            .keys()
            .filter(|id| !wanted.contains(id))
            .copied()
            .collect();
        for id in stale {
            tracing::warn!(task = %id, "dropping the restoration of a task the assignment no longer names");
            self.restoring.remove(&id);
            self.updater.remove(id);
        }
    }

    /// Whether some task's stores are being restored.
    pub fn is_restoring(&self) -> bool {
        !self.restoring.is_empty()
    }

    /// Creates (or resumes) the tasks of the pending assignment, and those waiting for
    /// their state directory: their stores go to the state updater.
    pub fn create_pending<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
    ) -> Result<(), StreamsError> {
        let mut wanted: BTreeSet<TaskId> = self.waiting.keys().copied().collect();
        let mut positions_kept = true;
        if let Some(pending) = self.pending.take() {
            positions_kept = self.pending_keeps_positions;
            let topology = self.settings.factory.topology().clone();
            wanted = pending
                .iter()
                .filter_map(|(t, p)| {
                    topology.subtopology_of_topic(t).map(|s| TaskId {
                        subtopology: s.id,
                        partition: *p,
                    })
                })
                .collect();
            if positions_kept {
                // Cooperative: a waiting task still assigned keeps its held records.
                self.waiting.retain(|id, _| wanted.contains(id));
            } else {
                // A new assignment restarts every partition from its committed offset (and
                // unpaused): records held for waiting tasks would be seen twice.
                self.waiting.clear();
            }
            let moved = std::mem::take(&mut self.moved);
            for id in std::mem::take(&mut self.suspended) {
                // A suspended task handed back resumes, unless its input moved on
                // elsewhere meanwhile (see `resume.rs`).
                if wanted.contains(&id) && !moved.contains(&id) {
                    continue;
                }
                if let Some(mut task) = self.tasks.remove(&id) {
                    tracing::info!(task = %id, "closing task taken by another member");
                    if self.settings.eos {
                        // The revocation committed it and a suspended task does nothing
                        // since: its state is exactly the committed changelog, so the next
                        // owner in this process restores only what follows, not everything.
                        self.write_checkpoint(&task)?;
                    }
                    self.record_closing_offset_sum(&task);
                    self.settings.offset_sums.stopped(id);
                    task.close(true)?;
                    self.metrics.tasks_closed.inc();
                }
                if self.restoring.remove(&id).is_some() {
                    tracing::info!(task = %id, "task taken by another member while restoring");
                    self.updater.remove(id);
                }
            }
            // Any other task of this thread that the assignment no longer names was
            // created from a stale one (never suspended, so never committed as revoked):
            // it is closed without committing, and a later assignment creates it afresh
            // from the changelog rather than reusing state another member moved past.
            self.drop_unassigned(&wanted);
            if positions_kept {
                let mut kept = TopicPartitionList::new();
                for id in wanted.iter().filter(|id| self.tasks.contains_key(id)) {
                    for e in self.task_partitions(*id).elements() {
                        kept.add_partition(e.topic(), e.partition());
                    }
                }
                wake_fetchers(consumer, &kept);
            }
        }
        for id in wanted {
            if self.tasks.contains_key(&id) {
                continue;
            }
            if self.promote_standby(consumer, id)? {
                continue;
            }
            if let Some(r) = self.restoring.get_mut(&id) {
                if !positions_kept {
                    // Its partitions restart from the committed offsets, unpaused.
                    r.held.clear();
                    consumer
                        .pause(&self.task_partitions(id))
                        .map_err(|e| kafka_err("pause", e))?;
                }
                continue;
            }
            let timestamp = Arc::new(AtomicI64::new(0));
            let Some(mut stores) = self.open_stores(id, &timestamp, false)? else {
                if !self.waiting.contains_key(&id) {
                    tracing::info!(task = %id, "state directory still held by another thread; waiting");
                    consumer
                        .pause(&self.task_partitions(id))
                        .map_err(|e| kafka_err("pause", e))?;
                    self.waiting.insert(id, Vec::new());
                }
                continue;
            };
            consumer
                .pause(&self.task_partitions(id))
                .map_err(|e| kafka_err("pause", e))?;
            let bounds = restore_bounds(consumer, self.member.as_deref(), id.partition, &stores)?;
            bound(&mut stores, &bounds);
            let metrics = self.metrics.task(id);
            let seq = self.hand_over(id, stores, &metrics);
            self.restoring.insert(
                id,
                Restoring {
                    seq,
                    timestamp,
                    metrics,
                    held: self.waiting.remove(&id).unwrap_or_default(),
                    wiped_for_gap: false,
                    bounds,
                },
            );
        }
        // Tasks closed above may have been wanted as standbys; waiting ones try again.
        self.sync_standbys()
    }

    /// Takes the updater's reports: restored tasks start running, corrupted ones are
    /// wiped and handed over again.
    pub fn take_restored<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
    ) -> Result<(), StreamsError> {
        while let Some(event) = self.updater.try_event()? {
            self.on_event(consumer, event)?;
        }
        Ok(())
    }

    /// Handles one report of the updater.
    pub(in crate::runtime) fn on_event<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        event: Event,
    ) -> Result<(), StreamsError> {
        {
            match event {
                Event::Restored { job, records } => {
                    if let Some(r) = self.current(&job) {
                        self.start_task(consumer, job, r, records)?;
                    }
                }
                Event::StandbyCorrupted { job, reason } => {
                    if let Some(promoted) = self.standby_corrupted(job, &reason)? {
                        // Found corrupt just before its promotion: the restoring task's
                        // stores are wiped and restored from the changelog.
                        return self.on_event(consumer, promoted);
                    }
                }
                Event::Corrupted {
                    job,
                    store,
                    topic,
                    reason,
                } => {
                    let id = job.id;
                    let Some(mut r) = self.current(&job) else {
                        return Ok(());
                    };
                    if self.settings.on_mock && !topic.is_empty() {
                        return Err(mock_retention_error("changelog", &topic, id.partition, &reason));
                    }
                    if r.wiped_for_gap {
                        return Err(StreamsError::Kafka {
                            message: format!(
                                "restoring store {store} of task {id} from {topic}: {reason}, even after wiping it"
                            ),
                            retriable: true,
                        });
                    }
                    if topic.is_empty() {
                        self.metrics.tasks_corrupted.inc();
                        tracing::warn!(task = %id, "{reason}: the task's local state is corrupt: wiping it and restoring from the changelog");
                    } else {
                        tracing::warn!(
                            task = %id,
                            store = %store,
                            "changelog {topic}: {reason}; the task's state is corrupted: wiping it and restoring from the earliest offset"
                        );
                    }
                    let mut stores = self.wipe(id, job.stores, &r.timestamp)?;
                    bound(&mut stores, &r.bounds);
                    r.seq = self.hand_over(id, stores, &r.metrics);
                    r.wiped_for_gap = true;
                    self.restoring.insert(id, r);
                }
                Event::Failed { id, seq, error } => {
                    if self.restoring.get(&id).is_some_and(|r| r.seq == seq) || self.is_standby(id, seq) {
                        return Err(error);
                    }
                    tracing::warn!(task = %id, error = %error, "restoring a task given up since");
                }
            }
        }
        Ok(())
    }

    /// The restoring entry `job` belongs to, taken out; `None` (and the stores closed) when
    /// the task was revoked or handed over again since.
    fn current(&mut self, job: &RestoreJob) -> Option<Restoring> {
        if self.restoring.get(&job.id).is_some_and(|r| r.seq == job.seq) {
            return self.restoring.remove(&job.id);
        }
        tracing::debug!(task = %job.id, "report of a restoration given up since");
        None
    }

    /// Builds the task around its restored stores and lets its records in.
    fn start_task<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        job: RestoreJob,
        r: Restoring,
        records: u64,
    ) -> Result<(), StreamsError> {
        let id = job.id;
        let mut stores = job.stores;
        for s in &mut stores {
            if let Some(topic) = &s.changelog
                && let Some(c) = s.store.checkpoint()?
            {
                self.restored_to.insert((topic.clone(), id.partition), c);
            }
            // Under exactly-once the checkpoint stays: persistent stores hold their writes
            // until the transaction commits (`TransactionalKeyValueStore`), so the local
            // data never runs ahead of it.
        }
        let mut task = self.settings.factory.task(
            id,
            stores,
            self.collector(),
            crate::runtime::tasks::now_ms(),
            r.timestamp,
            Some(Box::new(r.metrics)),
        )?;
        if let Some(g) = &self.globals {
            task.with_globals(g.slots());
        }
        let partitions = self.task_partitions(id);
        // A task with several input partitions processes them in timestamp order: it
        // waits while one of them is empty (see `engine/queue.rs`).
        let inputs: Vec<_> = partitions
            .elements()
            .iter()
            .filter_map(|e| {
                let key = (e.topic().to_owned(), e.partition());
                self.assigned_at.get(&key).map(|&start| (key, start))
            })
            .collect();
        if inputs.len() > 1 {
            for ((topic, partition), start) in inputs {
                task.expect_partition(Arc::from(topic), partition, Some(start));
            }
        }
        let committed: Vec<_> = partitions
            .elements()
            .iter()
            .filter_map(|e| self.committed_meta.get(&(e.topic().to_owned(), e.partition())))
            .collect();
        let committed_time = committed.iter().filter_map(|c| c.time).max();
        if let Some(time) = committed_time {
            task.resume_stream_time(time);
        }
        for c in &committed {
            task.resume_processor_metadata(&c.processors);
        }
        task.initialize()?;
        self.metrics.tasks_created.inc();
        tracing::info!(task = %id, restored = records, stream_time = ?committed_time, "task created");
        task.add_records(r.held);
        consumer.resume(&partitions).map_err(|e| kafka_err("resume", e))?;
        self.settings.offset_sums.started(id);
        self.tasks.insert(id, task);
        Ok(())
    }

    /// Hands `stores` to the updater; returns the hand-over's sequence number.
    fn hand_over(&mut self, id: TaskId, stores: Vec<TaskStore>, metrics: &TaskMetrics) -> u64 {
        self.handovers += 1;
        self.updater.add(RestoreJob {
            id,
            seq: self.handovers,
            stores,
            gauges: Some((metrics.restore_records.clone(), metrics.restore_remaining.clone())),
        });
        self.handovers
    }

    /// The record collector of a new task.
    fn collector(&self) -> Box<KafkaCollector> {
        Box::new(KafkaCollector::new(self.producer.clone()))
    }

    /// Builds the stores of task `id`; changelog writes are stamped with `timestamp`.
    pub(in crate::runtime) fn make_stores(
        &self,
        id: TaskId,
        timestamp: &Arc<AtomicI64>,
    ) -> Result<Vec<TaskStore>, StreamsError> {
        let producer = &self.producer;
        self.settings.factory.stores(
            id,
            &self.task_dir(id),
            Some(&mut |topic, partition, values, headers| {
                Box::new(KafkaChangelogSink {
                    producer: producer.clone(),
                    topic: topic.to_owned(),
                    handle: None,
                    partition,
                    timestamp: timestamp.clone(),
                    values,
                    headers: to_kafka_headers(headers),
                })
            }),
        )
    }

    /// Builds the stores of task `id` as [`make_stores`](Self::make_stores) does, wiped
    /// where they cannot be trusted; `Ok(None)` while another thread still holds the task's
    /// state directory. `standby` only words the log lines.
    pub(in crate::runtime) fn open_stores(
        &self,
        id: TaskId,
        timestamp: &Arc<AtomicI64>,
        standby: bool,
    ) -> Result<Option<Vec<TaskStore>>, StreamsError> {
        let mut stores = match self.make_stores(id, timestamp) {
            Err(StreamsError::Store(StoreError::Locked { .. })) => return Ok(None),
            Err(StreamsError::Store(e)) if e.is_corruption() => {
                // Unreadable files (a crash mid-write, a disk fault): the changelog has
                // the state, so the task starts over from it rather than failing.
                if standby {
                    tracing::warn!(task = %id, error = %e, "standby: the task's local state cannot be read: wiping it");
                } else {
                    tracing::warn!(task = %id, error = %e, "the task's local state cannot be read: wiping it and restoring from the changelog");
                }
                self.metrics.tasks_corrupted.inc();
                self.wipe(id, Vec::new(), timestamp)?
            }
            other => other?,
        };
        if self.settings.eos && holds_uncommitted(&stores)? {
            // Persistent state without a checkpoint may hold writes of an aborted
            // transaction: it is wiped and rebuilt from the (committed) changelog.
            if standby {
                tracing::info!(task = %id, "standby: wiping state without checkpoint (exactly-once)");
            } else {
                tracing::info!(task = %id, "wiping state without checkpoint (exactly-once)");
            }
            stores = self.wipe(id, stores, timestamp)?;
        }
        Ok(Some(stores))
    }

    /// Closes `stores` without committing, deletes the task's state directory and builds
    /// the stores anew (empty, to be restored from the changelog).
    pub(in crate::runtime) fn wipe(
        &self,
        id: TaskId,
        stores: Vec<TaskStore>,
        timestamp: &Arc<AtomicI64>,
    ) -> Result<Vec<TaskStore>, StreamsError> {
        for mut s in stores {
            s.store.close()?;
        }
        self.wipe_dir(id)?;
        self.make_stores(id, timestamp)
    }
}

/// The committed offset of each store of the task of `partition` restored from a source
/// topic: restoration stops there, the task processes what follows. Without a committed
/// offset the task processes the whole topic itself (from where `auto.offset.reset` says),
/// so there is nothing to restore: the bound is 0.
fn restore_bounds<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    member: Option<&StreamsMember>,
    partition: i32,
    stores: &[TaskStore],
) -> Result<Vec<(String, i64)>, StreamsError> {
    committed_bounds(consumer, member, partition, &sourced(stores))
}

/// The stores restored from a source topic, as (store name, topic).
pub(in crate::runtime) fn sourced(stores: &[TaskStore]) -> Vec<(String, String)> {
    stores
        .iter()
        .filter(|s| s.from_source.is_some())
        .filter_map(|s| Some((s.name.clone(), s.changelog.clone()?)))
        .collect()
}

/// [`restore_bounds`] of the stores `sourced` names (see [`sourced`]).
pub(in crate::runtime) fn committed_bounds<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    member: Option<&StreamsMember>,
    partition: i32,
    sourced: &[(String, String)],
) -> Result<Vec<(String, i64)>, StreamsError> {
    if sourced.is_empty() {
        return Ok(Vec::new());
    }
    let mut tpl = TopicPartitionList::new();
    for (_, topic) in sourced {
        tpl.add_partition(topic, partition);
    }
    let committed = crate::runtime::topics::start_offsets::committed(
        consumer,
        member,
        &tpl,
        crate::runtime::topics::start_offsets::COMMITTED_TIMEOUT,
    )?;
    Ok(sourced
        .iter()
        .filter_map(|(name, topic)| {
            let offset = match committed.find_partition(topic, partition)?.offset() {
                rdkafka::Offset::Offset(o) => o,
                _ => 0,
            };
            Some((name.clone(), offset))
        })
        .collect())
}

/// Sets the restore bounds of `stores` found by [`restore_bounds`].
fn bound(stores: &mut [TaskStore], bounds: &[(String, i64)]) {
    for s in stores {
        s.restore_until = bounds.iter().find(|(n, _)| *n == s.name).map(|(_, o)| *o);
    }
}

/// After an incremental rebalance, librdkafka (2.12) resumes the partitions it kept, which
/// it paused for the rebalance, without waking the threads that fetch them: a thread with
/// nothing else to fetch sleeps up to a second before it fetches again, and the kept tasks
/// stall meanwhile. A watermark query to each leader of a kept partition wakes its thread.
fn wake_fetchers<C: ConsumerContext>(consumer: &BaseConsumer<C>, kept: &TopicPartitionList) {
    let timeout = std::time::Duration::from_secs(5);
    let mut leaders: HashMap<i32, (String, i32)> = HashMap::new();
    let topics: BTreeSet<String> = kept.elements().iter().map(|e| e.topic().to_owned()).collect();
    for topic in &topics {
        let Ok(metadata) = consumer.fetch_metadata(Some(topic), timeout) else {
            continue;
        };
        for t in metadata.topics() {
            for p in t.partitions() {
                if kept.find_partition(topic, p.id()).is_some() {
                    leaders
                        .entry(p.leader())
                        .or_insert_with(|| (topic.clone(), p.id()));
                }
            }
        }
    }
    for (leader, (topic, partition)) in leaders {
        if let Err(e) = consumer.fetch_watermarks(&topic, partition, timeout) {
            tracing::debug!(leader, error = %e, "waking the fetcher of a kept partition");
        }
    }
}

/// Whether a persistent store has data but no checkpoint: under exactly-once it may hold
/// writes of an aborted transaction.
fn holds_uncommitted(stores: &[TaskStore]) -> Result<bool, StreamsError> {
    for s in stores {
        if s.store.persistent() && s.store.checkpoint()?.is_none() && s.store.approximate_num_entries()? > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}
