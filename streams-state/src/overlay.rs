//! Recent changes laid over an inner store: the caching layer's dirty cache entries and
//! the transactional layer's uncommitted writes are both an ordered map of key to value or
//! delete, read through ([`overlay`]) and counted ([`count_over`]) on top of the store below.

use std::iter::Peekable;

use bytes::Bytes;

use crate::error::Result;
use crate::iter::{KeyValue, KeyValueIter};
use crate::store::KeyValueStore;

/// `inner` with `overlay` (its entries in the same range, ascending) merged over it,
/// descending when `reverse`; `inner` itself when the overlay has nothing in the range, so
/// the common case pays no merge step per entry.
pub(crate) fn overlay<'a, O>(overlay: O, inner: KeyValueIter<'a>, reverse: bool) -> KeyValueIter<'a>
where
    O: DoubleEndedIterator<Item = (&'a Bytes, Option<&'a Bytes>)> + Clone + 'a,
{
    if overlay.clone().next().is_none() {
        return inner;
    }
    if reverse {
        KeyValueIter::new(OverlayIter::new(overlay.rev(), inner, true))
    } else {
        KeyValueIter::new(OverlayIter::new(overlay, inner, false))
    }
}

/// `inner`'s approximate entry count with `overlay`'s changes applied: a value for a key
/// `inner` lacks adds one, a delete of a key it has removes one.
pub(crate) fn count_over<'a>(
    inner: &dyn KeyValueStore,
    overlay: impl Iterator<Item = (&'a Bytes, Option<&'a Bytes>)>,
) -> Result<u64> {
    let mut n = inner.approximate_num_entries()?;
    for (k, v) in overlay {
        match (v.is_some(), inner.get(k)?.is_some()) {
            (true, false) => n = n.saturating_add(1),
            (false, true) => n = n.saturating_sub(1),
            _ => {}
        }
    }
    Ok(n)
}

/// Merges an overlay of recent changes (in the iteration's order; `None` for a delete) over
/// an inner store's iterator of the same range: an overlay entry shadows the inner entry of
/// the same key, and an overlay delete hides it. The caching layer merges its cache this
/// way, the transactional layer its uncommitted writes.
struct OverlayIter<'a, O: Iterator<Item = (&'a Bytes, Option<&'a Bytes>)>> {
    overlay: Peekable<O>,
    inner: KeyValueIter<'a>,
    inner_next: Option<KeyValue>,
    inner_done: bool,
    reverse: bool,
    done: bool,
}

impl<'a, O: Iterator<Item = (&'a Bytes, Option<&'a Bytes>)>> OverlayIter<'a, O> {
    /// `overlay` and `inner` both ascending, or both descending when `reverse`.
    fn new(overlay: O, inner: KeyValueIter<'a>, reverse: bool) -> Self {
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
