//! The tasks of one stream thread: created on assignment once their stores are restored
//! (`creation.rs`, `updater.rs`), committed and suspended on revocation, closed when
//! another member took them.
//!
//! Suspension: the classic protocol's eager rebalance revokes every partition before it
//! assigns again. Revoked tasks are committed and kept; tasks whose partitions come back
//! resume with their state, the rest are closed. Under exactly-once the commit is the
//! thread's transaction, so a kept task's state is exactly its committed state.
//!
//! Hand-over between threads of one process: a task moved from thread A to thread B may
//! still be open (suspended) on A when B is assigned its partitions, so B finds the
//! task's state directory locked. B then waits: the task's partitions are paused, records
//! already fetched for them are held back in order, and creation is retried on every
//! loop until A has closed the task. Nothing is dropped and no offset moves meanwhile.

pub(in crate::runtime) mod backpressure;
pub(in crate::runtime) mod commit;
pub(in crate::runtime) mod commit_eos;
pub(in crate::runtime) mod corrupted;
pub(in crate::runtime) mod creation;
pub(in crate::runtime) mod deliveries;
pub(in crate::runtime) mod global;
pub(in crate::runtime) mod publish;
pub(in crate::runtime) mod recover;
pub(in crate::runtime) mod resume;
pub(in crate::runtime) mod standby;
pub(in crate::runtime) mod txn_failure;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use rdkafka::producer::Producer;

use crate::engine::TaskFactory;
use crate::engine::{Fetched, Task, TaskId};
use crate::metrics::{Metrics, ThreadMetrics};
use crate::model::error::StreamsError;
use crate::model::record::RawRecord;
use crate::processor::PunctuationType;
use crate::runtime::produce::producer::{DeliveryTracker, StreamProducer};
use crate::runtime::restore::updater::StateUpdater;
use crate::runtime::streams_group::StreamsMember;
use crate::runtime::tasks::creation::Restoring;
use crate::runtime::tasks::global::GlobalTasks;
use crate::runtime::topics::resets::AssignedConsumer;

/// What a thread's tasks need to know of the application.
pub(crate) struct TaskSettings {
    /// Builds the thread's tasks and their stores.
    pub factory: TaskFactory,
    pub state_dir: PathBuf,
    pub eos: bool,
    /// The main consumer's `auto.offset.reset`.
    pub reset: crate::runtime::topics::start_offsets::ResetTo,
    /// The application runs on the embedded mock cluster: a changelog gap is then fatal.
    pub on_mock: bool,
    /// Deletes the committed records of repartition topics after commits.
    pub purge: Option<crate::runtime::topics::purge::PurgeSchedule>,
    /// How long an empty input partition holds back a task with several (`max.task.idle.ms`).
    pub idle: crate::engine::IdlePolicy,
    /// The instance's record of how much of each task's state it holds.
    pub offset_sums: Arc<crate::runtime::restore::offset_sums::OffsetSums>,
}

pub(crate) struct TaskManager {
    pub(super) settings: TaskSettings,
    pub(super) global_consumer: Option<AssignedConsumer>,
    /// This thread's replicas of the global stores.
    pub(super) globals: Option<GlobalTasks>,
    pub metrics: ThreadMetrics,
    /// Producer failures already published.
    pub(super) failed_published: u64,
    /// Nanoseconds of full-queue waits already published.
    pub(super) queue_full_published: u64,
    pub producer: Arc<StreamProducer>,
    pub(super) tracker: DeliveryTracker,
    /// Makes the producer again when it can no longer be used (see `producer_recipe.rs`).
    pub(super) recipe: crate::runtime::produce::producer_recipe::ProducerRecipe,
    /// Restores the stores of new tasks on its own thread.
    pub(super) updater: StateUpdater,
    /// Hand-overs to the updater so far (each one's sequence number).
    pub(super) handovers: u64,
    /// Tasks whose stores the updater is restoring (their partitions are paused).
    pub(super) restoring: BTreeMap<TaskId, Restoring>,
    pub(super) tasks: BTreeMap<TaskId, Task>,
    pub(super) suspended: BTreeSet<TaskId>,
    /// Suspended tasks whose input another member committed since (see `resume.rs`):
    /// built again rather than resumed.
    pub(super) moved: BTreeSet<TaskId>,
    /// The start offset of each input partition as the assignments gave it.
    pub(super) assigned_at: std::collections::HashMap<(String, i32), i64>,
    /// The metadata committed with each assigned input partition's offset (see
    /// `offset_metadata.rs`): a task created for it starts from the largest stream time of
    /// its inputs', and with their processor metadata merged.
    pub(super) committed_meta:
        std::collections::HashMap<(String, i32), crate::runtime::topics::offset_metadata::Committed>,
    /// Partitions assigned by the last rebalance, not yet turned into tasks.
    pub(super) pending: Option<Vec<(String, i32)>>,
    /// The pending assignment kept the positions of the partitions it kept (cooperative).
    pub(super) pending_keeps_positions: bool,
    /// Assigned tasks whose state directory another thread still holds, with the records
    /// fetched for them meanwhile (their partitions are paused).
    pub(super) waiting: BTreeMap<TaskId, Vec<RawRecord>>,
    /// Whether anything was processed or produced since the last commit.
    pub(super) dirty: bool,
    pub in_transaction: bool,
    /// A failure inside a rebalance callback, reported by the loop.
    pub failure: Option<StreamsError>,
    pub processed_total: u64,
    /// When at-least-once commits started failing, if the last one failed.
    pub(super) commit_failing_since: Option<std::time::Instant>,
    /// Tasks whose input is paused because they take no records now, with their queue
    /// length when paused (see `backpressure.rs`).
    pub(super) backpressured: BTreeMap<TaskId, usize>,
    /// Changelog offsets the stores hold as of their restoration, by changelog partition.
    pub(super) restored_to: std::collections::HashMap<(String, i32), i64>,
    /// The thread's standby tasks (see `standby.rs`).
    pub(super) standbys: crate::runtime::tasks::standby::Standbys,
    /// Under `group.protocol=streams`: the thread's group member, which commits the offsets
    /// (the consumer joins no group).
    pub(super) member: Option<Arc<StreamsMember>>,
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// What a task manager is made of; `Send`, so a thread can be handed it and build its
/// (thread-bound) task manager there.
pub(crate) struct TaskManagerParts {
    pub settings: TaskSettings,
    /// Reads the topics of global stores, when the topology has any.
    pub global_consumer: Option<AssignedConsumer>,
    pub metrics: Metrics,
    pub thread_name: String,
    pub producer: Arc<StreamProducer>,
    pub tracker: DeliveryTracker,
    pub recipe: crate::runtime::produce::producer_recipe::ProducerRecipe,
    /// The restore consumer, and under exactly-once the client that looks up where
    /// changelogs end (see `restore/mod.rs`).
    pub restore_consumers: crate::runtime::restore::RestoreConsumers,
    /// Under `group.protocol=streams`: the thread's group member.
    pub member: Option<Arc<StreamsMember>>,
}

impl TaskManager {
    /// The thread's streams-group member (`group.protocol=streams`), which also reads the
    /// group's committed offsets.
    pub(in crate::runtime) fn member(&self) -> Option<Arc<StreamsMember>> {
        self.member.clone()
    }

    pub fn new(parts: TaskManagerParts) -> Result<Self, StreamsError> {
        let TaskManagerParts {
            settings,
            global_consumer,
            metrics,
            thread_name,
            producer,
            tracker,
            recipe,
            restore_consumers,
            member,
        } = parts;
        let updater = StateUpdater::start(
            format!("{thread_name}-restorer"),
            restore_consumers,
            settings.offset_sums.clone(),
        )?;
        Ok(Self {
            settings,
            global_consumer,
            globals: None,
            metrics: metrics.thread(&thread_name),
            failed_published: 0,
            queue_full_published: 0,
            producer,
            tracker,
            recipe,
            updater,
            handovers: 0,
            restoring: BTreeMap::new(),
            tasks: BTreeMap::new(),
            suspended: BTreeSet::new(),
            moved: BTreeSet::new(),
            assigned_at: std::collections::HashMap::new(),
            committed_meta: std::collections::HashMap::new(),
            pending: None,
            pending_keeps_positions: false,
            waiting: BTreeMap::new(),
            dirty: false,
            in_transaction: false,
            failure: None,
            processed_total: 0,
            commit_failing_since: None,
            restored_to: std::collections::HashMap::new(),
            member,
            backpressured: BTreeMap::new(),
            standbys: crate::runtime::tasks::standby::Standbys::default(),
        })
    }

    /// After a cooperative rebalance: `tpl` is the whole assignment, and the partitions kept
    /// keep their positions (and pauses), so records held for waiting tasks stay held.
    pub fn set_pending_cooperative(&mut self, tpl: &TopicPartitionList) {
        self.set_pending(tpl);
        self.pending_keeps_positions = true;
    }

    /// After an eager rebalance (or a rewind): `tpl` is the whole assignment, and every
    /// partition restarts from its committed offset.
    pub fn set_pending(&mut self, tpl: &TopicPartitionList) {
        self.pending_keeps_positions = false;
        self.pending = Some(
            tpl.elements()
                .iter()
                .map(|e| (e.topic().to_owned(), e.partition()))
                .collect(),
        );
    }

    /// Whether an assignment or a task waiting for its state directory needs work.
    /// The tasks this thread hosts: running, suspended, restoring, or waiting for another
    /// thread's state directory.
    pub fn hosted(&self) -> Vec<TaskId> {
        self.tasks
            .keys()
            .chain(self.restoring.keys())
            .chain(self.waiting.keys())
            .copied()
            .collect()
    }

    pub fn has_pending(&self) -> bool {
        self.pending.is_some() || !self.waiting.is_empty() || self.standbys.waiting()
    }

    /// The assigned partitions of a task.
    pub(super) fn task_partitions(&self, id: TaskId) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::new();
        for sub in self.settings.factory.topology().subtopologies() {
            if sub.id == id.subtopology {
                for topic in &sub.source_topics {
                    tpl.add_partition(topic, id.partition);
                }
            }
        }
        tpl
    }

    pub(super) fn task_dir(&self, id: TaskId) -> PathBuf {
        self.settings
            .state_dir
            .join(&**self.settings.factory.app_id())
            .join(id.to_string())
    }

    /// Removes the state directory of task `id`, whose stores are closed.
    pub(super) fn wipe_dir(&self, id: TaskId) -> Result<(), StreamsError> {
        self.settings.offset_sums.forget(id);
        let dir = self.task_dir(id);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| {
                StreamsError::Store(streams_state::StoreError::Io {
                    store: id.to_string(),
                    path: dir.clone(),
                    source: e,
                })
            })?;
        }
        Ok(())
    }

    /// Loads this thread's replicas of the global stores (in
    /// `<state.dir>/<application.id>/global/<thread>`), before any task exists.
    pub fn start_globals(&mut self, thread: &str) -> Result<(), StreamsError> {
        if let Some(consumer) = self.global_consumer.take() {
            let dir = self
                .settings
                .state_dir
                .join(&**self.settings.factory.app_id())
                .join("global")
                .join(thread);
            self.globals = GlobalTasks::start(&self.settings, dir, consumer)?;
        }
        Ok(())
    }

    /// Applies global-store updates that have arrived.
    pub fn poll_globals(&mut self) -> Result<(), StreamsError> {
        if let Some(g) = self.globals.as_mut() {
            g.poll()?;
        }
        Ok(())
    }

    pub fn add_record(&mut self, record: RawRecord) {
        let Some(sub) = self
            .settings
            .factory
            .topology()
            .subtopology_of_topic(&record.topic)
        else {
            return;
        };
        let id = TaskId {
            subtopology: sub.id,
            partition: record.partition,
        };
        if let Some(task) = self.tasks.get_mut(&id) {
            task.add_records([record]);
        } else if let Some(held) = self.waiting.get_mut(&id) {
            held.push(record);
        } else if let Some(r) = self.restoring.get_mut(&id) {
            r.held.push(record);
        }
    }

    /// Tells the task of `topic`-`partition`, if it runs here, that the partition's
    /// position was moved on purpose (see `Task::forget_position`).
    pub fn forget_position(&mut self, topic: &str, partition: i32) {
        let Some(sub) = self.settings.factory.topology().subtopology_of_topic(topic) else {
            return;
        };
        let id = TaskId {
            subtopology: sub.id,
            partition,
        };
        if let Some(task) = self.tasks.get_mut(&id) {
            task.forget_position(topic, partition);
        }
    }

    /// Processes every queued record; returns how many. Under exactly-once, a failed
    /// transaction (see `txn_failure.rs`) stops processing and is recovered from.
    pub fn process<C: ConsumerContext>(&mut self, consumer: &BaseConsumer<C>) -> Result<usize, StreamsError> {
        let result = self.process_tasks(consumer);
        self.after_failed_transaction(consumer, result, 0)
    }

    /// Under exactly-once, when the open transaction failed: aborts it and restarts the
    /// tasks from the last commit, whatever `result` says (an error of a send the failed
    /// transaction refused is a consequence, not the cause); then `none`.
    fn after_failed_transaction<C: ConsumerContext, T>(
        &mut self,
        consumer: &BaseConsumer<C>,
        result: Result<T, StreamsError>,
        none: T,
    ) -> Result<T, StreamsError> {
        if !self.transaction_failed() {
            return result;
        }
        if let Err(e) = &result {
            tracing::debug!(error = %e, "an error after the transaction failed");
        }
        self.recover_failed_transaction(consumer)?;
        Ok(none)
    }

    fn process_tasks<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
    ) -> Result<usize, StreamsError> {
        let mut n = 0;
        let mut corrupt = None;
        let txn_failed = &self.tracker.txn_failed;
        let policy = self.settings.idle;
        // What the consumer knows of empty input partitions, asked once per partition and
        // position in this pass (its answer changes with the next poll).
        let mut known: Vec<(String, i32, Option<i64>, Fetched)> = Vec::new();
        let mut fetched = |topic: &str, partition: i32, next: Option<i64>| {
            if let Some(k) = known
                .iter()
                .find(|k| k.1 == partition && k.2 == next && k.0 == topic)
            {
                return k.3;
            }
            let f = crate::runtime::client::watermarks::fetched(consumer, topic, partition, next);
            known.push((topic.to_owned(), partition, next, f));
            f
        };
        'tasks: for (id, task) in &mut self.tasks {
            loop {
                if txn_failed.load(std::sync::atomic::Ordering::Relaxed) {
                    break 'tasks;
                }
                match task.process_next(&policy, &mut fetched) {
                    Ok(true) => n += 1,
                    Ok(false) => break,
                    Err(e) => match crate::runtime::tasks::corrupted::corruption(&e) {
                        Some(what) => {
                            corrupt = Some((*id, what));
                            break;
                        }
                        None => return Err(e),
                    },
                }
            }
            if corrupt.is_some() {
                break;
            }
        }
        if let Some((id, what)) = corrupt {
            self.recover_corrupted(id, &what, consumer)?;
        }
        if n > 0 {
            self.dirty = true;
            self.processed_total += n as u64;
        }
        Ok(n)
    }

    pub fn punctuate_wall_clock<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
    ) -> Result<usize, StreamsError> {
        let result = self.punctuate_tasks(consumer);
        self.after_failed_transaction(consumer, result, 0)
    }

    fn punctuate_tasks<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
    ) -> Result<usize, StreamsError> {
        let now = now_ms();
        let mut n = 0;
        let mut corrupt = None;
        for (id, task) in &mut self.tasks {
            // A suspended task (revoked, committed, waiting to learn whether it stays)
            // must not write: under exactly-once its writes would join the next
            // transaction of a thread that may no longer own it.
            if self.suspended.contains(id) {
                continue;
            }
            match task.punctuate(PunctuationType::WallClock, now) {
                Ok(k) => n += k,
                Err(e) => match crate::runtime::tasks::corrupted::corruption(&e) {
                    Some(what) => {
                        corrupt = Some((*id, what));
                        break;
                    }
                    None => return Err(e),
                },
            }
        }
        if let Some((id, what)) = corrupt {
            self.recover_corrupted(id, &what, consumer)?;
        }
        if n > 0 {
            self.dirty = true;
        }
        Ok(n)
    }

    pub fn commit_requested(&mut self) -> bool {
        // Every task's request is taken (cleared), not just the first one found.
        let mut requested = false;
        for t in self.tasks.values_mut() {
            requested |= t.take_commit_request();
        }
        requested
    }

    /// Closes every task without committing (after an aborted transaction).
    pub(crate) fn close_all_dirty(&mut self) {
        for (id, mut task) in std::mem::take(&mut self.tasks) {
            self.settings.offset_sums.stopped(id);
            if let Err(e) = task.close(false) {
                tracing::warn!(task = %id, error = %e, "closing task dirty");
            }
            self.metrics.tasks_closed.inc();
        }
        self.suspended.clear();
        self.moved.clear();
        self.waiting.clear();
        self.dirty = false;
    }

    /// On revocation: commit everything and suspend the revoked tasks.
    pub fn revoke<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        tpl: &TopicPartitionList,
    ) -> Result<(), StreamsError> {
        self.metrics.revoked_partitions.inc_by(tpl.count() as u64);
        self.dirty = true;
        self.commit(consumer)?;
        self.begin_transaction()?;
        // A creation queued before the revocation (after a rewind, say) must not bring the
        // revoked partitions' tasks back: another member owns them from now on.
        if let Some(pending) = &mut self.pending {
            pending.retain(|(t, p)| tpl.find_partition(t, *p).is_none());
        }
        for e in tpl.elements() {
            if let Some(sub) = self.settings.factory.topology().subtopology_of_topic(e.topic()) {
                let id = TaskId {
                    subtopology: sub.id,
                    partition: e.partition(),
                };
                self.suspended.insert(id);
                // Records fetched for a task still restoring (or waiting for its state
                // directory) belong to the revoked partition: its next owner reads them
                // again from the committed offset. Kept, they would run through the task
                // once restored, before the next assignment closes it, and their output
                // would commit without their offsets: twice in the output.
                if let Some(r) = self.restoring.get_mut(&id) {
                    r.held.clear();
                }
                if let Some(held) = self.waiting.get_mut(&id) {
                    held.clear();
                }
            }
        }
        Ok(())
    }

    /// Closes every task. A clean close commits first and, under exactly-once, writes
    /// checkpoints of the committed state.
    pub fn close<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        clean: bool,
    ) -> Result<(), StreamsError> {
        let mut result = Ok(());
        if clean {
            self.dirty = true;
            result = self.commit(consumer).map(|_| ());
            if result.is_ok() && self.settings.eos {
                if let Err(e) =
                    crate::runtime::produce::producer::flush(&self.producer, Duration::from_secs(30))
                {
                    tracing::warn!(error = %e, "flush at close");
                }
                // A corrupt store's checkpoint is not written: it restores from the
                // changelog at the next start.
                result = self.write_checkpoints().map(|corrupt| {
                    for (id, what) in corrupt {
                        tracing::warn!(task = %id, error = what, "a store of the task is corrupt; no checkpoint written");
                    }
                });
            }
        } else if self.in_transaction {
            let _ = self.producer.abort_transaction(Duration::from_secs(10));
            self.in_transaction = false;
        }
        for (_, mut task) in std::mem::take(&mut self.tasks) {
            let c = task.counters;
            tracing::info!(
                task = %task.id(),
                processed = c.processed,
                dropped = c.dropped,
                redelivered = c.redelivered,
                punctuations = c.punctuations,
                dead_lettered = c.dead_lettered,
                "closing task"
            );
            if clean && result.is_ok() {
                self.record_closing_offset_sum(&task);
            }
            self.settings.offset_sums.stopped(task.id());
            if let Err(e) = task.close(clean && result.is_ok()) {
                tracing::warn!(task = %task.id(), error = %e, "closing task");
            }
            self.metrics.tasks_closed.inc();
        }
        for id in std::mem::take(&mut self.restoring).into_keys() {
            self.updater.remove(id);
        }
        self.close_standbys();
        // After the tasks, which read the global stores until they close.
        if let Some(mut g) = self.globals.take() {
            g.close();
        }
        result
    }
}
