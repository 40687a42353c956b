//! Recovering from a failed exactly-once commit without losing the thread.
//!
//! A transaction that cannot commit (a broker restarting, a coordinator moving, a timeout)
//! is aborted: its output, changelog writes and offsets vanish. The thread's tasks hold
//! state ahead of that, so they are closed dirty; the consumer is rewound to the committed
//! offsets; and the tasks are created again, their stores wiped and restored from the
//! (committed) changelog, as after a crash. Fatal errors (a fenced producer: another
//! instance took over) still fail the thread.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::restore::kafka_err;
use super::tasks::TaskManager;
use crate::model::error::StreamsError;

/// How long aborting may be retried while the cluster is unreachable.
const ABORT_RETRY: Duration = Duration::from_secs(60);

/// Whether `e` means the producer can no longer be used.
pub(crate) fn is_fatal(e: &KafkaError) -> bool {
    if let KafkaError::Transaction(t) = e
        && t.is_fatal()
    {
        return true;
    }
    e.rdkafka_error_code().is_some_and(|c| {
        matches!(
            c,
            RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
                | RDKafkaErrorCode::Fenced
        )
    })
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
        if is_fatal(&error) {
            return Err(StreamsError::Kafka {
                message: format!("{what}: {error}"),
                retriable: false,
            });
        }
        self.recover_after(what, &error.to_string(), false, consumer)
    }

    /// [`recover_transaction`](Self::recover_transaction) for an error already classified:
    /// `fatal` when the producer can no longer be used.
    pub(crate) fn recover_after<C: ConsumerContext>(
        &mut self,
        what: &str,
        error: &str,
        fatal: bool,
        consumer: &BaseConsumer<C>,
    ) -> Result<bool, StreamsError> {
        if fatal {
            return Err(StreamsError::Kafka {
                message: format!("{what}: {error}"),
                retriable: false,
            });
        }
        tracing::warn!(error = %error, "{what} failed; aborting the transaction and recreating the tasks from their changelogs");
        self.abort_and_recreate(consumer, None)?;
        Ok(false)
    }

    /// The thread's group membership was lost (streams protocol: fenced, or its session
    /// expired): its tasks may already run elsewhere, so they are closed without
    /// committing, the open transaction aborted, and nothing of the old assignment is
    /// created. Standby tasks stay.
    pub(crate) fn lose_all<C: ConsumerContext>(
        &mut self,
        _consumer: &BaseConsumer<C>,
    ) -> Result<(), StreamsError> {
        if self.in_transaction {
            if let Err(e) = self.producer.abort_transaction(Duration::from_secs(10))
                && is_fatal(&e)
            {
                return Err(kafka_err("abort transaction", e));
            }
            self.in_transaction = false;
        }
        self.close_all_dirty();
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
        let started = Instant::now();
        loop {
            match self.producer.abort_transaction(Duration::from_secs(10)) {
                Ok(()) => break,
                Err(e) if is_fatal(&e) || started.elapsed() > ABORT_RETRY => {
                    return Err(kafka_err("abort transaction", e));
                }
                Err(e) => tracing::warn!(error = %e, "abort transaction failed; retrying"),
            }
        }
        self.in_transaction = false;
        self.close_all_dirty();
        if let Some(id) = wipe {
            self.wipe_dir(id)?;
        }
        let assignment = consumer.assignment().map_err(|e| kafka_err("assignment", e))?;
        self.rewind_to_committed(consumer, &assignment)?;
        // Queued for creation at the next loop, as after a rebalance.
        self.set_pending(&assignment);
        Ok(())
    }

    /// Moves the consumer's position of every partition of `partitions` back to its
    /// committed offset (where none is committed: where `auto.offset.reset` says).
    pub(super) fn rewind_to_committed<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        partitions: &TopicPartitionList,
    ) -> Result<(), StreamsError> {
        // A partition-level error (offsets still unstable) fails the rewind rather than
        // reading as "no commit", which would restart the partition from the beginning.
        let committed =
            super::start_offsets::committed(consumer, partitions, super::start_offsets::LOOKUP_TIMEOUT)?;
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
