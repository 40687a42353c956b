//! Exactly-once: output records that failed for good, and what the production handler
//! chose for them when their transaction is processed again.
//!
//! A record the broker refuses for good (larger than the topic's `max.message.bytes`, a
//! deleted topic) fails its whole transaction: librdkafka puts the transaction in an
//! abortable state and every later send of it fails with "Erroneous state". Skipping the
//! record there is not possible — the transaction can no longer commit — so the thread
//! aborts it, and the failed record is remembered here with the handler's choice:
//! `log_and_continue` drops it, `dead_letter_queue` sends its dead-letter record instead.
//! The tasks then process the aborted input again from the last commit; when a sink sends
//! the same record (topic, key and value bytes), the collector applies the choice, inside
//! the new transaction. Nothing is skipped outside a transaction, and nothing twice: a
//! record that was skipped in a transaction that then aborted too (another record of it
//! failed) is skipped again when that input is processed once more, and forgotten only
//! once the transaction that skipped it commits.
//!
//! The per-record cost while nothing is remembered is one relaxed atomic load.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use crate::model::record::{OutputRecord, OutputRef};

/// What a sink does instead of sending a remembered record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Instead {
    /// Nothing: the record is dropped (`log_and_continue`).
    Drop,
    /// The record's dead-letter record is sent (`dead_letter_queue`).
    DeadLetter(OutputRecord),
}

/// One remembered record.
#[derive(Debug)]
struct Skip {
    topic: String,
    key: Option<Bytes>,
    value: Option<Bytes>,
    error: String,
    instead: Instead,
    /// Skipped (or dead-lettered) in the open transaction.
    applied: bool,
}

/// The records to skip or dead-letter when they are sent again; shared by a thread's
/// collectors through its delivery tracker.
#[derive(Debug, Default)]
pub(crate) struct Skips {
    armed: AtomicBool,
    list: Mutex<Vec<Skip>>,
}

impl Skips {
    /// Remembers that the record `(topic, key, value)` failed with `error` and gets
    /// `instead` when it is sent again.
    pub fn add(
        &self,
        topic: &str,
        key: Option<Bytes>,
        value: Option<Bytes>,
        error: String,
        instead: Instead,
    ) {
        if let Ok(mut list) = self.list.lock() {
            list.push(Skip {
                topic: topic.to_owned(),
                key,
                value,
                error,
                instead,
                applied: false,
            });
            self.armed.store(true, Ordering::Release);
        }
    }

    /// What to do instead of sending `record`, with the error it failed with before, if it
    /// is remembered (each remembered record matches once per transaction).
    pub fn take(&self, record: &OutputRef<'_>) -> Option<(Instead, String)> {
        if !self.armed.load(Ordering::Relaxed) {
            return None;
        }
        let mut list = self.list.lock().ok()?;
        let skip = list.iter_mut().find(|s| {
            !s.applied
                && s.topic == record.topic
                && s.key.as_deref() == record.key
                && s.value.as_deref() == record.value
        })?;
        skip.applied = true;
        Some((skip.instead.clone(), skip.error.clone()))
    }

    /// The open transaction committed: the records it skipped are forgotten.
    pub fn committed(&self) {
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut list) = self.list.lock() {
            list.retain(|s| !s.applied);
            if list.is_empty() {
                self.armed.store(false, Ordering::Release);
            }
        }
    }

    /// The open transaction aborted: what it skipped is skipped again next time.
    pub fn aborted(&self) {
        if let Ok(mut list) = self.list.lock() {
            for s in list.iter_mut() {
                s.applied = false;
            }
        }
    }

    /// How many records are remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.list.lock().map_or(0, |l| l.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::record::Headers;

    fn out<'a>(
        topic: &'a str,
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
        h: &'a Headers,
    ) -> OutputRef<'a> {
        OutputRef {
            topic,
            partition: None,
            key,
            value,
            timestamp: 0,
            headers: h,
        }
    }

    #[test]
    fn a_remembered_record_matches_once_by_topic_key_and_value() {
        let h = Headers::new();
        let skips = Skips::default();
        assert_eq!(skips.take(&out("t", Some(b"k"), Some(b"v"), &h)), None);
        skips.add(
            "t",
            Some(Bytes::from_static(b"k")),
            Some(Bytes::from_static(b"v")),
            "too large".into(),
            Instead::Drop,
        );
        assert_eq!(
            skips.take(&out("u", Some(b"k"), Some(b"v"), &h)),
            None,
            "other topic"
        );
        assert_eq!(
            skips.take(&out("t", None, Some(b"v"), &h)),
            None,
            "null key is not b\"k\""
        );
        assert_eq!(
            skips.take(&out("t", Some(b"k"), Some(b"w"), &h)),
            None,
            "other value"
        );
        assert_eq!(
            skips.take(&out("t", Some(b"k"), Some(b"v"), &h)),
            Some((Instead::Drop, "too large".into()))
        );
        assert_eq!(
            skips.take(&out("t", Some(b"k"), Some(b"v"), &h)),
            None,
            "matched once"
        );
        assert_eq!(skips.len(), 1, "kept until its transaction commits");
        skips.aborted();
        assert!(
            skips.take(&out("t", Some(b"k"), Some(b"v"), &h)).is_some(),
            "skipped again after an abort"
        );
        skips.committed();
        assert_eq!(skips.len(), 0, "forgotten once committed");
        assert_eq!(skips.take(&out("t", Some(b"k"), Some(b"v"), &h)), None);
    }

    #[test]
    fn two_equal_records_are_two_entries() {
        let h = Headers::new();
        let skips = Skips::default();
        for _ in 0..2 {
            skips.add("t", None, None, "gone".into(), Instead::Drop);
        }
        assert!(skips.take(&out("t", None, None, &h)).is_some());
        assert!(skips.take(&out("t", None, None, &h)).is_some());
        assert!(skips.take(&out("t", None, None, &h)).is_none());
    }
}
