//! A stream thread: an OS thread with its own consumer (in the group `application.id`)
//! and producer, running the synchronous loop poll -> process -> punctuate -> commit.
//!
//! Rebalance callbacks run inside `poll`, on this thread. They reach the thread's tasks
//! through a thread-local slot, so revocation can commit (and suspend) the revoked tasks
//! before the partitions move, without sharing tasks across threads or taking locks.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers as _, Message};
use rdkafka::statistics::Statistics;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};
use rdkafka::{ClientContext, TopicPartitionList};

use super::assignment::TaskPartitions;
use super::publish::FetchPosition;
use super::query::Inbox;
use super::query::serve::serve;
use super::resets::{ResetWatch, SourceResets, forward_log};
use super::start_offsets;
use super::status::Status;
use super::streams_group::StreamsMember;
use super::tasks::{TaskManager, TaskManagerParts};
use crate::model::error::StreamsError;
use crate::model::record::{Headers, RawRecord};
use crate::processor::ThreadWaker;

thread_local! {
    static TASKS: RefCell<Option<TaskManager>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's task manager.
pub(super) fn with_tasks<R>(f: impl FnOnce(&mut TaskManager) -> R) -> Option<R> {
    TASKS.with(|t| t.try_borrow_mut().ok().and_then(|mut t| t.as_mut().map(f)))
}

/// The consumer context of a stream thread: forwards rebalances to the task manager.
pub(crate) struct ThreadContext {
    pub status: Arc<Status>,
    pub name: String,
    /// Set by a rebalance callback, cleared by the loop once the new tasks exist.
    pub in_rebalance: AtomicBool,
    /// Set once the loop has ended: the consumer is closing, and an assignment delivered
    /// meanwhile creates no task (its offsets are not looked up: the closing group would
    /// never answer).
    pub closing: AtomicBool,
    /// Counts this thread's rebalance callbacks. Per thread: a callback on another thread
    /// says nothing about the records this thread has polled.
    pub generation: AtomicU64,
    /// Partitions revoked by callbacks since the loop last looked (cooperative
    /// rebalances: only their polled records are dropped).
    pub revoked: Mutex<Vec<(String, i32)>>,
    /// Ends and fetch positions of the assigned partitions, from librdkafka's statistics
    /// (delivered inside `poll` about once a second), for the lag metric.
    pub fetch_positions: Mutex<HashMap<(String, i32), FetchPosition>>,
    /// Offset resets of source partitions librdkafka logged, for the loop to report.
    pub resets: ResetWatch,
    /// Where partitions without a commit start (`auto.offset.reset`), resolved to a
    /// concrete offset by the runtime (see `start_offsets.rs`).
    pub reset: start_offsets::ResetTo,
    /// Per source topic, where its partitions without a commit start when
    /// `auto.offset.reset` is not set: its source's [`OffsetReset`](crate::OffsetReset).
    pub topic_resets: HashMap<String, start_offsets::ResetTo>,
}

impl ClientContext for ThreadContext {
    /// librdkafka's log lines go to `tracing`; an offset reset is also noted for the loop,
    /// which reports it with what it skipped.
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        // A reset is reported by the loop, with what it skipped: its own line is detail.
        let level = if self.resets.observe(fac, message) {
            RDKafkaLogLevel::Debug
        } else {
            level
        };
        forward_log(&self.name, level, fac, message);
    }

    /// librdkafka's client-level errors (a broker down, a coordinator moving) are
    /// transient: librdkafka retries them itself. Logged as warnings, not errors.
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        let reason = super::redact::redact(reason);
        tracing::warn!(thread = %self.name, error = %error, "kafka client: {reason}");
    }

    fn stats(&self, statistics: Statistics) {
        let Ok(mut positions) = self.fetch_positions.lock() else {
            return;
        };
        positions.clear();
        for (topic, t) in statistics.topics {
            for (partition, p) in t.partitions {
                if partition >= 0 && p.desired {
                    positions.insert(
                        (topic.clone(), partition),
                        FetchPosition {
                            high: p.hi_offset,
                            stable: p.ls_offset,
                            next: p.next_offset,
                            queued: p.fetchq_cnt,
                        },
                    );
                }
            }
        }
    }
}

/// Whether `consumer`'s assignment changes come partition by partition: cooperative
/// rebalances (`group.protocol=consumer`), and the runtime's own assignments under the
/// streams protocol (the consumer joins no group, so librdkafka knows no protocol).
fn incremental<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> bool {
    !matches!(consumer.rebalance_protocol(), RebalanceProtocol::Eager)
}

impl ConsumerContext for ThreadContext {
    /// rust-rdkafka's rebalance, except that assigned partitions start at the committed
    /// offsets the runtime read itself (see `start_offsets.rs`).
    fn rebalance(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        let cooperative = incremental(consumer);
        let assign = err == RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
        let rebalance = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => Rebalance::Assign(tpl),
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => Rebalance::Revoke(tpl),
            other => Rebalance::Error(KafkaError::Rebalance(other.into())),
        };
        self.pre_rebalance(consumer, &rebalance);
        let applied = if assign {
            let start = if self.closing.load(Ordering::Relaxed) {
                tpl.clone()
            } else {
                let reset = |topic: &str| self.topic_resets.get(topic).copied().unwrap_or(self.reset);
                start_offsets::explicit(consumer, tpl, reset).unwrap_or_else(|e| {
                    // Never guess: without the committed offsets the thread fails (and is
                    // replaced, or the application stops, as the error handler says).
                    with_tasks(|tm| {
                        tm.failure.get_or_insert(e);
                    });
                    tpl.clone()
                })
            };
            if cooperative {
                consumer.incremental_assign(&start)
            } else {
                consumer.assign(&start)
            }
        } else if cooperative {
            consumer.incremental_unassign(tpl)
        } else {
            consumer.unassign()
        };
        if let Err(e) = applied {
            tracing::error!(thread = %self.name, error = %e, "applying a rebalance");
            with_tasks(|tm| {
                tm.failure
                    .get_or_insert(super::restore::kafka_err("applying a rebalance", e));
            });
        }
        self.post_rebalance(consumer, &rebalance);
    }

    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        if !self.in_rebalance.swap(true, Ordering::Relaxed) {
            self.status.enter_rebalance();
        }
        if let Rebalance::Revoke(tpl) = rebalance {
            tracing::info!(thread = %self.name, partitions = tpl.count(), "partitions revoked");
            if let Ok(mut r) = self.revoked.lock() {
                r.extend(
                    tpl.elements()
                        .iter()
                        .map(|e| (e.topic().to_owned(), e.partition())),
                );
            }
            with_tasks(|tm| {
                if let Err(e) = tm.revoke(consumer, tpl) {
                    tracing::error!(thread = %self.name, error = %e, "commit on revocation failed");
                    tm.failure.get_or_insert(e);
                }
            });
        }
    }

    /// Eager (classic protocol): every revocation is followed by the whole new assignment.
    /// Cooperative (`group.protocol=consumer`): callbacks carry only the partitions added
    /// or revoked, so the task manager is given the whole assignment after each of them;
    /// tasks whose partitions stay keep running.
    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        let cooperative = incremental(consumer);
        let whole = || match consumer.assignment() {
            Ok(a) => Some(a),
            Err(e) => {
                with_tasks(|tm| {
                    tm.failure
                        .get_or_insert(super::restore::kafka_err("assignment after a rebalance", e));
                });
                None
            }
        };
        match rebalance {
            Rebalance::Assign(tpl) => {
                tracing::info!(thread = %self.name, partitions = tpl.count(), cooperative, "partitions assigned");
                if !cooperative {
                    with_tasks(|tm| tm.set_pending(tpl));
                } else if let Some(all) = whole() {
                    with_tasks(|tm| tm.set_pending_cooperative(&all));
                }
            }
            Rebalance::Revoke(_) => {
                if cooperative && let Some(all) = whole() {
                    with_tasks(|tm| tm.set_pending_cooperative(&all));
                }
            }
            Rebalance::Error(e) => tracing::warn!(thread = %self.name, error = %e, "rebalance error"),
        }
    }
}

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
    pub hosting: Arc<super::query::discovery::Hosting>,
    /// Under `group.protocol=streams`: the thread's member of the streams group, which
    /// receives its task assignment (the consumer then joins no group), and the input
    /// partitions of each task.
    pub member: Option<(Arc<StreamsMember>, TaskPartitions)>,
}

/// Interns the topic names of one consumer's records: a handful of topics, so a scan beats
/// hashing, and each record shares its topic's name instead of allocating a copy.
#[derive(Default)]
pub(super) struct TopicNames(Vec<Arc<str>>);

impl TopicNames {
    /// The shared name of `topic`.
    pub fn get(&mut self, topic: &str) -> Arc<str> {
        if let Some(t) = self.0.iter().find(|t| ***t == *topic) {
            return t.clone();
        }
        let t: Arc<str> = Arc::from(topic);
        self.0.push(t.clone());
        t
    }
}

/// A consumed message as the tasks take it (bytes copied out of librdkafka's buffers: key
/// and value into this thread's payload arena, so the records of a batch share a few
/// chunks instead of allocating two buffers each; see `payloads.rs`).
pub(super) fn to_raw(m: &rdkafka::message::BorrowedMessage<'_>, topics: &mut TopicNames) -> RawRecord {
    let mut headers = Headers::new();
    if let Some(h) = m.headers() {
        for hd in h.iter() {
            match hd.value {
                Some(v) => headers.add(hd.key, Bytes::copy_from_slice(v)),
                None => headers.add_null(hd.key),
            };
        }
    }
    let (key, value) =
        super::payloads::with_arena(|a| (m.key().map(|k| a.copy(k)), m.payload().map(|v| a.copy(v))));
    RawRecord {
        topic: topics.get(m.topic()),
        partition: m.partition(),
        offset: m.offset(),
        key,
        value,
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
    mut settings: LoopSettings,
    shutdown: Arc<AtomicBool>,
    status: Arc<Status>,
    inbox: &Inbox,
) -> Result<(), StreamsError> {
    // Every event of this thread, rebalance callbacks included, carries the thread's name.
    let span = tracing::info_span!("stream_thread", thread = name);
    let _entered = span.enter();
    // Async processors' completions wake the loop through it.
    let waker = ThreadWaker::default();
    ThreadWaker::install(&waker);
    let manager = TaskManager::new(tasks)?;
    TASKS.with(|t| *t.borrow_mut() = Some(manager));
    let result = run_loop(name, &consumer, &settings, &shutdown, &status, inbox, &waker);
    consumer.context().closing.store(true, Ordering::Relaxed);
    let clean = result.is_ok();
    let closed = with_tasks(|tm| tm.close(&consumer, clean)).unwrap_or(Ok(()));
    TASKS.with(|t| t.borrow_mut().take());
    settings.hosting.remove(name);
    consumer.unsubscribe();
    // Leave the streams group now that the tasks are closed (their offsets committed), so
    // the broker moves them at once rather than after the session timeout.
    if let Some((member, _)) = settings.member.take()
        && let Ok(member) = Arc::try_unwrap(member)
    {
        member.leave(Duration::from_secs(10));
    }
    result.and(closed)
}

fn run_loop(
    name: &str,
    consumer: &BaseConsumer<ThreadContext>,
    settings: &LoopSettings,
    shutdown: &AtomicBool,
    status: &Status,
    inbox: &Inbox,
    waker: &ThreadWaker,
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
    step(&mut |tm| tm.start_globals(name))?;
    step(&mut |tm| tm.begin_transaction())?;
    // The loop's own metric handles (the task manager owns the thread's series).
    let m = with_tasks(|tm| LoopMetrics::of(&tm.metrics))
        .ok_or_else(|| StreamsError::Usage("task manager missing".into()))?;
    let resets = with_tasks(|tm| SourceResets {
        on_mock: settings.on_mock,
        resets: tm.metrics.offset_resets.clone(),
        skipped: tm.metrics.skipped_offsets.clone(),
    })
    .ok_or_else(|| StreamsError::Usage("task manager missing".into()))?;
    let mut last_commit = Instant::now();
    let mut last_publish = Instant::now();
    let mut topics = TopicNames::default();
    while !shutdown.load(Ordering::Relaxed) {
        if let Some((member, tasks)) = &settings.member {
            if let Some(e) = member.failure() {
                return Err(e);
            }
            super::assignment::apply_pending(consumer, member, tasks)?;
        }
        let mut batch = Vec::new();
        let mut timeout = settings.poll;
        let poll_started = Instant::now();
        while batch.len() < settings.max_poll_records {
            let generation = consumer.context().generation.load(Ordering::Relaxed);
            let polled = poll_sliced(consumer, timeout, inbox, waker);
            if consumer.context().generation.load(Ordering::Relaxed) != generation {
                drop_revoked(consumer, &mut batch);
            }
            match polled {
                Some(Ok(m)) => batch.push(to_raw(&m, &mut topics)),
                Some(Err(e)) if let Some(denied) = poll_denied(consumer, settings, &e) => {
                    // Not transient: librdkafka would retry for ever.
                    return Err(denied);
                }
                Some(Err(e)) => {
                    tracing::warn!(thread = name, error = %e, "poll error");
                    m.consumer_errors.inc();
                    break;
                }
                None => break,
            }
            timeout = Duration::ZERO;
        }
        let polled_for = poll_started.elapsed().as_secs_f64();
        m.poll_latency.observe(polled_for);
        m.blocked_seconds.inc_by(polled_for);
        m.poll_records.observe(batch.len() as f64);
        let reset = consumer.context().resets.take();
        if !reset.is_empty() {
            // The partitions start a new sequence of offsets: their tasks must not take
            // the new records for re-deliveries.
            with_tasks(|tm| {
                for r in &reset {
                    tm.forget_position(&r.topic, r.partition);
                }
            });
            resets.handle(consumer, reset)?;
        }
        let restoring = with_tasks(|tm| {
            let created = if tm.has_pending() {
                tm.create_pending(consumer)
            } else {
                Ok(())
            };
            created
                .and_then(|()| tm.take_restored(consumer))
                .map(|()| tm.is_restoring())
        })
        .unwrap_or(Ok(false))?;
        // The thread's rebalance ends once its new tasks are restored and running.
        if !restoring && consumer.context().in_rebalance.swap(false, Ordering::Relaxed) {
            with_tasks(|tm| settings.hosting.set(name, tm.hosted()));
            status.leave_rebalance();
        }
        step(&mut |tm| {
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
                settings.hosting.set(name, tm.hosted());
                last_publish = Instant::now();
            }
            status.set_processed(name, tm.processed_total);
            serve(inbox, tm, consumer.context().in_rebalance.load(Ordering::Relaxed));
            Ok(())
        })?;
    }
    Ok(())
}

/// How long an idle thread waits for records before it looks at its query inbox.
const QUERY_SLICE: Duration = Duration::from_millis(5);

/// Polls one message, waiting at most `timeout`, in slices of [`QUERY_SLICE`]: returns
/// early (with nothing) when a query arrives, async work completed or a rebalance
/// callback ran.
fn poll_sliced<'c>(
    consumer: &'c BaseConsumer<ThreadContext>,
    timeout: Duration,
    inbox: &Inbox,
    waker: &ThreadWaker,
) -> Option<rdkafka::error::KafkaResult<rdkafka::message::BorrowedMessage<'c>>> {
    let deadline = Instant::now() + timeout;
    let generation = consumer.context().generation.load(Ordering::Relaxed);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let polled = consumer.poll(left.min(QUERY_SLICE));
        if polled.is_some()
            || left <= QUERY_SLICE
            || inbox.has_pending()
            || waker.take()
            || consumer.context().generation.load(Ordering::Relaxed) != generation
        {
            return polled;
        }
    }
}

/// The authorization error a poll of the main consumer reported, naming the group or the
/// source topics.
fn poll_denied(
    consumer: &BaseConsumer<ThreadContext>,
    settings: &LoopSettings,
    e: &KafkaError,
) -> Option<StreamsError> {
    let code = e
        .rdkafka_error_code()
        .filter(|c| super::connect::is_authorization(*c))?;
    let app = &settings.application_id;
    if code == RDKafkaErrorCode::GroupAuthorizationFailed {
        return Some(super::connect::denied(
            format!("group `{app}`"),
            "joining the consumer group or reading its offsets",
            code,
            &format!("READ and DESCRIBE on groups prefixed `{app}`"),
        ));
    }
    let topics = consumer
        .subscription()
        .map(|s| {
            s.elements()
                .iter()
                .map(|e| format!("`{}`", e.topic()))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    Some(super::connect::denied(
        format!("source topics {topics}"),
        "reading them",
        code,
        &format!("READ on each source topic (READ on topics prefixed `{app}` for repartition topics)"),
    ))
}

/// After a rebalance of this thread's consumer inside a poll: records polled before it from
/// revoked partitions are dropped; they are delivered again from the committed offsets (to
/// whichever member owns them now). Eager rebalances revoke everything; cooperative ones
/// only the partitions named, and the records of the partitions kept stay in the batch,
/// since their fetch position has moved past them.
fn drop_revoked(consumer: &BaseConsumer<ThreadContext>, batch: &mut Vec<RawRecord>) {
    let revoked = consumer
        .context()
        .revoked
        .lock()
        .map(|mut r| std::mem::take(&mut *r))
        .unwrap_or_default();
    if incremental(consumer) {
        batch.retain(|r| !revoked.iter().any(|(t, p)| **t == *r.topic && *p == r.partition));
    } else {
        batch.clear();
    }
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

#[cfg(test)]
mod tests {
    use rdkafka::ClientConfig;
    use rdkafka::TopicPartitionList;

    use super::*;
    use crate::metrics::{Metrics, RecordingLevel};

    fn context(status: &Arc<Status>, name: &str) -> ThreadContext {
        ThreadContext {
            status: status.clone(),
            name: name.to_owned(),
            in_rebalance: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            revoked: Mutex::new(Vec::new()),
            fetch_positions: Mutex::new(HashMap::new()),
            resets: ResetWatch::default(),
            reset: start_offsets::ResetTo::Earliest,
            topic_resets: HashMap::new(),
        }
    }

    /// Two threads of one instance: a rebalance callback on B's consumer must not look like
    /// a rebalance to A, whose polled batch would otherwise be dropped while its position
    /// has moved past it (records lost).
    #[test]
    fn a_rebalance_of_one_thread_does_not_touch_anothers_generation() {
        let status = Arc::new(Status::new(Metrics::new("app", RecordingLevel::Info).unwrap()));
        let a = context(&status, "a");
        let b: BaseConsumer<ThreadContext> = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("group.id", "g")
            .create_with_context(context(&status, "b"))
            .unwrap();
        let tpl = TopicPartitionList::new();
        b.context().pre_rebalance(&b, &Rebalance::Assign(&tpl));
        b.context().post_rebalance(&b, &Rebalance::Assign(&tpl));
        assert_eq!(b.context().generation.load(Ordering::Relaxed), 2);
        assert_eq!(a.generation.load(Ordering::Relaxed), 0);
    }

    /// A message's key, value and header bytes, each possibly absent.
    type Message = (Option<Vec<u8>>, Option<Vec<u8>>, Option<Vec<u8>>);

    /// The key, value and header bytes of a message `i` of `to_raw_keeps_every_records_bytes`:
    /// null and empty keys and values, sizes around and above the arena's large-payload
    /// limit, and headers on some.
    fn message(i: usize) -> Message {
        let bytes = |len: usize| (0..len).map(|j| (i * 31 + j) as u8).collect::<Vec<u8>>();
        let key = match i % 7 {
            0 => None,
            1 => Some(Vec::new()),
            _ => Some(bytes(1 + i % 40)),
        };
        let value = match i % 11 {
            0 => None,
            1 => Some(Vec::new()),
            2 => Some(bytes(crate::runtime::payloads::LARGE_BYTES + 1 + i)),
            _ => Some(bytes(50 + (i * 37) % 400)),
        };
        let header = i.is_multiple_of(5).then(|| bytes(3 + i % 9));
        (key, value, header)
    }

    /// Records copied out of consumed messages (several arena chunks' worth, every record
    /// kept alive) hold exactly their messages' bytes, and null stays distinct from empty.
    #[test]
    fn to_raw_keeps_every_records_bytes() {
        use rdkafka::message::{Header, OwnedHeaders};
        use rdkafka::mocking::MockCluster;
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

        const N: usize = 1500;
        let cluster = MockCluster::new(1).unwrap();
        cluster.create_topic("in", 1, 1).unwrap();
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap_servers())
            .create()
            .unwrap();
        for i in 0..N {
            let (key, value, header) = message(i);
            let mut r: BaseRecord<'_, [u8], [u8]> = BaseRecord::to("in").partition(0);
            if let Some(k) = &key {
                r = r.key(&k[..]);
            }
            if let Some(v) = &value {
                r = r.payload(&v[..]);
            }
            if let Some(h) = &header {
                r = r.headers(OwnedHeaders::new().insert(Header {
                    key: "h",
                    value: Some(&h[..]),
                }));
            }
            producer.send(r).map_err(|(e, _)| e).unwrap();
        }
        producer.flush(Duration::from_secs(10)).unwrap();
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap_servers())
            .set("group.id", "to-raw")
            .set("auto.offset.reset", "earliest")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("in", 0, rdkafka::Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).unwrap();
        let mut topics = TopicNames::default();
        let mut records = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while records.len() < N && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                records.push(to_raw(&m.unwrap(), &mut topics));
            }
        }
        assert_eq!(records.len(), N);
        for (i, r) in records.iter().enumerate() {
            let (key, value, header) = message(i);
            assert_eq!(r.offset, i as i64);
            assert_eq!(&*r.topic, "in");
            assert_eq!(r.key.as_deref(), key.as_deref(), "key of record {i}");
            assert_eq!(r.value.as_deref(), value.as_deref(), "value of record {i}");
            assert_eq!(r.headers.last("h"), header.as_deref(), "header of record {i}");
        }
    }
}
