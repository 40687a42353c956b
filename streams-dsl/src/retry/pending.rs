//! What a retry stage's store holds: the records waiting for their due time, keyed so
//! that byte order is due-time order.
//!
//! Invariants:
//! - a [`PendingKey`] is 20 bytes: the due time (ms, `i64`), the partition (`i32`) and the
//!   offset (`i64`) of the record in the retry topic, each big-endian with the sign bit
//!   flipped, so byte order is the order of `(due, partition, offset)` and
//!   `range(..=PendingKey::last_due_at(now))` yields exactly the records due at `now`,
//!   earliest first;
//! - `(partition, offset)` makes the key unique within a task (the task owns one
//!   partition of the retry topic), and the same record read twice (after a crash under
//!   at-least-once) gets the same key, so storing it again is idempotent;
//! - a [`PendingRecord`] keeps the record byte for byte (null key or value distinct from
//!   empty, headers in order, null header values), so what leaves the store is what
//!   entered the retry topic; its encoding starts with a format version, and bytes this
//!   version cannot read are a [`SerdeError`], never a panic.

use streams_core::Headers;
use streams_core::serdes::{OrderedSerde, Serde, SerdeError};

/// The key of a waiting record: when it is due, and where it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PendingKey {
    /// When the record is due, ms since the epoch.
    pub due_at_ms: i64,
    /// Its partition in the retry topic.
    pub partition: i32,
    /// Its offset in the retry topic.
    pub offset: i64,
}

impl PendingKey {
    /// The largest key due at `now_ms`: `range(..=PendingKey::last_due_at(now))` is every
    /// record due by then.
    pub fn last_due_at(now_ms: i64) -> Self {
        Self {
            due_at_ms: now_ms,
            partition: i32::MAX,
            offset: i64::MAX,
        }
    }
}

/// [`PendingKey`] as 20 ordered bytes (see the module docs of `retry::pending`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PendingKeySerde;

const KEY_WIDTH: usize = 20;

impl Serde for PendingKeySerde {
    type Target = PendingKey;

    fn serialize_into(&self, key: &PendingKey, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(&(key.due_at_ms ^ i64::MIN).to_be_bytes());
        out.extend_from_slice(&(key.partition ^ i32::MIN).to_be_bytes());
        out.extend_from_slice(&(key.offset ^ i64::MIN).to_be_bytes());
        Ok(())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<PendingKey, SerdeError> {
        let bytes: &[u8; KEY_WIDTH] = bytes.try_into().map_err(|_| {
            SerdeError::new(
                "PendingKeySerde",
                format!("expected {KEY_WIDTH} bytes, got {}", bytes.len()),
            )
        })?;
        let (due, rest) = bytes.split_at(8);
        let (partition, offset) = rest.split_at(4);
        let i64_at = |b: &[u8]| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            i64::from_be_bytes(a) ^ i64::MIN
        };
        let mut p = [0u8; 4];
        p.copy_from_slice(partition);
        Ok(PendingKey {
            due_at_ms: i64_at(due),
            partition: i32::from_be_bytes(p) ^ i32::MIN,
            offset: i64_at(offset),
        })
    }
}

impl OrderedSerde for PendingKeySerde {}

/// A record waiting in a retry stage's store: the retry topic's record as it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRecord {
    /// The key bytes (`None` for a null key).
    pub key: Option<Vec<u8>>,
    /// The value bytes (`None` for a null value).
    pub value: Option<Vec<u8>>,
    /// The record's timestamp (ms).
    pub timestamp: i64,
    /// Its headers, in order (the application's and the retry headers).
    pub headers: Headers,
}

/// [`PendingRecord`] in a versioned binary form (see the module docs of `retry::pending`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PendingRecordSerde;

const FORMAT_V1: u8 = 1;

fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) -> Result<(), SerdeError> {
    match bytes {
        None => out.push(0),
        Some(b) => {
            let len = u32::try_from(b.len())
                .map_err(|_| SerdeError::new("PendingRecordSerde", "a field longer than 4 GiB"))?;
            out.push(1);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(b);
        }
    }
    Ok(())
}

/// Reads the encoding field by field; every read checks the length left.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn error(what: &str) -> SerdeError {
        SerdeError::new("PendingRecordSerde", format!("truncated or invalid {what}"))
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], SerdeError> {
        if self.bytes.len() < n {
            return Err(Self::error(what));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self, what: &str) -> Result<u8, SerdeError> {
        Ok(self.take(1, what)?[0])
    }

    fn u32(&mut self, what: &str) -> Result<u32, SerdeError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4, what)?);
        Ok(u32::from_be_bytes(a))
    }

    fn i64(&mut self, what: &str) -> Result<i64, SerdeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_be_bytes(a))
    }

    fn bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>, SerdeError> {
        match self.u8(what)? {
            0 => Ok(None),
            1 => {
                let len = self.u32(what)? as usize;
                self.take(len, what).map(Some)
            }
            _ => Err(Self::error(what)),
        }
    }
}

impl Serde for PendingRecordSerde {
    type Target = PendingRecord;

    fn serialize_into(&self, r: &PendingRecord, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.push(FORMAT_V1);
        out.extend_from_slice(&r.timestamp.to_be_bytes());
        put_bytes(out, r.key.as_deref())?;
        put_bytes(out, r.value.as_deref())?;
        let count = u32::try_from(r.headers.len())
            .map_err(|_| SerdeError::new("PendingRecordSerde", "too many headers"))?;
        out.extend_from_slice(&count.to_be_bytes());
        for (name, value) in r.headers.iter() {
            put_bytes(out, Some(name.as_bytes()))?;
            put_bytes(out, value)?;
        }
        Ok(())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<PendingRecord, SerdeError> {
        let mut r = Reader { bytes };
        let version = r.u8("format version")?;
        if version != FORMAT_V1 {
            return Err(SerdeError::new(
                "PendingRecordSerde",
                format!("unknown format version {version}"),
            ));
        }
        let timestamp = r.i64("timestamp")?;
        let key = r.bytes("key")?.map(<[u8]>::to_vec);
        let value = r.bytes("value")?.map(<[u8]>::to_vec);
        let count = r.u32("header count")?;
        let mut headers = Headers::new();
        for _ in 0..count {
            let name = r
                .bytes("header name")?
                .ok_or_else(|| Reader::error("header name"))?;
            let name = std::str::from_utf8(name).map_err(|_| Reader::error("header name"))?;
            match r.bytes("header value")? {
                Some(v) => headers.add(name, v.to_vec()),
                None => headers.add_null(name),
            };
        }
        if !r.bytes.is_empty() {
            return Err(Reader::error("record (trailing bytes)"));
        }
        Ok(PendingRecord {
            key,
            value,
            timestamp,
            headers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_due_time_then_position() {
        let keys = [
            PendingKey {
                due_at_ms: -5,
                partition: 3,
                offset: 0,
            },
            PendingKey {
                due_at_ms: 0,
                partition: 0,
                offset: 9,
            },
            PendingKey {
                due_at_ms: 7,
                partition: 0,
                offset: 1,
            },
            PendingKey {
                due_at_ms: 7,
                partition: 0,
                offset: 2,
            },
            PendingKey {
                due_at_ms: 7,
                partition: 1,
                offset: 0,
            },
            PendingKey::last_due_at(7),
            PendingKey {
                due_at_ms: 8,
                partition: i32::MIN,
                offset: i64::MIN,
            },
        ];
        let bytes: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| PendingKeySerde.serialize(k).unwrap())
            .collect();
        assert!(bytes.windows(2).all(|w| w[0] < w[1]));
        for (k, b) in keys.iter().zip(&bytes) {
            assert_eq!(b.len(), KEY_WIDTH);
            assert_eq!(PendingKeySerde.deserialize(b).unwrap(), *k);
        }
        assert!(PendingKeySerde.deserialize(&[1, 2, 3]).is_err());
    }

    #[test]
    fn records_round_trip_byte_for_byte() {
        let mut headers = Headers::new();
        headers.add("a", "1").add_null("n").add("a", Vec::new());
        for (key, value) in [
            (Some(b"k".to_vec()), Some(b"v".to_vec())),
            (None, None),
            (Some(Vec::new()), Some(Vec::new())),
        ] {
            let r = PendingRecord {
                key,
                value,
                timestamp: -1,
                headers: headers.clone(),
            };
            let bytes = PendingRecordSerde.serialize(&r).unwrap();
            assert_eq!(PendingRecordSerde.deserialize(&bytes).unwrap(), r);
            // Every truncation is an error, not a panic.
            for cut in 0..bytes.len() {
                assert!(
                    PendingRecordSerde.deserialize(&bytes[..cut]).is_err(),
                    "cut at {cut}"
                );
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(PendingRecordSerde.deserialize(&longer).is_err());
        }
        assert!(PendingRecordSerde.deserialize(&[9]).is_err());
    }
}
