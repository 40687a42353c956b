//! Key bounds: inclusive ranges as Kafka Streams defines them, and prefix ranges.
//!
//! Keys are compared as bytes, lexicographically (`memcmp` order, shorter first on a tie).
//! A prefix `p` covers exactly the keys in `[p, successor(p))` where `successor(p)` is `p`
//! with its last non-`0xFF` byte incremented and everything after it dropped. A prefix made
//! only of `0xFF` bytes has no successor: its range is unbounded above. The empty prefix
//! covers every key.

use std::ops::Bound;

/// The smallest byte string greater than every string starting with `prefix`, or `None`
/// when there is none (the prefix is empty or all `0xFF`).
///
/// ```
/// use streams_state::prefix_successor;
/// assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
/// assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
/// assert_eq!(prefix_successor(b"\xff\xff"), None);
/// assert_eq!(prefix_successor(b""), None);
/// ```
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|b| *b != 0xFF)?;
    let mut upper = prefix[..=last].to_vec();
    upper[last] += 1;
    Some(upper)
}

/// A range of keys with owned bounds, used by every store layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// The lower end.
    pub from: Bound<Vec<u8>>,
    /// The upper end.
    pub to: Bound<Vec<u8>>,
}

impl KeyRange {
    /// Every key.
    pub fn all() -> Self {
        Self {
            from: Bound::Unbounded,
            to: Bound::Unbounded,
        }
    }

    /// The keys between two bounds.
    pub fn new(from: Bound<&[u8]>, to: Bound<&[u8]>) -> Self {
        Self {
            from: from.map(<[u8]>::to_vec),
            to: to.map(<[u8]>::to_vec),
        }
    }

    /// Kafka Streams' `range(from, to)`: both ends inclusive, `None` for unbounded.
    pub fn inclusive(from: Option<&[u8]>, to: Option<&[u8]>) -> Self {
        let b = |k: Option<&[u8]>| k.map_or(Bound::Unbounded, |k| Bound::Included(k.to_vec()));
        Self {
            from: b(from),
            to: b(to),
        }
    }

    /// The keys that start with `prefix`: `[prefix, successor(prefix))`.
    pub fn prefix(prefix: &[u8]) -> Self {
        let from = if prefix.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Included(prefix.to_vec())
        };
        let to = prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        Self { from, to }
    }

    /// Whether `key` lies inside the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        let above = match &self.from {
            Bound::Included(f) => key >= f.as_slice(),
            Bound::Excluded(f) => key > f.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match &self.to {
            Bound::Included(t) => key <= t.as_slice(),
            Bound::Excluded(t) => key < t.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    }

    /// Whether no key can lie in the range (e.g. `from > to`).
    pub fn is_empty(&self) -> bool {
        match (&self.from, &self.to) {
            (Bound::Included(f), Bound::Included(t)) => f > t,
            (Bound::Included(f), Bound::Excluded(t))
            | (Bound::Excluded(f), Bound::Included(t))
            | (Bound::Excluded(f), Bound::Excluded(t)) => f >= t,
            _ => false,
        }
    }

    /// The bounds as borrowed slices, e.g. for `BTreeMap::range`.
    pub fn as_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            self.from.as_ref().map(Vec::as_slice),
            self.to.as_ref().map(Vec::as_slice),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ranges() {
        let r = KeyRange::prefix(b"ab");
        assert!(r.contains(b"ab") && r.contains(b"ab\xff\xff") && !r.contains(b"ac") && !r.contains(b"aa"));
        let r = KeyRange::prefix(b"\xff");
        assert!(r.contains(b"\xff\xff\x00") && !r.contains(b"\xfe"));
        assert_eq!(KeyRange::prefix(b""), KeyRange::all());
    }

    #[test]
    fn inverted_range_is_empty() {
        assert!(KeyRange::inclusive(Some(b"b"), Some(b"a")).is_empty());
        assert!(!KeyRange::inclusive(Some(b"a"), Some(b"a")).is_empty());
        assert!(KeyRange::new(Bound::Excluded(b"a"), Bound::Excluded(b"a")).is_empty());
    }
}
