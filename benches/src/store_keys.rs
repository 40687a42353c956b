//! The keys of the store-memory workload (`store_memory` writes them to stores,
//! `store_memory_kafka` to a topic): the same sequence from the same seed in both.

use rand::Rng;

/// The key of the `n`th distinct key: random-looking, so writes land all over each store.
pub fn key_of(n: usize) -> String {
    format!(
        "{:016x}",
        (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17)
    )
}

/// Which distinct key each record writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyIds {
    /// Half the records (once there is one) rewrite a key written before.
    rewrites: bool,
    distinct: usize,
}

impl KeyIds {
    /// Ids of all-new keys, or with `rewrites` half the time (once there is one) one
    /// written before: an aggregation's read-modify-write.
    pub fn new(rewrites: bool) -> Self {
        Self {
            rewrites,
            distinct: 0,
        }
    }

    /// The id of the next record's key.
    pub fn next(&mut self, rng: &mut impl Rng) -> usize {
        if self.rewrites && self.distinct > 0 && rng.random_bool(0.5) {
            rng.random_range(0..self.distinct)
        } else {
            self.distinct += 1;
            self.distinct - 1
        }
    }

    /// The distinct keys so far.
    pub fn distinct(&self) -> usize {
        self.distinct
    }
}
