//! A stream thread's consumer context: rebalance callbacks of librdkafka (classic and
//! consumer protocols) and the runtime's own task assignments (streams protocol, see
//! `assignment.rs`) reach the thread's task manager, which the loop lends them for the
//! calls that run them (`lend.rs`), on the thread itself, so revocation can commit (and
//! suspend) the revoked tasks before the partitions move, without sharing tasks across
//! threads or taking locks.
//!
//! Invariants: the generation counter moves at every callback of this thread's consumer
//! only, so the loop drops exactly the polled records of partitions revoked meanwhile;
//! a failure inside a callback is kept for the loop to report (callbacks cannot return it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, TopicPartitionList};

use crate::model::record::RawRecord;
use crate::runtime::client::client_log::forward_log;
use crate::runtime::client::fetch_queue::FetchRoute;
use crate::runtime::group::lend::with_lent;
use crate::runtime::status::Status;
use crate::runtime::tasks::publish::FetchPosition;
use crate::runtime::topics::resets::ResetWatch;
use crate::runtime::topics::start_offsets;

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
    /// Whether the group's rebalances are cooperative, as librdkafka answered inside the
    /// first rebalance callback (see [`incremental`]).
    pub cooperative: OnceLock<bool>,
    /// Where assigned partitions send their records: the thread's fetch queue, routed to
    /// before each assignment (see `client/fetch_queue.rs`).
    pub fetch_route: FetchRoute,
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
        let reason = crate::runtime::client::redact::redact(reason);
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

/// How long a closing stream thread waits for its consumer to give its partitions up.
const LEAVE_WAIT: Duration = Duration::from_secs(10);
/// How long no rebalance callback must have run, nothing assigned, before the consumer
/// counts as out of its group.
const LEAVE_QUIET: Duration = Duration::from_millis(250);

/// Leaves the group before `consumer` is dropped: unsubscribes and, for a consumer in a
/// group (`subscribed`: not under the streams protocol, where it joins none), polls until
/// nothing is assigned and no rebalance callback ran for [`LEAVE_QUIET`] (at most
/// [`LEAVE_WAIT`]). A rebalance event still queued when librdkafka's close begins (the
/// revocation, or an assignment of a join that was under way) is served inside the close,
/// where the callback's `assign`/`unassign` can wait for ever on a group already torn down
/// (librdkafka issue 4884: seen as a consumer that never closed, in about half the runs
/// of the standby tests). Records polled meanwhile are dropped: the tasks are closed,
/// their offsets committed.
pub(crate) fn leave_group(consumer: &BaseConsumer<ThreadContext>, subscribed: bool) {
    consumer.unsubscribe();
    if !subscribed {
        return;
    }
    let generation = || consumer.context().generation.load(Ordering::Relaxed);
    let deadline = Instant::now() + LEAVE_WAIT;
    let (mut seen, mut quiet_since) = (generation(), Instant::now());
    while Instant::now() < deadline {
        let _ = consumer.poll(Duration::from_millis(50));
        if generation() != seen {
            (seen, quiet_since) = (generation(), Instant::now());
        }
        let assigned = consumer.assignment().is_ok_and(|a| a.count() > 0);
        if !assigned && quiet_since.elapsed() >= LEAVE_QUIET {
            return;
        }
    }
}

/// Whether `consumer`'s assignment changes come partition by partition: cooperative
/// rebalances (`group.protocol=consumer`), and the runtime's own assignments under the
/// streams protocol (the consumer joins no group, so librdkafka knows no protocol).
///
/// librdkafka answers from its group thread, and the caller waits without a timeout. A
/// closing consumer's group may already be gone when a callback of its close asks, and
/// librdkafka drops a question put to it at that moment unanswered: the thread would wait
/// for ever (librdkafka issue 4041; seen as a stream thread that never closed after the
/// whole cluster was paused). The protocol of a consumer's group never changes, so the
/// first answer of a joined group (eager or cooperative) is kept and never asked again;
/// only a consumer with no group (the streams protocol) is asked each time, which
/// librdkafka answers at once without its group thread.
fn incremental(consumer: &BaseConsumer<ThreadContext>) -> bool {
    let known = &consumer.context().cooperative;
    if let Some(cooperative) = known.get() {
        return *cooperative;
    }
    match consumer.rebalance_protocol() {
        RebalanceProtocol::Eager => *known.get_or_init(|| false),
        RebalanceProtocol::Cooperative => *known.get_or_init(|| true),
        RebalanceProtocol::None => true,
    }
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
        self.before(consumer, &rebalance);
        let applied = if assign {
            let start = if self.closing.load(Ordering::Relaxed) {
                tpl.clone()
            } else {
                let reset = |topic: &str| self.topic_resets.get(topic).copied().unwrap_or(self.reset);
                let member = with_lent(|tm| tm.member()).flatten();
                start_offsets::explicit(consumer, member.as_deref(), tpl, reset).unwrap_or_else(|e| {
                    // Never guess: without the committed offsets the thread fails (and is
                    // replaced, or the application stops, as the error handler says).
                    with_lent(|tm| {
                        tm.failure.get_or_insert(e);
                    });
                    tpl.clone()
                })
            };
            with_lent(|tm| tm.note_start_offsets(&start, !cooperative));
            // Before the assignment: librdkafka fetches for it from now on.
            self.fetch_route.route(consumer, &start);
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
            with_lent(|tm| {
                tm.failure
                    .get_or_insert(crate::runtime::client::errors::kafka_err(
                        "applying a rebalance",
                        e,
                    ));
            });
        }
        self.after(consumer, &rebalance, cooperative);
    }
}

impl ThreadContext {
    /// Before the assignment changes: revoked tasks commit and suspend.
    fn before(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
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
            with_lent(|tm| {
                if let Err(e) = tm.revoke(consumer, tpl) {
                    tracing::error!(thread = %self.name, error = %e, "commit on revocation failed");
                    tm.failure.get_or_insert(e);
                }
            });
        }
    }

    /// After the assignment changed (`cooperative` as the callback found it before).
    /// Eager (classic protocol): every revocation is followed by the whole new assignment.
    /// Cooperative (`group.protocol=consumer`): callbacks carry only the partitions added
    /// or revoked, so the task manager is given the whole assignment after each of them;
    /// tasks whose partitions stay keep running.
    ///
    /// A closing consumer's callbacks stop here: its tasks are gone, and the group it
    /// would ask for the whole assignment may be gone too (see [`incremental`]).
    fn after(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>, cooperative: bool) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        if self.closing.load(Ordering::Relaxed) {
            return;
        }
        let whole = || match consumer.assignment() {
            Ok(a) => Some(a),
            Err(e) => {
                with_lent(|tm| {
                    tm.failure
                        .get_or_insert(crate::runtime::client::errors::kafka_err(
                            "assignment after a rebalance",
                            e,
                        ));
                });
                None
            }
        };
        match rebalance {
            Rebalance::Assign(tpl) => {
                tracing::info!(thread = %self.name, partitions = tpl.count(), cooperative, "partitions assigned");
                if !cooperative {
                    with_lent(|tm| tm.set_pending(tpl));
                } else if let Some(all) = whole() {
                    with_lent(|tm| tm.set_pending_cooperative(&all));
                }
            }
            Rebalance::Revoke(_) => {
                if cooperative && let Some(all) = whole() {
                    with_lent(|tm| tm.set_pending_cooperative(&all));
                }
            }
            Rebalance::Error(e) => tracing::warn!(thread = %self.name, error = %e, "rebalance error"),
        }
    }
}

/// After a rebalance of this thread's consumer inside a poll: records polled before it from
/// revoked partitions are dropped; they are delivered again from the committed offsets (to
/// whichever member owns them now). Eager rebalances revoke everything; cooperative ones
/// only the partitions named, and the records of the partitions kept stay in the batch,
/// since their fetch position has moved past them.
pub(in crate::runtime) fn drop_revoked(consumer: &BaseConsumer<ThreadContext>, batch: &mut Vec<RawRecord>) {
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

#[cfg(test)]
mod tests {
    use rdkafka::ClientConfig;

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
            cooperative: OnceLock::new(),
            fetch_route: FetchRoute::default(),
        }
    }

    /// A consumer that joined no group is asked each time (librdkafka answers at once); the
    /// answer of a joined group is kept, and a kept answer is never asked again.
    #[test]
    fn the_protocol_of_a_joined_group_is_kept() {
        let status = Arc::new(Status::new(Metrics::new("app", RecordingLevel::Info).unwrap()));
        let c: BaseConsumer<ThreadContext> = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("group.id", "g")
            .create_with_context(context(&status, "c"))
            .unwrap();
        assert!(incremental(&c), "no group joined: the runtime's own assignments");
        assert_eq!(c.context().cooperative.get(), None, "not kept");
        c.context().cooperative.set(false).unwrap();
        assert!(!incremental(&c), "eager, as the first callback found it");
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
        b.context().before(&b, &Rebalance::Assign(&tpl));
        b.context().after(&b, &Rebalance::Assign(&tpl), false);
        assert_eq!(b.context().generation.load(Ordering::Relaxed), 2);
        assert_eq!(a.generation.load(Ordering::Relaxed), 0);
    }
}
