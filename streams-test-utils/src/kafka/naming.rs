//! Fresh values for tests sharing one broker: names no other test uses, and recent
//! record timestamps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Kafka's limit on the length of a topic name.
pub(super) const MAX_TOPIC_NAME_LEN: usize = 249;

/// The start of the minute `minutes_ago` minutes before now, in epoch milliseconds: a record
/// timestamp for tests of windowed state.
///
/// Use recent timestamps with a real broker: it deletes a segment whose newest record is
/// older than the topic's `retention.ms`, and a window store's changelog (`compact,delete`,
/// retention + 1 day) is trimmed by the log cleaner while the test runs when its records
/// carry timestamps from years ago.
pub fn recent_minute(minutes_ago: i64) -> i64 {
    const MINUTE: i64 = 60_000;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    now - now.rem_euclid(MINUTE) - minutes_ago * MINUTE
}

/// A name no other test (in this or any other process) uses: `prefix-pid-nanos-counter`.
///
/// Use it for topics, consumer groups, application and transactional ids so tests sharing
/// one broker never see each other's data. Characters Kafka does not allow in topic names
/// are replaced by `_`, and the result is at most 249 characters long.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let suffix = format!("-{}-{nanos}-{n}", std::process::id());
    let prefix: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TOPIC_NAME_LEN.saturating_sub(suffix.len()))
        .collect();
    format!("{prefix}{suffix}")
}
