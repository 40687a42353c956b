//! What the output must hold, checked by identity rather than by maxima.
//!
//! - [`Identities`]: every input sequence number `0..n` in the audit topic, at least once
//!   (at-least-once) or exactly once (exactly-once, read committed). A lost record is missing
//!   there whatever duplicates the counts hold.
//! - [`Counts`]: under exactly-once every count `1..=n_k` of every key `k` appears exactly
//!   once in the committed output, `n_k` being the records the driver wrote with that key.

use std::fmt::Write as _;

/// Appearances of each sequence number.
pub(crate) struct Identities {
    seen: Vec<u8>,
    unexpected: u64,
}

/// What [`Identities::report`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct IdentityReport {
    pub(crate) missing: u64,
    pub(crate) duplicated: u64,
    pub(crate) unexpected: u64,
    /// A few missing sequence numbers.
    pub(crate) missing_examples: Vec<u64>,
}

impl Identities {
    /// Expects sequence numbers `0..n`.
    pub(crate) fn new(n: u64) -> Self {
        Self {
            seen: vec![0; n as usize],
            unexpected: 0,
        }
    }

    /// Counts one audit record's value (its sequence number in decimal).
    pub(crate) fn add(&mut self, value: &[u8]) {
        let seq: Option<u64> = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
        match seq.and_then(|s| self.seen.get_mut(s as usize)) {
            Some(c) => *c = c.saturating_add(1),
            None => self.unexpected += 1,
        }
    }

    pub(crate) fn report(&self) -> IdentityReport {
        let missing: Vec<u64> = (0..self.seen.len() as u64)
            .filter(|s| self.seen[*s as usize] == 0)
            .collect();
        IdentityReport {
            missing: missing.len() as u64,
            duplicated: self.seen.iter().filter(|c| **c > 1).count() as u64,
            unexpected: self.unexpected,
            missing_examples: missing.into_iter().take(5).collect(),
        }
    }
}

/// The counts seen per key index.
pub(crate) struct Counts {
    per_key: Vec<Vec<u32>>,
    unexpected: u64,
}

impl Counts {
    pub(crate) fn new(keys: u32) -> Self {
        Self {
            per_key: vec![Vec::new(); keys as usize],
            unexpected: 0,
        }
    }

    /// Counts one output record: key index and its 8-byte big-endian count.
    pub(crate) fn add(&mut self, key: Option<u32>, value: &[u8]) {
        let count = <[u8; 8]>::try_from(value).ok().map(u64::from_be_bytes);
        match (key.and_then(|k| self.per_key.get_mut(k as usize)), count) {
            (Some(v), Some(c)) if c <= u64::from(u32::MAX) => v.push(c as u32),
            _ => self.unexpected += 1,
        }
    }

    /// Keys whose counts are not exactly `1..=expected[k]`, each once: how many, with a few
    /// described.
    pub(crate) fn wrong(&mut self, expected: &[u32]) -> (u64, String) {
        let mut wrong = 0;
        let mut examples = String::new();
        for (k, seen) in self.per_key.iter_mut().enumerate() {
            seen.sort_unstable();
            let want = expected.get(k).copied().unwrap_or(0);
            if !seen.iter().copied().eq(1..=want) {
                wrong += 1;
                if wrong <= 5 {
                    let _ = write!(examples, " key {k}: want 1..={want}, got {seen:?};");
                }
            }
        }
        if self.unexpected > 0 {
            let _ = write!(
                examples,
                " {} records of unknown keys or bad counts",
                self.unexpected
            );
        }
        (wrong + self.unexpected, examples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_find_missing_and_duplicates() {
        let mut ids = Identities::new(4);
        for v in ["0", "1", "1", "3", "9", "x"] {
            ids.add(v.as_bytes());
        }
        assert_eq!(
            ids.report(),
            IdentityReport {
                missing: 1,
                duplicated: 1,
                unexpected: 2,
                missing_examples: vec![2],
            }
        );
    }

    #[test]
    fn counts_must_be_one_to_n_exactly_once() {
        let mut c = Counts::new(3);
        let be = |n: u64| n.to_be_bytes();
        // Key 0: 1, 2 (right); key 1: 1, 1 (duplicate, 2 missing); key 2: 2 (1 missing).
        for (k, n) in [(0, 2), (0, 1), (1, 1), (1, 1), (2, 2)] {
            c.add(Some(k), &be(n));
        }
        let (wrong, examples) = c.wrong(&[2, 2, 2]);
        assert_eq!(wrong, 2, "{examples}");
        let mut right = Counts::new(1);
        right.add(Some(0), &be(1));
        assert_eq!(right.wrong(&[1]).0, 0);
        // A count of a key the driver never wrote is wrong too.
        right.add(Some(7), &be(1));
        assert_eq!(right.wrong(&[1]).0, 1);
    }
}
