//! [`SegmentScan`]: a lazy iteration over the segments of a segmented store, one byte range
//! per segment, that visits only the segments that exist.
//!
//! Segments are visited in ascending id order (descending when backward). The next
//! existing segment is found with one seek (the first key at or after the next segment's
//! prefix), so a query over a wide time span costs one seek per segment that holds data,
//! not one per possible segment id; a span of fewer than three segments is visited
//! segment by segment without seeking. Inside a segment, entries come in byte order of their
//! keys (reversed when backward) and pass through a filter, which removes the entries of
//! other user keys whose bytes share the range (a key that has the asked key as a prefix)
//! and entries outside the asked times.

use std::ops::Bound;

use crate::error::Result;
use crate::iter::{KeyValue, KeyValueIter};
use crate::store::KeyValueStore;
use crate::window::schema::{encode_i64, segment_of};

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
        }
    }

    /// Opens the iterator of the next existing segment; `false` when there is none.
    fn open_next(&mut self) -> Result<bool> {
        let Some((lo, hi)) = self.remaining else {
            return Ok(false);
        };
        let seg = if hi.saturating_sub(lo) < DIRECT_SPAN {
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
