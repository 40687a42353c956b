//! Translation of [`Bound`]s to RocksDB's half-open `[lower, upper)` bounds, and the lazy
//! iterator over a bounded `DBRawIterator`.
//!
//! RocksDB bounds are inclusive below and exclusive above. Byte strings have an immediate
//! successor, `k ++ [0x00]`, so every [`Bound`] translates exactly:
//!
//! | bound | lower | upper |
//! |---|---|---|
//! | `Included(k)` | `k` | `k ++ [0]` |
//! | `Excluded(k)` | `k ++ [0]` | `k` |
//! | `Unbounded` | none | none |

use std::ops::Bound;

use ::rocksdb::{DBRawIterator, ReadOptions};
use bytes::Bytes;

use crate::error::Result;
use crate::iter::KeyValue;

/// The smallest key greater than `key`: `key ++ [0x00]`.
pub(super) fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// The inclusive lower end of a range, `None` when unbounded.
pub(super) fn lower_bound(from: Bound<&[u8]>) -> Option<Vec<u8>> {
    match from {
        Bound::Included(k) => Some(k.to_vec()),
        Bound::Excluded(k) => Some(successor(k)),
        Bound::Unbounded => None,
    }
}

/// The exclusive upper end of a range, `None` when unbounded.
pub(super) fn upper_bound(to: Bound<&[u8]>) -> Option<Vec<u8>> {
    match to {
        Bound::Included(k) => Some(successor(k)),
        Bound::Excluded(k) => Some(k.to_vec()),
        Bound::Unbounded => None,
    }
}

/// Read options carrying the range's bounds, so the iterator never leaves the range.
pub(super) fn bounded_read_options(from: Bound<&[u8]>, to: Bound<&[u8]>) -> ReadOptions {
    let mut opts = ReadOptions::default();
    if let Some(lower) = lower_bound(from) {
        opts.set_iterate_lower_bound(lower);
    }
    if let Some(upper) = upper_bound(to) {
        opts.set_iterate_upper_bound(upper);
    }
    opts
}

/// A lazy iterator over a bounded raw iterator: one entry is copied per `next`.
pub(super) struct RocksIter<'a> {
    raw: DBRawIterator<'a>,
    store: &'a str,
    reverse: bool,
    /// Whether the raw iterator still sits on an entry not yet yielded (true after the
    /// initial seek), so the next call reads before it moves.
    positioned: bool,
    done: bool,
}

impl<'a> RocksIter<'a> {
    /// Positions `raw` at the first entry of its bounds (the last one when `reverse`).
    pub(super) fn new(mut raw: DBRawIterator<'a>, store: &'a str, reverse: bool) -> Self {
        if reverse {
            raw.seek_to_last();
        } else {
            raw.seek_to_first();
        }
        Self {
            raw,
            store,
            reverse,
            positioned: true,
            done: false,
        }
    }
}

impl Iterator for RocksIter<'_> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if !self.positioned {
            if self.reverse {
                self.raw.prev();
            } else {
                self.raw.next();
            }
        }
        self.positioned = false;
        if let Some((key, value)) = self.raw.item() {
            return Some(Ok((Bytes::copy_from_slice(key), Bytes::copy_from_slice(value))));
        }
        self.done = true;
        match self.raw.status() {
            Ok(()) => None,
            Err(e) => Some(Err(super::op_error(self.store, e))),
        }
    }
}
