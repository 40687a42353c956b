//! The bytes-level key-value store contract that every store and every layer implements.
//!
//! The contract is documented on [`KeyValueStore`].

use std::ops::Bound;

use bytes::Bytes;

use crate::changelog::ChangelogRecord;
use crate::error::Result;
use crate::iter::KeyValueIter;

/// A bytes store shared between the task that owns it and the typed handles to it.
pub type SharedKeyValueStore = std::rc::Rc<std::cell::RefCell<Box<dyn KeyValueStore>>>;

/// Gauges a store reports for metrics; `None` where the store has no such thing.
///
/// Read about once a second by the runtime, never per record.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreStats {
    /// RocksDB's `rocksdb.estimate-num-keys`.
    pub estimated_keys: Option<u64>,
    /// RocksDB's `rocksdb.cur-size-all-mem-tables`: bytes in memtables.
    pub memtable_bytes: Option<u64>,
    /// RocksDB's `rocksdb.block-cache-usage`: bytes of the (possibly shared) block cache in use.
    pub block_cache_usage_bytes: Option<u64>,
    /// RocksDB's `rocksdb.estimate-pending-compaction-bytes`.
    pub pending_compaction_bytes: Option<u64>,
    /// Bytes held by the record cache layer, when there is one.
    pub cached_bytes: Option<u64>,
}

/// Called for each dirty entry written down to the inner store, on flush or eviction, with
/// the key, the new value (`None` for a delete) and the value the inner store held before
/// (when old values were asked for). A delete of a key the inner store did not hold is not
/// reported, as Kafka Streams' caches do not forward it.
pub type FlushListener = Box<dyn FnMut(&[u8], Option<&[u8]>, Option<&[u8]>) + Send>;

/// Operations every state store has, whatever its shape.
pub trait StateStore: Send {
    /// The store's name, unique within a topology.
    fn name(&self) -> &str;

    /// Whether the store keeps its data on disk across restarts.
    fn persistent(&self) -> bool;

    /// Whether the store is open for reads and writes.
    fn is_open(&self) -> bool;

    /// Writes everything buffered (cache entries, memtables as needed for durability) down
    /// to the layer below, and the changelog sink's pending writes out.
    fn flush(&mut self) -> Result<()>;

    /// Flushes and releases the store's resources. Further operations fail with
    /// [`StoreError::Closed`](crate::StoreError::Closed). Closing twice is fine.
    fn close(&mut self) -> Result<()>;

    /// The store's gauges; a layer adds its own to those of the layer below. Default: none.
    fn stats(&self) -> StoreStats {
        StoreStats::default()
    }
}

/// An ordered key-value store of bytes.
///
/// The bytes-level key-value store contract that every store and every layer implements.
///
/// # Ordering contract
///
/// Every iterator returned by a [`KeyValueStore`] — whatever the implementation and however
/// many layers (caching, change-logging) sit on top — yields entries in ascending byte order
/// of the key (`memcmp`, shorter first on a tie), or descending for `reverse_range` and
/// `reverse_all`. Iteration is lazy: memory does not grow with the number of entries.
/// Entries deleted in an upper layer (e.g. a cached tombstone) are never yielded.
///
/// # Bounds
///
/// [`range`](KeyValueStore::range) takes two [`Bound`]s; Kafka Streams' `range(from, to)` is
/// `range(Included(from), Included(to))`. A range whose lower end lies above its upper end
/// yields nothing (it is not an error). `prefix_scan(p)` yields exactly the keys starting with
/// `p` (see [`KeyRange::prefix`](crate::KeyRange::prefix)); the empty prefix yields every key.
///
/// # Writes while iterating
///
/// Iterators borrow the store, so a store cannot be written while an iterator over it is
/// open: the borrow checker rejects it. Collect the keys first, or use `delete_range` /
/// `delete_prefix`.
pub trait KeyValueStore: StateStore {
    /// The value of `key`, if any.
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>>;

    /// Sets `key` to `value`.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()>;

    /// Sets `key` to `value` unless it has a value; returns the value it had.
    fn put_if_absent(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Bytes>> {
        match self.get(key)? {
            Some(existing) => Ok(Some(existing)),
            None => {
                self.put(key, value)?;
                Ok(None)
            }
        }
    }

    /// Sets every key to its value, in order.
    fn put_all(&mut self, entries: &[(Bytes, Bytes)]) -> Result<()> {
        entries.iter().try_for_each(|(k, v)| self.put(k, v))
    }

    /// Removes `key`; returns the value it had.
    fn delete(&mut self, key: &[u8]) -> Result<Option<Bytes>>;

    /// The entries with keys between `from` and `to`, ascending.
    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>>;

    /// The entries with keys between `from` and `to`, descending.
    fn reverse_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>>;

    /// The entries whose keys start with `prefix`, ascending.
    fn prefix_scan(&self, prefix: &[u8]) -> Result<KeyValueIter<'_>> {
        let r = crate::KeyRange::prefix(prefix);
        let (from, to) = r.as_bounds();
        self.range(from, to)
    }

    /// Every entry, ascending.
    fn all(&self) -> Result<KeyValueIter<'_>> {
        self.range(Bound::Unbounded, Bound::Unbounded)
    }

    /// Every entry, descending.
    fn reverse_all(&self) -> Result<KeyValueIter<'_>> {
        self.reverse_range(Bound::Unbounded, Bound::Unbounded)
    }

    /// An estimate of the number of entries (exact for in-memory stores).
    fn approximate_num_entries(&self) -> Result<u64>;

    /// Removes every key between `from` and `to`.
    fn delete_range(&mut self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<()>;

    /// Removes every key starting with `prefix`.
    fn delete_prefix(&mut self, prefix: &[u8]) -> Result<()> {
        let r = crate::KeyRange::prefix(prefix);
        let (from, to) = r.as_bounds();
        self.delete_range(from, to)
    }

    /// Applies changelog records read back from the changelog, in order, bypassing caching
    /// and logging (decorators pass the batch to their inner store). A record with no value
    /// deletes its key. Implementations apply a batch atomically where they can (RocksDB:
    /// one write batch, WAL off) and record the last record's offset as the checkpoint.
    fn restore_batch(&mut self, batch: &[ChangelogRecord]) -> Result<()>;

    /// The changelog offset of the last change the local data contains, if known: restore
    /// resumes after it. `None` means restore from the beginning.
    fn checkpoint(&self) -> Result<Option<i64>>;

    /// Records that the local data contains every change up to changelog offset `offset`
    /// (`None` clears it, e.g. before a restore from scratch). Persistent stores write it
    /// durably together with the data flushed so far.
    fn write_checkpoint(&mut self, offset: Option<i64>) -> Result<()>;

    /// The writes flushed since the last call are committed (under exactly-once: the Kafka
    /// transaction that logged them committed), and the changelog reaches `checkpoint`
    /// (`None`: unknown or no changelog). A store that holds writes apart until then (the
    /// [`TransactionalKeyValueStore`](crate::TransactionalKeyValueStore) layer) applies
    /// them now, together with the checkpoint; layers pass the call down. Default: the
    /// writes are applied already, so only a known checkpoint is written.
    fn commit_writes(&mut self, checkpoint: Option<i64>) -> Result<()> {
        match checkpoint {
            Some(c) => self.write_checkpoint(Some(c)),
            None => Ok(()),
        }
    }

    /// Has the write-back cache of this store's stack, if there is one, tell `listener`
    /// about each dirty entry it writes down (at a flush or an eviction), with the inner
    /// store's previous value when `old_values`; layers above the cache pass the call down.
    /// Returns whether a cache took it (`false`: writes go down at once, and nobody is
    /// told). See [`CachingKeyValueStore::set_flush_listener`](crate::CachingKeyValueStore::set_flush_listener).
    fn set_flush_listener(&mut self, listener: FlushListener, old_values: bool) -> bool {
        let _ = (listener, old_values);
        false
    }

    /// Writes the dirty entries of this store's cache down (its listener sees them) without
    /// flushing the layers below it; layers above the cache pass the call down. Default:
    /// nothing is cached.
    fn flush_cache(&mut self) -> Result<()> {
        Ok(())
    }
}

impl<S: StateStore + ?Sized> StateStore for Box<S> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn persistent(&self) -> bool {
        (**self).persistent()
    }
    fn is_open(&self) -> bool {
        (**self).is_open()
    }
    fn flush(&mut self) -> Result<()> {
        (**self).flush()
    }
    fn close(&mut self) -> Result<()> {
        (**self).close()
    }
    fn stats(&self) -> StoreStats {
        (**self).stats()
    }
}

impl<S: KeyValueStore + ?Sized> KeyValueStore for Box<S> {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        (**self).get(key)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        (**self).put(key, value)
    }
    fn put_if_absent(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Bytes>> {
        (**self).put_if_absent(key, value)
    }
    fn put_all(&mut self, entries: &[(Bytes, Bytes)]) -> Result<()> {
        (**self).put_all(entries)
    }
    fn delete(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        (**self).delete(key)
    }
    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        (**self).range(from, to)
    }
    fn reverse_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        (**self).reverse_range(from, to)
    }
    fn prefix_scan(&self, prefix: &[u8]) -> Result<KeyValueIter<'_>> {
        (**self).prefix_scan(prefix)
    }
    fn all(&self) -> Result<KeyValueIter<'_>> {
        (**self).all()
    }
    fn reverse_all(&self) -> Result<KeyValueIter<'_>> {
        (**self).reverse_all()
    }
    fn approximate_num_entries(&self) -> Result<u64> {
        (**self).approximate_num_entries()
    }
    fn delete_range(&mut self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<()> {
        (**self).delete_range(from, to)
    }
    fn delete_prefix(&mut self, prefix: &[u8]) -> Result<()> {
        (**self).delete_prefix(prefix)
    }
    fn restore_batch(&mut self, batch: &[ChangelogRecord]) -> Result<()> {
        (**self).restore_batch(batch)
    }
    fn checkpoint(&self) -> Result<Option<i64>> {
        (**self).checkpoint()
    }
    fn write_checkpoint(&mut self, offset: Option<i64>) -> Result<()> {
        (**self).write_checkpoint(offset)
    }
    fn commit_writes(&mut self, checkpoint: Option<i64>) -> Result<()> {
        (**self).commit_writes(checkpoint)
    }
    fn set_flush_listener(&mut self, listener: FlushListener, old_values: bool) -> bool {
        (**self).set_flush_listener(listener, old_values)
    }
    fn flush_cache(&mut self) -> Result<()> {
        (**self).flush_cache()
    }
}
