//! Window and session store keys on their changelog topic: Kafka Streams' layouts, not the
//! store's.
//!
//! | store | key in the store | key on the changelog (Kafka Streams) |
//! |---|---|---|
//! | window | `[segment 8][key][start 8][seq 4]` | `[key][start 8][seq 4]` (`WindowKeySchema`) |
//! | session | `[segment 8][key][end 8][start 8]` | `[key][end 8][start 8]` (`SessionKeySchema`) |
//!
//! In the store, times are big-endian with the sign bit flipped (byte order is time order)
//! and a segment id leads the key; on the changelog, times are plain big-endian and there
//! is no segment. So [`ChangelogKeys`] drops the segment and flips each time's sign bit on
//! the way out, and [`store_key`] does the reverse for a restored record, putting it in the
//! segment of its time (window start, session end) under the store's own segmenting.

use bytes::Bytes;

use crate::changelog::{ChangelogError, ChangelogRecord, ChangelogSink};
use crate::window::schema::{SEGMENT_LEN, Schema, Segments, TIME_LEN, encode_i64};

/// The sign bit of the first byte of a big-endian `i64`.
const SIGN_BYTE: u8 = 0x80;

impl Schema {
    /// Offsets of the times inside the part of a key after the user key.
    fn time_offsets(self) -> &'static [usize] {
        match self {
            Self::Window => &[0],
            Self::Session => &[0, TIME_LEN],
        }
    }

    /// `suffix` (the bytes after the user key) with the sign bit of each time flipped: from
    /// the store's encoding to plain big-endian, and back.
    fn flip_times(self, suffix: &mut [u8]) {
        for &at in self.time_offsets() {
            suffix[at] ^= SIGN_BYTE;
        }
    }
}

/// Kafka Streams' changelog key of store key `key`; `None` if `key` is too short for the
/// layout.
pub(crate) fn changelog_key(schema: Schema, key: &[u8]) -> Option<Vec<u8>> {
    let user = schema.user_key(key)?;
    let mut out = key[SEGMENT_LEN..].to_vec();
    schema.flip_times(&mut out[user.len()..]);
    Some(out)
}

/// The store key of Kafka Streams' changelog key `key`, in the segment of its retained
/// time; `None` if `key` is too short for the layout.
pub(crate) fn store_key(schema: Schema, segments: Segments, key: &[u8]) -> Option<Vec<u8>> {
    let user_len = key.len().checked_sub(schema.suffix_len())?;
    let mut suffix = key[user_len..].to_vec();
    let time: [u8; 8] = suffix[..TIME_LEN].try_into().ok()?;
    schema.flip_times(&mut suffix);
    let mut out = Vec::with_capacity(SEGMENT_LEN + key.len());
    out.extend_from_slice(&encode_i64(segments.segment_id(i64::from_be_bytes(time))));
    out.extend_from_slice(&key[..user_len]);
    out.extend_from_slice(&suffix);
    Some(out)
}

/// Restored records with their keys turned into store keys (see [`store_key`]); the error
/// names the first key that does not have the layout.
pub(crate) fn store_records(
    schema: Schema,
    segments: Segments,
    batch: &[ChangelogRecord],
) -> Result<Vec<ChangelogRecord>, Vec<u8>> {
    batch
        .iter()
        .map(|r| {
            let key = store_key(schema, segments, &r.key).ok_or_else(|| r.key.to_vec())?;
            Ok(ChangelogRecord {
                key: Bytes::from(key),
                value: r.value.clone(),
                offset: r.offset,
            })
        })
        .collect()
}

/// A changelog sink that writes a segmented store's keys in Kafka Streams' layout.
pub(crate) struct ChangelogKeys {
    pub sink: Box<dyn ChangelogSink>,
    pub schema: Schema,
}

impl ChangelogSink for ChangelogKeys {
    fn send(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), ChangelogError> {
        let key = changelog_key(self.schema, key).ok_or_else(|| {
            ChangelogError::new(format!(
                "a {:?} store key needs at least {} bytes, got {}",
                self.schema,
                SEGMENT_LEN + self.schema.suffix_len(),
                key.len()
            ))
        })?;
        self.sink.send(&key, value)
    }

    fn flush(&mut self) -> Result<(), ChangelogError> {
        self.sink.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn be(v: i64) -> [u8; 8] {
        v.to_be_bytes()
    }

    /// Kafka Streams' `WindowKeySchema.toStoreKeyBinary(key, start, seq)`.
    fn kafka_window_key(key: &[u8], start: i64, seq: u32) -> Vec<u8> {
        [key, &be(start), &seq.to_be_bytes()].concat()
    }

    /// Kafka Streams' `SessionKeySchema.toBinary(key, start, end)`: the end first.
    fn kafka_session_key(key: &[u8], start: i64, end: i64) -> Vec<u8> {
        [key, &be(end), &be(start)].concat()
    }

    #[test]
    fn window_keys_go_out_as_kafka_streams_writes_them_and_come_back() {
        let segments = Segments::with_interval(1_000, 100);
        for (key, start, seq) in [
            (&b"ab"[..], 250, 0u32),
            (b"", -1, 7),
            (b"k", i64::MAX, 1),
            (b"k", i64::MIN, 2),
        ] {
            let stored = [
                &encode_i64(segments.segment_id(start))[..],
                key,
                &encode_i64(start),
                &seq.to_be_bytes(),
            ]
            .concat();
            let out = changelog_key(Schema::Window, &stored).unwrap();
            assert_eq!(out, kafka_window_key(key, start, seq));
            assert_eq!(store_key(Schema::Window, segments, &out).unwrap(), stored);
        }
    }

    #[test]
    fn session_keys_go_out_as_kafka_streams_writes_them_and_come_back() {
        let segments = Segments::with_interval(1_000, 100);
        for (key, start, end) in [(&b"user"[..], 10, 250), (b"", -300, -5)] {
            let stored = [
                &encode_i64(segments.segment_id(end))[..],
                key,
                &encode_i64(end),
                &encode_i64(start),
            ]
            .concat();
            let out = changelog_key(Schema::Session, &stored).unwrap();
            assert_eq!(out, kafka_session_key(key, start, end));
            assert_eq!(store_key(Schema::Session, segments, &out).unwrap(), stored);
        }
    }

    #[test]
    fn short_keys_are_refused_not_misread() {
        let segments = Segments::with_interval(1_000, 100);
        assert_eq!(changelog_key(Schema::Window, &[0; 19]), None);
        assert_eq!(store_key(Schema::Window, segments, &[0; 11]), None);
        assert_eq!(store_key(Schema::Session, segments, &[0; 15]), None);
        let mut sink = ChangelogKeys {
            sink: Box::new(crate::VecChangelog::default()),
            schema: Schema::Session,
        };
        assert!(sink.send(b"short", None).is_err());
    }
}
