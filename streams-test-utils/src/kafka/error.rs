//! What a helper reports when it fails: [`TestKafkaError`], and [`TestResult`] for every
//! helper's result.

use std::time::Duration;

use rdkafka::error::KafkaError;

/// What went wrong in a test helper.
#[derive(Debug, thiserror::Error)]
pub enum TestKafkaError {
    /// The Kafka client reported an error.
    #[error("kafka client error: {0}")]
    Kafka(#[from] KafkaError),
    /// An operation did not finish within its time bound.
    #[error("timed out after {after:?}: {what}")]
    Timeout {
        /// What was being waited for, with the progress made.
        what: String,
        /// The bound that ran out.
        after: Duration,
    },
    /// The broker answered, but with a failure.
    #[error("{what}: {detail}")]
    Failed {
        /// The operation that failed.
        what: String,
        /// The broker's or client's explanation.
        detail: String,
    },
}

/// Result of the helpers in this module.
pub type TestResult<T> = Result<T, TestKafkaError>;

pub(super) fn timeout_error(what: impl Into<String>, after: Duration) -> TestKafkaError {
    TestKafkaError::Timeout {
        what: what.into(),
        after,
    }
}
