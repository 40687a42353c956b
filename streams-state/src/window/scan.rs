//! [`SegmentScan`]: a lazy iteration over the segments of a segmented store, one byte range
//! per segment, that visits only the segments that exist.
//!
//! Segments are visited in ascending id order (descending when backward). The first
//! segment of the span is visited directly; each next existing segment is found with one
//! seek (the first key at or after the next segment's prefix), so a query over a wide time
//! span costs one seek per segment that holds data, not one per possible segment id; a
//! span of fewer than three segments is visited segment by segment without seeking. The
//! first segment is not sought: a seek reads the store through its retention filter, and
//! the oldest live segment can begin with a long run of entries that fell out of
//! retention (old keys sort first), which the seek would read through on every query. Inside a segment, entries come in byte order of their
//! keys (reversed when backward) and pass through a filter, which removes the entries of
//! other user keys whose bytes share the range (a key that has the asked key as a prefix)
//! and entries outside the asked times.

use std::ops::Bound;

use crate::error::Result;
use crate::iter::{KeyValue, KeyValueIter};
use crate::store::KeyValueStore;
use crate::window::schema::{SEGMENT_LEN, Schema, encode_i64, segment_of};

/// Spans of fewer segments than this are visited segment by segment, without seeks.
const DIRECT_SPAN: i64 = 3;

/// The byte range to scan inside one segment, from the segment id.
pub(crate) type RangeInSegment = Box<dyn Fn(i64) -> (Bound<Vec<u8>>, Bound<Vec<u8>>)>;
/// Whether an entry's key belongs to the result.
pub(crate) type KeepKey = Box<dyn Fn(&[u8]) -> bool>;

/// See the [module docs](self).
pub(crate) struct SegmentScan<'r> {
    store: &'r dyn KeyValueStore,
    forward: bool,
    /// The segments still to visit, inclusive; `None` when done.
    remaining: Option<(i64, i64)>,
    current: Option<KeyValueIter<'r>>,
    range: RangeInSegment,
    keep: KeepKey,
    /// No segment was opened yet.
    first: bool,
}

impl<'r> SegmentScan<'r> {
    /// Scans segments `lo..=hi` of `store` (nothing when `lo > hi`).
    pub(crate) fn new(
        store: &'r dyn KeyValueStore,
        forward: bool,
        (lo, hi): (i64, i64),
        range: RangeInSegment,
        keep: KeepKey,
    ) -> Self {
        Self {
            store,
            forward,
            remaining: (lo <= hi).then_some((lo, hi)),
            current: None,
            range,
            keep,
            first: true,
        }
    }

    /// Scans the entries of the one user key `key` of a store of layout `schema` that
    /// `times` keeps: in each segment `seg` of `span`, from `[seg][key][lo_tail]` to
    /// `[seg][key][hi_tail]`, both included (keys of other user keys that share those
    /// bytes are left out before `times` sees them).
    pub(crate) fn one_key<const L: usize, const H: usize>(
        store: &'r dyn KeyValueStore,
        forward: bool,
        span: (i64, i64),
        (schema, key): (Schema, Vec<u8>),
        (lo_tail, hi_tail): ([u8; L], [u8; H]),
        times: impl Fn(&[u8]) -> bool + 'static,
    ) -> Self {
        let want = SEGMENT_LEN + key.len() + schema.suffix_len();
        let range_key = key.clone();
        let range = Box::new(move |seg: i64| {
            let mut lo = encode_i64(seg).to_vec();
            lo.extend_from_slice(&range_key);
            let mut hi = lo.clone();
            lo.extend_from_slice(&lo_tail);
            hi.extend_from_slice(&hi_tail);
            (Bound::Included(lo), Bound::Included(hi))
        });
        let keep =
            Box::new(move |k: &[u8]| k.len() == want && schema.user_key(k) == Some(&key[..]) && times(k));
        Self::new(store, forward, span, range, keep)
    }

    /// Scans the entries of the user keys in `lo..=hi` (their bytes; `None`: unbounded) of
    /// a store of layout `schema` that `times` keeps, over the segments of `span`.
    pub(crate) fn key_range(
        store: &'r dyn KeyValueStore,
        forward: bool,
        span: (i64, i64),
        schema: Schema,
        (lo, hi): (Option<Vec<u8>>, Option<Vec<u8>>),
        times: impl Fn(&[u8]) -> bool + 'static,
    ) -> Self {
        let suffix = schema.suffix_len();
        let (range_lo, range_hi) = (lo.clone(), hi.clone());
        let range = Box::new(move |seg: i64| {
            let (whole_lo, whole_hi) = segment_bounds(seg);
            let lower = range_lo.as_ref().map_or(whole_lo, |k| {
                let mut b = encode_i64(seg).to_vec();
                b.extend_from_slice(k);
                Bound::Included(b)
            });
            let upper = range_hi
                .as_ref()
                .map_or(whole_hi, |k| Bound::Included(key_range_upper(seg, k, suffix)));
            (lower, upper)
        });
        let keep = Box::new(move |k: &[u8]| {
            let Some(user) = schema.user_key(k) else {
                return false;
            };
            lo.as_deref().is_none_or(|lo| user >= lo) && hi.as_deref().is_none_or(|hi| user <= hi) && times(k)
        });
        Self::new(store, forward, span, range, keep)
    }

    /// Opens the iterator of the next existing segment; `false` when there is none.
    fn open_next(&mut self) -> Result<bool> {
        let Some((lo, hi)) = self.remaining else {
            return Ok(false);
        };
        let first = std::mem::take(&mut self.first);
        let seg = if first || hi.saturating_sub(lo) < DIRECT_SPAN {
            // A few segments: visiting each costs no more than seeking the next.
            if self.forward { lo } else { hi }
        } else {
            let (lo_key, hi_key) = (encode_i64(lo), hi.checked_add(1).map(encode_i64));
            let upper = hi_key
                .as_ref()
                .map_or(Bound::Unbounded, |k| Bound::Excluded(&k[..]));
            let lower = Bound::Included(&lo_key[..]);
            let first = if self.forward {
                self.store.range(lower, upper)?.next()
            } else {
                self.store.reverse_range(lower, upper)?.next()
            };
            let Some(seg) = first.transpose()?.and_then(|(k, _)| segment_of(&k)) else {
                self.remaining = None;
                return Ok(false);
            };
            seg
        };
        self.remaining = match self.forward {
            true => seg.checked_add(1).map(|n| (n, hi)),
            false => seg.checked_sub(1).map(|n| (lo, n)),
        }
        .filter(|(l, h)| l <= h);
        let (from, to) = (self.range)(seg);
        let (from, to) = (from.as_ref().map(Vec::as_slice), to.as_ref().map(Vec::as_slice));
        self.current = Some(if self.forward {
            self.store.range(from, to)?
        } else {
            self.store.reverse_range(from, to)?
        });
        Ok(true)
    }
}

/// The largest key of segment `seg` an entry of a user key `<= key` can have, with a
/// suffix of `suffix` bytes: the entries of a key that is a proper byte prefix of `key`
/// continue with their suffix where `key` continues with its own bytes, so the bound is
/// the largest of `[seg][p][0xFF; suffix]` over every prefix `p` of `key`.
fn key_range_upper(seg: i64, key: &[u8], suffix: usize) -> Vec<u8> {
    let candidate = |p: &[u8]| {
        let mut b = encode_i64(seg).to_vec();
        b.extend_from_slice(p);
        b.extend(std::iter::repeat_n(0xFF, suffix));
        b
    };
    (0..=key.len())
        .map(|i| candidate(&key[..i]))
        .max()
        .unwrap_or_else(|| candidate(key))
}

/// The whole of segment `seg`.
pub(crate) fn segment_bounds(seg: i64) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lo = Bound::Included(encode_i64(seg).to_vec());
    let hi = seg
        .checked_add(1)
        .map_or(Bound::Unbounded, |n| Bound::Excluded(encode_i64(n).to_vec()));
    (lo, hi)
}

impl Iterator for SegmentScan<'_> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(it) = &mut self.current {
                match it.next() {
                    Some(Ok((k, v))) if (self.keep)(&k) => return Some(Ok((k, v))),
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        self.current = None;
                        self.remaining = None;
                        return Some(Err(e));
                    }
                    None => self.current = None,
                }
            }
            match self.open_next() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    self.remaining = None;
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use bytes::Bytes;

    use super::*;
    use crate::layer::delegate_to_inner;
    use crate::memory::InMemoryKeyValueStore;
    use crate::store::StateStore;

    /// A store whose ranges hide the entries whose value is `old` (as a retention filter
    /// hides entries past retention) and count every entry they read.
    struct Hiding {
        inner: InMemoryKeyValueStore,
        read: Cell<usize>,
    }

    impl Hiding {
        fn filtered<'a>(&'a self, it: KeyValueIter<'a>) -> KeyValueIter<'a> {
            KeyValueIter::new(it.filter(|e| {
                self.read.set(self.read.get() + 1);
                !matches!(e, Ok((_, v)) if &v[..] == b"old")
            }))
        }
    }

    impl StateStore for Hiding {
        fn name(&self) -> &str {
            "hiding"
        }
        fn persistent(&self) -> bool {
            false
        }
        fn is_open(&self) -> bool {
            true
        }
        fn flush(&mut self) -> Result<()> {
            Ok(())
        }
        fn close(&mut self) -> Result<()> {
            Ok(())
        }
    }

    impl KeyValueStore for Hiding {
        delegate_to_inner!(
            get,
            put,
            delete,
            approximate_num_entries,
            delete_range,
            restore_batch,
            checkpoint,
            write_checkpoint,
        );

        fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
            Ok(self.filtered(self.inner.range(from, to)?))
        }
        fn reverse_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
            Ok(self.filtered(self.inner.reverse_range(from, to)?))
        }
    }

    fn key(segment: i64, user: &[u8]) -> Vec<u8> {
        let mut k = encode_i64(segment).to_vec();
        k.extend_from_slice(user);
        k
    }

    /// A scan from a segment whose first entries are hidden does not read through them:
    /// the first segment is opened at the asked key, not found by a seek.
    #[test]
    fn the_first_segment_is_not_sought_through_hidden_entries() {
        let mut store = Hiding {
            inner: InMemoryKeyValueStore::new("s"),
            read: Cell::new(0),
        };
        for i in 0..1000 {
            store.put(&key(5, format!("a{i:04}").as_bytes()), b"old").unwrap();
        }
        store.put(&key(5, b"k"), b"live").unwrap();
        store.put(&key(6, b"k"), b"newer").unwrap();
        let range: RangeInSegment = Box::new(|seg| {
            let k = key(seg, b"k");
            (Bound::Included(k.clone()), Bound::Included(k))
        });
        let scan = SegmentScan::new(&store, true, (5, i64::MAX / 2), range, Box::new(|_| true));
        let values: Vec<Bytes> = scan.map(|e| e.unwrap().1).collect();
        assert_eq!(
            values,
            [Bytes::from_static(b"live"), Bytes::from_static(b"newer")]
        );
        assert!(store.read.get() < 10, "read {} entries", store.read.get());
    }
}
