//! The consumer context of one stage of the ladder: the offsets it handled and their
//! commit.
//!
//! Invariants: an offset is committed only after every forward queued before the commit
//! was acknowledged (a crash repeats an attempt, never loses a record); offsets are
//! committed on a revocation too, so the partition's next owner starts after what was
//! handled; every rebalance is flagged for the stage loop, which then drops the records it
//! held back (they were not committed, so they are read again).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::forwarder::Forwarder;
use crate::ExampleError;

/// The consumer context of one stage: on a revocation, commits what was handled so far
/// (after its forwards were acknowledged), and tells the loop to drop waiting records.
pub(super) struct StageContext {
    topic: String,
    /// The stage's producer: what it forwards must be acknowledged before a commit.
    pub(super) forwarder: Arc<Forwarder>,
    produce_timeout: Duration,
    /// Handled but not yet committed: partition -> next offset.
    uncommitted: Mutex<HashMap<i32, i64>>,
    /// Set by every rebalance; the stage loop takes it to drop its waiting records.
    pub(super) rebalanced: AtomicBool,
}

impl StageContext {
    /// The context of the consumer of `topic`, forwarding with `forwarder`, whose commits
    /// wait at most `produce_timeout` for the forwards.
    pub(super) fn new(topic: String, forwarder: Arc<Forwarder>, produce_timeout: Duration) -> Self {
        Self {
            topic,
            forwarder,
            produce_timeout,
            uncommitted: Mutex::new(HashMap::new()),
            rebalanced: AtomicBool::new(false),
        }
    }

    /// Flushes the forwards, then commits the handled offsets.
    pub(super) fn commit(&self, consumer: &BaseConsumer<StageContext>) -> Result<(), ExampleError> {
        let offsets = std::mem::take(&mut *self.uncommitted.lock().unwrap_or_else(PoisonError::into_inner));
        if offsets.is_empty() {
            return Ok(());
        }
        self.forwarder.flush(self.produce_timeout)?;
        let mut tpl = TopicPartitionList::with_capacity(offsets.len());
        for (p, o) in offsets {
            tpl.add_partition_offset(&self.topic, p, Offset::Offset(o))?;
        }
        consumer.commit(&tpl, CommitMode::Sync)?;
        Ok(())
    }

    /// Notes that the record at `offset` of `partition` was handled (and forwarded if it
    /// failed): its partition's next commit is `offset + 1`.
    pub(super) fn handled(&self, partition: i32, offset: i64) {
        self.uncommitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(partition, offset + 1);
    }
}

impl ClientContext for StageContext {}

impl ConsumerContext for StageContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(_) = rebalance {
            self.rebalanced.store(true, Ordering::Relaxed);
            if let Err(e) = self.commit(consumer) {
                // The new owner repeats what was not committed: at least once.
                tracing::warn!(topic = %self.topic, error = %e, "commit on revocation failed");
            }
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.rebalanced.store(true, Ordering::Relaxed);
        if let Rebalance::Error(e) = rebalance {
            tracing::warn!(topic = %self.topic, error = %e, "rebalance error");
        }
    }
}
