//! A stream thread: an OS thread with its own consumer (in the group `application.id`)
//! and producer, running the synchronous loop poll -> process -> punctuate -> commit.
//!
//! The loop owns the thread's task manager and passes it on by `&mut`. Rebalance callbacks
//! run inside `poll`, on this thread, through the consumer context of `rebalance.rs`: the
//! loop lends them the task manager for each poll (`lend.rs`).

pub(in crate::runtime) mod factory;
mod poll;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::model::error::StreamsError;
use crate::runtime::group::assignment::TaskPartitions;
pub(crate) use crate::runtime::group::rebalance::ThreadContext;
use crate::runtime::query::Inbox;
use crate::runtime::query::serve::serve;
use crate::runtime::status::Status;
use crate::runtime::streams_group::StreamsMember;
use crate::runtime::tasks::{TaskManager, TaskManagerParts};
use crate::runtime::topics::resets::SourceResets;

/// The settings of a thread's loop.
pub(crate) struct LoopSettings {
    /// The application's id: its consumer group, and the prefix of its internal topics.
    pub application_id: String,
    pub commit_interval: Duration,
    pub poll: Duration,
    pub max_poll_records: usize,
    /// The application runs on the embedded mock cluster.
    pub on_mock: bool,
    /// Where the thread reports the tasks it hosts (for interactive queries).
    pub hosting: Arc<crate::runtime::query::discovery::Hosting>,
    /// Under `group.protocol=streams`: the thread's member of the streams group, which
    /// receives its task assignment (the consumer then joins no group), and the input
    /// partitions of each task.
    pub member: Option<(Arc<StreamsMember>, TaskPartitions)>,
}

/// Runs the loop until `shutdown` is set or an error stops it. The consumer must already
/// be subscribed; the task manager's producer already initialized for transactions.
pub(crate) fn run(
    name: &str,
    consumer: crate::runtime::client::oauth::Authenticated<BaseConsumer<ThreadContext>>,
    tasks: TaskManagerParts,
    settings: LoopSettings,
    shutdown: Arc<AtomicBool>,
    status: Arc<Status>,
    inbox: &Inbox,
) -> Result<(), StreamsError> {
    // Every event of this thread, rebalance callbacks included, carries the thread's name.
    let span = tracing::info_span!("stream_thread", thread = name);
    let _entered = span.enter();
    let mut tasks = TaskManager::new(tasks)?;
    let result = run_loop(name, &consumer, &mut tasks, &settings, &shutdown, &status, inbox);
    consumer.context().closing.store(true, Ordering::Relaxed);
    let clean = result.is_ok();
    let closed = tasks.close(&consumer, clean);
    // Dropped before the consumer leaves its group: its stores and producer are closed.
    drop(tasks);
    settings.hosting.remove(name);
    crate::runtime::group::rebalance::leave_group(&consumer, settings.member.is_none());
    // The streams-group member leaves when the runtime drops its own handle, right after
    // this returns: the tasks are closed (their offsets committed) by then, so the broker
    // moves them at once rather than after the session timeout. The runtime keeps that
    // handle because a failed thread may ask the whole application to shut down through it.
    result.and(closed)
}

/// A failure a rebalance callback recorded (callbacks cannot return it), as an error.
fn callback_failure(tm: &mut TaskManager) -> Result<(), StreamsError> {
    tm.failure.take().map_or(Ok(()), Err)
}

fn run_loop(
    name: &str,
    consumer: &BaseConsumer<ThreadContext>,
    tm: &mut TaskManager,
    settings: &LoopSettings,
    shutdown: &AtomicBool,
    status: &Status,
    inbox: &Inbox,
) -> Result<(), StreamsError> {
    tm.start_globals(name)?;
    tm.begin_transaction()?;
    // The loop's own metric handles (the task manager owns the thread's series).
    let m = LoopMetrics::of(&tm.metrics);
    let resets = SourceResets {
        on_mock: settings.on_mock,
        resets: tm.metrics.offset_resets.clone(),
        skipped: tm.metrics.skipped_offsets.clone(),
    };
    let mut last_commit = Instant::now();
    let mut last_publish = Instant::now();
    let mut poller = poll::Poller::new(consumer, settings.max_poll_records)?;
    while !shutdown.load(Ordering::Relaxed) {
        if let Some((member, tasks)) = &settings.member {
            member.polled();
            if let Some(e) = member.failure() {
                return Err(e);
            }
            crate::runtime::group::assignment::apply_pending(consumer, tm, member, tasks)?;
        }
        let poll_started = Instant::now();
        let mut batch = poller.poll(tm, settings, inbox, &m)?;
        let polled_for = poll_started.elapsed().as_secs_f64();
        m.poll_latency.observe(polled_for);
        m.blocked_seconds.inc_by(polled_for);
        m.poll_records.observe(batch.len() as f64);
        let reset = consumer.context().resets.take();
        if !reset.is_empty() {
            // The partitions start a new sequence of offsets: their tasks must not take
            // the new records for re-deliveries.
            for r in &reset {
                tm.forget_position(&r.topic, r.partition);
            }
            resets.handle(consumer, reset)?;
        }
        if tm.has_pending() {
            tm.create_pending(consumer)?;
        }
        tm.take_restored(consumer)?;
        let restoring = tm.is_restoring();
        // The thread's rebalance ends once its new tasks are restored and running.
        if !restoring && consumer.context().in_rebalance.swap(false, Ordering::Relaxed) {
            settings.hosting.set(name, tm.hosted(), tm.standby_ids());
            status.leave_rebalance();
        }
        callback_failure(tm)?;
        tm.poll_globals()?;
        let started = Instant::now();
        for r in batch.drain(..) {
            tm.add_record(r);
        }
        if tm.process(consumer)? > 0 {
            m.process_latency.observe(started.elapsed().as_secs_f64());
        }
        let started = Instant::now();
        if tm.punctuate_wall_clock(consumer)? > 0 {
            m.punctuate_latency.observe(started.elapsed().as_secs_f64());
            // A punctuation may have let a task take records again (an async
            // processor's completions): its queued records go on now, not after the
            // next wait for records.
            tm.process(consumer)?;
        }
        tm.apply_backpressure(consumer)?;
        if tm.commit_requested() || last_commit.elapsed() >= settings.commit_interval {
            let started = Instant::now();
            if tm.commit(consumer)? {
                let took = started.elapsed().as_secs_f64();
                m.commit_latency.observe(took);
                m.blocked_seconds.inc_by(took);
                m.commits.inc();
                tracing::debug!(thread = name, took_ms = took * 1e3, "committed");
            }
            tm.begin_transaction()?;
            last_commit = Instant::now();
        }
        if last_publish.elapsed() >= PUBLISH_EVERY {
            let fetch = consumer
                .context()
                .fetch_positions
                .lock()
                .map(|h| h.clone())
                .unwrap_or_default();
            tm.publish_metrics(&fetch);
            settings.hosting.set(name, tm.hosted(), tm.standby_ids());
            last_publish = Instant::now();
        }
        status.set_processed(name, tm.processed_total);
        serve(inbox, tm, consumer.context().in_rebalance.load(Ordering::Relaxed));
    }
    Ok(())
}

/// How often task counts and gauges are published to the registry.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// Clones of the thread's handles the loop records into itself.
struct LoopMetrics {
    poll_latency: prometheus::Histogram,
    poll_records: prometheus::Histogram,
    process_latency: prometheus::Histogram,
    punctuate_latency: prometheus::Histogram,
    commit_latency: prometheus::Histogram,
    commits: prometheus::IntCounter,
    blocked_seconds: prometheus::Counter,
    consumer_errors: prometheus::IntCounter,
}

impl LoopMetrics {
    fn of(t: &crate::metrics::ThreadMetrics) -> Self {
        Self {
            poll_latency: t.poll_latency.clone(),
            poll_records: t.poll_records.clone(),
            process_latency: t.process_latency.clone(),
            punctuate_latency: t.punctuate_latency.clone(),
            commit_latency: t.commit_latency.clone(),
            commits: t.commits.clone(),
            blocked_seconds: t.blocked_seconds.clone(),
            consumer_errors: t.consumer_errors.clone(),
        }
    }
}
