//! Committing a thread's tasks under exactly-once: the input offsets go into the
//! transaction on a helper thread while the stream thread flushes its caches and stores;
//! then the thread waits for the transaction's records, commits it, and the persistent
//! stores apply the writes they held back.
//!
//! Why in parallel: adding the offsets to the transaction is two round trips to two
//! coordinators (`AddOffsetsToTxn`, `TxnOffsetCommit`) that depend on nothing the flush
//! does (it processes no input, so the offsets are final before it), and librdkafka takes
//! records while `send_offsets_to_transaction` waits. One after the other, the two were the
//! largest parts of an exactly-once commit (`docs/benchmarks.md`).
//!
//! Invariants:
//! - no other call on the transaction (an abort after a corrupt store or a failed record)
//!   is made before the helper has returned: librdkafka refuses concurrent ones;
//! - a failure on either side aborts the transaction and re-creates the tasks from their
//!   changelogs (`recover.rs`); nothing is committed.

use std::time::{Duration, Instant};

use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::producer::Producer;

use crate::metrics::handles::CommitPhase;
use crate::model::error::StreamsError;
use crate::runtime::client::errors::{is_fatal, kafka_err};
use crate::runtime::produce::txn_offsets::{TxnOffsetsError, send_offsets_as_member};
use crate::runtime::tasks::TaskManager;

/// Adds the offsets to the open transaction; run on the helper thread.
type Sender<'a> = Box<dyn FnOnce() -> Result<(), TxnOffsetsError> + Send + 'a>;

impl TaskManager {
    /// Commits the open transaction with the input offsets `tpl` (see the module docs).
    /// `Ok(false)`: it was aborted and the tasks are being re-created.
    pub(super) fn commit_transaction_with<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        tpl: &TopicPartitionList,
        since: &mut Instant,
    ) -> Result<bool, StreamsError> {
        // No step waits longer than the transaction may stay open: past
        // `transaction.timeout.ms` the coordinator aborts it anyway, and the thread recovers
        // at once rather than after minutes of silent waiting.
        let timeout = self.recipe.transaction_timeout();
        let send = self.offsets_sender(consumer, tpl, timeout)?;
        let (flushed, sent) = std::thread::scope(|scope| {
            let sending = send.map(|send| scope.spawn(send));
            let flushed = self.flush_until_corrupt();
            let sent = sending.map(|helper| {
                helper.join().unwrap_or_else(|_| {
                    Err(TxnOffsetsError {
                        message: "adding the offsets to the transaction panicked".into(),
                        fatal: false,
                    })
                })
            });
            (flushed, sent)
        });
        if self.transaction_failed() {
            // A record of the transaction failed (or the flush's changelog writes found it
            // failed): it cannot commit.
            if let Err(e) = &flushed {
                tracing::debug!(error = %e, "flushing after the transaction failed");
            }
            self.recover_failed_transaction(consumer)?;
            return Ok(false);
        }
        if let Some((id, what)) = flushed? {
            self.recover_corrupted(id, &what, consumer)?;
            return Ok(false);
        }
        self.metrics.lap(CommitPhase::FlushStores, since);
        if let Some(sent) = sent {
            if let Err(e) = sent {
                return self.recover_after("send offsets", &e.message, e.fatal, consumer);
            }
            // Only what the offsets took beyond the flush.
            self.metrics.lap(CommitPhase::SendOffsets, since);
        }
        // Wait for the transaction's records here: `commit_transaction` flushes first
        // through rust-rdkafka's `flush`, which sleeps in 100 ms slices while any record is
        // in flight (the `ThreadedProducer`'s thread serves the delivery reports), so every
        // commit took 100 ms more than the broker needed. Nothing is sent between this flush
        // and the commit, so librdkafka's own flush then finds nothing to wait for.
        if let Err(e) = crate::runtime::produce::producer::flush(&self.producer, timeout) {
            return self.recover_transaction("flush producer", e, consumer);
        }
        self.metrics.lap(CommitPhase::FlushProducer, since);
        if let Err(e) = self.commit_transaction_resuming(timeout) {
            return self.recover_after("commit transaction", &e.message, e.fatal, consumer);
        }
        self.metrics.lap(CommitPhase::CommitTransaction, since);
        self.in_transaction = false;
        self.tracker.skips.committed();
        self.check_deliveries()?;
        // Committed: the stores apply what they held, with their checkpoints.
        self.commit_writes()?;
        self.metrics.lap(CommitPhase::CommitStores, since);
        Ok(true)
    }

    /// What adds `tpl` to the transaction, as this thread's streams-group member or with
    /// its consumer's group metadata; `None` when there are no offsets.
    fn offsets_sender<'a, C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        tpl: &'a TopicPartitionList,
        timeout: Duration,
    ) -> Result<Option<Sender<'a>>, StreamsError> {
        if tpl.count() == 0 {
            return Ok(None);
        }
        let producer = self.producer.clone();
        if let Some(member) = &self.member {
            let (id, epoch) = member.member_id_and_epoch();
            let group = self.settings.factory.app_id().clone();
            return Ok(Some(Box::new(move || {
                send_offsets_as_member(&producer, tpl, &group, &id, epoch, timeout)
            })));
        }
        let meta = consumer
            .group_metadata()
            .ok_or_else(|| kafka_err("commit", "no group metadata"))?;
        Ok(Some(Box::new(move || {
            producer
                .send_offsets_to_transaction(tpl, &meta, timeout)
                .map_err(|e| TxnOffsetsError {
                    message: e.to_string(),
                    fatal: is_fatal(&e),
                })
        })))
    }
}
