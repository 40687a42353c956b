//! The headers the ladder writes on the records it moves, and how they are read.
//!
//! Invariants: the retry headers ([`RETRY_HEADERS`]) are replaced, never repeated, when a
//! record moves on; the application's own headers travel unchanged and in order, before
//! them; the original topic, partition and offset are set at the first failure and kept
//! after it (also through a replay from the dead-letter topic); the values are decimal or
//! plain UTF-8 text, so any Kafka tool shows them. An unreadable retry header counts as
//! absent: reading headers never fails.

use streams_core::{Headers, RecordMetadata};

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

/// The headers the ladder writes; they are replaced, not repeated, when a record moves on.
pub const RETRY_HEADERS: [&str; 7] = [
    HEADER_ATTEMPT,
    HEADER_NEXT_AT,
    HEADER_LAST_ERROR,
    HEADER_ORIGINAL_TOPIC,
    HEADER_ORIGINAL_PARTITION,
    HEADER_ORIGINAL_OFFSET,
    HEADER_REPLAYED_FROM,
];

/// The failed attempts so far ([`HEADER_ATTEMPT`]; 0 when absent or unreadable).
pub fn failed_attempts(headers: &Headers) -> u32 {
    headers
        .last_str(HEADER_ATTEMPT)
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// When the record is due ([`HEADER_NEXT_AT`]); `None` when absent or unreadable.
pub fn due_at_ms(headers: &Headers) -> Option<i64> {
    headers
        .last_str(HEADER_NEXT_AT)
        .and_then(|s| s.trim().parse().ok())
}

/// The error of the last failed attempt ([`HEADER_LAST_ERROR`]).
pub fn last_error(headers: &Headers) -> Option<&str> {
    headers.last_str(HEADER_LAST_ERROR)
}

/// Where the record was first read: the original topic, partition and offset headers, each
/// falling back to `read_from` (where it was read now) when absent or unreadable.
pub fn original_position(headers: &Headers, read_from: &RecordMetadata) -> RecordMetadata {
    RecordMetadata {
        topic: headers
            .last_str(HEADER_ORIGINAL_TOPIC)
            .map_or_else(|| read_from.topic.clone(), str::to_owned),
        partition: headers
            .last_str(HEADER_ORIGINAL_PARTITION)
            .and_then(|s| s.parse().ok())
            .unwrap_or(read_from.partition),
        offset: headers
            .last_str(HEADER_ORIGINAL_OFFSET)
            .and_then(|s| s.parse().ok())
            .unwrap_or(read_from.offset),
    }
}

/// Whether `name` is one of [`RETRY_HEADERS`].
pub fn is_retry_header(name: &str) -> bool {
    RETRY_HEADERS.contains(&name)
}

/// The headers of a record moving on after a failure (or a replay): its application
/// headers in order, the original topic/partition/offset ([`original_position`], kept from
/// the first failure), then `extra` (e.g. the attempt count and the error), in order.
pub fn moved_headers(headers: &Headers, read_from: &RecordMetadata, extra: &[(&str, String)]) -> Headers {
    let mut out = Headers::new();
    for (name, value) in headers.iter().filter(|(n, _)| !is_retry_header(n)) {
        match value {
            Some(v) => out.add(name, v.to_vec()),
            None => out.add_null(name),
        };
    }
    let original = original_position(headers, read_from);
    out.add(HEADER_ORIGINAL_TOPIC, original.topic)
        .add(HEADER_ORIGINAL_PARTITION, original.partition.to_string())
        .add(HEADER_ORIGINAL_OFFSET, original.offset.to_string());
    for (name, value) in extra {
        out.add(*name, value.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(h: &Headers) -> Vec<(String, Option<String>)> {
        h.iter()
            .map(|(k, v)| (k.to_owned(), v.map(|v| String::from_utf8_lossy(v).into_owned())))
            .collect()
    }

    #[test]
    fn moved_headers_keep_the_original_and_replace_retry_headers() {
        let mut h = Headers::new();
        h.add("app", "x")
            .add(HEADER_ATTEMPT, "1")
            .add_null("app-null")
            .add(HEADER_ORIGINAL_TOPIC, "req")
            .add(HEADER_ORIGINAL_PARTITION, "0")
            .add(HEADER_ORIGINAL_OFFSET, "4")
            .add(HEADER_REPLAYED_FROM, "req-dlq/0/3");
        assert_eq!(failed_attempts(&h), 1);
        let here = RecordMetadata {
            topic: "req-retry-1".into(),
            partition: 2,
            offset: 9,
        };
        let moved = moved_headers(&h, &here, &[(HEADER_ATTEMPT, "2".into())]);
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(
            text(&moved),
            vec![
                ("app".into(), s("x")),
                ("app-null".into(), None),
                (HEADER_ORIGINAL_TOPIC.into(), s("req")),
                (HEADER_ORIGINAL_PARTITION.into(), s("0")),
                (HEADER_ORIGINAL_OFFSET.into(), s("4")),
                (HEADER_ATTEMPT.into(), s("2")),
            ]
        );
    }

    #[test]
    fn first_failure_takes_the_position_read_and_bad_values_count_as_absent() {
        let mut h = Headers::new();
        h.add(HEADER_ATTEMPT, "x").add(HEADER_NEXT_AT, "soon");
        assert_eq!(failed_attempts(&h), 0);
        assert_eq!(due_at_ms(&h), None);
        let here = RecordMetadata {
            topic: "req".into(),
            partition: 1,
            offset: 7,
        };
        let moved = moved_headers(&h, &here, &[]);
        assert_eq!(moved.last_str(HEADER_ORIGINAL_TOPIC), Some("req"));
        assert_eq!(moved.last_str(HEADER_ORIGINAL_PARTITION), Some("1"));
        assert_eq!(moved.last_str(HEADER_ORIGINAL_OFFSET), Some("7"));
        assert_eq!(moved.last(HEADER_ATTEMPT), None);
        assert_eq!(moved.last(HEADER_NEXT_AT), None);
    }
}
