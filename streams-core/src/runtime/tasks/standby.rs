//! Standby tasks: warm replicas of tasks' stores, kept by the state updater
//! (`updater.rs`, `tailing.rs`) by following the tasks' changelogs, so that a task that
//! comes to this thread restores only what its standby had not applied yet.
//!
//! The assignment says which tasks a thread keeps as standbys ([`TaskManager::set_standbys`]);
//! a standby's stores are built as a restoring task's are (`make_stores`), in the same
//! state directory, and handed to the updater.
//!
//! Invariants:
//! - A task is never both active on this thread (running, suspended, restoring or waiting)
//!   and a standby: a wanted standby of an active task is left out until the task is closed.
//!   A task of the pending assignment gets no new standby, and keeps the one it has until
//!   `create_pending` promotes it.
//! - A wanted standby is either held (its stores are with the updater) or waiting (its state
//!   directory is held by another thread, or by a store of this thread still closing);
//!   waiting ones are retried on every loop, as waiting active tasks are.
//! - Promotion: when the assignment makes a standby active, the standby's stores go
//!   straight to the restoring path ([`StateUpdater::promote`](crate::runtime::restore::updater::StateUpdater::promote)):
//!   the updater checkpoints them and restores from there, so only what the standby had
//!   not applied is restored. The promotion's hand-over number is the restoring task's; a
//!   corruption report of the standby that crosses the promotion is turned into one of the
//!   restoring task.
//! - Removing a standby checkpoints and closes its stores and keeps its state directory, so
//!   a later assignment of the task (active or standby) restores little. A standby found
//!   corrupt (a changelog gap, unreadable files) is wiped and started over.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};

use crate::engine::{TaskId, TaskStore};
use crate::model::error::StreamsError;
use crate::runtime::client::errors::kafka_err;
use crate::runtime::restore::updater::{Event, Promotion, RestoreJob, StandbyJob};
use crate::runtime::tasks::TaskManager;
use crate::runtime::tasks::creation::{Restoring, committed_bounds, sourced};

/// The standby tasks of one thread.
#[derive(Default)]
pub(crate) struct Standbys {
    /// The standbys of the last [`TaskManager::set_standbys`].
    wanted: BTreeSet<TaskId>,
    /// Standbys whose stores are with the updater.
    held: BTreeMap<TaskId, Held>,
    /// Wanted standbys whose state directory is still held elsewhere.
    waiting: BTreeSet<TaskId>,
    /// Tasks promoted from a standby, with the standby's hand-over number.
    promoted: BTreeMap<TaskId, u64>,
}

/// A standby whose stores are with the updater.
struct Held {
    seq: u64,
    /// The stream time the stores' changelog writers stamp records with (used once the
    /// task is active).
    timestamp: Arc<AtomicI64>,
    /// The stores restored from a source topic, as (store, topic): bounded at promotion.
    sourced: Vec<(String, String)>,
}

impl Standbys {
    /// Whether a wanted standby waits for its state directory.
    pub fn waiting(&self) -> bool {
        !self.waiting.is_empty()
    }
}

impl TaskManager {
    /// Makes the thread's standby tasks exactly `wanted`, minus any task it runs as active
    /// (those become standbys once closed, if still wanted). New standbys start from their
    /// stores' checkpoints; removed ones are checkpointed and closed, their state kept.
    ///
    /// A task of an assignment not yet created (`set_pending*`) counts as active: no standby
    /// is started for it, and a standby it already has stays until `create_pending`
    /// promotes it, whichever of the two calls comes first.
    // Called by the thread loop once the group protocol assigns standbys.
    pub fn set_standbys(&mut self, wanted: &BTreeSet<TaskId>) -> Result<(), StreamsError> {
        self.standbys.wanted = wanted.clone();
        let pending = self.pending_ids();
        let gone: Vec<TaskId> = self
            .standbys
            .held
            .keys()
            .filter(|id| !pending.contains(id) && (!wanted.contains(id) || self.is_active(**id)))
            .copied()
            .collect();
        for id in gone {
            self.standbys.held.remove(&id);
            self.updater.remove_standby(id);
            tracing::info!(task = %id, "standby task removed (its state stays on disk)");
        }
        self.standbys.waiting.retain(|id| wanted.contains(id));
        self.sync_standbys()
    }

    /// The thread's standby tasks: held by the updater or waiting for their state directory.
    pub fn standby_ids(&self) -> BTreeSet<TaskId> {
        self.standbys
            .held
            .keys()
            .chain(self.standbys.waiting.iter())
            .copied()
            .collect()
    }

    /// Whether task `id` is active here (running, suspended, restoring or waiting).
    fn is_active(&self, id: TaskId) -> bool {
        self.tasks.contains_key(&id) || self.restoring.contains_key(&id) || self.waiting.contains_key(&id)
    }

    /// The tasks of the assignment not yet created.
    fn pending_ids(&self) -> BTreeSet<TaskId> {
        let topology = self.settings.factory.topology();
        self.pending
            .iter()
            .flatten()
            .filter_map(|(t, p)| {
                topology.subtopology_of_topic(t).map(|s| TaskId {
                    subtopology: s.id,
                    partition: *p,
                })
            })
            .collect()
    }

    /// Whether hand-over `seq` is the current standby of task `id`.
    pub(in crate::runtime) fn is_standby(&self, id: TaskId, seq: u64) -> bool {
        self.standbys.held.get(&id).is_some_and(|h| h.seq == seq)
    }

    /// Starts the wanted standbys that are neither held nor active; those whose state
    /// directory is held elsewhere wait.
    pub(in crate::runtime) fn sync_standbys(&mut self) -> Result<(), StreamsError> {
        let pending = self.pending_ids();
        // A waiting standby whose task became active here is no standby any more.
        let active: Vec<TaskId> = self
            .standbys
            .waiting
            .iter()
            .filter(|id| self.is_active(**id) || pending.contains(id))
            .copied()
            .collect();
        for id in active {
            self.standbys.waiting.remove(&id);
        }
        let todo: Vec<TaskId> = self
            .standbys
            .wanted
            .iter()
            .filter(|id| {
                !self.standbys.held.contains_key(id) && !self.is_active(**id) && !pending.contains(id)
            })
            .copied()
            .collect();
        for id in todo {
            let timestamp = Arc::new(AtomicI64::new(0));
            let Some(stores) = self.open_stores(id, &timestamp, true)? else {
                if self.standbys.waiting.insert(id) {
                    tracing::info!(task = %id, "standby: state directory still held; waiting");
                }
                continue;
            };
            self.standbys.waiting.remove(&id);
            self.hand_standby(id, stores, timestamp);
        }
        self.metrics
            .standby_tasks
            .set(i64::try_from(self.standby_ids().len()).unwrap_or(i64::MAX));
        Ok(())
    }

    /// Hands a standby's stores to the updater.
    fn hand_standby(&mut self, id: TaskId, stores: Vec<TaskStore>, timestamp: Arc<AtomicI64>) {
        self.handovers += 1;
        let seq = self.handovers;
        let held = Held {
            seq,
            timestamp,
            sourced: sourced(&stores),
        };
        self.updater.add_standby(StandbyJob {
            id,
            seq,
            stores,
            metrics: self.metrics.standby(id),
        });
        self.standbys.held.insert(id, held);
    }

    /// Makes standby `id`, if held, the active task of the assignment: its partitions are
    /// paused and its stores restored from where the standby got (see the module docs).
    /// `false` when `id` is not a held standby.
    pub(in crate::runtime) fn promote_standby<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        id: TaskId,
    ) -> Result<bool, StreamsError> {
        self.standbys.waiting.remove(&id);
        let Some(held) = self.standbys.held.remove(&id) else {
            return Ok(false);
        };
        consumer
            .pause(&self.task_partitions(id))
            .map_err(|e| kafka_err("pause", e))?;
        let bounds = committed_bounds(consumer, self.member.as_deref(), id.partition, &held.sourced)?;
        let metrics = self.metrics.task(id);
        self.handovers += 1;
        let seq = self.handovers;
        self.updater.promote(Promotion {
            id,
            seq,
            gauges: Some((metrics.restore_records.clone(), metrics.restore_remaining.clone())),
            bounds: bounds.clone(),
        });
        let held_records = self.waiting.remove(&id).unwrap_or_default();
        self.restoring.insert(
            id,
            Restoring::promoted(seq, held.timestamp, metrics, held_records, bounds),
        );
        self.standbys.promoted.insert(id, held.seq);
        self.metrics
            .standby_tasks
            .set(i64::try_from(self.standby_ids().len()).unwrap_or(i64::MAX));
        tracing::info!(task = %id, "standby task becomes active");
        Ok(true)
    }

    /// A standby was found corrupt: it is wiped and started over. When it was promoted
    /// meanwhile (the updater ignored the promotion), the report returned is that of the
    /// restoring task, to be handled as such.
    pub(in crate::runtime) fn standby_corrupted(
        &mut self,
        job: StandbyJob,
        reason: &str,
    ) -> Result<Option<Event>, StreamsError> {
        let StandbyJob {
            id,
            seq: standby_seq,
            mut stores,
            metrics,
        } = job;
        // Its series go before a new standby of the task registers them again.
        drop(metrics);
        if self.standbys.promoted.get(&id) == Some(&standby_seq) {
            self.standbys.promoted.remove(&id);
            if let Some(seq) = self.restoring.get(&id).map(Restoring::seq) {
                return Ok(Some(Event::Corrupted {
                    job: RestoreJob {
                        id,
                        seq,
                        stores,
                        gauges: None,
                    },
                    store: String::new(),
                    topic: String::new(),
                    reason: reason.to_owned(),
                }));
            }
        }
        if !self.is_standby(id, standby_seq) {
            for s in &mut stores {
                let _ = s.store.close();
            }
            return Ok(None);
        }
        self.standbys.held.remove(&id);
        tracing::warn!(task = %id, "standby: {reason}; wiping its state and starting over");
        self.metrics.tasks_corrupted.inc();
        for s in &mut stores {
            let _ = s.store.close();
        }
        self.wipe_dir(id)?;
        // Built anew (or waiting, should the directory be taken meanwhile).
        self.sync_standbys()?;
        Ok(None)
    }

    /// Stops every standby (the thread closes): checkpointed and closed by the updater.
    pub(in crate::runtime) fn close_standbys(&mut self) {
        for id in std::mem::take(&mut self.standbys.held).into_keys() {
            self.updater.remove_standby(id);
        }
        self.standbys.waiting.clear();
        self.standbys.wanted.clear();
        self.metrics.standby_tasks.set(0);
    }
}

#[cfg(test)]
pub(in crate::runtime) mod tests;
