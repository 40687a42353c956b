//! What the ladder calls for every attempt ([`RetryHandler`]), what it hands it
//! ([`Attempt`]), and how an attempt fails ([`RetryError`]).
//!
//! Invariants: one handler is shared by every task of every stage, on every stream thread,
//! so it is `Send + Sync`; it is called synchronously on the stream thread that owns the
//! task, so its running time is the task's (and its thread's other tasks') waiting time;
//! [`RetryError::Retriable`] moves a record to the next rung, [`RetryError::Fatal`]
//! straight to the dead-letter topic; a key or value the serdes cannot read is a fatal
//! error found before the handler is called. The handler may be called again for an
//! attempt whose outcome was not committed yet (a crash, a rebalance): its side effects
//! are at least once, whatever the processing guarantee.

use streams_core::{Headers, Record, RecordMetadata};

/// Why an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryError {
    /// Worth retrying later (a non-2xx answer, a connection error): the record moves to
    /// the next retry topic, or to the dead-letter topic after the last one.
    #[error("{0}")]
    Retriable(String),
    /// Retrying cannot help (an undecodable record, a malformed address): the record goes
    /// straight to the dead-letter topic.
    #[error("fatal: {0}")]
    Fatal(String),
}

impl RetryError {
    /// A [`RetryError::Retriable`] with `error`'s message.
    pub fn retriable(error: impl std::fmt::Display) -> Self {
        Self::Retriable(error.to_string())
    }

    /// A [`RetryError::Fatal`] with `error`'s message.
    pub fn fatal(error: impl std::fmt::Display) -> Self {
        Self::Fatal(error.to_string())
    }

    /// Whether it is [`RetryError::Fatal`].
    pub fn is_fatal(&self) -> bool {
        matches!(self, Self::Fatal(_))
    }
}

/// One attempt to handle a record, as the handler sees it.
#[derive(Debug)]
pub struct Attempt<'a, K, V> {
    pub(super) record: &'a Record<K, V>,
    pub(super) number: u32,
    pub(super) stage: usize,
    pub(super) read_from: &'a RecordMetadata,
    pub(super) original: &'a RecordMetadata,
}

impl<K, V> Attempt<'_, K, V> {
    /// The record: key and value through the ladder's serdes, its timestamp, and all its
    /// headers (the application's and the retry headers).
    pub fn record(&self) -> &Record<K, V> {
        self.record
    }

    /// The key.
    pub fn key(&self) -> &K {
        &self.record.key
    }

    /// The value.
    pub fn value(&self) -> &V {
        &self.record.value
    }

    /// The headers.
    pub fn headers(&self) -> &Headers {
        &self.record.headers
    }

    /// This attempt's number: 1 for the first attempt (and the first after a replay from
    /// the dead-letter topic), one more per failed attempt before it.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// The stage making it: 0 for the main topic, `i` for retry topic `i`.
    pub fn stage(&self) -> usize {
        self.stage
    }

    /// Where the record was read for this attempt (the main or a retry topic).
    pub fn read_from(&self) -> &RecordMetadata {
        self.read_from
    }

    /// Where the record was first read (the original-position headers, or
    /// [`read_from`](Self::read_from) on the main topic).
    pub fn original(&self) -> &RecordMetadata {
        self.original
    }

    /// The error of the previous attempt, if any.
    pub fn last_error(&self) -> Option<&str> {
        super::headers::last_error(&self.record.headers)
    }
}

/// Handles one record: for web hooks, one HTTP delivery. Shared by every task of the
/// ladder and called on their stream threads, synchronously: see the [module
/// docs](super) for what a slow handler holds up.
pub trait RetryHandler<K, V>: Send + Sync + 'static {
    /// Handles one attempt; an error sends the record down the ladder.
    fn handle(&self, attempt: &Attempt<'_, K, V>) -> Result<(), RetryError>;
}

impl<K, V, F> RetryHandler<K, V> for F
where
    F: Fn(&Attempt<'_, K, V>) -> Result<(), RetryError> + Send + Sync + 'static,
{
    fn handle(&self, attempt: &Attempt<'_, K, V>) -> Result<(), RetryError> {
        self(attempt)
    }
}
