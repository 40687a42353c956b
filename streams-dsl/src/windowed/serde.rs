//! Windowed keys ([`Windowed`], the window stores' own type) and [`WindowedSerde`], their
//! serde in topics.
//!
//! [`WindowedSerde`] writes the window start first (8 bytes, big-endian with the sign bit
//! flipped) and then the key's bytes, so byte order is window-start order, then key-byte
//! order.

use std::time::Duration;

pub use streams_state::Windowed;
use streams_state::{OrderedSerde, Serde, SerdeError};

use crate::options::{DynSerde, dyn_serde};
use crate::windowed::windows::millis;

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

#[cfg(test)]
mod tests {
    use streams_core::serdes::StringSerde;

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
}
