//! The settings of the ladder's consumers: their groups, polling, batching, the
//! librdkafka properties they add, and the listener of attempts.
//!
//! Invariant: every consumer of one ladder gets the same options; each joins its own group
//! `<group_id>.<topic>`, so the stages never share partitions or offsets.

use std::sync::Arc;
use std::time::Duration;

use super::handler::{Listener, OutcomeEvent};

/// Settings of [`RetryConsumers`](super::RetryConsumers).
#[derive(Clone)]
pub struct RetryOptions {
    /// The consumer groups are `<group_id>.<topic>`, one per topic of the ladder.
    pub group_id: String,
    /// The longest a consumer blocks in one poll (it also bounds how late a due record is
    /// noticed and how quickly `close` is served).
    pub poll_interval: Duration,
    /// Records handled between two commits on the main topic.
    pub max_batch: usize,
    /// How long a commit's forwards may take to be acknowledged before the consumer fails.
    pub produce_timeout: Duration,
    /// Extra librdkafka consumer properties (e.g. `session.timeout.ms`).
    pub consumer_properties: Vec<(String, String)>,
    /// Extra librdkafka producer properties.
    pub producer_properties: Vec<(String, String)>,
    /// Called after every attempt.
    pub listener: Option<Listener>,
}

impl RetryOptions {
    /// Defaults for `group_id`: 100 ms polls, commits every 100 records, 30 s for forwards.
    pub fn new(group_id: impl Into<String>) -> Self {
        Self {
            group_id: group_id.into(),
            poll_interval: Duration::from_millis(100),
            max_batch: 100,
            produce_timeout: Duration::from_secs(30),
            consumer_properties: Vec::new(),
            producer_properties: Vec::new(),
            listener: None,
        }
    }

    /// Sets the listener.
    pub fn with_listener(mut self, listener: impl Fn(&OutcomeEvent<'_>) + Send + Sync + 'static) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// Adds a consumer property.
    pub fn consumer_property(mut self, key: &str, value: &str) -> Self {
        self.consumer_properties.push((key.to_owned(), value.to_owned()));
        self
    }
}

impl std::fmt::Debug for RetryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryOptions")
            .field("group_id", &self.group_id)
            .field("poll_interval", &self.poll_interval)
            .field("max_batch", &self.max_batch)
            .field("listener", &self.listener.is_some())
            .finish_non_exhaustive()
    }
}
