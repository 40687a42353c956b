//! The metered store layer: the outermost bytes layer of every store of a task with
//! metrics (metered -> caching -> change-logging -> inner, as in Kafka Streams).
//!
//! Every operation bumps a pre-resolved counter; at recording level DEBUG it also times
//! itself into a histogram. Iterators are wrapped to keep the open-iterator gauge and the
//! oldest open iterator's age; they borrow the store, so the bookkeeping needs no lock.
//! [`StateStore::stats`] on this layer also refreshes the store's RocksDB gauges.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Instant;

use bytes::Bytes;
use prometheus::{Histogram, IntCounter, IntGauge};
use streams_state::{ChangelogRecord, KeyValue, KeyValueIter, KeyValueStore, Result, StateStore, StoreStats};

use super::Metrics;
use super::families::Families;

/// Store operations, as the `operation` label spells them.
const OPS: [&str; 14] = [
    "put",
    "put_if_absent",
    "put_all",
    "get",
    "delete",
    "range",
    "reverse_range",
    "prefix_scan",
    "all",
    "reverse_all",
    "delete_range",
    "delete_prefix",
    "flush",
    "restore",
];

#[derive(Clone, Copy)]
enum Op {
    Put,
    PutIfAbsent,
    PutAll,
    Get,
    Delete,
    Range,
    ReverseRange,
    PrefixScan,
    All,
    ReverseAll,
    DeleteRange,
    DeletePrefix,
    Flush,
    Restore,
}

/// The pre-resolved metrics of one store in one task.
pub(crate) struct StoreMetrics {
    ops: Vec<IntCounter>,
    latency: Option<Vec<Histogram>>,
    open_iterators: IntGauge,
    oldest_iterator: IntGauge,
    estimated_keys: IntGauge,
    memtable_bytes: IntGauge,
    block_cache_usage: IntGauge,
    pending_compaction: IntGauge,
}

impl StoreMetrics {
    pub(super) fn new(metrics: &Metrics, task: [&str; 3], store: &str, debug: bool) -> Self {
        let f = metrics.families();
        let [a, t, k] = task;
        let l = [a, t, k, store];
        Self {
            ops: OPS
                .iter()
                .map(|op| f.store_operations.with_label_values(&[a, t, k, store, op]))
                .collect(),
            latency: debug.then(|| {
                OPS.iter()
                    .map(|op| f.store_latency.with_label_values(&[a, t, k, store, op]))
                    .collect()
            }),
            open_iterators: f.store_open_iterators.with_label_values(&l),
            oldest_iterator: f.store_oldest_iterator.with_label_values(&l),
            estimated_keys: f.store_estimated_keys.with_label_values(&l),
            memtable_bytes: f.store_memtable_bytes.with_label_values(&l),
            block_cache_usage: f.store_block_cache_usage.with_label_values(&l),
            pending_compaction: f.store_pending_compaction.with_label_values(&l),
        }
    }

    /// Counts `op` and, at DEBUG, times `f`.
    fn record<R>(&self, op: Op, f: impl FnOnce() -> R) -> R {
        self.ops[op as usize].inc();
        match &self.latency {
            Some(h) => {
                let started = Instant::now();
                let r = f();
                h[op as usize].observe(started.elapsed().as_secs_f64());
                r
            }
            None => f(),
        }
    }
}

/// Removes every series of `store` in task `task`.
pub(super) fn remove_store_series(f: &Families, task: [&str; 3], store: &str) {
    let [a, t, k] = task;
    for op in OPS {
        let _ = f.store_operations.remove_label_values(&[a, t, k, store, op]);
        let _ = f.store_latency.remove_label_values(&[a, t, k, store, op]);
    }
    let l = [a, t, k, store];
    for g in [
        &f.store_open_iterators,
        &f.store_oldest_iterator,
        &f.store_estimated_keys,
        &f.store_memtable_bytes,
        &f.store_block_cache_usage,
        &f.store_pending_compaction,
    ] {
        let _ = g.remove_label_values(&l);
    }
}

fn unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A store with metrics around it.
pub(crate) struct MeteredKeyValueStore {
    inner: Box<dyn KeyValueStore>,
    metrics: StoreMetrics,
    /// Open iterators: id -> unix seconds opened. Ids grow, so the first is the oldest.
    iterators: RefCell<BTreeMap<u64, i64>>,
    next_iterator: Cell<u64>,
}

impl MeteredKeyValueStore {
    pub fn new(inner: Box<dyn KeyValueStore>, metrics: StoreMetrics) -> Self {
        Self {
            inner,
            metrics,
            iterators: RefCell::new(BTreeMap::new()),
            next_iterator: Cell::new(0),
        }
    }

    fn track<'a>(
        &'a self,
        op: Op,
        open: impl FnOnce() -> Result<KeyValueIter<'a>>,
    ) -> Result<KeyValueIter<'a>> {
        let inner = self.metrics.record(op, open)?;
        let id = self.next_iterator.get();
        self.next_iterator.set(id + 1);
        let now = unix_seconds();
        let mut open = self.iterators.borrow_mut();
        if open.is_empty() {
            self.metrics.oldest_iterator.set(now);
        }
        open.insert(id, now);
        self.metrics.open_iterators.inc();
        Ok(KeyValueIter::new(TrackedIter {
            inner,
            store: self,
            id,
        }))
    }

    fn untrack(&self, id: u64) {
        let mut open = self.iterators.borrow_mut();
        if open.remove(&id).is_some() {
            self.metrics.open_iterators.dec();
            self.metrics
                .oldest_iterator
                .set(open.values().next().copied().unwrap_or(0));
        }
    }
}

/// An iterator that tells its store when it is dropped.
struct TrackedIter<'a> {
    inner: KeyValueIter<'a>,
    store: &'a MeteredKeyValueStore,
    id: u64,
}

impl Iterator for TrackedIter<'_> {
    type Item = Result<KeyValue>;
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
}

impl Drop for TrackedIter<'_> {
    fn drop(&mut self) {
        self.store.untrack(self.id);
    }
}

impl StateStore for MeteredKeyValueStore {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn persistent(&self) -> bool {
        self.inner.persistent()
    }
    fn is_open(&self) -> bool {
        self.inner.is_open()
    }
    fn flush(&mut self) -> Result<()> {
        let inner = &mut self.inner;
        self.metrics.record(Op::Flush, || inner.flush())
    }
    fn close(&mut self) -> Result<()> {
        self.inner.close()
    }
    /// The inner layers' stats; also sets the store's RocksDB gauges from them.
    fn stats(&self) -> StoreStats {
        let s = self.inner.stats();
        let set = |g: &IntGauge, v: Option<u64>| {
            if let Some(v) = v {
                g.set(i64::try_from(v).unwrap_or(i64::MAX));
            }
        };
        set(&self.metrics.estimated_keys, s.estimated_keys);
        set(&self.metrics.memtable_bytes, s.memtable_bytes);
        set(&self.metrics.block_cache_usage, s.block_cache_usage_bytes);
        set(&self.metrics.pending_compaction, s.pending_compaction_bytes);
        s
    }
}

impl KeyValueStore for MeteredKeyValueStore {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.metrics.record(Op::Get, || self.inner.get(key))
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let inner = &mut self.inner;
        self.metrics.record(Op::Put, || inner.put(key, value))
    }
    fn put_if_absent(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Bytes>> {
        let inner = &mut self.inner;
        self.metrics
            .record(Op::PutIfAbsent, || inner.put_if_absent(key, value))
    }
    fn put_all(&mut self, entries: &[(Bytes, Bytes)]) -> Result<()> {
        let inner = &mut self.inner;
        self.metrics.record(Op::PutAll, || inner.put_all(entries))
    }
    fn delete(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        let inner = &mut self.inner;
        self.metrics.record(Op::Delete, || inner.delete(key))
    }
    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        self.track(Op::Range, || self.inner.range(from, to))
    }
    fn reverse_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        self.track(Op::ReverseRange, || self.inner.reverse_range(from, to))
    }
    fn prefix_scan(&self, prefix: &[u8]) -> Result<KeyValueIter<'_>> {
        self.track(Op::PrefixScan, || self.inner.prefix_scan(prefix))
    }
    fn all(&self) -> Result<KeyValueIter<'_>> {
        self.track(Op::All, || self.inner.all())
    }
    fn reverse_all(&self) -> Result<KeyValueIter<'_>> {
        self.track(Op::ReverseAll, || self.inner.reverse_all())
    }
    fn approximate_num_entries(&self) -> Result<u64> {
        self.inner.approximate_num_entries()
    }
    fn delete_range(&mut self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<()> {
        let inner = &mut self.inner;
        self.metrics
            .record(Op::DeleteRange, || inner.delete_range(from, to))
    }
    fn delete_prefix(&mut self, prefix: &[u8]) -> Result<()> {
        let inner = &mut self.inner;
        self.metrics
            .record(Op::DeletePrefix, || inner.delete_prefix(prefix))
    }
    fn restore_batch(&mut self, batch: &[ChangelogRecord]) -> Result<()> {
        let inner = &mut self.inner;
        self.metrics.record(Op::Restore, || inner.restore_batch(batch))
    }
    fn checkpoint(&self) -> Result<Option<i64>> {
        self.inner.checkpoint()
    }
    fn write_checkpoint(&mut self, offset: Option<i64>) -> Result<()> {
        self.inner.write_checkpoint(offset)
    }

    fn commit_writes(&mut self, checkpoint: Option<i64>) -> Result<()> {
        self.inner.commit_writes(checkpoint)
    }

    fn set_flush_listener(&mut self, listener: streams_state::FlushListener, old_values: bool) -> bool {
        self.inner.set_flush_listener(listener, old_values)
    }

    fn flush_cache(&mut self) -> Result<()> {
        self.inner.flush_cache()
    }
}
