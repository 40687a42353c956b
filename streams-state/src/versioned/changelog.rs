//! A versioned store's changelog in Kafka Streams' format, and back.
//!
//! Kafka Streams logs each put of a versioned store as one record: the key, the value (null
//! for a tombstone) and the version's timestamp as the record's timestamp
//! (`ChangeLoggingVersionedKeyValueBytesStore`). Here every version is an entry of the
//! bytes stack (see the [module docs](super)), so the changelog sink turns each logged
//! entry into that record, and a restore turns each record back into the entry:
//!
//! | entry | changelog record |
//! |---|---|
//! | `[len][key][inverted t]` → `[1][value]` | key, value, timestamp `t` |
//! | `[len][key][inverted t]` → `[0]` | key, null, timestamp `t` |
//! | the stream time | not logged: a restore raises it to the newest version restored |
//! | a removed version (a delete) | not logged: it could no longer answer a query |

use super::schema::{
    LEN, STREAM_TIME_KEY, TS, decode_value, encode_value, from_inverted, key_prefix, version_key,
};

/// Kafka Streams' changelog record (key, value or `None` for a tombstone, timestamp) of
/// the entry `entry` → `value` (`None`: the entry was removed); `Ok(None)` for what is not
/// logged (the stream time, a removed version); `Err` for bytes of no entry.
#[allow(clippy::type_complexity)]
pub fn to_changelog<'a>(
    entry: &'a [u8],
    value: Option<&'a [u8]>,
) -> Result<Option<(&'a [u8], Option<&'a [u8]>, i64)>, String> {
    if entry == STREAM_TIME_KEY {
        return Ok(None);
    }
    let Some(value) = value else {
        return Ok(None);
    };
    let (key, time) =
        split_entry(entry).ok_or_else(|| format!("a versioned entry key of {} bytes", entry.len()))?;
    let value = decode_value(value).map_err(|()| "a versioned entry value of no version".to_owned())?;
    Ok(Some((key, value, time)))
}

/// The entry (key and value bytes) of Kafka Streams' changelog record `key`, `value`
/// (`None`: a tombstone) at `timestamp`; `None` for a key too long to encode.
pub fn from_changelog(key: &[u8], value: Option<&[u8]>, timestamp: i64) -> Option<(Vec<u8>, Vec<u8>)> {
    let prefix = key_prefix(key)?;
    Some((version_key(&prefix, timestamp), encode_value(value)))
}

/// The timestamp of entry key `entry`; `None` for the stream time's key or bytes of no
/// entry.
pub fn entry_time(entry: &[u8]) -> Option<i64> {
    split_entry(entry).map(|(_, t)| t)
}

/// The key under which a versioned store keeps its observed stream time.
pub fn stream_time_key() -> &'static [u8] {
    &STREAM_TIME_KEY
}

/// The stored bytes of stream time `time`.
pub fn encode_stream_time(time: i64) -> [u8; 8] {
    time.to_be_bytes()
}

/// The stream time of its stored bytes; `None` for bytes of no time.
pub fn decode_stream_time(bytes: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(bytes.try_into().ok()?))
}

/// The key and the timestamp of an entry key.
fn split_entry(entry: &[u8]) -> Option<(&[u8], i64)> {
    let (len, rest) = entry.split_first_chunk::<LEN>()?;
    let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
    if rest.len() != len.checked_add(TS)? {
        return None;
    }
    let (key, time) = rest.split_at(len);
    Some((key, from_inverted(time.try_into().ok()?)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn every_version_round_trips_through_the_changelog(
            key in proptest::collection::vec(any::<u8>(), 0..16),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
            time: i64,
        ) {
            let (entry, stored) = from_changelog(&key, value.as_deref(), time).unwrap();
            let logged = to_changelog(&entry, Some(&stored)).unwrap();
            prop_assert_eq!(logged, Some((&key[..], value.as_deref(), time)));
            prop_assert_eq!(entry_time(&entry), Some(time));
        }
    }

    #[test]
    fn the_stream_time_and_removed_versions_are_not_logged() {
        assert_eq!(
            to_changelog(stream_time_key(), Some(&encode_stream_time(5))),
            Ok(None)
        );
        let (entry, _) = from_changelog(b"k", Some(b"v"), 7).unwrap();
        assert_eq!(to_changelog(&entry, None), Ok(None));
        assert_eq!(entry_time(stream_time_key()), None);
        assert_eq!(decode_stream_time(&encode_stream_time(-3)), Some(-3));
    }

    #[test]
    fn bytes_of_no_entry_are_errors() {
        assert!(to_changelog(b"\0\0\0\x05ab", Some(&[1])).is_err());
        let (entry, _) = from_changelog(b"k", None, 1).unwrap();
        assert!(to_changelog(&entry, Some(&[9, 9])).is_err());
    }
}
