//! The write-back cache layer: buffers writes in memory, dedupes them per key, and writes
//! them down to the inner store on flush (commit) or when the thread's caches outgrow their
//! shared budget ([`ThreadCache`]).
//!
//! The contract is documented on [`CachingKeyValueStore`]; the budget's on [`ThreadCache`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;

use bytes::Bytes;

use crate::KeyRange;
use crate::changelog::ChangelogRecord;
use crate::error::{Result, StoreError};
use crate::iter::KeyValueIter;
use crate::layer::delegate_to_inner;
use crate::overlay::{count_over, overlay};
use crate::store::{FlushListener, KeyValueStore, StateStore, StoreStats};
use crate::thread_cache::ThreadCache;

/// The bytes each cached entry is charged for on top of its key and value: its share of
/// the cache's hash table, key-order and recency indexes, the reference-counted buffers' headers,
/// and the allocator's rounding. Measured: an entry with a 16-byte key and a 100-byte value
/// takes about 400 bytes of resident memory (glibc, x86-64; see docs/benchmarks.md, "Bounded
/// memory"), so the charge is about the memory an entry really takes, and the budget a
/// bound on the caches' memory rather than on their data only.
pub const ENTRY_OVERHEAD: usize = 288;

/// One cached key.
#[derive(Debug, Clone)]
struct CacheEntry {
    /// The value, `None` for a cached delete.
    value: Option<Bytes>,
    /// Whether the entry still has to be written to the inner store.
    dirty: bool,
    /// The stamp of the entry's last write, from the thread's write sequence (its key in
    /// the recency index).
    seq: u64,
}

fn entry_size(key: &[u8], value: Option<&Bytes>) -> usize {
    key.len() + value.map_or(0, Bytes::len) + ENTRY_OVERHEAD
}

/// A write-back cache over another key-value store.
///
/// The write-back cache layer: buffers writes in memory, dedupes them per key, and writes
/// them down to the inner store on flush (commit) or when the thread's caches outgrow their
/// shared budget.
///
/// # Budget and eviction
///
/// # Layout
///
/// Entries live in a hash table, so a point read or a rewrite of a cached key is one hash
/// and (mostly) one probe, whatever the cache's size; a separate ordered set of the cached
/// keys serves iteration and range deletes, and is touched only when a key enters or
/// leaves the cache. A recency index (write stamp -> key) orders eviction.
///
/// Every cached entry costs `key.len() + value.len() +` [`ENTRY_OVERHEAD`] bytes, charged to
/// a [`ThreadCache`]: the budget of one stream thread, shared by the caches of all its
/// stores ([`with_thread_cache`](Self::with_thread_cache)), or a budget of the cache's own
/// ([`new`](Self::new)). When a write takes the budget's caches together over it, this
/// cache drops its least recently *written* entries until they fit again; if such an entry
/// is dirty, every dirty entry of this cache is first written down (in key order), as Kafka
/// Streams does. Entries older than the thread's eviction mark (written before an entry
/// some cache of the thread had to evict) are dropped the same way at the next write or
/// flush. See [`ThreadCache`] for the rules. Recency is tracked on writes only: reads take
/// `&self` and do not populate or reorder the cache (a read miss goes to the inner store
/// and is not cached).
///
/// # Reads and iteration
///
/// `get` answers from the cache first (a cached delete means absent). Every iterator merges
/// the cache's range over the inner store's range lazily, in key order: a cached entry
/// shadows the inner entry with the same key and a cached delete hides it. Memory does not
/// grow with the number of entries.
///
/// # Range deletes and restore
///
/// `delete_range`/`delete_prefix` drop the cached entries in the range and delegate to the
/// inner store; `restore_batch` drops the cached entries of the restored keys and
/// delegates. Neither is reported to the flush listener.
pub struct CachingKeyValueStore {
    inner: Box<dyn KeyValueStore>,
    /// Every cached key's entry (point reads and rewrites).
    cache: HashMap<Bytes, CacheEntry, foldhash::fast::RandomState>,
    /// The keys of `cache` in byte order (iteration and range deletes). Invariant: holds
    /// exactly the keys of `cache`.
    order: BTreeSet<Bytes>,
    /// Write stamp -> key, oldest write first. Invariant: one stamp per key of `cache`, its
    /// entry's `seq`.
    recency: BTreeMap<u64, Bytes>,
    /// The budget this cache draws on, with the thread's other caches.
    budget: ThreadCache,
    /// The bytes this cache is charged for (its part of the budget's use).
    cached_bytes: usize,
    listener: Option<FlushListener>,
    /// Whether the listener is given the inner store's previous values (one read each).
    listener_old: bool,
    open: bool,
}

impl std::fmt::Debug for CachingKeyValueStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachingKeyValueStore")
            .field("name", &self.inner.name())
            .field("budget", &self.budget)
            .field("cached_bytes", &self.cached_bytes)
            .field("cached_entries", &self.cache.len())
            .finish_non_exhaustive()
    }
}

impl CachingKeyValueStore {
    /// A cache of at most `max_bytes` (see [`ENTRY_OVERHEAD`]) over `inner`, with a budget
    /// of its own. A budget of 0 writes every change through at once.
    pub fn new(inner: Box<dyn KeyValueStore>, max_bytes: usize) -> Self {
        Self::with_thread_cache(inner, ThreadCache::new(max_bytes))
    }

    /// A cache over `inner` drawing on `budget`, which the caches of the thread's other
    /// stores share (see [`ThreadCache`]).
    pub fn with_thread_cache(inner: Box<dyn KeyValueStore>, budget: ThreadCache) -> Self {
        budget.register();
        Self {
            inner,
            cache: HashMap::default(),
            order: BTreeSet::new(),
            recency: BTreeMap::new(),
            budget,
            cached_bytes: 0,
            listener: None,
            listener_old: false,
            open: true,
        }
    }

    /// The budget this cache draws on.
    pub fn thread_cache(&self) -> &ThreadCache {
        &self.budget
    }

    /// The bytes the cache is charged for now.
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    /// The number of cached keys (values and deletes, dirty or clean).
    pub fn cached_entries(&self) -> usize {
        self.cache.len()
    }

    fn check_open(&self) -> Result<()> {
        if self.open {
            Ok(())
        } else {
            Err(StoreError::Closed {
                store: self.inner.name().to_owned(),
            })
        }
    }

    /// Caches a dirty write of `key`, then evicts what the budget asks for.
    fn write(&mut self, key: &[u8], value: Option<Bytes>) -> Result<()> {
        let seq = self.budget.next_seq();
        let size = entry_size(key, value.as_ref());
        // A cached key is rewritten in place (one hash probe, and its key buffer moves from
        // its old stamp to the new one); only a new key is copied and indexed.
        let old_size = match self.cache.get_mut(key) {
            Some(entry) => {
                let old_size = entry_size(key, entry.value.as_ref());
                let old_seq = std::mem::replace(&mut entry.seq, seq);
                entry.value = value;
                entry.dirty = true;
                let key = self
                    .recency
                    .remove(&old_seq)
                    .unwrap_or_else(|| Bytes::copy_from_slice(key));
                self.recency.insert(seq, key);
                old_size
            }
            None => {
                let key = Bytes::copy_from_slice(key);
                let entry = CacheEntry {
                    value,
                    dirty: true,
                    seq,
                };
                self.cache.insert(key.clone(), entry);
                self.order.insert(key.clone());
                self.recency.insert(seq, key);
                0
            }
        };
        self.cached_bytes = self.cached_bytes - old_size + size;
        self.budget.charge(old_size, size);
        self.drop_stale()?;
        self.evict()
    }

    /// Drops least recently written entries until the budget's caches together fit it, or
    /// this cache is empty (the other caches did not grow, so they fit then).
    fn evict(&mut self) -> Result<()> {
        while self.budget.over_budget() {
            let Some((seq, key)) = self.oldest() else {
                break;
            };
            self.evict_entry(&key)?;
            self.budget.evicted(seq);
        }
        Ok(())
    }

    /// Drops the entries written before the thread's eviction mark: those a thread-wide LRU
    /// would have evicted before the entries other caches did evict.
    fn drop_stale(&mut self) -> Result<()> {
        let mark = self.budget.evicted_below();
        while let Some((&seq, key)) = self.recency.first_key_value() {
            if seq >= mark {
                break;
            }
            let key = key.clone();
            self.evict_entry(&key)?;
            self.budget.dropped_stale();
        }
        Ok(())
    }

    /// The least recently written entry's stamp and key.
    fn oldest(&self) -> Option<(u64, Bytes)> {
        self.recency.first_key_value().map(|(&seq, k)| (seq, k.clone()))
    }

    /// Drops `key`'s entry, after writing every dirty entry down when it is dirty.
    fn evict_entry(&mut self, key: &Bytes) -> Result<()> {
        if self.cache.get(key).is_some_and(|e| e.dirty) {
            self.flush_dirty()?;
        }
        self.remove_cached(key);
        Ok(())
    }

    fn remove_cached(&mut self, key: &[u8]) {
        if let Some((k, old)) = self.cache.remove_entry(key) {
            self.order.remove(key);
            self.recency.remove(&old.seq);
            let size = entry_size(&k, old.value.as_ref());
            self.cached_bytes -= size;
            self.budget.charge(size, 0);
        }
    }

    /// Empties the cache without writing anything down and gives its bytes back.
    fn release(&mut self) {
        self.cache.clear();
        self.order.clear();
        self.recency.clear();
        self.budget.charge(self.cached_bytes, 0);
        self.cached_bytes = 0;
    }

    /// Writes every dirty entry down to the inner store (in key order; in write order when
    /// a listener is told) and marks it clean. Unless the listener wants old values, runs of
    /// puts go down as one `put_all`.
    fn flush_dirty(&mut self) -> Result<()> {
        let mut dirty: Vec<(u64, Bytes, Option<Bytes>)> = self
            .cache
            .iter()
            .filter(|(_, e)| e.dirty)
            .map(|(k, e)| (e.seq, k.clone(), e.value.clone()))
            .collect();
        if dirty.is_empty() {
            return Ok(());
        }
        if self.listener.is_some() {
            // The listener sees the entries in the order of their last writes, as Kafka
            // Streams' caches flush them (a forwarding aggregation then sends its updates
            // in the order it made them).
            dirty.sort_unstable_by_key(|(seq, _, _)| *seq);
        } else {
            // Keys are unique: an unstable sort is deterministic.
            dirty.sort_unstable_by(|(_, a, _), (_, b, _)| a.cmp(b));
        }
        if let (Some(listener), true) = (self.listener.as_mut(), self.listener_old) {
            for (_, key, value) in &dirty {
                let old = match value {
                    Some(v) => {
                        let old = self.inner.get(key)?;
                        self.inner.put(key, v)?;
                        old
                    }
                    None => self.inner.delete(key)?,
                };
                // A delete of a key the inner store did not hold changes nothing.
                if value.is_some() || old.is_some() {
                    listener(key, value.as_deref(), old.as_deref());
                }
            }
        } else {
            let mut puts: Vec<(Bytes, Bytes)> = Vec::new();
            // Whether each entry changed the inner store (a delete may find nothing).
            let mut changed = Vec::with_capacity(dirty.len());
            for (_, key, value) in &dirty {
                match value {
                    Some(v) => {
                        puts.push((key.clone(), v.clone()));
                        changed.push(true);
                    }
                    None => {
                        if !puts.is_empty() {
                            self.inner.put_all(&puts)?;
                            puts.clear();
                        }
                        changed.push(self.inner.delete(key)?.is_some());
                    }
                }
            }
            if !puts.is_empty() {
                self.inner.put_all(&puts)?;
            }
            if let Some(listener) = self.listener.as_mut() {
                for ((_, key, value), changed) in dirty.iter().zip(changed) {
                    if changed {
                        listener(key, value.as_deref(), None);
                    }
                }
            }
        }
        for (_, key, _) in &dirty {
            if let Some(e) = self.cache.get_mut(key) {
                e.dirty = false;
            }
        }
        Ok(())
    }

    /// Drops the cached entries in `range` without writing them down.
    fn drop_range(&mut self, range: &KeyRange) {
        if range.is_empty() {
            return;
        }
        let keys: Vec<Bytes> = self.order.range::<[u8], _>(range.as_bounds()).cloned().collect();
        for k in keys {
            self.remove_cached(&k);
        }
    }

    /// Asserts the invariants tying the three indexes together.
    #[cfg(test)]
    fn check_indexes(&self) {
        assert_eq!(self.order.len(), self.cache.len());
        assert_eq!(self.recency.len(), self.cache.len());
        assert!(self.order.iter().all(|k| self.cache.contains_key(k)));
        for (seq, key) in &self.recency {
            assert_eq!(self.cache.get(key).map(|e| e.seq), Some(*seq));
        }
        let charged: usize = self
            .cache
            .iter()
            .map(|(k, e)| entry_size(k, e.value.as_ref()))
            .sum();
        assert_eq!(charged, self.cached_bytes);
    }

    fn merged<'a>(&'a self, range: &KeyRange, inner: KeyValueIter<'a>, reverse: bool) -> KeyValueIter<'a> {
        // Nothing can be cached in the range later: the iterator borrows the store.
        let cache = &self.cache;
        let cached = self
            .order
            .range::<[u8], _>(range.as_bounds())
            .filter_map(move |k: &'a Bytes| cache.get(k).map(|e| (k, e.value.as_ref())));
        overlay(cached, inner, reverse)
    }
}

impl StateStore for CachingKeyValueStore {
    delegate_to_inner!(name, persistent);

    fn is_open(&self) -> bool {
        self.open && self.inner.is_open()
    }
    fn flush(&mut self) -> Result<()> {
        self.check_open()?;
        self.flush_dirty()?;
        // Every entry is clean now: stale ones go without writing anything.
        self.drop_stale()?;
        self.inner.flush()
    }
    fn close(&mut self) -> Result<()> {
        if !self.open {
            return Ok(());
        }
        self.flush()?;
        self.open = false;
        self.release();
        self.budget.unregister();
        self.inner.close()
    }
    fn stats(&self) -> StoreStats {
        let mut stats = self.inner.stats();
        stats.cached_bytes = Some(self.cached_bytes as u64);
        stats
    }
}

impl Drop for CachingKeyValueStore {
    /// Gives the cache's bytes back to the budget (a store dropped without `close`, e.g.
    /// with a failed task). Dirty entries are lost, as the inner store's unflushed writes
    /// are: the changelog restores them.
    fn drop(&mut self) {
        if self.open {
            self.release();
            self.budget.unregister();
        }
    }
}

impl KeyValueStore for CachingKeyValueStore {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.check_open()?;
        match self.cache.get(key) {
            Some(e) => Ok(e.value.clone()),
            None => self.inner.get(key),
        }
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_open()?;
        self.write(key, Some(Bytes::copy_from_slice(value)))
    }

    fn delete(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        let old = self.get(key)?;
        self.write(key, None)?;
        Ok(old)
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        self.check_open()?;
        let range = KeyRange::new(from, to);
        if range.is_empty() {
            return Ok(KeyValueIter::empty());
        }
        Ok(self.merged(&range, self.inner.range(from, to)?, false))
    }

    fn reverse_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        self.check_open()?;
        let range = KeyRange::new(from, to);
        if range.is_empty() {
            return Ok(KeyValueIter::empty());
        }
        Ok(self.merged(&range, self.inner.reverse_range(from, to)?, true))
    }

    fn prefix_scan(&self, prefix: &[u8]) -> Result<KeyValueIter<'_>> {
        self.check_open()?;
        Ok(self.merged(&KeyRange::prefix(prefix), self.inner.prefix_scan(prefix)?, false))
    }

    /// The inner store's count corrected by the dirty entries (one inner `get` per dirty
    /// entry): exact when the inner store's count is.
    fn approximate_num_entries(&self) -> Result<u64> {
        self.check_open()?;
        let dirty = self
            .cache
            .iter()
            .filter(|(_, e)| e.dirty)
            .map(|(k, e)| (k, e.value.as_ref()));
        count_over(self.inner.as_ref(), dirty)
    }

    fn delete_range(&mut self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<()> {
        self.check_open()?;
        self.drop_range(&KeyRange::new(from, to));
        self.inner.delete_range(from, to)
    }

    fn delete_prefix(&mut self, prefix: &[u8]) -> Result<()> {
        self.check_open()?;
        self.drop_range(&KeyRange::prefix(prefix));
        self.inner.delete_prefix(prefix)
    }

    fn restore_batch(&mut self, batch: &[ChangelogRecord]) -> Result<()> {
        self.check_open()?;
        for rec in batch {
            self.remove_cached(&rec.key);
        }
        self.inner.restore_batch(batch)
    }

    delegate_to_inner!(checkpoint, write_checkpoint, commit_writes);

    /// Tells `listener` about every dirty entry written down from now on (see
    /// [`FlushListener`]; `None` as the old value unless `old_values`, which costs a read
    /// of the inner store per entry), replacing any earlier one. Always `true`.
    fn set_flush_listener(&mut self, listener: FlushListener, old_values: bool) -> bool {
        self.listener = Some(listener);
        self.listener_old = old_values;
        true
    }

    fn flush_cache(&mut self) -> Result<()> {
        self.check_open()?;
        self.flush_dirty()?;
        self.drop_stale()
    }
}

#[cfg(test)]
#[path = "caching_tests.rs"]
mod tests;
