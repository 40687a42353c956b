//! Where sinks and changelogged stores send their records: a Kafka producer in the
//! runtime, an in-memory topic map in streams-test-utils' test driver.

use crate::model::record::OutputRef;

/// Receives every record a task produces.
pub trait RecordCollector {
    /// Sends one record. A refusal is handled by the task's production handler.
    fn send(&mut self, record: OutputRef<'_>) -> Result<(), SendError>;

    /// The partition count of `topic`, when known (needed to partition keyed records).
    fn partitions(&mut self, topic: &str) -> Option<i32>;
}

/// Why a collector refused a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot produce to `{topic}`: {message}")]
pub struct SendError {
    /// The record's topic.
    pub topic: String,
    /// What the producer said.
    pub message: String,
    /// Whether trying again later may succeed (a full queue), or not (a record too large,
    /// an unknown topic).
    pub retriable: bool,
    /// The producer refuses every send, this record is not at fault: under exactly-once its
    /// open transaction has already failed (an earlier record was refused, or the producer
    /// raised a fatal error), and the transaction is aborted and its input processed again
    /// rather than the record handed to the production handler. Never skipped by
    /// `log_and_continue`.
    pub transaction_failed: bool,
}
