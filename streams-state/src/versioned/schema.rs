//! The byte layout of a versioned store's entries (see the [module docs](crate::versioned)).

/// Bytes of the key-length prefix.
pub(crate) const LEN: usize = 4;
/// Bytes of the timestamp suffix.
pub(crate) const TS: usize = 8;

/// The key under which the observed stream time is kept.
pub(crate) const STREAM_TIME_KEY: [u8; LEN] = [0xFF; LEN];

/// Value tag of a tombstone.
const TOMBSTONE: u8 = 0;
/// Value tag of a value.
const VALUE: u8 = 1;

/// The timestamp as 8 bytes whose byte order is the *reverse* of numeric order.
fn inverted(timestamp: i64) -> [u8; TS] {
    (!((timestamp as u64) ^ (1 << 63))).to_be_bytes()
}

/// The timestamp back from [`inverted`] bytes.
pub(crate) fn from_inverted(bytes: [u8; TS]) -> i64 {
    ((!u64::from_be_bytes(bytes)) ^ (1 << 63)) as i64
}

/// The prefix every version of `key` starts with; `None` for a key too long to encode.
pub(crate) fn key_prefix(key: &[u8]) -> Option<Vec<u8>> {
    let len = u32::try_from(key.len()).ok().filter(|&l| l < u32::MAX)?;
    let mut out = Vec::with_capacity(LEN + key.len() + TS);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(key);
    Some(out)
}

/// The entry key of the version of `prefix` (from [`key_prefix`]) at `timestamp`.
pub(crate) fn version_key(prefix: &[u8], timestamp: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + TS);
    out.extend_from_slice(prefix);
    out.extend_from_slice(&inverted(timestamp));
    out
}

/// The timestamp of an entry key of `prefix`; `None` for a key of another shape.
pub(crate) fn timestamp_of(prefix: &[u8], entry: &[u8]) -> Option<i64> {
    let suffix = entry.strip_prefix(prefix)?;
    Some(from_inverted(suffix.try_into().ok()?))
}

/// The stored bytes of a version: a value, or a tombstone for `None`.
pub(crate) fn encode_value(value: Option<&[u8]>) -> Vec<u8> {
    match value {
        None => vec![TOMBSTONE],
        Some(v) => {
            let mut out = Vec::with_capacity(1 + v.len());
            out.push(VALUE);
            out.extend_from_slice(v);
            out
        }
    }
}

/// The value of stored version bytes: `Ok(None)` for a tombstone, `Err(())` for bytes of
/// no version.
pub(crate) fn decode_value(bytes: &[u8]) -> Result<Option<&[u8]>, ()> {
    match bytes.split_first() {
        Some((&VALUE, v)) => Ok(Some(v)),
        Some((&TOMBSTONE, [])) => Ok(None),
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn inverted_timestamps_sort_newest_first(a: i64, b: i64) {
            prop_assert_eq!(from_inverted(inverted(a)), a);
            prop_assert_eq!(inverted(a).cmp(&inverted(b)), b.cmp(&a));
        }

        #[test]
        fn versions_of_one_key_are_contiguous(a in proptest::collection::vec(any::<u8>(), 0..4),
                                              b in proptest::collection::vec(any::<u8>(), 0..4),
                                              t: i64, u: i64) {
            let (pa, pb) = (key_prefix(&a).unwrap(), key_prefix(&b).unwrap());
            let (ka, kb) = (version_key(&pa, t), version_key(&pb, u));
            prop_assert_eq!(timestamp_of(&pa, &ka), Some(t));
            if a != b {
                // Another key's entry never falls between two versions of `a`.
                let (lo, hi) = (version_key(&pa, i64::MAX), version_key(&pa, i64::MIN));
                prop_assert!(kb < lo || kb > hi);
                prop_assert_eq!(timestamp_of(&pa, &kb), None);
            }
        }
    }

    #[test]
    fn values_and_tombstones_round_trip() {
        assert_eq!(decode_value(&encode_value(Some(b"x"))), Ok(Some(&b"x"[..])));
        assert_eq!(decode_value(&encode_value(Some(b""))), Ok(Some(&b""[..])));
        assert_eq!(decode_value(&encode_value(None)), Ok(None));
        assert_eq!(decode_value(b""), Err(()));
        assert_eq!(decode_value(&[0, 1]), Err(()));
        assert!(key_prefix(&[]).unwrap() < STREAM_TIME_KEY.to_vec());
    }
}
