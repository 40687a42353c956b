//! Recovering from a failed exactly-once commit without losing the thread.
//!
//! A transaction that cannot commit (a broker restarting, a coordinator moving, a timeout)
//! is aborted: its output, changelog writes and offsets vanish. The thread's tasks hold
//! state ahead of that, so they are closed dirty; the consumer is rewound to the committed
//! offsets; and the tasks are created again, their stores wiped and restored from the
//! (committed) changelog, as after a crash.
//!
//! The thread outlives the cluster's faults: an abort that cannot reach the coordinator,
//! or a producer fenced because the broker aborted its transaction on timeout (a broker
//! paused longer than `transaction.timeout.ms`), makes a new producer instead
//! (`producer_recipe.rs`); a new producer and a rewind wait for the cluster for up to
//! [`RECOVERY_LIMIT`]. What the failed transaction's records ask for is decided in
//! `txn_failure.rs` (the production handler, for records refused for good).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use crate::model::error::StreamsError;
use crate::runtime::client::errors::{RECOVERY_LIMIT, is_fatal, kafka_err};
use crate::runtime::produce::txn_offsets::TxnOffsetsError;
use crate::runtime::tasks::TaskManager;

/// How long one abort may wait for the transaction coordinator.
const ABORT_ATTEMPT: Duration = Duration::from_secs(10);

/// How long aborting is tried before the producer is made again instead.
const ABORT_RETRY: Duration = Duration::from_secs(30);

/// The pause between two tries of an abort.
const ABORT_PAUSE: Duration = Duration::from_millis(200);

/// Whether the call that failed with `e` may be made again (librdkafka: "retry call to
/// resume", a timed-out transaction call still under way).
fn is_retriable(e: &KafkaError) -> bool {
    matches!(e, KafkaError::Transaction(t) if t.is_retriable() && !t.is_fatal())
}

/// Whether `e` says another transaction call (a timed-out commit) is still under way.
fn is_conflict(e: &KafkaError) -> bool {
    e.rdkafka_error_code() == Some(RDKafkaErrorCode::Conflict)
}

impl TaskManager {
    /// Aborts the open transaction, closes every task dirty, rewinds the consumer to the
    /// committed offsets and queues the assignment for re-creation. Returns `Ok(false)`:
    /// nothing was committed.
    pub(crate) fn recover_transaction<C: ConsumerContext>(
        &mut self,
        what: &str,
        error: KafkaError,
        consumer: &BaseConsumer<C>,
    ) -> Result<bool, StreamsError> {
        let fatal = is_fatal(&error);
        self.recover_after(what, &error.to_string(), fatal, consumer)
    }

    /// [`recover_transaction`](Self::recover_transaction) for an error already classified:
    /// `fatal` when the producer can no longer be used (fenced after the broker aborted
    /// its transaction on timeout): it is then made again (see `producer_recipe.rs`).
    pub(crate) fn recover_after<C: ConsumerContext>(
        &mut self,
        what: &str,
        error: &str,
        fatal: bool,
        consumer: &BaseConsumer<C>,
    ) -> Result<bool, StreamsError> {
        tracing::warn!(error = %error, producer_unusable = fatal, "{what} failed; aborting the transaction and recreating the tasks from their changelogs");
        self.restart_from_commit(consumer, None, fatal)?;
        Ok(false)
    }

    /// Exactly-once: a record of the open transaction failed, or a send found the
    /// transaction failed. The transaction is aborted and the tasks restart from the last
    /// commit; the failed records go to the production handler (`txn_failure.rs`).
    /// At-least-once: the producer raised a fatal error; a new one is made and the tasks
    /// restart from the last commit (their inputs since are processed again).
    pub(in crate::runtime) fn recover_failed_transaction<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
    ) -> Result<(), StreamsError> {
        if self.settings.eos {
            tracing::warn!(
                "a record of the open transaction failed; aborting it and recreating the tasks from their changelogs"
            );
        } else {
            tracing::warn!(
                "the producer failed; making a new one and recreating the tasks from the last commit"
            );
        }
        self.restart_from_commit(consumer, None, false)
    }

    /// The thread's group membership was lost (streams protocol: fenced, or its session
    /// expired): its tasks may already run elsewhere, so they are closed without
    /// committing, the open transaction aborted, and nothing of the old assignment is
    /// created. Standby tasks stay.
    pub(crate) fn lose_all<C: ConsumerContext>(
        &mut self,
        _consumer: &BaseConsumer<C>,
    ) -> Result<(), StreamsError> {
        let aborted = !self.in_transaction || (!self.producer_failed() && self.abort_bounded());
        self.in_transaction = false;
        self.close_all_dirty();
        if !aborted {
            self.reset_producer()?;
        }
        self.forget_failed_records();
        for id in std::mem::take(&mut self.restoring).into_keys() {
            self.updater.remove(id);
        }
        self.pending = None;
        self.begin_transaction()
    }

    /// Aborts the open transaction, closes every task dirty (and wipes the state directory
    /// of `wipe`), rewinds the consumer to the committed offsets and queues the assignment
    /// for re-creation.
    pub(crate) fn abort_and_recreate<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        wipe: Option<crate::engine::TaskId>,
    ) -> Result<(), StreamsError> {
        self.restart_from_commit(consumer, wipe, false)
    }

    /// The heart of recovery: aborts the open transaction (or, when the producer is
    /// unusable or the abort cannot reach the coordinator, makes a new producer, which
    /// fences the old one), closes every task dirty, acts on the failed records, wipes
    /// `wipe`'s state directory, rewinds the consumer to the committed offsets and queues
    /// the assignment for re-creation.
    fn restart_from_commit<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        wipe: Option<crate::engine::TaskId>,
        producer_unusable: bool,
    ) -> Result<(), StreamsError> {
        // At-least-once there is no transaction to abort: only a failed producer is made again.
        let unusable = producer_unusable || self.producer_failed();
        let aborted = !unusable && (!self.settings.eos || self.abort_bounded());
        self.in_transaction = false;
        self.close_all_dirty();
        if aborted {
            // The abort purged the transaction's records: their reports (and that of the
            // record that failed it) reach the tracker before it is read.
            if let Err(e) = crate::runtime::produce::producer::flush(&self.producer, ABORT_ATTEMPT) {
                tracing::warn!(error = %e, "waiting for the aborted transaction's delivery reports");
            }
        } else {
            self.reset_producer()?;
        }
        self.settle_failed_records()?;
        if let Some(id) = wipe {
            self.wipe_dir(id)?;
        }
        let assignment = consumer.assignment().map_err(|e| kafka_err("assignment", e))?;
        let started = Instant::now();
        loop {
            match self.rewind_to_committed(consumer, &assignment) {
                Ok(()) => break,
                Err(e) if started.elapsed() < RECOVERY_LIMIT && e.is_retriable() => {
                    tracing::warn!(error = %e, "rewinding to the committed offsets failed; retrying");
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => return Err(e),
            }
        }
        // Queued for creation at the next loop, as after a rebalance.
        self.set_pending(&assignment);
        // The next records go into a new transaction (a send outside one fails).
        self.begin_transaction()
    }

    /// Commits the open transaction. A commit that timed out is still under way in
    /// librdkafka, which then refuses an abort ("conflicting commit_transaction API call
    /// already in progress") until it ends: it is resumed (called again) for up to
    /// `timeout` more, and where it still has not ended the error is classified as
    /// fatal, so that recovery makes a new producer, whose `init_transactions` lets the
    /// coordinator finish the old transaction either way before the tasks read the
    /// committed offsets again.
    pub(in crate::runtime) fn commit_transaction_resuming(
        &mut self,
        timeout: Duration,
    ) -> Result<(), TxnOffsetsError> {
        let mut resume_until = None;
        loop {
            match self.producer.commit_transaction(timeout) {
                Ok(()) => return Ok(()),
                Err(e) if is_retriable(&e) => {
                    let until = *resume_until.get_or_insert_with(|| Instant::now() + timeout);
                    if Instant::now() >= until {
                        return Err(TxnOffsetsError {
                            message: format!("{e} (resumed for {timeout:?} more)"),
                            fatal: true,
                        });
                    }
                    tracing::warn!(error = %e, "commit transaction timed out; resuming it");
                }
                Err(e) => {
                    return Err(TxnOffsetsError {
                        message: e.to_string(),
                        fatal: is_fatal(&e),
                    });
                }
            }
        }
    }

    /// Whether the producer raised a fatal error: it refuses every send from then on, and
    /// librdkafka may still accept an abort of its transaction, so only a new producer
    /// helps. Seen when a broker drops a connection mid-batch and the retried batch meets
    /// an out-of-order sequence number.
    fn producer_failed(&self) -> bool {
        match self.producer.client().fatal_error() {
            Some((code, reason)) => {
                tracing::warn!(error = %code, reason = %reason, "the producer raised a fatal error; making a new one");
                true
            }
            None => false,
        }
    }

    /// Aborts the open transaction, trying for up to [`ABORT_RETRY`] with a pause between
    /// tries; `false` when it could not (the producer is fenced, a commit of it is still
    /// under way, or the coordinator did not answer).
    fn abort_bounded(&mut self) -> bool {
        let started = Instant::now();
        loop {
            match self.producer.abort_transaction(ABORT_ATTEMPT) {
                Ok(()) => return true,
                Err(e) if is_fatal(&e) || is_conflict(&e) || started.elapsed() >= ABORT_RETRY => {
                    tracing::warn!(error = %e, "abort transaction failed; making a new producer instead");
                    return false;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "abort transaction failed; retrying");
                    // An abort that fails at once must not spin.
                    std::thread::sleep(ABORT_PAUSE);
                }
            }
        }
    }

    /// Replaces the thread's producer by a new one with the same `transactional.id`, which
    /// fences the old one (see `producer_recipe.rs`), bootstrapped from the brokers the old
    /// one's metadata lists as well as the configured ones. The tasks, which share the old
    /// producer, must be closed first.
    pub(in crate::runtime) fn reset_producer(&mut self) -> Result<(), StreamsError> {
        let started = Instant::now();
        let brokers = crate::runtime::client::connect::listed_brokers(
            self.producer.client(),
            None,
            Duration::from_secs(5),
        );
        let fresh = self.recipe.create_retrying(RECOVERY_LIMIT, &brokers)?;
        // The old producer goes now: its last delivery reports (purged records) reach the
        // tracker as it closes.
        let old = std::mem::replace(&mut self.producer, std::sync::Arc::new(fresh));
        if std::sync::Arc::strong_count(&old) > 1 {
            tracing::warn!("the old producer is still shared; it closes when its last user does");
        }
        drop(old);
        self.metrics.producer_resets.inc();
        tracing::info!(
            took_ms = started.elapsed().as_millis() as u64,
            "made a new transactional producer"
        );
        Ok(())
    }

    /// Moves the consumer's position of every partition of `partitions` back to its
    /// committed offset (where none is committed: where `auto.offset.reset` says).
    pub(in crate::runtime) fn rewind_to_committed<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        partitions: &TopicPartitionList,
    ) -> Result<(), StreamsError> {
        // A partition-level error (offsets still unstable) fails the rewind rather than
        // reading as "no commit", which would restart the partition from the beginning.
        let committed = crate::runtime::topics::start_offsets::committed(
            consumer,
            self.member.as_deref(),
            partitions,
            crate::runtime::topics::start_offsets::COMMITTED_TIMEOUT,
        )?;
        for e in committed.elements() {
            let to = match e.offset() {
                Offset::Offset(o) => Offset::Offset(o),
                // Concrete, as at assignment (see `start_offsets.rs`).
                _ => match self.settings.reset.resolve(consumer, e.topic(), e.partition())? {
                    Some(o) => Offset::Offset(o),
                    None => Offset::End,
                },
            };
            consumer
                .seek(e.topic(), e.partition(), to, Duration::from_secs(30))
                .map_err(|err| kafka_err(&format!("rewind {}-{}", e.topic(), e.partition()), err))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rdkafka::bindings as rdsys;
    use rdkafka::consumer::Consumer;
    use rdkafka::producer::Producer;
    use streams_test_utils::kafka::{self, ConsumeUntil};

    use crate::engine::RecordCollector;
    use crate::model::record::{Headers, OutputRef};
    use crate::runtime::produce::sinks::KafkaCollector;
    use crate::runtime::tasks::standby::tests::Setup;

    /// Sends `value` to the input topic through a collector of the task manager's producer.
    fn send(s: &Setup, value: &str) -> Result<(), crate::engine::SendError> {
        let mut collector = KafkaCollector::new(s.tm.producer.clone());
        collector.send(OutputRef {
            topic: &s.input,
            partition: Some(0),
            key: Some(b"k"),
            value: Some(value.as_bytes()),
            timestamp: 0,
            headers: &Headers::default(),
        })
    }

    /// A producer that raises a fatal error (as librdkafka does for an out-of-order
    /// sequence number after a broker dropped a connection mid-batch) fails its open
    /// transaction: the next send is refused as the transaction's failure, not the
    /// record's, and processing makes a new producer rather than failing the thread. The
    /// failed transaction's record is never read; the next transaction commits.
    #[test]
    fn a_fatal_producer_error_on_send_makes_a_new_producer() {
        fatal_producer_error("fatal producer error", true);
    }

    /// At-least-once, the idempotent producer's fatal error likewise makes a new producer
    /// (the inputs since the last commit are processed again), and the next commit delivers.
    #[test]
    fn a_fatal_producer_error_at_least_once_makes_a_new_producer() {
        fatal_producer_error("fatal producer error, at-least-once", false);
    }

    #[allow(unsafe_code)]
    fn fatal_producer_error(test: &str, eos: bool) {
        let Some(mut s) = Setup::new(test, eos) else {
            return;
        };
        s.consumer.assign(&s.assignment()).unwrap();
        s.tm.set_pending(&s.assignment());
        s.tm.create_pending(&s.consumer).unwrap();
        s.run_restored();

        send(&s, "lost").unwrap();
        let reason = c"injected by a test";
        // SAFETY: the client pointer is valid while the producer lives; the reason is a
        // NUL-terminated string librdkafka copies.
        let raised = unsafe {
            rdsys::rd_kafka_test_fatal_error(
                s.tm.producer.client().native_ptr(),
                rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                reason.as_ptr(),
            )
        };
        assert_eq!(raised, rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);

        let refused = send(&s, "refused").unwrap_err();
        assert!(
            refused.transaction_failed,
            "the producer's failure, not the record's: {refused}"
        );
        assert!(s.tm.transaction_failed());

        assert_eq!(s.tm.process(&s.consumer).unwrap(), 0, "recovered, not failed");
        assert_eq!(s.tm.metrics.producer_resets.get(), 1, "a new producer");
        assert!(!s.tm.transaction_failed());
        s.tm.create_pending(&s.consumer).unwrap();
        s.run_restored();

        send(&s, "committed").unwrap();
        s.tm.dirty = true;
        assert!(s.tm.commit(&s.consumer).unwrap(), "the new producer commits");
        let read = kafka::consume_all(
            &s.bootstrap,
            &s.input,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            true,
        )
        .unwrap();
        let values: Vec<_> = read.iter().map(|r| r.value.clone().unwrap_or_default()).collect();
        if eos {
            assert_eq!(values, vec![b"committed".to_vec()]);
        } else {
            // The record sent before the fatal error may have been written or purged.
            assert_eq!(values.last(), Some(&b"committed".to_vec()));
            assert!(!values.contains(&b"refused".to_vec()));
        }
        // A consumer closed while assigned but never polled waits a minute for its rebalance.
        s.consumer.unassign().unwrap();
    }
}
