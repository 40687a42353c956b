//! The suppression buffer: the latest update per key, evicted in buffer-time order, kept in
//! a changelogged key-value store of bytes so it survives a restart (Kafka Streams'
//! `InMemoryTimeOrderedKeyValueChangeBuffer`).
//!
//! The store holds what Kafka Streams writes to the buffer's changelog, so the two
//! implementations restore each other's buffers: the key's bytes map to a value of
//! format 3 (the changelog records carry the header `v` = 3, see [`FORMAT_HEADER`]), all
//! numbers big-endian:
//!
//! ```text
//! record context: timestamp (8) | offset (8) | topic length (4) | topic | partition (4)
//!                 | header count (4) | per header: name length (4) | name
//!                                                 | value length (4, -1 null) | value
//! prior value:    length (4, -1 null) | bytes
//! old value:      length (4, -1 null, -2 the same as the prior value) | bytes
//! new value:      length (4, -1 null: a deletion) | bytes
//! buffer time (8)
//! ```
//!
//! The record context is the update's input record; the emitted record takes its
//! timestamp and headers. The prior value is the key's old value when it was first
//! buffered; the old value is the update's. This runtime's suppressed tables carry no old
//! values, so it writes both as null, and keeps the prior value of an entry Kafka Streams
//! wrote when it replaces it.
//!
//! Invariants: every key has at most one entry; an update of a buffered key replaces its
//! value but keeps its buffer time (Kafka's non-resetting semantics). The eviction order
//! (buffer time, then key bytes) is held in memory, rebuilt from the store the first time
//! the buffer is used after a task starts (after a restore). An entry's size is Kafka
//! Streams' estimate of its memory, so a [`BufferConfig`](super::BufferConfig) byte limit
//! evicts where Kafka Streams' does: 8 bytes (its time), the key, the prior, old and new
//! values, and the record context (16 bytes of timestamp and offset, the topic's
//! characters, 4 of partition, each header's name characters and value bytes).

use std::collections::BTreeSet;

use streams_core::state::StoreError;
use streams_core::{Headers, KvStore, RecordMetadata};
use streams_state::serde::BytesSerde;

/// The store behind a buffer.
pub(crate) type BufferStore = KvStore<BytesSerde, BytesSerde>;

/// The header every changelog record of a buffer carries (tombstones aside): the value's
/// format, 3.
pub(crate) const FORMAT_HEADER: (&str, [u8; 1]) = ("v", [3]);

/// A null value's length.
const NULL: i32 = -1;
/// An old value's length when it is the prior value.
const SAME_AS_PRIOR: i32 = -2;

/// One buffered update, as put and evicted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// The serialized key.
    pub key: Vec<u8>,
    /// The update's record timestamp.
    pub timestamp: i64,
    /// The update's headers.
    pub headers: Headers,
    /// The serialized value; `None` a deletion.
    pub value: Option<Vec<u8>>,
    /// Topic, partition and offset of the update's input record; `None` unknown (written
    /// as topic `""`, partition -1, offset -1).
    pub source: Option<RecordMetadata>,
}

/// A stored value, decoded.
struct Stored {
    entry: Entry,
    prior: Option<Vec<u8>>,
    time: i64,
}

/// A time-ordered buffer of the latest update per key.
pub(crate) struct Buffer {
    store: BufferStore,
    /// (buffer time, key) of every buffered key, in eviction order; `None` until read from
    /// the store.
    order: Option<BTreeSet<(i64, Vec<u8>)>>,
    bytes: u64,
}

/// The size of `e` with the `prior` value (see the module docs); the old value is null.
fn size(e: &Entry, prior: Option<&[u8]>) -> u64 {
    let len = |b: Option<&[u8]>| b.map_or(0, <[u8]>::len);
    let headers: usize = e.headers.iter().map(|(n, v)| n.chars().count() + len(v)).sum();
    let topic = e.source.as_ref().map_or(0, |m| m.topic.chars().count());
    let context = 8 + 8 + topic + 4 + headers;
    (8 + e.key.len() + len(prior) + len(e.value.as_deref()) + context) as u64
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Serde {
        store: "suppression buffer".to_owned(),
        source: streams_state::SerdeError::new("suppression buffer", what),
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => out.extend_from_slice(&NULL.to_be_bytes()),
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
    }
}

/// The stored value of `e` at buffer time `time`, with the key's `prior` value.
fn encode(e: &Entry, prior: Option<&[u8]>, time: i64) -> Vec<u8> {
    let (topic, partition, offset) = e
        .source
        .as_ref()
        .map_or(("", -1, -1), |m| (m.topic.as_str(), m.partition, m.offset));
    let mut out = Vec::with_capacity(64 + topic.len() + e.value.as_ref().map_or(0, Vec::len));
    out.extend_from_slice(&e.timestamp.to_be_bytes());
    out.extend_from_slice(&offset.to_be_bytes());
    put_bytes(&mut out, Some(topic.as_bytes()));
    out.extend_from_slice(&partition.to_be_bytes());
    out.extend_from_slice(&(e.headers.len() as i32).to_be_bytes());
    for (name, value) in e.headers.iter() {
        put_bytes(&mut out, Some(name.as_bytes()));
        put_bytes(&mut out, value);
    }
    put_bytes(&mut out, prior);
    // No old value: this runtime's suppressed tables forward none.
    put_bytes(&mut out, None);
    put_bytes(&mut out, e.value.as_deref());
    out.extend_from_slice(&time.to_be_bytes());
    out
}

/// Reads a stored value of format 3, front to back.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        if self.0.len() < n {
            return Err(corrupt("truncated value"));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn i32(&mut self) -> Result<i32, StoreError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self) -> Result<i64, StoreError> {
        let b: [u8; 8] = self.take(8)?.try_into().map_err(|_| corrupt("truncated value"))?;
        Ok(i64::from_be_bytes(b))
    }

    /// A length-prefixed array of `len` (already read) bytes; `None` for a null.
    fn array(&mut self, len: i32) -> Result<Option<&'a [u8]>, StoreError> {
        match len {
            NULL => Ok(None),
            n if n >= 0 => self.take(n as usize).map(Some),
            _ => Err(corrupt("negative length")),
        }
    }

    fn nullable(&mut self) -> Result<Option<&'a [u8]>, StoreError> {
        let len = self.i32()?;
        self.array(len)
    }

    fn string(&mut self, what: &str) -> Result<String, StoreError> {
        let bytes = self.nullable()?.ok_or_else(|| corrupt(what))?;
        String::from_utf8(bytes.to_vec()).map_err(|_| corrupt(what))
    }
}

fn decode(key: Vec<u8>, bytes: &[u8]) -> Result<Stored, StoreError> {
    let mut r = Reader(bytes);
    let timestamp = r.i64()?;
    let offset = r.i64()?;
    let topic = r.string("topic")?;
    let partition = r.i32()?;
    let mut headers = Headers::new();
    // -1: no headers (an older writer's way of saying so).
    for _ in 0..r.i32()?.max(0) {
        let name = r.string("header name")?;
        match r.nullable()? {
            None => headers.add_null(name),
            Some(v) => headers.add(name, v.to_vec()),
        };
    }
    let prior = r.nullable()?.map(<[u8]>::to_vec);
    match r.i32()? {
        SAME_AS_PRIOR => {}
        len => {
            r.array(len)?;
        }
    }
    let value = r.nullable()?.map(<[u8]>::to_vec);
    let time = r.i64()?;
    if !r.0.is_empty() {
        return Err(corrupt("bytes after the buffer time (not format 3)"));
    }
    Ok(Stored {
        entry: Entry {
            key,
            timestamp,
            headers,
            value,
            source: Some(RecordMetadata {
                topic,
                partition,
                offset,
            }),
        },
        prior,
        time,
    })
}

impl Buffer {
    /// A buffer over `store`, read on first use.
    pub fn new(store: BufferStore) -> Self {
        Self {
            store,
            order: None,
            bytes: 0,
        }
    }

    /// The eviction order, read from the store the first time.
    fn order(&mut self) -> Result<&mut BTreeSet<(i64, Vec<u8>)>, StoreError> {
        if self.order.is_none() {
            let (mut order, mut bytes) = (BTreeSet::new(), 0);
            for e in self.store.read()?.all()? {
                let (k, v) = e?;
                let s = decode(k, &v)?;
                bytes += size(&s.entry, s.prior.as_deref());
                order.insert((s.time, s.entry.key));
            }
            self.bytes = bytes;
            self.order = Some(order);
        }
        Ok(self.order.get_or_insert_default())
    }

    /// Buffers `entry` at `time`, or replaces the key's entry, keeping its time and prior
    /// value.
    pub fn put(&mut self, time: i64, entry: &Entry) -> Result<(), StoreError> {
        self.order()?;
        let (prior, time) = match self.store.get(&entry.key)? {
            None => {
                self.order()?.insert((time, entry.key.clone()));
                (None, time)
            }
            Some(old) => {
                let was = decode(entry.key.clone(), &old)?;
                self.bytes = self.bytes.saturating_sub(size(&was.entry, was.prior.as_deref()));
                (was.prior, was.time)
            }
        };
        self.bytes += size(entry, prior.as_deref());
        self.store.put(&entry.key, &encode(entry, prior.as_deref(), time))
    }

    /// The earliest buffer time, if any entry is buffered.
    pub fn min_time(&mut self) -> Result<Option<i64>, StoreError> {
        Ok(self.order()?.first().map(|(t, _)| *t))
    }

    /// Removes and returns the entry with the earliest buffer time.
    pub fn pop(&mut self) -> Result<Option<Entry>, StoreError> {
        let Some((_, key)) = self.order()?.pop_first() else {
            return Ok(None);
        };
        let stored = self
            .store
            .get(&key)?
            .ok_or_else(|| corrupt("a buffered key is missing from the store"))?;
        self.store.delete(&key)?;
        let s = decode(key, &stored)?;
        self.bytes = self.bytes.saturating_sub(size(&s.entry, s.prior.as_deref()));
        Ok(Some(s.entry))
    }

    /// The number of buffered keys.
    pub fn records(&self) -> u64 {
        self.order.as_ref().map_or(0, |o| o.len() as u64)
    }

    /// The buffer's size in bytes (see the module docs).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(value: Option<Vec<u8>>) -> Entry {
        let mut headers = Headers::new();
        headers.add("a", b"1".to_vec());
        headers.add_null("b");
        Entry {
            key: b"k".to_vec(),
            timestamp: -7,
            headers,
            value,
            source: Some(RecordMetadata {
                topic: "in".to_owned(),
                partition: 3,
                offset: 42,
            }),
        }
    }

    #[test]
    fn entries_round_trip_with_headers_deletions_and_prior_values() {
        for value in [None, Some(Vec::new()), Some(b"xyz".to_vec())] {
            for prior in [None, Some(&b"p"[..])] {
                let e = entry(value.clone());
                let s = decode(e.key.clone(), &encode(&e, prior, 99)).unwrap();
                assert_eq!((s.entry, s.prior.as_deref(), s.time), (e, prior, 99));
            }
        }
        assert!(decode(Vec::new(), b"\x00\x01").is_err());
        let mut longer = encode(&entry(None), None, 1);
        longer.push(0);
        assert!(
            decode(Vec::new(), &longer).is_err(),
            "trailing bytes are not format 3"
        );
    }

    /// The bytes Kafka Streams 4.x writes for one buffered update (`BufferValue.serialize`
    /// with `ProcessorRecordContext.serialize` in front and the buffer time behind):
    /// timestamp 5, offset 6, topic "t", partition 1, header `h` = "x", prior value null,
    /// old value the same as the prior (-2), new value "n", buffer time 10000.
    #[test]
    fn reads_the_values_kafka_streams_writes() {
        let mut v = Vec::new();
        v.extend_from_slice(&5i64.to_be_bytes());
        v.extend_from_slice(&6i64.to_be_bytes());
        v.extend_from_slice(&[0, 0, 0, 1, b't']);
        v.extend_from_slice(&1i32.to_be_bytes());
        v.extend_from_slice(&1i32.to_be_bytes());
        v.extend_from_slice(&[0, 0, 0, 1, b'h', 0, 0, 0, 1, b'x']);
        v.extend_from_slice(&(-1i32).to_be_bytes());
        v.extend_from_slice(&(-2i32).to_be_bytes());
        v.extend_from_slice(&[0, 0, 0, 1, b'n']);
        v.extend_from_slice(&10_000i64.to_be_bytes());
        let s = decode(b"k".to_vec(), &v).unwrap();
        let mut headers = Headers::new();
        headers.add("h", b"x".to_vec());
        assert_eq!(
            s.entry,
            Entry {
                key: b"k".to_vec(),
                timestamp: 5,
                headers,
                value: Some(b"n".to_vec()),
                source: Some(RecordMetadata {
                    topic: "t".to_owned(),
                    partition: 1,
                    offset: 6,
                }),
            }
        );
        assert_eq!((s.prior, s.time), (None, 10_000));
        // This runtime writes the old value as null (-1), not as "same as prior".
        let ours = encode(&s.entry, None, 10_000);
        assert_eq!(ours.len(), v.len());
        assert_eq!(&ours[..ours.len() - 17], &v[..v.len() - 17]);
    }
}
