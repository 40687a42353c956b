//! Timestamped values: [`ValueAndTimestamp`] and its serde, for key-value stores that keep
//! each value's record timestamp (Kafka Streams' `TimestampedKeyValueStore`).
//!
//! There is no separate store type: a timestamped key-value store is a key-value store
//! (any [`Stores`](crate::Stores) key-value builder) whose value serde is
//! [`ValueAndTimestampSerde`]. The encoding is Kafka Streams' own: the timestamp as
//! 8 bytes big-endian (two's complement), then the value's bytes.
//!
//! ```
//! use streams_state::serde::{StringSerde, U64Serde};
//! use streams_state::{StoreBuildContext, StoreBuilder, Stores, ValueAndTimestamp, ValueAndTimestampSerde};
//! use std::{cell::RefCell, rc::Rc};
//!
//! let b = Stores::in_memory_kv("latest", StringSerde, ValueAndTimestampSerde(U64Serde));
//! let store = streams_state::KvStore::new(
//!     Rc::new(RefCell::new(b.build(StoreBuildContext::default())?)),
//!     b.key_serde(),
//!     b.value_serde(),
//! );
//! store.put(&"k".to_string(), &ValueAndTimestamp::new(7, -3))?;
//! assert_eq!(store.get(&"k".to_string())?, Some(ValueAndTimestamp { value: 7, timestamp: -3 }));
//! # Ok::<(), streams_state::StoreError>(())
//! ```

use crate::error::SerdeError;
use crate::serde::Serde;

/// A value with the timestamp (ms) of the record that last set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ValueAndTimestamp<V> {
    /// The value.
    pub value: V,
    /// The record timestamp (ms).
    pub timestamp: i64,
}

impl<V> ValueAndTimestamp<V> {
    /// `value` at `timestamp`.
    pub fn new(value: V, timestamp: i64) -> Self {
        Self { value, timestamp }
    }
}

impl<'a> ValueAndTimestamp<&'a [u8]> {
    /// Reads the timestamp of timestamped bytes, leaving the value's bytes undecoded; `None`
    /// when there are fewer than 8 bytes.
    ///
    /// This is how a timestamped store's changelog record is made from a stored value (the
    /// value's bytes with the timestamp as the record's), as Kafka Streams writes it.
    pub fn from_bytes(bytes: &'a [u8]) -> Option<Self> {
        let (ts, value) = bytes.split_first_chunk::<8>()?;
        Some(Self::new(value, i64::from_be_bytes(*ts)))
    }

    /// The timestamped bytes: the timestamp (8 bytes, big-endian), then the value's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.value.len());
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(self.value);
        out
    }
}

/// [`ValueAndTimestamp`]s of values of the inner serde: 8 bytes of timestamp (big-endian),
/// then the value's bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ValueAndTimestampSerde<S>(pub S);

impl<S: Serde> Serde for ValueAndTimestampSerde<S> {
    type Target = ValueAndTimestamp<S::Target>;

    fn serialize_into(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(&value.timestamp.to_be_bytes());
        self.0.serialize_into(&value.value, out)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Self::Target, SerdeError> {
        let (Some(ts), Some(rest)) = (bytes.get(..8), bytes.get(8..)) else {
            return Err(SerdeError::new(
                "ValueAndTimestampSerde",
                format!("needs at least 8 bytes of timestamp, got {}", bytes.len()),
            ));
        };
        let mut arr = [0u8; 8];
        arr.copy_from_slice(ts);
        Ok(ValueAndTimestamp {
            value: self.0.deserialize(rest)?,
            timestamp: i64::from_be_bytes(arr),
        })
    }

    fn is_value_and_timestamp(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serde::StringSerde;

    #[test]
    fn kafka_layout_round_trips() {
        let s = ValueAndTimestampSerde(StringSerde);
        let bytes = s
            .serialize(&ValueAndTimestamp::new("ab".to_owned(), 258))
            .unwrap();
        assert_eq!(bytes, [0, 0, 0, 0, 0, 0, 1, 2, b'a', b'b']);
        assert_eq!(
            s.deserialize(&bytes).unwrap(),
            ValueAndTimestamp::new("ab".to_owned(), 258)
        );
        let neg = s.serialize(&ValueAndTimestamp::new(String::new(), -1)).unwrap();
        assert_eq!(neg, [0xFF; 8]);
        assert!(s.deserialize(&[1, 2, 3]).is_err());
    }

    #[test]
    fn raw_bytes_split_and_join_without_decoding() {
        let bytes = [0, 0, 0, 0, 0, 0, 1, 2, b'a', b'b'];
        let raw = ValueAndTimestamp::from_bytes(&bytes).unwrap();
        assert_eq!(raw, ValueAndTimestamp::new(&b"ab"[..], 258));
        assert_eq!(raw.to_bytes(), bytes);
        assert_eq!(
            ValueAndTimestamp::from_bytes(&[0xFF; 8]),
            Some(ValueAndTimestamp::new(&[][..], -1))
        );
        assert_eq!(ValueAndTimestamp::from_bytes(&[1, 2, 3]), None);
    }
}
