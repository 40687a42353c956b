//! A record of the ladder's topics read with rdkafka, owned: what the dead-letter tool
//! lists and replays.
//!
//! Invariants: the retry headers are read and moved by the framework's own functions
//! ([`streams_dsl::retry::moved_headers`] and its neighbours), so the tool writes exactly
//! what the ladder's nodes write: retry headers replaced, never repeated; the
//! application's own headers unchanged and in order; the original topic, partition and
//! offset kept from the first failure.

use std::time::{SystemTime, UNIX_EPOCH};

use rdkafka::message::{BorrowedMessage, Header, Headers as _, Message, OwnedHeaders};
use streams_core::{Headers, RecordMetadata};
use streams_dsl::retry::{
    HEADER_LAST_ERROR, HEADER_ORIGINAL_TOPIC, due_at_ms, failed_attempts, is_retry_header, moved_headers,
};

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

    /// The headers as the framework's [`Headers`].
    pub fn core_headers(&self) -> Headers {
        let mut h = Headers::new();
        for (k, v) in &self.headers {
            match v {
                Some(v) => h.add(k.as_str(), v.clone()),
                None => h.add_null(k.as_str()),
            };
        }
        h
    }

    /// Where it was read.
    pub fn position(&self) -> RecordMetadata {
        RecordMetadata {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: self.offset,
        }
    }

    /// The failed attempts so far ([`HEADER_ATTEMPT`](super::HEADER_ATTEMPT); 0 when absent
    /// or unreadable).
    pub fn attempt(&self) -> u32 {
        failed_attempts(&self.core_headers())
    }

    /// When the record is due ([`HEADER_NEXT_AT`](super::HEADER_NEXT_AT)); `None` means now.
    pub fn due_at_ms(&self) -> Option<i64> {
        due_at_ms(&self.core_headers())
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

    /// The headers that are not [`RETRY_HEADERS`](super::RETRY_HEADERS) (the
    /// application's own), in order.
    pub fn application_headers(&self) -> impl Iterator<Item = &(String, Option<Vec<u8>>)> {
        self.headers.iter().filter(|(k, _)| !is_retry_header(k))
    }

    /// The headers of this record moving on (a replay): as the ladder moves them
    /// ([`moved_headers`]), with `extra` after the original position.
    pub(super) fn moved_headers(&self, extra: &[(&str, String)]) -> OwnedHeaders {
        let moved = moved_headers(&self.core_headers(), &self.position(), extra);
        let mut out = OwnedHeaders::new();
        for (key, value) in moved.iter() {
            out = out.insert(Header { key, value });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use streams_dsl::retry::{HEADER_ATTEMPT, HEADER_ORIGINAL_OFFSET, HEADER_ORIGINAL_PARTITION};

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
