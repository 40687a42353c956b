//! The changelog: where a logged store sends every change, and what restore reads back.

use bytes::Bytes;

/// Receives every change of a logged store, in the order the changes were made.
///
/// The runtime implements it with a Kafka producer writing to the store's changelog topic
/// (`<application.id>-<store>-changelog`, partition = the task's partition); the record's
/// timestamp is the timestamp of the record being processed, which the sink knows from its
/// task. Tests implement it with a vector.
pub trait ChangelogSink: Send {
    /// Logs that `key` now maps to `value`, or was deleted when `value` is `None` (a tombstone).
    fn send(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), ChangelogError>;

    /// Waits until every change sent so far is durable, where the sink can tell.
    fn flush(&mut self) -> Result<(), ChangelogError> {
        Ok(())
    }
}

/// A changelog sink could not accept or persist a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ChangelogError {
    /// What failed.
    pub message: String,
}

impl ChangelogError {
    /// A new error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// One record read back from a changelog during restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangelogRecord {
    /// The key bytes.
    pub key: Bytes,
    /// The value bytes, `None` for a tombstone (delete).
    pub value: Option<Bytes>,
    /// The record's offset in the changelog partition.
    pub offset: i64,
}

/// A sink that keeps every change in memory, for tests and the test driver. Clones share
/// the same records, so a test keeps one clone and hands the other to the store.
#[derive(Debug, Default, Clone)]
pub struct VecChangelog {
    records: std::sync::Arc<std::sync::Mutex<Changes>>,
}

/// Changes in order: key and value (`None` for a delete).
type Changes = Vec<(Bytes, Option<Bytes>)>;

impl ChangelogSink for VecChangelog {
    fn send(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), ChangelogError> {
        let mut records = self
            .records
            .lock()
            .map_err(|_| ChangelogError::new("changelog lock poisoned"))?;
        records.push((Bytes::copy_from_slice(key), value.map(Bytes::copy_from_slice)));
        Ok(())
    }
}

impl VecChangelog {
    /// The changes so far, in order: key and value (`None` for a delete).
    pub fn changes(&self) -> Vec<(Bytes, Option<Bytes>)> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The changes as changelog records with offsets 0, 1, 2, ...
    pub fn to_records(&self) -> Vec<ChangelogRecord> {
        self.changes()
            .into_iter()
            .zip(0..)
            .map(|((key, value), offset)| ChangelogRecord { key, value, offset })
            .collect()
    }
}
