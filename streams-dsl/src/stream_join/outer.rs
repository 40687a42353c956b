//! The outer-join store of left and outer stream-stream joins (KIP-633's shared store):
//! records that found no partner yet, held until their join window closes.
//!
//! Invariants: an entry is keyed `[time: 8 B big-endian, sign bit flipped][side: 1 B][key]`
//! (side 0 the right stream, 1 the left), so the store's byte order is time order, then
//! right before left, then key bytes, and a scan for closed windows stops at the first
//! entry too recent to be closed on either side. The value is the list of the serialized
//! values of that side's records with this key and time (duplicates are kept, in arrival
//! order), each prefixed with its length (4 B big-endian). An entry is removed whole when
//! a partner of that key and time arrives or when it is emitted.

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
        out.extend_from_slice(&((value.time as u64) ^ (1 << 63)).to_be_bytes());
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
            time: (u64::from_be_bytes(t) ^ (1 << 63)) as i64,
            left: side == 1,
            key: self.0.deserialize(&bytes[TIME_LEN + 1..])?,
        })
    }
}

/// A list of serialized values, each prefixed with its length.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ValueListSerde;

impl Serde for ValueListSerde {
    type Target = Vec<Vec<u8>>;

    fn serialize_into(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        for v in value {
            let len =
                u32::try_from(v.len()).map_err(|_| SerdeError::new("ValueListSerde", "value over 4 GiB"))?;
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(v);
        }
        Ok(())
    }

    fn deserialize(&self, mut bytes: &[u8]) -> Result<Self::Target, SerdeError> {
        let mut values = Vec::new();
        while !bytes.is_empty() {
            let truncated = || SerdeError::new("ValueListSerde", "truncated value list");
            let len = bytes.get(..4).ok_or_else(truncated)?;
            let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            let value = bytes.get(4..4 + len).ok_or_else(truncated)?;
            values.push(value.to_vec());
            bytes = &bytes[4 + len..];
        }
        Ok(values)
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
        let keys = [
            key(-5, true, "a"),
            key(0, false, "z"),
            key(0, true, "a"),
            key(0, true, "b"),
            key(7, false, "a"),
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
        let list = vec![b"one".to_vec(), Vec::new(), b"three".to_vec()];
        let bytes = ValueListSerde.serialize(&list).unwrap();
        assert_eq!(ValueListSerde.deserialize(&bytes).unwrap(), list);
        assert!(ValueListSerde.deserialize(&bytes[..bytes.len() - 1]).is_err());
        assert!(ValueListSerde.deserialize(&[]).unwrap().is_empty());
    }
}
