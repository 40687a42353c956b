//! The iterator type every store layer returns.

use std::iter::Peekable;

use bytes::Bytes;

use crate::error::Result;

/// One entry of a store: key and value bytes.
pub type KeyValue = (Bytes, Bytes);

/// A lazy iterator over store entries, in byte order of the keys (descending for the
/// `reverse_*` operations).
///
/// It borrows the store it came from, so the store cannot be written while the iterator
/// lives: that is the defined behaviour of "writing while iterating" at the bytes level (it
/// does not compile). Items are `Result`s because a read may fail part-way (e.g. a RocksDB
/// I/O error); after an error the iterator is exhausted.
pub struct KeyValueIter<'a> {
    inner: Box<dyn Iterator<Item = Result<KeyValue>> + 'a>,
}

impl<'a> KeyValueIter<'a> {
    /// Wraps any iterator of entries.
    pub fn new(inner: impl Iterator<Item = Result<KeyValue>> + 'a) -> Self {
        Self {
            inner: Box::new(inner),
        }
    }

    /// An iterator with no entries.
    pub fn empty() -> Self {
        Self::new(std::iter::empty())
    }
}

impl Iterator for KeyValueIter<'_> {
    type Item = Result<KeyValue>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
}

impl std::fmt::Debug for KeyValueIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyValueIter")
    }
}

/// Merges an overlay of recent changes (in the iteration's order; `None` for a delete) over
/// an inner store's iterator of the same range: an overlay entry shadows the inner entry of
/// the same key, and an overlay delete hides it. The caching layer merges its cache this
/// way, the transactional layer its uncommitted writes.
pub(crate) struct OverlayIter<'a, O: Iterator<Item = (&'a Bytes, Option<&'a Bytes>)>> {
    overlay: Peekable<O>,
    inner: KeyValueIter<'a>,
    inner_next: Option<KeyValue>,
    inner_done: bool,
    reverse: bool,
    done: bool,
}

impl<'a, O: Iterator<Item = (&'a Bytes, Option<&'a Bytes>)>> OverlayIter<'a, O> {
    /// `overlay` and `inner` both ascending, or both descending when `reverse`.
    pub(crate) fn new(overlay: O, inner: KeyValueIter<'a>, reverse: bool) -> Self {
        Self {
            overlay: overlay.peekable(),
            inner,
            inner_next: None,
            inner_done: false,
            reverse,
            done: false,
        }
    }
}

impl<'a, O: Iterator<Item = (&'a Bytes, Option<&'a Bytes>)>> Iterator for OverlayIter<'a, O> {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            if self.inner_next.is_none() && !self.inner_done {
                match self.inner.next() {
                    Some(Ok(kv)) => self.inner_next = Some(kv),
                    Some(Err(e)) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                    None => self.inner_done = true,
                }
            }
            let take_overlay = match (self.overlay.peek(), &self.inner_next) {
                (None, None) => {
                    self.done = true;
                    return None;
                }
                (None, Some(_)) => false,
                (Some(_), None) => true,
                (Some((ok, _)), Some((ik, _))) => {
                    let ord = ok.as_ref().cmp(ik.as_ref());
                    let ord = if self.reverse { ord.reverse() } else { ord };
                    match ord {
                        std::cmp::Ordering::Greater => false,
                        std::cmp::Ordering::Equal => {
                            self.inner_next = None; // shadowed by the overlay
                            true
                        }
                        std::cmp::Ordering::Less => true,
                    }
                }
            };
            if !take_overlay {
                return self.inner_next.take().map(Ok);
            }
            if let Some((k, Some(v))) = self.overlay.next() {
                return Some(Ok((k.clone(), v.clone())));
            }
            // An overlay delete: skip it.
        }
    }
}
