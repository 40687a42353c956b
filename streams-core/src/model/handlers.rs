//! What happens to a record that cannot be deserialized, processed or produced.
//!
//! Each of the three handlers is configured with one of the [`ErrorHandling`] choices. A
//! dead-lettered record keeps its original key and value bytes and gets headers saying what
//! failed and where the record came from (the header names of KIP-1034).

use crate::model::record::{Headers, OutputRecord, RawRecord};

/// The choice of an exception handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorHandling {
    /// Log the error, skip the record, continue.
    LogAndContinue,
    /// Log the error and stop the stream thread (Kafka Streams' default).
    #[default]
    LogAndFail,
    /// Write the record to the dead-letter topic (`errors.dead.letter.queue.topic.name`)
    /// and continue.
    DeadLetterQueue,
}

impl ErrorHandling {
    /// Parses a handler name: `log_and_continue`, `log_and_fail`, `dead_letter_queue` (also
    /// accepting Kafka Streams' class names of the first two).
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "log_and_continue" | "LogAndContinueExceptionHandler" => Some(Self::LogAndContinue),
            "log_and_fail" | "LogAndFailExceptionHandler" => Some(Self::LogAndFail),
            "dead_letter_queue" | "dlq" => Some(Self::DeadLetterQueue),
            _ => None,
        }
    }
}

/// The handlers of a task, as configured.
#[derive(Debug, Clone, Default)]
pub struct ErrorPolicy {
    /// For records whose key or value cannot be deserialized.
    pub deserialization: ErrorHandling,
    /// For records a processor fails on.
    pub processing: ErrorHandling,
    /// For records that cannot be produced.
    pub production: ErrorHandling,
    /// The dead-letter topic, required when any handler is `DeadLetterQueue`.
    pub dead_letter_topic: Option<String>,
}

/// Header names on dead-lettered records.
pub mod headers {
    /// The kind of failure: `deserialization`, `processing` or `production`.
    pub const EXCEPTION: &str = "__streams.errors.exception";
    /// The error message.
    pub const MESSAGE: &str = "__streams.errors.message";
    /// The record's source topic.
    pub const TOPIC: &str = "__streams.errors.topic";
    /// The record's source partition.
    pub const PARTITION: &str = "__streams.errors.partition";
    /// The record's source offset.
    pub const OFFSET: &str = "__streams.errors.offset";
    /// The node that failed.
    pub const NODE: &str = "__streams.errors.node";
}

/// The dead-letter record for `raw`: its original bytes and headers, plus the error headers.
pub(crate) fn dead_letter(
    topic: &str,
    raw: &RawRecord,
    kind: &str,
    node: &str,
    message: &str,
) -> OutputRecord {
    let mut h: Headers = raw.headers.clone();
    h.add(headers::EXCEPTION, kind.to_owned())
        .add(headers::MESSAGE, message.to_owned())
        .add(headers::TOPIC, raw.topic.to_string())
        .add(headers::PARTITION, raw.partition.to_string())
        .add(headers::OFFSET, raw.offset.to_string())
        .add(headers::NODE, node.to_owned());
    OutputRecord {
        topic: topic.to_owned(),
        partition: None,
        key: raw.key.clone(),
        value: raw.value.clone(),
        timestamp: raw.timestamp,
        headers: h,
    }
}
