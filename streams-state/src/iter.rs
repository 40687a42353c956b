//! The iterator type every store layer returns.

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
