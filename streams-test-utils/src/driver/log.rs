//! The driver's in-memory topics: every record produced, per topic in production order,
//! with per-partition offsets.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use streams_state::{ChangelogError, ChangelogSink};

use streams_core::engine::{RecordCollector, SendError};
use streams_core::{Headers, OutputRecord, OutputRef, RawRecord, SourceValues};

/// All topics of a driver.
#[derive(Default)]
pub(crate) struct TopicLog {
    partitions: HashMap<String, i32>,
    records: HashMap<String, Vec<RawRecord>>,
    next_offsets: HashMap<(String, i32), i64>,
}

impl TopicLog {
    pub fn set_partitions(&mut self, topic: &str, n: i32) {
        self.partitions.insert(topic.to_owned(), n);
    }

    pub fn partitions(&self, topic: &str) -> i32 {
        self.partitions.get(topic).copied().unwrap_or(1)
    }

    /// Appends a record to `partition` of `topic`; returns it with its offset.
    pub fn append(&mut self, topic: &str, partition: i32, r: OutputRecord) -> RawRecord {
        let next = self
            .next_offsets
            .entry((topic.to_owned(), partition))
            .or_insert(0);
        let raw = RawRecord {
            topic: std::sync::Arc::from(topic),
            partition,
            offset: *next,
            key: r.key,
            value: r.value,
            timestamp: r.timestamp,
            headers: r.headers,
        };
        *next += 1;
        self.records
            .entry(topic.to_owned())
            .or_default()
            .push(raw.clone());
        raw
    }

    /// The records of `topic` from position `from` on (positions count across partitions,
    /// in production order).
    pub fn read_from(&self, topic: &str, from: usize) -> &[RawRecord] {
        self.records
            .get(topic)
            .map_or(&[], |v| v.get(from..).unwrap_or(&[]))
    }

    pub fn len(&self, topic: &str) -> usize {
        self.records.get(topic).map_or(0, Vec::len)
    }

    pub fn topics(&self) -> impl Iterator<Item = &String> {
        self.records.keys()
    }
}

/// Shared handle to the topics.
#[derive(Clone, Default)]
pub(crate) struct SharedLog(Arc<Mutex<TopicLog>>);

impl SharedLog {
    pub fn lock(&self) -> MutexGuard<'_, TopicLog> {
        // A panic while the lock is held cannot leave the log half-written in a way that
        // matters to a test; keep going with the inner value.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The collector of a driver task: partitions records like the runtime and appends them.
pub(crate) struct DriverCollector {
    pub log: SharedLog,
    pub round_robin: u32,
}

impl RecordCollector for DriverCollector {
    fn send(&mut self, record: OutputRef<'_>) -> Result<(), SendError> {
        let mut log = self.log.lock();
        let partition = match record.partition {
            Some(p) => p,
            None => {
                self.round_robin = self.round_robin.wrapping_add(1);
                (self.round_robin % log.partitions(record.topic).max(1) as u32) as i32
            }
        };
        log.append(record.topic, partition, record.to_owned_record());
        Ok(())
    }

    fn partitions(&mut self, topic: &str) -> Option<i32> {
        Some(self.log.lock().partitions(topic))
    }
}

/// The changelog sink of a driver store: appends to the changelog topic.
pub(crate) struct DriverChangelog {
    pub log: SharedLog,
    pub topic: String,
    pub partition: i32,
    pub timestamp: Arc<AtomicI64>,
    /// How the store holds the changelog's records: a timestamped store's value goes out
    /// without its timestamp, which becomes the record's, a versioned store's entry as its
    /// key and value at the version's timestamp, as the runtime writes them.
    pub values: SourceValues,
    /// The store's changelog headers, on every record but tombstones.
    pub headers: Headers,
}

impl ChangelogSink for DriverChangelog {
    fn send(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), ChangelogError> {
        let Some((key, value, timestamp)) = self
            .values
            .changelog_record(key, value, self.timestamp.load(Ordering::Relaxed))
            .map_err(|e| ChangelogError::new(format!("changelog `{}`: {e}", self.topic)))?
        else {
            return Ok(());
        };
        let record = OutputRecord {
            topic: self.topic.clone(),
            partition: Some(self.partition),
            key: Some(Bytes::copy_from_slice(key)),
            value: value.map(Bytes::copy_from_slice),
            timestamp,
            headers: if value.is_some() {
                self.headers.clone()
            } else {
                Headers::new()
            },
        };
        self.log.lock().append(&self.topic, self.partition, record);
        Ok(())
    }
}
