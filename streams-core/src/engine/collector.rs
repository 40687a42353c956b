//! Where sinks and changelogged stores send their records: a Kafka producer in the
//! runtime, an in-memory topic map in streams-test-utils' test driver.

use crate::model::record::OutputRecord;

/// Receives every record a task produces.
pub trait RecordCollector {
    /// Sends one record. An error is reported through the production handler by the task.
    fn send(&mut self, record: OutputRecord) -> Result<(), crate::model::error::ProcessorError>;

    /// The partition count of `topic`, when known (needed to partition keyed records).
    fn partitions(&mut self, topic: &str) -> Option<i32>;
}
