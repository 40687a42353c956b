//! The outer-join store of left and outer stream-stream joins (KIP-633's shared store):
//! records that found no partner yet, held until their join window closes.
//!
//! The bytes are Kafka Streams' (`TimestampedKeyAndJoinSide` keys, a `ListValueStore` of
//! `LeftOrRightValue`s), in the store and so on its changelog, which the two
//! implementations therefore share.
//!
//! Invariants: an entry is keyed `[time: 8 B big-endian][side: 1 B][key]` (side 0 the
//! right stream, 1 the left), so the store's byte order is time order (non-negative times
//! first, as in Kafka Streams), then right before left, then key bytes, and a scan for
//! closed windows stops at the first entry too recent to be closed on either side. The
//! value is the list of that side's records with this key and time (duplicates are kept,
//! in arrival order), in Kafka's `ListSerde` layout: a byte 1 (variable-size entries),
//! the count (4 B), then per record its length (4 B) and `[side: 1 B][value bytes]`. An
//! entry is removed whole when a partner of that key and time arrives or when it is
//! emitted.

use streams_state::{KvStore, Serde, SerdeError};

use crate::dyn_serde::DynSerde;

/// Where an unmatched record waits: its time, side and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OuterKey<K> {
    /// The record's timestamp.
    pub time: i64,
    /// Whether the record is from the left (this) stream.
    pub left: bool,
    /// The record's key.
    pub key: K,
}

/// Serializes [`OuterKey`]s in time order (see the [module docs](self)).
pub(crate) struct OuterKeySerde<K>(pub DynSerde<K>);

impl<K> Clone for OuterKeySerde<K> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

const TIME_LEN: usize = 8;

fn err(message: &str) -> SerdeError {
    SerdeError::new("OuterKeySerde", message)
}

impl<K: 'static> Serde for OuterKeySerde<K> {
    type Target = OuterKey<K>;

    fn serialize_into(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(&value.time.to_be_bytes());
        out.push(u8::from(value.left));
        self.0.serialize_into(&value.key, out)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Self::Target, SerdeError> {
        let (Some(time), Some(&side)) = (bytes.get(..TIME_LEN), bytes.get(TIME_LEN)) else {
            return Err(err("an outer-join key is at least 9 bytes"));
        };
        let mut t = [0; TIME_LEN];
        t.copy_from_slice(time);
        Ok(OuterKey {
            time: i64::from_be_bytes(t),
            left: side == 1,
            key: self.0.deserialize(&bytes[TIME_LEN + 1..])?,
        })
    }
}

/// The records of one side waiting under one key and time: their serialized values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Waiting {
    /// Whether the records are from the left (this) stream.
    pub left: bool,
    /// Their values, in arrival order.
    pub values: Vec<Vec<u8>>,
}

/// [`Waiting`] records as Kafka's `ListSerde` of `LeftOrRightValue`s (see the
/// [module docs](self)).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ValueListSerde;

/// `ListSerde`'s mark of a list of variable-size entries.
const VARIABLE_SIZE: u8 = 1;

fn list_err(message: &str) -> SerdeError {
    SerdeError::new("ValueListSerde", message)
}

fn int(len: usize) -> Result<[u8; 4], SerdeError> {
    i32::try_from(len)
        .map(i32::to_be_bytes)
        .map_err(|_| list_err("a list or value over 2 GiB"))
}

impl Serde for ValueListSerde {
    type Target = Waiting;

    fn serialize_into(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.push(VARIABLE_SIZE);
        out.extend_from_slice(&int(value.values.len())?);
        for v in &value.values {
            out.extend_from_slice(&int(v.len() + 1)?);
            out.push(u8::from(value.left));
            out.extend_from_slice(v);
        }
        Ok(())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Self::Target, SerdeError> {
        let truncated = || list_err("truncated value list");
        let int_at = |at: usize| -> Result<i32, SerdeError> {
            let b = bytes.get(at..at + 4).ok_or_else(truncated)?;
            Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        if bytes.first() != Some(&VARIABLE_SIZE) {
            return Err(list_err("not a list of variable-size entries"));
        }
        let count = usize::try_from(int_at(1)?).map_err(|_| list_err("a negative count"))?;
        let mut waiting = Waiting::default();
        let mut at = 5;
        for i in 0..count {
            let len = usize::try_from(int_at(at)?).map_err(|_| list_err("a null or negative entry"))?;
            let entry = bytes.get(at + 4..at + 4 + len).ok_or_else(truncated)?;
            let (&side, value) = entry
                .split_first()
                .ok_or_else(|| list_err("an entry without its side"))?;
            let left = side == 1;
            if i > 0 && left != waiting.left {
                return Err(list_err("entries of both sides under one key"));
            }
            waiting.left = left;
            waiting.values.push(value.to_vec());
            at += 4 + len;
        }
        if at != bytes.len() {
            return Err(list_err("bytes after the last entry"));
        }
        Ok(waiting)
    }
}

/// The typed outer-join store.
pub(crate) type OuterStore<K> = KvStore<OuterKeySerde<K>, ValueListSerde>;

#[cfg(test)]
mod tests {
    use streams_state::serde::StringSerde;

    use super::*;
    use crate::dyn_serde::dyn_serde;

    #[test]
    fn keys_order_by_time_then_side_then_key_and_round_trip() {
        let s = OuterKeySerde(dyn_serde(StringSerde));
        let key = |time, left, key: &str| OuterKey {
            time,
            left,
            key: key.to_owned(),
        };
        // A negative time sorts after every other (Kafka Streams' plain big-endian bytes).
        let keys = [
            key(0, false, "z"),
            key(0, true, "a"),
            key(0, true, "b"),
            key(7, false, "a"),
            key(-5, true, "a"),
        ];
        let bytes: Vec<Vec<u8>> = keys.iter().map(|k| s.serialize(k).unwrap()).collect();
        assert!(bytes.windows(2).all(|w| w[0] < w[1]));
        for (k, b) in keys.iter().zip(&bytes) {
            assert_eq!(&s.deserialize(b).unwrap(), k);
        }
        assert!(s.deserialize(&[1, 2]).is_err());
    }

    #[test]
    fn value_lists_round_trip_and_reject_truncation() {
        for left in [true, false] {
            let list = Waiting {
                left,
                values: vec![b"one".to_vec(), Vec::new(), b"three".to_vec()],
            };
            let bytes = ValueListSerde.serialize(&list).unwrap();
            assert_eq!(ValueListSerde.deserialize(&bytes).unwrap(), list);
            assert!(ValueListSerde.deserialize(&bytes[..bytes.len() - 1]).is_err());
        }
        assert!(ValueListSerde.deserialize(&[]).is_err());
    }

    /// Kafka Streams' bytes for a left record `v` of key "k" at time 5, twice:
    /// `TimestampedKeyAndJoinSideSerializer` and `ListSerde(ArrayList, ByteArray)` of
    /// `LeftOrRightValueSerializer`'s bytes.
    #[test]
    fn keys_and_values_are_kafka_streams_bytes() {
        let key = OuterKeySerde(dyn_serde(StringSerde))
            .serialize(&OuterKey {
                time: 5,
                left: true,
                key: "k".to_owned(),
            })
            .unwrap();
        assert_eq!(key, [0, 0, 0, 0, 0, 0, 0, 5, 1, b'k']);
        let value = ValueListSerde
            .serialize(&Waiting {
                left: true,
                values: vec![b"v".to_vec(), b"v".to_vec()],
            })
            .unwrap();
        assert_eq!(value, [1, 0, 0, 0, 2, 0, 0, 0, 2, 1, b'v', 0, 0, 0, 2, 1, b'v']);
    }
}
