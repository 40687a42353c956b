//! The state updater: restores the stores of a stream thread's new tasks on a thread of
//! its own, so the stream thread goes on polling its consumer (a long restoration never
//! exceeds `max.poll.interval.ms`) and processing its running tasks meanwhile.
//!
//! The stream thread builds a new task's stores (they are `Send`), pauses the task's input
//! partitions and hands the stores over ([`StateUpdater::add`]). The updater owns the
//! thread's restore consumer and takes turns between its tasks in steps of [`STEP`] (so a
//! task with little to restore is not stuck behind a large one), one store of a task at a
//! time; between steps it takes commands. A restored (or corrupted) task's
//! stores come back as an [`Event`]; the stream thread then builds the task around them,
//! or wipes them and hands them over again.
//!
//! Standby tasks ([`StandbyJob`], `tailing.rs`) are held too: their stores follow their
//! changelogs and are never reported done. Restoring tasks go first: standbys step only
//! while no task restores, all of them at once, with a consumer of their own
//! (`standby_reader.rs`) that holds every standby's partitions and is assigned again only
//! when the standbys changed. A standby is removed
//! ([`StateUpdater::remove_standby`]: its stores are checkpointed and closed) or promoted
//! ([`StateUpdater::promote`]: its stores, checkpointed, become a restoring task's, which
//! restores only what the standby had not applied).
//!
//! A task revoked while restoring is removed ([`StateUpdater::remove`]): the updater
//! checkpoints how far it got and closes the stores, which releases the task's state
//! directory (a new owner on this process waits for it, see `tasks/mod.rs`). Dropping the
//! updater stops its thread the same way for every task it still holds.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::Duration;

pub(crate) use super::jobs::{Event, Promotion, RestoreJob, StandbyJob};
use crate::engine::TaskStore;
use crate::model::TaskId;
use crate::model::error::StreamsError;
use crate::runtime::restore::RestoreConsumers;
use crate::runtime::restore::held::{HeldTask, Visit};
use crate::runtime::restore::offset_sums::OffsetSums;
use crate::runtime::restore::tailing::{self, TailStep, Tailing};
use crate::runtime::restore::{Restoration, Step};

/// The most work the updater does between two looks at its commands.
const STEP: Duration = Duration::from_millis(200);

enum Command {
    Add(RestoreJob),
    Remove(TaskId),
    AddStandby(StandbyJob),
    RemoveStandby(TaskId),
    Promote(Promotion),
    Visit(Visit),
}

/// The stream thread's handle on its state updater.
pub(crate) struct StateUpdater {
    commands: Option<Sender<Command>>,
    /// Visits sent and not taken yet: a standby step waiting for records ends early.
    visits: Arc<AtomicUsize>,
    events: Receiver<Event>,
    thread: Option<JoinHandle<()>>,
}

impl StateUpdater {
    /// Starts the updater thread `name`, which restores with `consumers`.
    /// Standbys record their stores' offset sums in `sums`.
    pub fn start(
        name: String,
        consumers: RestoreConsumers,
        sums: Arc<OffsetSums>,
    ) -> Result<Self, StreamsError> {
        let (commands, inbox) = mpsc::channel();
        let (outbox, events) = mpsc::channel();
        let visits = Arc::new(AtomicUsize::new(0));
        let waiting = visits.clone();
        let span = tracing::info_span!("state_updater", thread = %name);
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let _entered = span.enter();
                Worker {
                    consumers,
                    jobs: VecDeque::new(),
                    standbys: VecDeque::new(),
                    assigned: None,
                    standbys_assigned: false,
                    outbox,
                    sums,
                    visits: waiting,
                }
                .run(&inbox);
            })
            .map_err(|e| StreamsError::Usage(format!("cannot start the state updater thread: {e}")))?;
        Ok(Self {
            commands: Some(commands),
            visits,
            events,
            thread: Some(thread),
        })
    }

    /// Hands a task's stores over for restoration.
    pub fn add(&self, job: RestoreJob) {
        self.send(Command::Add(job));
    }

    /// Stops restoring task `id`: its stores are checkpointed where they are and closed.
    pub fn remove(&self, id: TaskId) {
        self.send(Command::Remove(id));
    }

    /// Keeps a standby task's stores warm.
    pub fn add_standby(&self, job: StandbyJob) {
        self.send(Command::AddStandby(job));
    }

    /// Stops keeping standby `id`: its stores are checkpointed and closed (their state
    /// directory stays).
    pub fn remove_standby(&self, id: TaskId) {
        self.send(Command::RemoveStandby(id));
    }

    /// Turns standby `promotion.id` into a restoring task: its stores are checkpointed and
    /// restored from there, reported like any restoration. A standby no longer held (it was
    /// reported corrupted meanwhile) is ignored: the stream thread handles that report.
    pub fn promote(&self, promotion: Promotion) {
        self.send(Command::Promote(promotion));
    }

    /// Runs `visit` on the updater's thread, between two steps, with the tasks it holds
    /// (see `held.rs`); `false` when the updater is gone (`visit` is dropped, not run).
    pub fn visit(&self, visit: Visit) -> bool {
        self.visits.fetch_add(1, Ordering::AcqRel);
        let sent = (self.commands.as_ref()).is_some_and(|c| c.send(Command::Visit(visit)).is_ok());
        if !sent {
            self.visits.fetch_sub(1, Ordering::AcqRel);
        }
        sent
    }

    fn send(&self, command: Command) {
        // The worker only ends when the handle is dropped, or by a panic, which
        // `try_event` reports.
        if let Some(c) = &self.commands {
            let _ = c.send(command);
        }
    }

    /// The next report, if one is there; an error if the updater thread is gone.
    pub fn try_event(&self) -> Result<Option<Event>, StreamsError> {
        match self.events.try_recv() {
            Ok(e) => Ok(Some(e)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(StreamsError::Usage(
                "the state updater thread stopped unexpectedly (a panic, logged above)".into(),
            )),
        }
    }
}

impl Drop for StateUpdater {
    fn drop(&mut self) {
        // Closing the channel stops the worker after it closed the stores it holds.
        self.commands.take();
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the state updater thread panicked");
        }
    }
}

/// A task being restored.
struct Job {
    job: RestoreJob,
    restoration: Restoration,
}

/// A standby task being kept warm.
struct Standby {
    job: StandbyJob,
    tail: Tailing,
}

struct Worker {
    consumers: RestoreConsumers,
    /// The tasks being restored; the first one takes the next step.
    jobs: VecDeque<Job>,
    /// The standby tasks; the first one takes the next standby step.
    standbys: VecDeque<Standby>,
    /// The hand-over whose changelog partition the restore consumer is assigned.
    assigned: Option<u64>,
    /// Whether the standbys' consumer holds every standby's partitions.
    standbys_assigned: bool,
    outbox: Sender<Event>,
    /// Where standbys record how much state they hold.
    sums: Arc<OffsetSums>,
    /// Visits waiting (see [`StateUpdater`]).
    visits: Arc<AtomicUsize>,
}

impl Worker {
    fn run(mut self, inbox: &Receiver<Command>) {
        loop {
            // Idle: wait for work. Busy: take what came in, then do one step.
            let next = if self.jobs.is_empty() && self.standbys.is_empty() {
                inbox.recv().map_err(|_| TryRecvError::Disconnected)
            } else {
                inbox.try_recv()
            };
            match next {
                Ok(Command::Add(job)) => {
                    let restoration = Restoration::new(job.id.partition, &job.stores);
                    self.jobs.push_back(Job { job, restoration });
                    continue;
                }
                Ok(Command::Remove(id)) => {
                    self.remove(id);
                    continue;
                }
                Ok(Command::AddStandby(job)) => {
                    self.add_standby(job);
                    continue;
                }
                Ok(Command::RemoveStandby(id)) => {
                    if let Some(s) = self.take_standby(id) {
                        close_standby(s, "standby removed");
                    }
                    continue;
                }
                Ok(Command::Promote(p)) => {
                    self.promote(p);
                    continue;
                }
                Ok(Command::Visit(v)) => {
                    self.visits.fetch_sub(1, Ordering::AcqRel);
                    self.visit(v);
                    continue;
                }
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {}
            }
            if standby_next(!self.jobs.is_empty(), !self.standbys.is_empty()) {
                self.step_standby();
            } else {
                self.step();
            }
        }
        for id in self.jobs.iter().map(|j| j.job.id).collect::<Vec<_>>() {
            self.remove(id);
        }
        for id in self.standbys.iter().map(|s| s.job.id).collect::<Vec<_>>() {
            if let Some(s) = self.take_standby(id) {
                close_standby(s, "closing");
            }
        }
    }

    /// Lends the restoring tasks and the standbys to `visit`.
    fn visit(&mut self, visit: Visit) {
        let consumer = self.consumers.standby_watermarks();
        let restoring = self.jobs.iter_mut().map(|j| {
            let r = &j.restoration;
            HeldTask::new(
                j.job.id,
                false,
                &mut j.job.stores,
                Box::new(move |i| r.store_lag(i)),
            )
        });
        let standbys = self.standbys.iter_mut().map(|s| {
            let tail = &mut s.tail;
            HeldTask::new(
                s.job.id,
                true,
                &mut s.job.stores,
                Box::new(move |i| tail.store_lag(i, consumer)),
            )
        });
        visit(restoring.chain(standbys).collect());
    }

    /// Starts keeping a standby warm, from its stores' checkpoints.
    fn add_standby(&mut self, mut job: StandbyJob) {
        match Tailing::new(job.id.partition, &job.stores) {
            Ok(tail) => {
                tracing::info!(task = %job.id, "standby task started");
                self.standbys.push_back(Standby { job, tail });
                // Assigned with the others at the next standby step.
                self.standbys_assigned = false;
            }
            Err(error) if error.corrupt_store().is_some() => {
                let reason = error.to_string();
                let _ = self.outbox.send(Event::StandbyCorrupted { job, reason });
            }
            Err(error) => {
                close_stores(job.id, &mut job.stores, "standby failed");
                let _ = self.outbox.send(Event::Failed {
                    id: job.id,
                    seq: job.seq,
                    error,
                });
            }
        }
    }

    /// One step of every standby at once: their consumer holds all their partitions
    /// (assigned again only when the standbys changed).
    fn step_standby(&mut self) {
        if self.standbys.is_empty() {
            return;
        }
        let budget = STEP;
        let mut tails: Vec<(&mut Tailing, &mut Vec<TaskStore>)> = self
            .standbys
            .iter_mut()
            .map(|s| (&mut s.tail, &mut s.job.stores))
            .collect();
        let consumer = match self.consumers.standby.get() {
            Ok(c) => c,
            Err(error) => {
                drop(tails);
                tracing::warn!(error = %error, "creating the standby consumer; trying again");
                return;
            }
        };
        if !self.standbys_assigned {
            match tailing::assign_all(consumer, &mut tails) {
                Ok(()) => self.standbys_assigned = true,
                Err((at, error)) => {
                    drop(tails);
                    match at {
                        Some(i) => self.standby_failed(i, Err(error)),
                        // The assignment itself (a transient client state): tried again next step.
                        None => tracing::debug!(error = %error, "standby assignment"),
                    }
                    return;
                }
            }
        }
        let before: Vec<u64> = tails.iter().map(|(t, _)| t.applied).collect();
        let visits = &self.visits;
        let visited = || visits.load(Ordering::Acquire) > 0;
        let outcomes = tailing::step_all(consumer, &mut tails, budget, &visited);
        drop(tails);
        for (s, before) in self.standbys.iter_mut().zip(before) {
            s.job
                .metrics
                .records
                .inc_by(s.tail.applied.saturating_sub(before));
            if let Some(lag) = s.tail.lag(self.consumers.standby_watermarks()) {
                s.job.metrics.lag.set(lag);
            }
            self.sums
                .record(s.job.id, s.tail.offset_sum(&s.job.stores), false);
            self.sums.record_end(
                s.job.id,
                s.tail.end_sum(&s.job.stores, self.consumers.standby_watermarks()),
            );
        }
        // Standbys that cannot go on leave the deque, last first (indices stay valid).
        for (i, outcome) in outcomes.into_iter().enumerate().rev() {
            if !matches!(outcome, Ok(TailStep::Applied)) {
                self.standby_failed(i, outcome);
            }
        }
    }

    /// Standby `i` stopped with `outcome`: corrupted ones go back to the stream thread to be
    /// wiped and started over, other errors fail it.
    fn standby_failed(&mut self, i: usize, outcome: Result<TailStep, StreamsError>) {
        let reason = match outcome {
            Ok(TailStep::Applied) => return,
            Ok(TailStep::Corrupted { reason }) => reason,
            Err(error) if error.corrupt_store().is_some() => error.to_string(),
            Err(error) => {
                let Some(mut s) = self.drop_standby(i) else {
                    return;
                };
                close_stores(s.job.id, &mut s.job.stores, "standby failed");
                let _ = self.outbox.send(Event::Failed {
                    id: s.job.id,
                    seq: s.job.seq,
                    error,
                });
                return;
            }
        };
        let Some(s) = self.drop_standby(i) else {
            return;
        };
        let _ = self.outbox.send(Event::StandbyCorrupted { job: s.job, reason });
    }

    /// Takes standby `i` out as it stands (no checkpoint), no longer followed.
    fn drop_standby(&mut self, i: usize) -> Option<Standby> {
        let s = self.standbys.remove(i)?;
        self.sums.record_end(s.job.id, None);
        self.unassign_standbys();
        Some(s)
    }

    /// Takes standby `id` out, its stores checkpointed where it stands.
    fn take_standby(&mut self, id: TaskId) -> Option<Standby> {
        let i = self.standbys.iter().position(|s| s.job.id == id)?;
        let mut s = self.standbys.remove(i)?;
        if self.standbys_assigned {
            self.unassign_standbys();
        }
        if let Err(e) = s.tail.checkpoint(&mut s.job.stores) {
            tracing::warn!(task = %id, error = %e, "checkpointing a standby");
        }
        self.sums.record(id, s.tail.offset_sum(&s.job.stores), true);
        self.sums.record_end(id, None);
        tracing::info!(task = %id, applied = s.tail.applied, "standby task stopped");
        Some(s)
    }

    /// Takes every partition from the standbys' consumer: the next standby step assigns the
    /// standbys left.
    fn unassign_standbys(&mut self) {
        self.standbys_assigned = false;
        if let Some(consumer) = self.consumers.standby.made() {
            let _ = rdkafka::consumer::Consumer::unassign(&**consumer);
        }
    }

    /// Turns a standby into a restoring task, first in line.
    fn promote(&mut self, p: Promotion) {
        let Some(s) = self.take_standby(p.id) else {
            tracing::debug!(task = %p.id, "promotion of a standby no longer held");
            return;
        };
        let mut stores = s.job.stores;
        for store in &mut stores {
            store.restore_until = p.bounds.iter().find(|(n, _)| *n == store.name).map(|(_, o)| *o);
        }
        let job = RestoreJob {
            id: p.id,
            seq: p.seq,
            stores,
            gauges: p.gauges,
        };
        let restoration = Restoration::new(job.id.partition, &job.stores);
        tracing::info!(task = %p.id, "standby promoted: restoring what it had not applied");
        self.jobs.push_front(Job { job, restoration });
    }

    /// Restores the first task for a step, then puts it last; reports it when it is done.
    fn step(&mut self) {
        let Some(current) = self.jobs.front_mut() else {
            return;
        };
        let before = current.restoration.restored;
        let mut step = Ok(());
        if self.assigned != Some(current.job.seq) {
            step = current.restoration.resume(&self.consumers.reader);
        }
        self.assigned = Some(current.job.seq);
        let step = step.and_then(|()| {
            current
                .restoration
                .step(&self.consumers, &mut current.job.stores, STEP)
        });
        if let Some((records, remaining)) = &current.job.gauges {
            records.inc_by(current.restoration.restored.saturating_sub(before));
            remaining.set(i64::try_from(current.restoration.remaining()).unwrap_or(i64::MAX));
        }
        let event = match step {
            Ok(Step::Pending) => {
                self.jobs.rotate_left(1);
                return;
            }
            Ok(Step::Done(records)) => {
                let Some(Job { job, .. }) = self.jobs.pop_front() else {
                    return;
                };
                Event::Restored { job, records }
            }
            Ok(Step::Corrupted { store, topic, reason }) => {
                let Some(Job { job, .. }) = self.jobs.pop_front() else {
                    return;
                };
                Event::Corrupted {
                    job,
                    store,
                    topic,
                    reason,
                }
            }
            Err(error) if error.corrupt_store().is_some() => {
                // The local files are corrupt (a checksum mismatch reading the checkpoint or
                // a block): like a changelog gap, the task starts over from the changelog.
                let Some(Job { job, .. }) = self.jobs.pop_front() else {
                    return;
                };
                let _ = rdkafka::consumer::Consumer::unassign(&*self.consumers.reader);
                Event::Corrupted {
                    job,
                    store: String::new(),
                    topic: String::new(),
                    reason: error.to_string(),
                }
            }
            Err(error) => {
                let Some(Job { job, .. }) = self.jobs.pop_front() else {
                    return;
                };
                let _ = rdkafka::consumer::Consumer::unassign(&*self.consumers.reader);
                Event::Failed {
                    id: job.id,
                    seq: job.seq,
                    error,
                }
            }
        };
        // Done and corrupted restorations unassigned the consumer.
        self.assigned = None;
        if let Some((_, remaining)) = match &event {
            Event::Restored { job, .. } | Event::Corrupted { job, .. } => job.gauges.as_ref(),
            Event::Failed { .. } | Event::StandbyCorrupted { .. } => None,
        } {
            remaining.set(0);
        }
        let _ = self.outbox.send(event);
    }

    /// Gives up restoring task `id`: checkpoints its progress and closes its stores.
    fn remove(&mut self, id: TaskId) {
        let Some(i) = self.jobs.iter().position(|j| j.job.id == id) else {
            return;
        };
        let Some(mut j) = self.jobs.remove(i) else {
            return;
        };
        // Abandoning may unassign the consumer: the next step assigns it again.
        self.assigned = None;
        if let Err(e) = j.restoration.abandon(&self.consumers.reader, &mut j.job.stores) {
            tracing::warn!(task = %id, error = %e, "checkpointing a restoration given up");
        }
        close_stores(id, &mut j.job.stores, "restoration given up");
        tracing::info!(task = %id, restored = j.restoration.restored, "restoration given up (task revoked or closing)");
    }
}

/// Whether the standbys take the next step: only while no task restores. Restoring tasks
/// keep processing waiting, standbys only keep a fail-over short; and the two cannot share
/// the restore consumer in turns: assigned partition after partition in quick succession,
/// librdkafka (2.12) at times never started fetching the restoring partition again (a task's
/// restoration made no progress for a minute while standbys took every other turn).
fn standby_next(restoring: bool, standbys: bool) -> bool {
    standbys && !restoring
}

/// Closes the stores of task `id` (releasing its state directory); `why` names the occasion
/// in warnings.
fn close_stores(id: TaskId, stores: &mut [TaskStore], why: &str) {
    for s in stores {
        if let Err(e) = s.store.close() {
            tracing::warn!(task = %id, store = %s.name, error = %e, "closing a store ({why})");
        }
    }
}

/// Closes a standby's stores. Its metric series go first: a standby of the same task
/// started once the state directory is free must not have its new series removed by this
/// one's.
fn close_standby(s: Standby, why: &str) {
    let StandbyJob {
        id,
        mut stores,
        metrics,
        ..
    } = s.job;
    drop(metrics);
    close_stores(id, &mut stores, why);
}

#[cfg(test)]
#[path = "updater_tests.rs"]
mod tests;
