//! What of a query's output must be equal between two implementations.
//!
//! The stream queries (q0–q2) write one record per selected bid, in an order that depends
//! on scheduling: their digest is the multiset of records, as a count and two
//! order-independent hashes, JSON values compared as [`Bid`]s (so field order and
//! whitespace do not matter). The others write updates of a result per key: their digest
//! is the last value of every key, a deleted (null or empty) value meaning no result. q12
//! counts in windows of processing time, which differ from run to run: its digest is the
//! total of the last counts per bidder (the key's part before `@`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};

use super::model::Bid;

/// An output topic reduced to what must be equal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Digest {
    /// The multiset of records of a stream query.
    Records {
        /// Records seen.
        count: u64,
        /// The wrapping sum of the records' hashes.
        sum: u64,
        /// The xor of the records' hashes.
        xor: u64,
        /// Values that were not the JSON the query writes.
        unreadable: u64,
    },
    /// The last value of every key.
    Last(BTreeMap<String, String>),
    /// The last count of every key, compared as totals per key prefix (before `@`).
    Totals(BTreeMap<String, String>),
}

/// Whether `query` writes a stream of bids as JSON (q0, q1).
fn writes_bids(query: &str) -> bool {
    matches!(query, "q0" | "q1")
}

impl Digest {
    /// The empty digest of `query`'s output.
    pub fn new(query: &str) -> Self {
        if writes_bids(query) || query == "q2" {
            Digest::Records {
                count: 0,
                sum: 0,
                xor: 0,
                unreadable: 0,
            }
        } else if query == "q12" {
            Digest::Totals(BTreeMap::new())
        } else {
            Digest::Last(BTreeMap::new())
        }
    }

    /// The totals per key prefix of a [`Digest::Totals`] (empty for the others); a value
    /// that is no number counts as `u64::MAX`, so that it cannot go unnoticed.
    pub fn totals(&self) -> BTreeMap<&str, u64> {
        let mut totals = BTreeMap::new();
        if let Digest::Totals(last) = self {
            for (k, v) in last {
                let prefix = k.split_once('@').map_or(k.as_str(), |(p, _)| p);
                let n = v.parse::<u64>().unwrap_or(u64::MAX);
                let t: &mut u64 = totals.entry(prefix).or_default();
                *t = t.saturating_add(n);
            }
        }
        totals
    }

    /// Adds one output record of `query` (an empty value stands for null).
    pub fn add(&mut self, query: &str, key: &[u8], value: &[u8]) {
        match self {
            Digest::Records {
                count,
                sum,
                xor,
                unreadable,
            } => {
                let mut h = DefaultHasher::new();
                key.hash(&mut h);
                if writes_bids(query) {
                    match serde_json::from_slice::<Bid>(value) {
                        Ok(bid) => (
                            bid.auction,
                            bid.bidder,
                            bid.price,
                            bid.channel,
                            bid.url,
                            bid.date_time,
                            bid.extra,
                        )
                            .hash(&mut h),
                        Err(_) => {
                            *unreadable += 1;
                            value.hash(&mut h);
                        }
                    }
                } else {
                    value.hash(&mut h);
                }
                let x = h.finish();
                *count += 1;
                *sum = sum.wrapping_add(x);
                *xor ^= x;
            }
            Digest::Last(last) | Digest::Totals(last) => {
                let key = String::from_utf8_lossy(key).into_owned();
                if value.is_empty() {
                    last.remove(&key);
                } else {
                    last.insert(key, String::from_utf8_lossy(value).into_owned());
                }
            }
        }
    }

    /// One line for a log: records and hashes, or results and their keys' range.
    pub fn summary(&self) -> String {
        match self {
            Digest::Records {
                count,
                sum,
                xor,
                unreadable,
            } => format!("{count} records, hashes {sum:016x}/{xor:016x}, {unreadable} unreadable"),
            Digest::Last(last) => format!(
                "{} results, keys {:?}..{:?}",
                last.len(),
                last.keys().next(),
                last.keys().next_back()
            ),
            Digest::Totals(_) => {
                let totals = self.totals();
                let sum = totals.values().fold(0u64, |a, t| a.saturating_add(*t));
                format!("{} keys, {sum} in all", totals.len())
            }
        }
    }

    /// `None` when equal, else what differs (at most five keys).
    pub fn diff(&self, other: &Digest) -> Option<String> {
        if let (Digest::Totals(_), Digest::Totals(_)) = (self, other) {
            let (a, b) = (self.totals(), other.totals());
            if a == b {
                return None;
            }
            let mut s = format!("{} vs {}", self.summary(), other.summary());
            list_differences(&mut s, &a, &b);
            return Some(s);
        }
        if self == other {
            return None;
        }
        match (self, other) {
            (Digest::Last(a), Digest::Last(b)) => {
                let mut s = format!("{} results vs {}", a.len(), b.len());
                list_differences(&mut s, a, b);
                Some(s)
            }
            _ => Some(format!("{} vs {}", self.summary(), other.summary())),
        }
    }
}

/// Appends `; key: a vs b` to `s` for the first five keys whose values differ.
fn list_differences<K, V>(s: &mut String, a: &BTreeMap<K, V>, b: &BTreeMap<K, V>)
where
    K: Ord + std::fmt::Display,
    V: PartialEq + std::fmt::Debug,
{
    let keys: std::collections::BTreeSet<&K> = a.keys().chain(b.keys()).collect();
    for k in keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).take(5) {
        let _ = write!(s, "; {k}: {:?} vs {:?}", a.get(k), b.get(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Records<'a> = &'a [(&'a [u8], &'a [u8])];

    /// Digests of `query` fed `a`'s and `b`'s (key, value) records.
    fn digests(query: &str, a: Records<'_>, b: Records<'_>) -> (Digest, Digest) {
        let digest = |records: Records<'_>| {
            let mut d = Digest::new(query);
            for (k, v) in records {
                d.add(query, k, v);
            }
            d
        };
        (digest(a), digest(b))
    }

    #[test]
    fn stream_digests_ignore_order_and_json_layout() {
        let one = br#"{"auction":1,"bidder":2,"price":3,"channel":"c","url":"u","dateTime":4,"extra":""}"#;
        let one_reordered =
            br#"{"bidder":2, "auction":1,"price":3,"channel":"c","url":"u","dateTime":4,"extra":""}"#;
        let two = br#"{"auction":5,"bidder":2,"price":3,"channel":"c","url":"u","dateTime":4,"extra":""}"#;
        let (a, mut b) = digests("q0", &[(b"", one), (b"", two)], &[(b"", two)]);
        assert!(a.diff(&b).is_some(), "a record missing");
        b.add("q0", b"", one_reordered);
        assert_eq!(a.diff(&b), None);
        b.add("q0", b"", one);
        assert!(a.diff(&b).is_some(), "a duplicate");
    }

    #[test]
    fn totals_compare_sums_per_key_prefix() {
        let (a, mut b) = digests(
            "q12",
            &[(b"7@0", b"1"), (b"7@0", b"2"), (b"7@10", b"3")],
            &[(b"7@5", b"5")],
        );
        assert_eq!(a.diff(&b), None, "2 + 3 = 5");
        b.add("q12", b"8@5", b"1");
        assert_eq!(
            a.diff(&b).unwrap(),
            "1 keys, 5 in all vs 2 keys, 6 in all; 8: None vs Some(1)"
        );
    }

    #[test]
    fn table_digests_keep_the_last_value_and_drop_deletions() {
        let (a, mut b) = digests(
            "q11",
            &[(b"k@0/5", b"1"), (b"k@0/5", b""), (b"k@0/9", b"2")],
            &[(b"k@0/9", b"1"), (b"k@0/9", b"2")],
        );
        assert_eq!(a.diff(&b), None);
        b.add("q11", b"k@0/9", b"3");
        assert_eq!(
            a.diff(&b).unwrap(),
            r#"1 results vs 1; k@0/9: Some("2") vs Some("3")"#
        );
    }
}
