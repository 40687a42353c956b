//! The suppression buffer: a time-ordered key-value buffer kept in a changelogged
//! key-value store of bytes, so it survives a restart (Kafka Streams'
//! `TimeOrderedKeyValueBuffer`).
//!
//! Layout of the store (byte-ordered):
//! - `0x00 | buffer time (8 bytes, big-endian, sign bit flipped) | key` → the latest update
//!   of the key: record timestamp (8 bytes), headers, then a flag (`0` deletion, `1` value)
//!   and the value's bytes. Byte order is buffer-time order, so eviction reads only the
//!   entries that are due, oldest first.
//! - `0x01 | key` → the key's buffer time, to find and replace its entry.
//!
//! Invariants: every key has at most one entry; an update of a buffered key replaces its
//! value but keeps its buffer time (Kafka's non-resetting semantics); the record count and
//! byte size are recomputed from the store the first time the buffer is used after a task
//! starts (after a restore), then kept up to date. An entry's size is 8 bytes (its time)
//! plus its key and stored value.

use std::ops::Bound;

use streams_core::state::StoreError;
use streams_core::{Headers, KvStore};
use streams_state::serde::BytesSerde;

/// The store behind a buffer.
pub(crate) type BufferStore = KvStore<BytesSerde, BytesSerde>;

const SORTED: u8 = 0;
const INDEX: u8 = 1;

/// One buffered update, as evicted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// The serialized key.
    pub key: Vec<u8>,
    /// The latest update's record timestamp.
    pub timestamp: i64,
    /// The latest update's headers.
    pub headers: Headers,
    /// The serialized value; `None` a deletion.
    pub value: Option<Vec<u8>>,
}

/// A time-ordered buffer of the latest update per key.
pub(crate) struct Buffer {
    store: BufferStore,
    loaded: bool,
    records: u64,
    bytes: u64,
}

fn sorted_key(time: i64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + key.len());
    k.push(SORTED);
    k.extend_from_slice(&((time as u64) ^ (1 << 63)).to_be_bytes());
    k.extend_from_slice(key);
    k
}

fn index_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + key.len());
    k.push(INDEX);
    k.extend_from_slice(key);
    k
}

fn size(key: &[u8], stored: &[u8]) -> u64 {
    (8 + key.len() + stored.len()) as u64
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Serde {
        store: "suppression buffer".to_owned(),
        source: streams_state::SerdeError::new("suppression buffer", what),
    }
}

fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Result<&'a [u8], StoreError> {
    if bytes.len() < n {
        return Err(corrupt("truncated entry"));
    }
    let (head, tail) = bytes.split_at(n);
    *bytes = tail;
    Ok(head)
}

fn take_u32(bytes: &mut &[u8]) -> Result<usize, StoreError> {
    let b = take(bytes, 4)?;
    Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

fn encode(e: &Entry) -> Vec<u8> {
    let mut out = e.timestamp.to_be_bytes().to_vec();
    out.extend_from_slice(&(e.headers.len() as u32).to_be_bytes());
    for (name, value) in e.headers.iter() {
        out.extend_from_slice(&(name.len() as u32).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        match value {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&(v.len() as u32).to_be_bytes());
                out.extend_from_slice(v);
            }
        }
    }
    match &e.value {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            out.extend_from_slice(v);
        }
    }
    out
}

fn decode(key: Vec<u8>, mut bytes: &[u8]) -> Result<Entry, StoreError> {
    let b = &mut bytes;
    let ts = take(b, 8)?;
    let timestamp = i64::from_be_bytes(ts.try_into().map_err(|_| corrupt("timestamp"))?);
    let mut headers = Headers::new();
    for _ in 0..take_u32(b)? {
        let n = take_u32(b)?;
        let name = String::from_utf8(take(b, n)?.to_vec()).map_err(|_| corrupt("header name"))?;
        if take(b, 1)?[0] == 0 {
            headers.add_null(name);
        } else {
            let n = take_u32(b)?;
            headers.add(name, take(b, n)?.to_vec());
        }
    }
    let value = match take(b, 1)?[0] {
        0 => None,
        _ => Some(b.to_vec()),
    };
    Ok(Entry {
        key,
        timestamp,
        headers,
        value,
    })
}

fn time_of(bytes: &[u8]) -> Result<i64, StoreError> {
    let b: [u8; 8] = bytes.try_into().map_err(|_| corrupt("buffer time"))?;
    Ok((u64::from_be_bytes(b) ^ (1 << 63)) as i64)
}

impl Buffer {
    /// A buffer over `store`, whose counts are read on first use.
    pub fn new(store: BufferStore) -> Self {
        Self {
            store,
            loaded: false,
            records: 0,
            bytes: 0,
        }
    }

    fn load(&mut self) -> Result<(), StoreError> {
        if self.loaded {
            return Ok(());
        }
        let (mut records, mut bytes) = (0, 0);
        {
            let reader = self.store.read()?;
            for e in reader.range(Bound::Included(&vec![SORTED]), Bound::Excluded(&vec![INDEX]))? {
                let (k, v) = e?;
                records += 1;
                bytes += size(&k[9..], &v);
            }
        }
        (self.records, self.bytes, self.loaded) = (records, bytes, true);
        Ok(())
    }

    /// Buffers `entry` at `time`, or replaces the key's entry, keeping its time.
    pub fn put(&mut self, time: i64, entry: &Entry) -> Result<(), StoreError> {
        self.load()?;
        let stored = encode(entry);
        let index = index_key(&entry.key);
        match self.store.get(&index)? {
            None => {
                self.store.put(&index, &time.to_be_bytes().to_vec())?;
                self.store.put(&sorted_key(time, &entry.key), &stored)?;
                self.records += 1;
            }
            Some(t) => {
                let at = sorted_key(
                    i64::from_be_bytes(t.try_into().map_err(|_| corrupt("index"))?),
                    &entry.key,
                );
                if let Some(old) = self.store.get(&at)? {
                    self.bytes = self.bytes.saturating_sub(size(&entry.key, &old));
                }
                self.store.put(&at, &stored)?;
            }
        }
        self.bytes += size(&entry.key, &stored);
        Ok(())
    }

    /// The earliest buffer time, if any entry is buffered.
    pub fn min_time(&mut self) -> Result<Option<i64>, StoreError> {
        self.load()?;
        let reader = self.store.read()?;
        let mut it = reader.range(Bound::Included(&vec![SORTED]), Bound::Excluded(&vec![INDEX]))?;
        match it.next() {
            None => Ok(None),
            Some(e) => Ok(Some(time_of(&e?.0[1..9])?)),
        }
    }

    /// Removes and returns the entry with the earliest buffer time.
    pub fn pop(&mut self) -> Result<Option<Entry>, StoreError> {
        self.load()?;
        let first = {
            let reader = self.store.read()?;
            let mut it = reader.range(Bound::Included(&vec![SORTED]), Bound::Excluded(&vec![INDEX]))?;
            it.next().transpose()?
        };
        let Some((k, v)) = first else {
            return Ok(None);
        };
        let key = k.get(9..).ok_or_else(|| corrupt("short key"))?.to_vec();
        self.store.delete(&k)?;
        self.store.delete(&index_key(&key))?;
        self.records = self.records.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(size(&key, &v));
        decode(key, &v).map(Some)
    }

    /// The number of buffered keys.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The buffer's size in bytes (see the module docs).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_with_headers_and_deletions() {
        let mut headers = Headers::new();
        headers.add("a", b"1".to_vec());
        headers.add_null("b");
        for value in [None, Some(Vec::new()), Some(b"xyz".to_vec())] {
            let e = Entry {
                key: b"k".to_vec(),
                timestamp: -7,
                headers: headers.clone(),
                value,
            };
            assert_eq!(decode(e.key.clone(), &encode(&e)).unwrap(), e);
        }
        assert!(decode(Vec::new(), b"\x00\x01").is_err());
    }

    #[test]
    fn sorted_keys_order_by_time_then_key() {
        let mut keys = [
            sorted_key(5, b"a"),
            sorted_key(-1, b"z"),
            sorted_key(5, b"0"),
            sorted_key(1 << 40, b""),
        ];
        keys.sort();
        assert_eq!(
            keys,
            [
                sorted_key(-1, b"z"),
                sorted_key(5, b"0"),
                sorted_key(5, b"a"),
                sorted_key(1 << 40, b"")
            ]
        );
        assert_eq!(time_of(&sorted_key(-3, b"k")[1..9]).unwrap(), -3);
        assert!(index_key(b"k") > sorted_key(i64::MAX, b"zzzz"));
    }
}
