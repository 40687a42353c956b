//! The records the ladder moves, and the headers it writes on them.
//!
//! Invariants: the retry headers ([`RETRY_HEADERS`]) are replaced, never repeated, when a
//! record moves on; the application's own headers travel unchanged and in order; the
//! original topic, partition and offset are set at the first failure and kept after it
//! (also through a replay from the dead-letter topic).

use std::time::{SystemTime, UNIX_EPOCH};

use rdkafka::message::{BorrowedMessage, Header, Headers as _, Message, OwnedHeaders};

/// Header: how many delivery attempts failed so far (decimal text). Absent on the main
/// topic; reset to `0` by a replay from the dead-letter topic.
pub const HEADER_ATTEMPT: &str = "retry.attempt";
/// Header: when the record is due for its next attempt, in ms since the epoch (decimal).
/// Only on records in retry topics.
pub const HEADER_NEXT_AT: &str = "retry.next.at.ms";
/// Header: the error of the last failed attempt.
pub const HEADER_LAST_ERROR: &str = "retry.last.error";
/// Header: the topic the record was first read from (the ladder's main topic).
pub const HEADER_ORIGINAL_TOPIC: &str = "retry.original.topic";
/// Header: the record's partition in the original topic.
pub const HEADER_ORIGINAL_PARTITION: &str = "retry.original.partition";
/// Header: the record's offset in the original topic.
pub const HEADER_ORIGINAL_OFFSET: &str = "retry.original.offset";
/// Header: on a record replayed from the dead-letter topic, where it was read:
/// `<topic>/<partition>/<offset>`.
pub const HEADER_REPLAYED_FROM: &str = "retry.replayed.from";

/// The headers this module writes; they are replaced, not repeated, when a record moves on.
pub const RETRY_HEADERS: [&str; 7] = [
    HEADER_ATTEMPT,
    HEADER_NEXT_AT,
    HEADER_LAST_ERROR,
    HEADER_ORIGINAL_TOPIC,
    HEADER_ORIGINAL_PARTITION,
    HEADER_ORIGINAL_OFFSET,
    HEADER_REPLAYED_FROM,
];

/// The current time in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A record as read from one of the ladder's topics, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryRecord {
    /// The topic it was read from.
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its timestamp in ms since the epoch, if it has one.
    pub timestamp: Option<i64>,
    /// The key bytes.
    pub key: Option<Vec<u8>>,
    /// The value bytes (`None` for a tombstone).
    pub value: Option<Vec<u8>>,
    /// The headers in order.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl RetryRecord {
    /// Copies a consumed message.
    pub fn from_message(m: &BorrowedMessage<'_>) -> Self {
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            topic: m.topic().to_owned(),
            partition: m.partition(),
            offset: m.offset(),
            timestamp: m.timestamp().to_millis(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers,
        }
    }

    /// The value of the last header named `name` (`None` when absent or null).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// The last header named `name` as UTF-8 text.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The failed attempts so far ([`HEADER_ATTEMPT`]; 0 when absent or unreadable).
    pub fn attempt(&self) -> u32 {
        self.header_str(HEADER_ATTEMPT)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    /// When the record is due ([`HEADER_NEXT_AT`]); `None` means now.
    pub fn due_at_ms(&self) -> Option<i64> {
        self.header_str(HEADER_NEXT_AT).and_then(|s| s.parse().ok())
    }

    /// The error of the last failed attempt ([`HEADER_LAST_ERROR`]).
    pub fn last_error(&self) -> Option<&str> {
        self.header_str(HEADER_LAST_ERROR)
    }

    /// The topic the record was first read from ([`HEADER_ORIGINAL_TOPIC`]), or the topic it
    /// was read from when it has not been retried yet.
    pub fn original_topic(&self) -> &str {
        self.header_str(HEADER_ORIGINAL_TOPIC).unwrap_or(&self.topic)
    }

    /// The key as text (lossy), for display.
    pub fn key_text(&self) -> String {
        self.key.as_deref().map_or_else(
            || "<null>".to_owned(),
            |k| String::from_utf8_lossy(k).into_owned(),
        )
    }

    /// The value as text (lossy), for display.
    pub fn value_text(&self) -> String {
        self.value.as_deref().map_or_else(
            || "<null>".to_owned(),
            |v| String::from_utf8_lossy(v).into_owned(),
        )
    }

    /// The headers that are not [`RETRY_HEADERS`] (the application's own), in order.
    pub fn application_headers(&self) -> impl Iterator<Item = &(String, Option<Vec<u8>>)> {
        self.headers
            .iter()
            .filter(|(k, _)| !RETRY_HEADERS.contains(&k.as_str()))
    }

    /// The headers of this record moving on after a failure: the application's headers,
    /// the original topic/partition/offset (kept from the first failure), then `extra`.
    pub(super) fn moved_headers(&self, extra: &[(&str, String)]) -> OwnedHeaders {
        let mut out = OwnedHeaders::new();
        for (k, v) in self.application_headers() {
            out = out.insert(Header {
                key: k,
                value: v.as_deref(),
            });
        }
        let original = [
            (HEADER_ORIGINAL_TOPIC, self.original_topic().to_owned()),
            (
                HEADER_ORIGINAL_PARTITION,
                self.header_str(HEADER_ORIGINAL_PARTITION)
                    .map_or_else(|| self.partition.to_string(), str::to_owned),
            ),
            (
                HEADER_ORIGINAL_OFFSET,
                self.header_str(HEADER_ORIGINAL_OFFSET)
                    .map_or_else(|| self.offset.to_string(), str::to_owned),
            ),
        ];
        for (k, v) in original
            .iter()
            .map(|(k, v)| (*k, v))
            .chain(extra.iter().map(|(k, v)| (*k, v)))
        {
            out = out.insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_headers_keep_the_original_and_replace_retry_headers() {
        let r = RetryRecord {
            topic: "req-retry-1".into(),
            partition: 2,
            offset: 9,
            timestamp: None,
            key: None,
            value: None,
            headers: vec![
                ("app".into(), Some(b"x".to_vec())),
                (HEADER_ATTEMPT.into(), Some(b"1".to_vec())),
                (HEADER_ORIGINAL_TOPIC.into(), Some(b"req".to_vec())),
                (HEADER_ORIGINAL_PARTITION.into(), Some(b"0".to_vec())),
                (HEADER_ORIGINAL_OFFSET.into(), Some(b"4".to_vec())),
            ],
        };
        assert_eq!(r.attempt(), 1);
        assert_eq!(r.original_topic(), "req");
        let h = r.moved_headers(&[(HEADER_ATTEMPT, "2".into())]);
        let got: Vec<(String, String)> = h
            .iter()
            .map(|h| {
                (
                    h.key.to_owned(),
                    String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned(),
                )
            })
            .collect();
        let want = [
            ("app", "x"),
            (HEADER_ORIGINAL_TOPIC, "req"),
            (HEADER_ORIGINAL_PARTITION, "0"),
        ];
        for (k, v) in want {
            assert!(got.contains(&(k.to_owned(), v.to_owned())), "{got:?}");
        }
        assert!(got.contains(&(HEADER_ORIGINAL_OFFSET.to_owned(), "4".to_owned())));
        assert_eq!(got.iter().filter(|(k, _)| k == HEADER_ATTEMPT).count(), 1);
        assert!(got.contains(&(HEADER_ATTEMPT.to_owned(), "2".to_owned())));
    }
}
