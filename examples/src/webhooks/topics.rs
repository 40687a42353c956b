//! Where the web-hook records live: the topic names, the record keys, and the partition of
//! a user.
//!
//! Invariants: a hook's key is its user's key followed by `:` and the hook id, so a prefix
//! scan over `<user key>:` finds exactly that user's hooks; user keys are zero-padded to 20
//! digits so byte order is numeric order; a user's hooks and events go to the same
//! partition ([`user_partition`]), so they meet in the same task.

use streams_core::default_partition;

/// The default web-hook topic.
pub const WEB_HOOKS: &str = "web_hooks";
/// The default event-log topic.
pub const EVENT_LOGS: &str = "event_logs";
/// The default topic of requests to deliver.
pub const WEB_HOOK_REQUESTS: &str = "web_hook_requests";

/// The topic names of the join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebHookTopics {
    /// The web hooks (a table).
    pub web_hooks: String,
    /// The events (a stream).
    pub event_logs: String,
    /// The join's output: requests to deliver.
    pub requests: String,
}

impl Default for WebHookTopics {
    /// `web_hooks`, `event_logs`, `web_hook_requests`.
    fn default() -> Self {
        Self {
            web_hooks: WEB_HOOKS.into(),
            event_logs: EVENT_LOGS.into(),
            requests: WEB_HOOK_REQUESTS.into(),
        }
    }
}

impl WebHookTopics {
    /// The three names with `suffix` appended (fresh topics for a test or a demo run).
    pub fn with_suffix(suffix: &str) -> Self {
        let d = Self::default();
        Self {
            web_hooks: format!("{}{suffix}", d.web_hooks),
            event_logs: format!("{}{suffix}", d.event_logs),
            requests: format!("{}{suffix}", d.requests),
        }
    }
}

/// The key of `user_id`'s events, and the prefix of its hooks' keys: `%020d`.
pub fn user_key(user_id: u64) -> String {
    format!("{user_id:020}")
}

/// The key of a hook: `%020d(user_id):webhook_id`.
pub fn hook_key(user_id: u64, webhook_id: u64) -> String {
    format!("{user_id:020}:{webhook_id}")
}

/// The partition of `user_id`'s hooks and events among `partitions`: murmur2 of
/// [`user_key`], as Kafka's Java default partitioner places the user's events.
pub fn user_partition(user_id: u64, partitions: i32) -> i32 {
    default_partition(user_key(user_id).as_bytes(), partitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_zero_padded_and_users_co_partitioned() {
        assert_eq!(user_key(1), "00000000000000000001");
        assert_eq!(hook_key(10, 7), "00000000000000000010:7");
        assert!(hook_key(1, 99) < hook_key(2, 1));
        assert!(!hook_key(10, 1).starts_with(&format!("{}:", user_key(1))));
        for user in 0..100 {
            assert_eq!(
                user_partition(user, 3),
                default_partition(user_key(user).as_bytes(), 3)
            );
        }
    }

    #[test]
    fn suffixed_topics_keep_their_order() {
        let t = WebHookTopics::with_suffix("-x");
        assert_eq!(t.web_hooks, "web_hooks-x");
        assert_eq!(t.event_logs, "event_logs-x");
        assert_eq!(t.requests, "web_hook_requests-x");
    }
}
