//! The byte layout of window and session store keys, and the segment arithmetic both
//! stores share.
//!
//! Times and segment ids are written as 8 bytes big-endian with the sign bit flipped, so
//! byte order is numeric order for negative values too. A segment id is
//! `time.div_euclid(interval)` (floor division), so segment ids rise with time.
//!
//! | store | key bytes |
//! |---|---|
//! | window | `[segment(start) 8][key][start 8][seq 4]` |
//! | session | `[segment(end) 8][key][end 8][start 8]` |
//!
//! The time a key is retained by (window start, session end) is read back from a fixed
//! offset from the end of the key, so the user key in between may have any length.

use crate::error::{SerdeError, StoreError};

/// Length of a segment id prefix.
pub(crate) const SEGMENT_LEN: usize = 8;
/// Length of an encoded time.
pub(crate) const TIME_LEN: usize = 8;
/// Length of a window key's sequence number.
pub(crate) const SEQ_LEN: usize = 4;

/// The sign bit of an `i64`.
const SIGN: u64 = 1 << 63;

/// `v` as 8 bytes whose byte order is numeric order.
pub(crate) fn encode_i64(v: i64) -> [u8; 8] {
    ((v as u64) ^ SIGN).to_be_bytes()
}

/// The inverse of [`encode_i64`]; `None` unless `b` has 8 bytes.
pub(crate) fn decode_i64(b: &[u8]) -> Option<i64> {
    let arr: [u8; 8] = b.try_into().ok()?;
    Some((u64::from_be_bytes(arr) ^ SIGN) as i64)
}

/// Which layout a store's keys have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Schema {
    /// `[segment(start)][key][start][seq]`.
    Window,
    /// `[segment(end)][key][end][start]`.
    Session,
}

impl Schema {
    /// Bytes after the user key.
    pub(crate) fn suffix_len(self) -> usize {
        match self {
            Self::Window => TIME_LEN + SEQ_LEN,
            Self::Session => 2 * TIME_LEN,
        }
    }

    /// Whether `key` is long enough to hold this layout.
    fn fits(self, key: &[u8]) -> bool {
        key.len() >= SEGMENT_LEN + self.suffix_len()
    }

    /// The time `key` is retained by: a window's start, a session's end.
    pub(crate) fn time_of(self, key: &[u8]) -> Option<i64> {
        if !self.fits(key) {
            return None;
        }
        let at = key.len() - self.suffix_len();
        decode_i64(&key[at..at + TIME_LEN])
    }

    /// The user key bytes inside `key`.
    pub(crate) fn user_key(self, key: &[u8]) -> Option<&[u8]> {
        self.fits(key)
            .then(|| &key[SEGMENT_LEN..key.len() - self.suffix_len()])
    }

    /// The error for a key that does not have this layout.
    pub(crate) fn malformed(self, store: &str, key: &[u8]) -> StoreError {
        StoreError::Serde {
            store: store.to_owned(),
            source: SerdeError::new(
                "SegmentedKeySchema",
                format!(
                    "a {self:?} store key needs at least {} bytes, got {}",
                    SEGMENT_LEN + self.suffix_len(),
                    key.len()
                ),
            ),
        }
    }
}

/// The segment id of a key (its first 8 bytes).
pub(crate) fn segment_of(key: &[u8]) -> Option<i64> {
    key.get(..SEGMENT_LEN).and_then(decode_i64)
}

/// Retention and segment size of a segmented store, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segments {
    /// How long entries stay visible behind the observed stream time.
    pub retention: i64,
    /// The time span of one segment (at least 1).
    pub interval: i64,
}

impl Segments {
    /// Kafka Streams' default number of segments.
    pub(crate) const DEFAULT_SEGMENTS: i64 = 3;
    /// Kafka Streams' smallest segment interval: one minute.
    pub(crate) const MIN_INTERVAL: i64 = 60_000;

    /// Kafka Streams' segmenting: `interval = max(retention / (segments - 1), 60 s)`.
    pub(crate) fn new(retention: i64) -> Self {
        let retention = retention.max(0);
        Self {
            retention,
            interval: (retention / (Self::DEFAULT_SEGMENTS - 1)).max(Self::MIN_INTERVAL),
        }
    }

    /// Segments of `interval` ms exactly (at least 1), for tests that want many segments.
    #[cfg(test)]
    pub(crate) fn with_interval(retention: i64, interval: i64) -> Self {
        Self {
            retention: retention.max(0),
            interval: interval.max(1),
        }
    }

    /// The segment holding time `t`.
    pub(crate) fn segment_id(&self, t: i64) -> i64 {
        t.div_euclid(self.interval)
    }

    /// The oldest visible time at stream time `st` (`None`: nothing observed, all visible):
    /// `st - retention + 1`, as Kafka Streams' `observedStreamTime - retentionPeriod + 1`.
    pub(crate) fn oldest_visible(&self, st: Option<i64>) -> Option<i64> {
        st.map(|st| {
            let t = i128::from(st) - i128::from(self.retention) + 1;
            i64::try_from(t).unwrap_or(i64::MIN)
        })
    }

    /// Whether an entry retained by time `t` is visible at stream time `st`.
    pub(crate) fn visible(&self, st: Option<i64>, t: i64) -> bool {
        self.oldest_visible(st).is_none_or(|oldest| t >= oldest)
    }

    /// Segments below this id hold only invisible entries at stream time `st`.
    pub(crate) fn min_live_segment(&self, st: Option<i64>) -> Option<i64> {
        self.oldest_visible(st).map(|t| self.segment_id(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_times_sort_numerically() {
        let vs = [i64::MIN, -70_000, -1, 0, 1, 59_999, i64::MAX];
        for w in vs.windows(2) {
            assert!(encode_i64(w[0]) < encode_i64(w[1]), "{w:?}");
            assert_eq!(decode_i64(&encode_i64(w[0])), Some(w[0]));
        }
    }

    #[test]
    fn kafka_segment_interval_and_floor_division() {
        assert_eq!(Segments::new(1_000).interval, 60_000);
        assert_eq!(Segments::new(600_000).interval, 300_000);
        let s = Segments::new(0);
        assert_eq!(
            (s.segment_id(-1), s.segment_id(0), s.segment_id(59_999)),
            (-1, 0, 0)
        );
        assert_eq!(s.segment_id(-60_000), -1);
        assert_eq!(s.segment_id(-60_001), -2);
    }

    #[test]
    fn visibility_is_kafkas_retention_plus_one() {
        let s = Segments::with_interval(10, 5);
        assert!(s.visible(None, i64::MIN));
        assert!(s.visible(Some(100), 91) && !s.visible(Some(100), 90));
        assert_eq!(s.min_live_segment(Some(100)), Some(18));
        assert!(s.visible(Some(i64::MIN), i64::MIN));
    }

    #[test]
    fn layouts_read_back() {
        let mut k = encode_i64(3).to_vec();
        k.extend_from_slice(b"key");
        k.extend_from_slice(&encode_i64(-5));
        k.extend_from_slice(&[0, 0, 0, 7]);
        assert_eq!(Schema::Window.time_of(&k), Some(-5));
        assert_eq!(Schema::Window.user_key(&k), Some(&b"key"[..]));
        assert_eq!(segment_of(&k), Some(3));
        assert_eq!(Schema::Session.time_of(b"short"), None);
    }
}
