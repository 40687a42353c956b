//! Windowed keys and timestamped aggregates, and their serdes.
//!
//! [`WindowedSerde`] writes the window start first (8 bytes, big-endian with the sign bit
//! flipped) and then the key's bytes, so a store's byte order is window-start order, then
//! key-byte order; that is the order its range queries use. [`ValueAndTimestampSerde`]
//! writes the timestamp (8 bytes, big-endian) before the value, as Kafka Streams'
//! timestamped stores do.

use std::time::Duration;

use streams_state::{OrderedSerde, Serde, SerdeError};

use crate::options::{DynSerde, dyn_serde};
use crate::windowed::windows::millis;

/// A key in one window.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Windowed<K> {
    /// The record key.
    pub key: K,
    /// The window's start (ms, inclusive).
    pub start: i64,
    /// The window's end (ms): exclusive for time windows, inclusive for sliding windows.
    pub end: i64,
}

/// Serializes a [`Windowed`] key as the window start (8 bytes, big-endian with the sign bit
/// flipped, so byte order is time order) followed by the key's bytes. The window size is
/// needed to read the end back (for sliding windows: the time difference).
///
/// Its byte order, and so the order of range queries on a store keyed by it, is window
/// start, then key bytes.
pub struct WindowedSerde<K> {
    inner: DynSerde<K>,
    size_ms: i64,
}

impl<K> Clone for WindowedSerde<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            size_ms: self.size_ms,
        }
    }
}

impl<K: 'static> WindowedSerde<K> {
    /// Windowed keys of `inner` in windows of `size` (end = start + size).
    pub fn new(inner: impl Serde<Target = K>, size: Duration) -> Self {
        Self::of(dyn_serde(inner), millis(size))
    }

    pub(crate) fn of(inner: DynSerde<K>, size_ms: i64) -> Self {
        Self { inner, size_ms }
    }
}

fn start_bytes(start: i64) -> [u8; 8] {
    ((start as u64) ^ (1 << 63)).to_be_bytes()
}

impl<K: 'static> Serde for WindowedSerde<K> {
    type Target = Windowed<K>;

    fn serialize_into(&self, value: &Windowed<K>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(&start_bytes(value.start));
        self.inner.serialize_into(&value.key, out)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Windowed<K>, SerdeError> {
        let (start, key) = bytes
            .split_first_chunk::<8>()
            .ok_or_else(|| SerdeError::new("WindowedSerde", "fewer than 8 bytes"))?;
        let start = (u64::from_be_bytes(*start) ^ (1 << 63)) as i64;
        Ok(Windowed {
            key: self.inner.deserialize(key)?,
            start,
            end: start.saturating_add(self.size_ms),
        })
    }
}

/// Byte order is window start, then key bytes.
impl<K: 'static> OrderedSerde for WindowedSerde<K> {}

/// An aggregate with the largest timestamp of the records folded into it (Kafka Streams'
/// `ValueAndTimestamp`): what a windowed aggregation's store holds per window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueAndTimestamp<V> {
    /// The aggregate.
    pub value: V,
    /// The largest record timestamp in the window (ms).
    pub timestamp: i64,
}

/// Serializes a [`ValueAndTimestamp`] as the timestamp (8 bytes, big-endian) followed by the
/// value's bytes.
pub struct ValueAndTimestampSerde<V> {
    inner: DynSerde<V>,
}

impl<V> Clone for ValueAndTimestampSerde<V> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<V: 'static> ValueAndTimestampSerde<V> {
    /// Timestamped values of `inner`.
    pub fn new(inner: impl Serde<Target = V>) -> Self {
        Self::of(dyn_serde(inner))
    }

    pub(crate) fn of(inner: DynSerde<V>) -> Self {
        Self { inner }
    }
}

impl<V: 'static> Serde for ValueAndTimestampSerde<V> {
    type Target = ValueAndTimestamp<V>;

    fn serialize_into(&self, value: &ValueAndTimestamp<V>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(&value.timestamp.to_be_bytes());
        self.inner.serialize_into(&value.value, out)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<ValueAndTimestamp<V>, SerdeError> {
        let (ts, value) = bytes
            .split_first_chunk::<8>()
            .ok_or_else(|| SerdeError::new("ValueAndTimestampSerde", "fewer than 8 bytes"))?;
        Ok(ValueAndTimestamp {
            value: self.inner.deserialize(value)?,
            timestamp: i64::from_be_bytes(*ts),
        })
    }
}

#[cfg(test)]
mod tests {
    use streams_core::serdes::{StringSerde, U64Serde};

    use super::*;

    #[test]
    fn windowed_keys_round_trip_and_sort_by_window_start() {
        let serde = WindowedSerde::new(StringSerde, Duration::from_millis(10));
        let key = |start: i64, k: &str| Windowed {
            key: k.to_owned(),
            start,
            end: start + 10,
        };
        let keys = [
            key(-20, "z"),
            key(-10, "a"),
            key(0, "b"),
            key(10, "a"),
            key(1 << 40, "a"),
        ];
        let bytes: Vec<Vec<u8>> = keys.iter().map(|k| serde.serialize(k).unwrap()).collect();
        let mut sorted = bytes.clone();
        sorted.sort();
        assert_eq!(sorted, bytes, "byte order is window-start order");
        for (k, b) in keys.iter().zip(&bytes) {
            assert_eq!(&serde.deserialize(b).unwrap(), k);
        }
        assert!(serde.deserialize(b"short").is_err());
    }

    #[test]
    fn timestamped_values_round_trip() {
        let serde = ValueAndTimestampSerde::new(U64Serde);
        let v = ValueAndTimestamp {
            value: 7u64,
            timestamp: -3,
        };
        assert_eq!(serde.deserialize(&serde.serialize(&v).unwrap()).unwrap(), v);
        assert!(serde.deserialize(b"short").is_err());
    }
}
