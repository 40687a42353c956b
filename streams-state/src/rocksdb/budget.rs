//! The memtable budget shared by the stores of one [`RocksDbResources`]: which store flushes
//! its memtable when all of them together hold more than `rocksdb.write.buffer.bytes`.
//!
//! # Why not RocksDB's own policy
//!
//! RocksDB's write-buffer manager, given a size, asks at every write of every database that
//! shares it whether the memtables passed the budget, and if so the database being written
//! flushes *its own* memtable, however small. With 100 stores written in turn that meant
//! flushes of a few kilobytes each: once the one flush thread fell behind, the memtables
//! waiting for it kept the budget exceeded, every write flushed another tiny memtable, and
//! the lag fed itself (tens of thousands of flushes for 3,000,000 records; see
//! docs/benchmarks.md, "Bounded memory: 100 RocksDB stores").
//!
//! # The policy here
//!
//! The manager is created without a size: it still charges every memtable's memory to the
//! block cache (so the cache stays the bound of RocksDB's memory), but it never triggers a
//! flush. Each store instead keeps a [`MemtableShare`] that counts the bytes written since
//! its last flush. When that count reaches the store's fair share of the budget (the budget
//! divided by the stores open, at least one arena block) and the memtables together hold
//! the budget or more, the store flushes its memtables without waiting for the flush. So
//! a flush always carries at least a fair share, the stores that are written most flush
//! first, and memtables still waiting for the flush thread make no further store flush
//! early. Memory may overshoot the budget while flushes are pending, as with RocksDB's
//! manager without stalls; each store's memtable is still capped at
//! [`MEMTABLE_BYTES`](RocksDbResources::MEMTABLE_BYTES) by RocksDB itself.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::RocksDbResources;

/// The counters of one budget, shared by every clone of the resources (also those with an
/// options setter of their own).
#[derive(Debug, Default)]
pub(crate) struct Budget {
    open_stores: AtomicUsize,
    flushes: AtomicU64,
}

/// One open store's part of the shared memtable budget; counts the store as open until it
/// is dropped.
pub(crate) struct MemtableShare {
    resources: RocksDbResources,
    /// Bytes of keys and values written since this store's last flush (an estimate of its
    /// active memtable: RocksDB may also flush it by itself when it fills).
    unflushed: usize,
}

impl MemtableShare {
    /// Counts one more store open on `resources`.
    pub(crate) fn new(resources: &RocksDbResources) -> Self {
        resources.inner.budget.open_stores.fetch_add(1, Ordering::Relaxed);
        Self {
            resources: resources.clone(),
            unflushed: 0,
        }
    }

    /// Notes a write of `bytes`; true when this store is to flush its memtables now (the
    /// count then starts again).
    pub(crate) fn wrote(&mut self, bytes: usize) -> bool {
        self.unflushed = self.unflushed.saturating_add(bytes);
        if self.unflushed < self.resources.fair_share() || !self.resources.over_budget() {
            return false;
        }
        self.unflushed = 0;
        self.resources
            .inner
            .budget
            .flushes
            .fetch_add(1, Ordering::Relaxed);
        true
    }
}

impl Drop for MemtableShare {
    fn drop(&mut self) {
        self.resources
            .inner
            .budget
            .open_stores
            .fetch_sub(1, Ordering::Relaxed);
    }
}

impl RocksDbResources {
    /// The bytes a store writes before it flushes for the budget: the budget divided by
    /// the open stores, at least one arena block.
    fn fair_share(&self) -> usize {
        let stores = self.inner.budget.open_stores.load(Ordering::Relaxed).max(1);
        (self.inner.write_buffer_bytes / stores).max(self.arena_block_bytes())
    }

    /// Whether the memtables of all stores together hold the budget or more.
    fn over_budget(&self) -> bool {
        self.write_buffer_usage() >= self.inner.write_buffer_bytes
    }

    /// How many memtable flushes the budget asked for so far (stores flushing because the
    /// memtables together passed `write_buffer_bytes`; RocksDB's own flushes of a full
    /// memtable, and those at close, are not counted).
    pub fn budget_flushes(&self) -> u64 {
        self.inner.budget.flushes.load(Ordering::Relaxed)
    }

    /// How many stores are open on these resources.
    pub fn open_stores(&self) -> usize {
        self.inner.budget.open_stores.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_asks_for_a_flush_only_past_its_fair_share_and_the_budget() {
        let res = RocksDbResources::new(4 << 20, 1 << 20);
        let mut shares: Vec<_> = (0..4).map(|_| MemtableShare::new(&res)).collect();
        assert_eq!(res.open_stores(), 4);
        assert_eq!(res.fair_share(), 256 << 10);
        // Nothing is in the memtables: past the fair share, still under the budget.
        assert!(!shares[0].wrote(300 << 10));
        assert_eq!(res.budget_flushes(), 0);
        shares.truncate(1);
        assert_eq!(res.open_stores(), 1);
        assert_eq!(res.fair_share(), 1 << 20);
        // A fair share never goes below one arena block.
        let many: Vec<_> = (0..10_000).map(|_| MemtableShare::new(&res)).collect();
        assert_eq!(res.fair_share(), res.arena_block_bytes());
        drop(many);
        assert_eq!(res.open_stores(), 1);
    }
}
