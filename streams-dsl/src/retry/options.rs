//! The settings of a ladder's nodes: how often and how much the retry stages punctuate,
//! their stores, and the listener of outcomes.
//!
//! Invariants: every stage of one ladder gets the same options; one punctuation handles at
//! least one due record (when there is one) and stops before the next once either bound,
//! records or time, is reached; the records left wait for the next punctuation, in due
//! order. The stores are always changelogged: a retry stage without a changelog could lose
//! the records it committed the input offsets of.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::outcome::{OutcomeEvent, RetryListener};

/// Settings of [`add_retry_ladder`](super::add_retry_ladder).
#[derive(Clone)]
pub struct RetryOptions {
    pub(super) punctuate_every: Duration,
    pub(super) max_records_per_punctuation: usize,
    pub(super) max_punctuation_time: Duration,
    pub(super) persistent: bool,
    pub(super) changelog_config: BTreeMap<String, String>,
    pub(super) listener: Option<RetryListener>,
}

impl Default for RetryOptions {
    /// Punctuations every second, each handling at most 1,000 records and starting no new
    /// attempt after 1 s; persistent (RocksDB) stores; no listener.
    fn default() -> Self {
        Self {
            punctuate_every: Duration::from_secs(1),
            max_records_per_punctuation: 1000,
            max_punctuation_time: Duration::from_secs(1),
            persistent: true,
            changelog_config: BTreeMap::new(),
            listener: None,
        }
    }
}

impl RetryOptions {
    /// The defaults (see [`Default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// How often a retry stage looks for due records (wall-clock time). A record is
    /// attempted between its due time and one interval (plus the stream thread's loop)
    /// after it.
    pub fn punctuate_every(mut self, interval: Duration) -> Self {
        self.punctuate_every = interval.max(Duration::from_millis(1));
        self
    }

    /// The most records one punctuation attempts (at least 1).
    pub fn max_records_per_punctuation(mut self, n: usize) -> Self {
        self.max_records_per_punctuation = n.max(1);
        self
    }

    /// After this long, a punctuation starts no further attempt (one slow attempt can
    /// still take longer: the handler is not interrupted).
    pub fn max_punctuation_time(mut self, time: Duration) -> Self {
        self.max_punctuation_time = time;
        self
    }

    /// Keeps the waiting records in in-memory stores instead of RocksDB. They are still
    /// changelogged, and restored from the changelog at every start.
    pub fn in_memory(mut self) -> Self {
        self.persistent = false;
        self
    }

    /// Creates the stores' changelog topics with these settings (e.g.
    /// `min.insync.replicas`); `cleanup.policy=compact` is the runtime's default.
    pub fn changelog_config(mut self, config: impl IntoIterator<Item = (String, String)>) -> Self {
        self.changelog_config = config.into_iter().collect();
        self
    }

    /// Calls `listener` after every step of every record (see [`OutcomeEvent`]).
    pub fn listener(mut self, listener: impl Fn(&OutcomeEvent<'_>) + Send + Sync + 'static) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// The punctuation interval.
    pub fn punctuation_interval(&self) -> Duration {
        self.punctuate_every
    }
}

impl std::fmt::Debug for RetryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryOptions")
            .field("punctuate_every", &self.punctuate_every)
            .field("max_records_per_punctuation", &self.max_records_per_punctuation)
            .field("max_punctuation_time", &self.max_punctuation_time)
            .field("persistent", &self.persistent)
            .field("changelog_config", &self.changelog_config)
            .field("listener", &self.listener.is_some())
            .finish()
    }
}
