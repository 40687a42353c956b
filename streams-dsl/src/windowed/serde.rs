//! Windowed keys ([`Windowed`], the window stores' own type) and [`WindowedSerde`], their
//! serde in topics.
//!
//! [`WindowedSerde`] writes Kafka Streams' time-windowed layout (`TimeWindowedSerializer`):
//! the key's bytes, then the window start (8 bytes, big-endian), so a Kafka Streams
//! application reads the windowed keys this one writes, and the reverse.

use std::time::Duration;

pub use streams_state::Windowed;
use streams_state::{Serde, SerdeError};

use crate::dyn_serde::{DynSerde, dyn_serde};
use crate::windowed::windows::millis;

/// Serializes a [`Windowed`] key as Kafka Streams' `TimeWindowedSerde` does: the key's
/// bytes followed by the window start (8 bytes, big-endian). The window size is needed to
/// read the end back (for sliding windows: the time difference), as in Kafka Streams.
///
/// The key's bytes come first, so its byte order is not the order of (key, start) for every
/// key serde: a store keyed by it is read in key-byte order, not window order (the window
/// stores keep their own layout, ordered by key and then start).
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

impl<K: 'static> Serde for WindowedSerde<K> {
    type Target = Windowed<K>;

    fn serialize_into(&self, value: &Windowed<K>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        self.inner.serialize_into(&value.key, out)?;
        out.extend_from_slice(&value.start.to_be_bytes());
        Ok(())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Windowed<K>, SerdeError> {
        let (key, start) = bytes
            .split_last_chunk::<8>()
            .ok_or_else(|| SerdeError::new("WindowedSerde", "fewer than 8 bytes"))?;
        let start = i64::from_be_bytes(*start);
        Ok(Windowed {
            key: self.inner.deserialize(key)?,
            start,
            end: start.saturating_add(self.size_ms),
        })
    }

    /// The base key: every window of a key goes to the key's partition.
    fn partition_bytes<'a>(&self, serialized: &'a [u8]) -> &'a [u8] {
        &serialized[..serialized.len().saturating_sub(8)]
    }
}

#[cfg(test)]
mod tests {
    use streams_core::serdes::StringSerde;

    use super::*;

    /// The bytes of Kafka Streams' `TimeWindowedSerializer` (its `WindowKeySchema.toBinary`
    /// without a sequence number): the key, then the start as a big-endian long.
    #[test]
    fn windowed_keys_are_kafka_streams_bytes_and_round_trip() {
        let serde = WindowedSerde::new(StringSerde, Duration::from_millis(10));
        let key = |start: i64, k: &str| Windowed {
            key: k.to_owned(),
            start,
            end: start + 10,
        };
        let bytes = serde.serialize(&key(0x0102, "ab")).unwrap();
        assert_eq!(bytes, [b'a', b'b', 0, 0, 0, 0, 0, 0, 0x01, 0x02]);
        for k in [key(-20, "z"), key(0, ""), key(10, "a"), key(1 << 40, "ab")] {
            assert_eq!(serde.deserialize(&serde.serialize(&k).unwrap()).unwrap(), k);
        }
        assert!(serde.deserialize(b"short").is_err());
    }
}
