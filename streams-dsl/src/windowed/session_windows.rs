//! [`SessionWindows`] (Kafka Streams' `SessionWindows`) and [`SessionWindowedSerde`], the
//! serde of a session-windowed key.
//!
//! A session is a span `[start, end]` of activity of one key, inclusive at both ends: `start`
//! is its first record's timestamp and `end` its last one's, so a session of one record is
//! `[t, t]`. Records of a key less than or exactly the inactivity gap apart belong to the same
//! session. Unlike time windows, a session key's end cannot be derived from its start, so
//! [`SessionWindowedSerde`] writes both, in Kafka Streams' layout
//! `[key bytes][end: 8 B][start: 8 B]` (big-endian), which is also its byte form on topics.

use std::time::Duration;

use streams_state::{Serde, SerdeError};

use crate::dyn_serde::{DynSerde, dyn_serde};
use crate::windowed::serde::Windowed;
use crate::windowed::windows::millis;

/// Session windows: a key's records at most `gap` apart form one session, which accepts
/// records up to `grace` after it could last have been extended (Kafka Streams'
/// `SessionWindows`).
///
/// A record at `t` merges with every session of its key that ends at or after `t - gap` and
/// starts at or before `t + gap`; it is dropped as late when the merged session's
/// `end + gap + grace` is before the aggregation's stream time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionWindows {
    pub(crate) gap_ms: i64,
    pub(crate) grace_ms: i64,
}

impl SessionWindows {
    /// Sessions closed by an inactivity `gap`, accepting records up to `grace` after that.
    /// A gap of zero is taken as 1 ms (Kafka Streams rejects it).
    pub fn of_inactivity_gap_with_grace(gap: Duration, grace: Duration) -> Self {
        Self {
            gap_ms: millis(gap).max(1),
            grace_ms: millis(grace),
        }
    }

    /// Sessions closed by an inactivity `gap`, with no grace period.
    pub fn of_inactivity_gap_no_grace(gap: Duration) -> Self {
        Self::of_inactivity_gap_with_grace(gap, Duration::ZERO)
    }

    /// The inactivity gap in milliseconds.
    pub fn inactivity_gap_ms(&self) -> i64 {
        self.gap_ms
    }

    /// The grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    /// The least (and default) retention of the aggregation's store: `gap + grace`.
    pub(crate) fn min_retention_ms(&self) -> i64 {
        self.gap_ms.saturating_add(self.grace_ms)
    }
}

/// Serializes a session's [`Windowed`] key as the key's bytes, then the session's end and
/// start (8 bytes each, big-endian), as Kafka Streams' `SessionWindowedSerde` does; reads
/// back both times, so any session round-trips.
pub struct SessionWindowedSerde<K> {
    inner: DynSerde<K>,
}

impl<K> Clone for SessionWindowedSerde<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K: 'static> SessionWindowedSerde<K> {
    /// Session keys of `inner`.
    pub fn new(inner: impl Serde<Target = K>) -> Self {
        Self::of(dyn_serde(inner))
    }

    pub(crate) fn of(inner: DynSerde<K>) -> Self {
        Self { inner }
    }
}

/// The length of the `[end][start]` suffix.
const TIMES_LEN: usize = 16;

impl<K: 'static> Serde for SessionWindowedSerde<K> {
    type Target = Windowed<K>;

    fn serialize_into(&self, value: &Windowed<K>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        self.inner.serialize_into(&value.key, out)?;
        out.extend_from_slice(&value.end.to_be_bytes());
        out.extend_from_slice(&value.start.to_be_bytes());
        Ok(())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Windowed<K>, SerdeError> {
        let split = bytes
            .len()
            .checked_sub(TIMES_LEN)
            .ok_or_else(|| SerdeError::new("SessionWindowedSerde", "fewer than 16 bytes"))?;
        let (key, times) = bytes.split_at(split);
        let (end, start) = times.split_at(8);
        let time = |b: &[u8]| {
            <[u8; 8]>::try_from(b)
                .map(i64::from_be_bytes)
                .map_err(|_| SerdeError::new("SessionWindowedSerde", "malformed time"))
        };
        Ok(Windowed {
            key: self.inner.deserialize(key)?,
            start: time(start)?,
            end: time(end)?,
        })
    }

    /// The base key: every session of a key goes to the key's partition.
    fn partition_bytes<'a>(&self, serialized: &'a [u8]) -> &'a [u8] {
        &serialized[..serialized.len().saturating_sub(TIMES_LEN)]
    }
}

#[cfg(test)]
mod tests {
    use streams_core::serdes::StringSerde;

    use super::*;

    #[test]
    fn session_keys_round_trip_with_start_and_end() {
        let serde = SessionWindowedSerde::new(StringSerde);
        for (start, end) in [(0, 0), (5, 17), (-3, 4), (i64::MIN, i64::MAX)] {
            let key = Windowed {
                key: "user".to_owned(),
                start,
                end,
            };
            let bytes = serde.serialize(&key).unwrap();
            assert_eq!(bytes.len(), 4 + 16);
            assert_eq!(&bytes[..4], b"user");
            assert_eq!(&bytes[4..12], &end.to_be_bytes(), "end first, as Kafka Streams");
            assert_eq!(serde.deserialize(&bytes).unwrap(), key);
        }
        let empty = Windowed {
            key: String::new(),
            start: 1,
            end: 2,
        };
        assert_eq!(
            serde.deserialize(&serde.serialize(&empty).unwrap()).unwrap(),
            empty
        );
        assert!(serde.deserialize(&[0; 15]).is_err());
    }

    #[test]
    fn a_zero_gap_is_one_millisecond() {
        let w = SessionWindows::of_inactivity_gap_no_grace(Duration::ZERO);
        assert_eq!(w.inactivity_gap_ms(), 1);
        let w = SessionWindows::of_inactivity_gap_with_grace(Duration::from_secs(5), Duration::from_secs(2));
        assert_eq!(
            (w.inactivity_gap_ms(), w.grace_ms(), w.min_retention_ms()),
            (5000, 2000, 7000)
        );
    }
}
