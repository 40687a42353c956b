//! A stream thread: an OS thread with its own consumer (in the group `application.id`)
//! and producer, running the synchronous loop poll -> process -> punctuate -> commit.
//!
//! Rebalance callbacks run inside `poll`, on this thread. They reach the thread's tasks
//! through a thread-local slot, so revocation can commit (and suspend) the revoked tasks
//! before the partitions move, without sharing tasks across threads or taking locks.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::{Headers as _, Message};

use super::status::Status;
use super::tasks::{TaskManager, TaskManagerParts};
use crate::error::StreamsError;
use crate::record::{Headers, RawRecord};

thread_local! {
    static TASKS: RefCell<Option<TaskManager>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's task manager.
fn with_tasks<R>(f: impl FnOnce(&mut TaskManager) -> R) -> Option<R> {
    TASKS.with(|t| t.try_borrow_mut().ok().and_then(|mut t| t.as_mut().map(f)))
}

/// The consumer context of a stream thread: forwards rebalances to the task manager.
pub(crate) struct ThreadContext {
    pub status: Arc<Status>,
    pub name: String,
    /// Set by a rebalance callback, cleared by the loop once the new tasks exist.
    pub in_rebalance: AtomicBool,
}

impl ClientContext for ThreadContext {}

impl ConsumerContext for ThreadContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.status.bump_generation();
        if !self.in_rebalance.swap(true, Ordering::Relaxed) {
            self.status.enter_rebalance();
        }
        if let Rebalance::Revoke(tpl) = rebalance {
            tracing::info!(thread = %self.name, partitions = tpl.count(), "partitions revoked");
            with_tasks(|tm| {
                if let Err(e) = tm.revoke(consumer, tpl) {
                    tracing::error!(thread = %self.name, error = %e, "commit on revocation failed");
                    tm.failure.get_or_insert(e);
                }
            });
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.status.bump_generation();
        match rebalance {
            Rebalance::Assign(tpl) => {
                tracing::info!(thread = %self.name, partitions = tpl.count(), "partitions assigned");
                with_tasks(|tm| tm.set_pending(tpl));
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => tracing::warn!(thread = %self.name, error = %e, "rebalance error"),
        }
    }
}

/// The settings of a thread's loop.
pub(crate) struct LoopSettings {
    pub commit_interval: Duration,
    pub poll: Duration,
    pub max_poll_records: usize,
}

fn to_raw(m: &rdkafka::message::BorrowedMessage<'_>) -> RawRecord {
    let mut headers = Headers::new();
    if let Some(h) = m.headers() {
        for hd in h.iter() {
            match hd.value {
                Some(v) => headers.add(hd.key, Bytes::copy_from_slice(v)),
                None => headers.add_null(hd.key),
            };
        }
    }
    RawRecord {
        topic: m.topic().to_owned(),
        partition: m.partition(),
        offset: m.offset(),
        key: m.key().map(Bytes::copy_from_slice),
        value: m.payload().map(Bytes::copy_from_slice),
        timestamp: m.timestamp().to_millis().unwrap_or(0),
        headers,
    }
}

/// Runs the loop until `shutdown` is set or an error stops it. The consumer must already
/// be subscribed; the task manager's producer already initialized for transactions.
pub(crate) fn run(
    name: &str,
    consumer: BaseConsumer<ThreadContext>,
    tasks: TaskManagerParts,
    settings: LoopSettings,
    shutdown: Arc<AtomicBool>,
    status: Arc<Status>,
) -> Result<(), StreamsError> {
    TASKS.with(|t| *t.borrow_mut() = Some(TaskManager::new(tasks)));
    let result = run_loop(name, &consumer, &settings, &shutdown, &status);
    let clean = result.is_ok();
    let closed = with_tasks(|tm| tm.close(&consumer, clean)).unwrap_or(Ok(()));
    TASKS.with(|t| t.borrow_mut().take());
    consumer.unsubscribe();
    result.and(closed)
}

fn run_loop(
    name: &str,
    consumer: &BaseConsumer<ThreadContext>,
    settings: &LoopSettings,
    shutdown: &AtomicBool,
    status: &Status,
) -> Result<(), StreamsError> {
    let step = |f: &mut dyn FnMut(&mut TaskManager) -> Result<(), StreamsError>| -> Result<(), StreamsError> {
        with_tasks(|tm| {
            if let Some(e) = tm.failure.take() {
                return Err(e);
            }
            f(tm)
        })
        .unwrap_or_else(|| Err(StreamsError::Usage("task manager missing".into())))
    };
    step(&mut |tm| tm.begin_transaction())?;
    let mut last_commit = Instant::now();
    while !shutdown.load(Ordering::Relaxed) {
        let mut batch = Vec::new();
        let mut timeout = settings.poll;
        while batch.len() < settings.max_poll_records {
            let generation = status.generation();
            let polled = consumer.poll(timeout);
            if status.generation() != generation {
                // A rebalance ran inside this poll: records polled before it belong to
                // the old assignment and are delivered again from the committed offsets.
                batch.clear();
            }
            match polled {
                Some(Ok(m)) => batch.push(to_raw(&m)),
                Some(Err(e)) => {
                    tracing::warn!(thread = name, error = %e, "poll error");
                    break;
                }
                None => break,
            }
            timeout = Duration::ZERO;
        }
        step(&mut |tm| {
            if tm.has_pending() {
                tm.create_pending(consumer)?;
            }
            Ok(())
        })?;
        if consumer.context().in_rebalance.swap(false, Ordering::Relaxed) {
            status.leave_rebalance();
        }
        step(&mut |tm| {
            for r in batch.drain(..) {
                tm.add_record(r);
            }
            tm.process()?;
            tm.punctuate_wall_clock()?;
            if tm.commit_requested() || last_commit.elapsed() >= settings.commit_interval {
                tm.commit(consumer)?;
                tm.begin_transaction()?;
                last_commit = Instant::now();
            }
            status.set_processed(name, tm.processed_total);
            Ok(())
        })?;
    }
    Ok(())
}
