//! Hook registration and event sending: writes the two input topics of the join.
//!
//! Invariant: every record goes to [`user_partition`] of its user, never to the
//! producer's own choice, so a user's hooks and events meet in the same task; the
//! producer refuses topics whose partition counts differ.

use std::time::Duration;

use rdkafka::message::OwnedHeaders;

use super::records::{EventLog, WebHook};
use super::topics::{WebHookTopics, hook_key, user_key, user_partition};
use crate::ExampleError;
use crate::retry::Forwarder;

/// Writes hooks and events co-partitioned on the user id (see the
/// [module docs](crate::webhooks)).
pub struct WebHookProducer {
    forwarder: Forwarder,
    topics: WebHookTopics,
    partitions: i32,
}

impl WebHookProducer {
    /// A producer for `topics`, which must exist with the same partition count.
    pub fn new(bootstrap: &str, topics: WebHookTopics) -> Result<Self, ExampleError> {
        let forwarder = Forwarder::new(bootstrap, &[])?;
        let timeout = Duration::from_secs(30);
        let hooks = forwarder.partitions(&topics.web_hooks, timeout)?;
        let events = forwarder.partitions(&topics.event_logs, timeout)?;
        if hooks != events {
            return Err(ExampleError::Other(format!(
                "{} has {hooks} partitions but {} has {events}: not co-partitioned",
                topics.web_hooks, topics.event_logs
            )));
        }
        Ok(Self {
            forwarder,
            topics,
            partitions: hooks,
        })
    }

    /// The partition count of both topics.
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// Registers or replaces a hook.
    pub fn upsert(&self, hook: &WebHook) -> Result<(), ExampleError> {
        let key = hook_key(hook.user_id, hook.webhook_id);
        let value = serde_json::to_vec(hook)?;
        let partition = Some(user_partition(hook.user_id, self.partitions));
        self.forwarder.send_to(
            &self.topics.web_hooks,
            partition,
            Some(key.as_bytes()),
            Some(&value),
            OwnedHeaders::new(),
        )
    }

    /// Deletes a hook (a tombstone).
    pub fn delete(&self, user_id: u64, webhook_id: u64) -> Result<(), ExampleError> {
        let key = hook_key(user_id, webhook_id);
        let partition = Some(user_partition(user_id, self.partitions));
        self.forwarder.send_to(
            &self.topics.web_hooks,
            partition,
            Some(key.as_bytes()),
            None,
            OwnedHeaders::new(),
        )
    }

    /// Sends an event.
    pub fn event(&self, event: &EventLog) -> Result<(), ExampleError> {
        let key = user_key(event.user_id);
        let value = serde_json::to_vec(event)?;
        let partition = Some(user_partition(event.user_id, self.partitions));
        self.forwarder.send_to(
            &self.topics.event_logs,
            partition,
            Some(key.as_bytes()),
            Some(&value),
            OwnedHeaders::new(),
        )
    }

    /// Waits until everything sent was acknowledged.
    pub fn flush(&self, timeout: Duration) -> Result<(), ExampleError> {
        self.forwarder.flush(timeout)
    }
}

impl std::fmt::Debug for WebHookProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebHookProducer")
            .field("topics", &self.topics)
            .field("partitions", &self.partitions)
            .finish()
    }
}
