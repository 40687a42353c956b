//! What the ladder calls for every record, and what it reports after each attempt.
//!
//! Invariants: a [`Handler`] is shared by every consumer of the ladder and called from
//! their threads, so it must be `Send + Sync`; [`HandleError::Retriable`] moves a record
//! to the next rung, [`HandleError::Permanent`] straight to the dead-letter topic; a
//! [`Listener`] runs on the consumer's thread after the attempt, so it must be quick.

use std::sync::Arc;

use super::record::RetryRecord;

/// Why handling a record failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandleError {
    /// Worth retrying later (a non-2xx answer, a connection error): the record moves to the
    /// next retry topic.
    #[error("{0}")]
    Retriable(String),
    /// Retrying cannot help (an undecodable record): the record goes straight to the
    /// dead-letter topic.
    #[error("permanent: {0}")]
    Permanent(String),
}

/// Handles one record: for web hooks, one HTTP delivery. Shared by every consumer of the
/// ladder, called from their threads.
pub trait Handler: Send + Sync + 'static {
    /// Handles `record`; an error sends it down the ladder.
    fn handle(&self, record: &RetryRecord) -> Result<(), HandleError>;
}

impl<F> Handler for F
where
    F: Fn(&RetryRecord) -> Result<(), HandleError> + Send + Sync + 'static,
{
    fn handle(&self, record: &RetryRecord) -> Result<(), HandleError> {
        self(record)
    }
}

/// What happened to a record at one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Handled successfully.
    Delivered,
    /// Failed; sent to retry topic `topic`, due at `due_at_ms`, with `attempt` failed
    /// attempts so far.
    Retrying {
        /// The retry topic it went to.
        topic: String,
        /// Failed attempts so far.
        attempt: u32,
        /// When it is due, in ms since the epoch.
        due_at_ms: i64,
    },
    /// Failed for the last time (or permanently); sent to the dead-letter topic.
    DeadLettered {
        /// Failed attempts in all.
        attempt: u32,
        /// Whether the failure was [`HandleError::Permanent`].
        permanent: bool,
    },
}

/// One attempt, as reported to a [`Listener`].
#[derive(Debug)]
pub struct OutcomeEvent<'a> {
    /// The topic the record was read from.
    pub topic: &'a str,
    /// The record.
    pub record: &'a RetryRecord,
    /// What happened.
    pub outcome: Outcome,
    /// The error of a failed attempt.
    pub error: Option<&'a HandleError>,
}

/// Called after every attempt, from the consumer threads (keep it quick).
pub type Listener = Arc<dyn Fn(&OutcomeEvent<'_>) + Send + Sync>;
