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
//!
//! # Copies
//!
//! Entries are copied out of RocksDB (its slices die when the iterator moves). Small entries
//! are copied into a per-iterator arena of [`ARENA_BYTES`] and handed out as slices of it, so
//! a scan makes one allocation per arena instead of two per entry, and an arena whose entries
//! were all dropped is reused in place. A retained entry keeps at most its arena alive.

use std::ops::Bound;

use ::rocksdb::{DBRawIterator, ReadOptions};
use bytes::{Bytes, BytesMut};

use crate::error::Result;
use crate::iter::KeyValue;

/// The size of the buffers small entries are copied into.
const ARENA_BYTES: usize = 4096;

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

/// Read options carrying the bounds `[lower, upper)`, so the iterator never leaves them;
/// `None` when the range is empty (`lower >= upper`).
pub(super) fn bounded_read_options(lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) -> Option<ReadOptions> {
    if matches!((&lower, &upper), (Some(lower), Some(upper)) if lower >= upper) {
        return None;
    }
    let mut opts = ReadOptions::default();
    if let Some(lower) = lower {
        opts.set_iterate_lower_bound(lower);
    }
    if let Some(upper) = upper {
        opts.set_iterate_upper_bound(upper);
    }
    Some(opts)
}

/// Copies an entry: into `arena` when small, into two buffers of its own otherwise.
fn copy_entry(arena: &mut BytesMut, key: &[u8], value: &[u8]) -> KeyValue {
    let needed = key.len() + value.len();
    if needed > ARENA_BYTES / 2 {
        return (Bytes::copy_from_slice(key), Bytes::copy_from_slice(value));
    }
    if arena.capacity() < needed {
        // Reuses the arena in place when no entry cut from it is alive, else allocates.
        arena.reserve(ARENA_BYTES);
    }
    arena.extend_from_slice(key);
    let key = arena.split().freeze();
    arena.extend_from_slice(value);
    (key, arena.split().freeze())
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
    arena: BytesMut,
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
            arena: BytesMut::new(),
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
            return Some(Ok(copy_entry(&mut self.arena, key, value)));
        }
        self.done = true;
        match self.raw.status() {
            Ok(()) => None,
            Err(e) => Some(Err(super::op_error(self.store, e))),
        }
    }
}
