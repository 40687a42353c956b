//! What the ladder reports after every step of a record: an [`OutcomeEvent`] passed to the
//! optional [`RetryListener`] (for statistics, logs, a demo's console).
//!
//! Invariants: every attempt reports exactly one of [`Outcome::Succeeded`],
//! [`Outcome::Retrying`] and [`Outcome::DeadLettered`], after the record was forwarded;
//! a record stored by a retry stage to wait reports [`Outcome::Waiting`] (no attempt).
//! Events are reported on the stream thread as the steps happen, before they are
//! committed: a step repeated after a crash or a rebalance is reported again, so counts
//! built from events are at least once.

use std::sync::Arc;

use streams_core::{Headers, RecordMetadata};

use super::handler::RetryError;

/// What happened to a record at one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The handler succeeded.
    Succeeded,
    /// The attempt failed; the record was sent to retry topic `topic`, due at `due_at_ms`.
    Retrying {
        /// The retry topic it went to.
        topic: String,
        /// When it is due, ms since the epoch (by the task's wall clock).
        due_at_ms: i64,
    },
    /// The attempt failed for the last time, or fatally; the record was sent to the
    /// dead-letter topic.
    DeadLettered {
        /// Whether the failure was [`RetryError::Fatal`].
        fatal: bool,
    },
    /// Not an attempt: a retry stage stored the record to wait until `due_at_ms`.
    Waiting {
        /// When it is due, ms since the epoch.
        due_at_ms: i64,
    },
}

/// One step of one record, as reported to a [`RetryListener`].
#[derive(Debug)]
pub struct OutcomeEvent<'a> {
    /// The stage: 0 for the main topic, `i` for retry topic `i`.
    pub stage: usize,
    /// Where the record was read for this step.
    pub read_from: &'a RecordMetadata,
    /// The attempt's number (1 for the first); for [`Outcome::Waiting`], the number of the
    /// attempt it waits for.
    pub attempt: u32,
    /// The key bytes as read (`None` for a null key).
    pub key: Option<&'a [u8]>,
    /// The value bytes as read (`None` for a null value).
    pub value: Option<&'a [u8]>,
    /// The headers as read.
    pub headers: &'a Headers,
    /// What happened.
    pub outcome: Outcome,
    /// The error of a failed attempt.
    pub error: Option<&'a RetryError>,
}

/// Called after every step, on the stream thread (keep it quick).
pub type RetryListener = Arc<dyn Fn(&OutcomeEvent<'_>) + Send + Sync>;
