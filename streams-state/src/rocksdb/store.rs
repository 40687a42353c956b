//! [`RocksDbKeyValueStore`]: the [`KeyValueStore`] contract on one RocksDB instance.

use std::fmt;
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use ::rocksdb::{
    ColumnFamily, ColumnFamilyDescriptor, DB, DEFAULT_COLUMN_FAMILY_NAME, FlushOptions, ReadOptions,
    WriteBatch, WriteOptions,
};
use bytes::Bytes;

use super::budget::MemtableShare;
use super::iter::{RocksIter, bounded_read_options, lower_bound, successor, upper_bound};
use super::{RocksDbResources, op_error, open_error};
use crate::changelog::ChangelogRecord;
use crate::error::{Result, StoreError};
use crate::iter::KeyValueIter;
use crate::store::{KeyValueStore, StateStore, StoreStats};
use crate::{KeyRange, prefix_successor};

/// The column family holding the store's metadata (the checkpoint).
const METADATA_CF: &str = "streams-metadata";
/// The key of the checkpoint in [`METADATA_CF`]; the value is an `i64`, big-endian.
const CHECKPOINT_KEY: &[u8] = b"checkpoint";
/// How far (in changelog offsets) a checkpoint moves before it is written into RocksDB
/// again: Kafka Streams' `OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT`. See [`Checkpoints`].
const CHECKPOINT_OFFSET_DELTA: i64 = 10_000;

/// The store's checkpoint: the latest one (what [`checkpoint`](KeyValueStore::checkpoint)
/// answers) and the one last written into [`METADATA_CF`].
///
/// A write into the metadata column family leaves its memtable dirty, and every atomic
/// flush of a dirty metadata memtable writes a one-key SST file beside the data's (and
/// later compacts them). Written at every commit, that doubled the files created and
/// synced: 100 stores written through the runtime ran 5x slower (docs/benchmarks.md,
/// "Bounded memory: 100 RocksDB stores"). So, as Kafka Streams writes its checkpoint file
/// only when the offsets moved by 10,000, a checkpoint goes down when it moved by
/// [`CHECKPOINT_OFFSET_DELTA`] from the written one (or backwards, or none was written),
/// and at close. The written checkpoint is then older than the data, never ahead of it:
/// after a crash, restoration replays a few more changelog records, which is idempotent.
/// Writes without the WAL lose the memtables in a crash anyway, so this costs little.
///
/// A store writing through the write-ahead log (the exactly-once layer's) writes every
/// checkpoint with its data: the log keeps both through a crash, so a restart restores
/// only what the changelog has beyond the last commit.
#[derive(Debug, Clone, Copy, Default)]
struct Checkpoints {
    latest: Option<i64>,
    written: Option<i64>,
    /// Every checkpoint goes down at once (writes go through the write-ahead log).
    exact: bool,
}

impl Checkpoints {
    /// Whether `offset` is to be written now rather than held.
    fn due(&self, offset: i64) -> bool {
        self.exact
            || self
                .written
                .is_none_or(|w| offset < w || offset - w >= CHECKPOINT_OFFSET_DELTA)
    }
}

/// A persistent, ordered key-value store on RocksDB: one RocksDB instance per store, in
/// `<state dir>/rocksdb/<store>` ([`store_dir`](Self::store_dir)).
///
/// - Keys are ordered by RocksDB's bytewise comparator, exactly the byte order of the
///   [ordering contract](crate::KeyValueStore); iterators are lazy and carry RocksDB
///   `iterate_lower_bound`/`iterate_upper_bound`, so they never walk tombstones outside their
///   range. Values are copied out into [`Bytes`] as they are read.
/// - `delete_range`/`delete_prefix` are one RocksDB range delete.
/// - Writes skip the write-ahead log, as in Kafka Streams: the changelog is the source of
///   truth. The checkpoint is a key of its own column family, written after the data it
///   covers; every memtable flush (when memtables fill, when the memory budget asks, and
///   at close) writes both column families up to one point of the write sequence
///   (`atomic_flush`), so whatever is on disk after a crash is a prefix of the writes in which the checkpoint is never ahead of
///   the data. [`flush`](crate::StateStore::flush) and
///   [`write_checkpoint`](crate::KeyValueStore::write_checkpoint) therefore do not force a
///   memtable flush: forcing one at every commit (100 ms under exactly-once) wrote a tiny
///   SST file per commit, and a growing store spent its time compacting them and probing
///   their filters (see docs/benchmarks.md, "Stores that grow"). `restore_batch` writes
///   records and checkpoint in one atomic batch.
/// - A second instance on the same directory fails with [`StoreError::Locked`]; unreadable
///   files give [`StoreError::Corrupt`].
pub struct RocksDbKeyValueStore {
    name: String,
    path: PathBuf,
    db: Option<DB>,
    /// Data writes skip the WAL: durability comes from atomic flushes + checkpoint + changelog.
    write_opts: WriteOptions,
    checkpoints: Checkpoints,
    /// The store's part of the shared memtable budget, held while the store is open.
    share: Option<MemtableShare>,
}

impl RocksDbKeyValueStore {
    /// The directory of store `name` under a task's state directory: `<dir>/rocksdb/<name>`.
    pub fn store_dir(dir: &Path, name: &str) -> PathBuf {
        dir.join("rocksdb").join(name)
    }

    /// Opens (creating if needed) the store `name` in [`store_dir(dir, name)`](Self::store_dir),
    /// with the options and shared memory of `resources`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Locked`] when another instance holds the directory,
    /// [`StoreError::Corrupt`] when its files cannot be read as a store,
    /// [`StoreError::Io`] when the directory cannot be created or the name is not a plain
    /// file name (empty, `.`/`..`, or containing a path separator).
    pub fn open(name: impl Into<String>, dir: &Path, resources: &RocksDbResources) -> Result<Self> {
        let name = name.into();
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
            let source = io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid store name `{name}`"),
            );
            return Err(StoreError::Io {
                store: name,
                path: dir.to_owned(),
                source,
            });
        }
        let path = Self::store_dir(dir, &name);
        std::fs::create_dir_all(&path).map_err(|source| StoreError::Io {
            store: name.clone(),
            path: path.clone(),
            source,
        })?;
        let opts = resources.store_options(&name);
        let families = [
            ColumnFamilyDescriptor::new(DEFAULT_COLUMN_FAMILY_NAME, opts.clone()),
            ColumnFamilyDescriptor::new(METADATA_CF, resources.metadata_options()),
        ];
        let db = DB::open_cf_descriptors(&opts, &path, families).map_err(|e| open_error(&name, &path, e))?;
        let mut write_opts = WriteOptions::default();
        write_opts.disable_wal(true);
        let mut store = Self {
            name,
            path,
            db: Some(db),
            write_opts,
            checkpoints: Checkpoints::default(),
            share: Some(MemtableShare::new(resources)),
        };
        // Fail at open, not at first use, when the metadata is unreadable.
        let on_disk = store.read_checkpoint()?;
        store.checkpoints = Checkpoints {
            latest: on_disk,
            written: on_disk,
            exact: false,
        };
        Ok(store)
    }

    /// Writes through RocksDB's write-ahead log (unbuffered, not synced: it survives the
    /// process, not the machine), so a crash loses no write that returned. Off by default:
    /// the changelog restores what a crash lost since the last memtable flush. The
    /// exactly-once layer turns it on, its writes being whole committed transactions
    /// together with their checkpoint, so a restart restores only what the changelog has
    /// beyond that.
    pub fn with_write_ahead_log(mut self, on: bool) -> Self {
        self.write_opts.disable_wal(!on);
        self.checkpoints.exact = on;
        self
    }

    /// The directory holding the store's files.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn db(&self) -> Result<&DB> {
        self.db.as_ref().ok_or_else(|| StoreError::Closed {
            store: self.name.clone(),
        })
    }

    fn family<'d>(&self, db: &'d DB, family: &str) -> Result<&'d ColumnFamily> {
        db.cf_handle(family).ok_or_else(|| StoreError::Corrupt {
            store: self.name.clone(),
            path: self.path.clone(),
            message: format!("column family `{family}` is missing"),
        })
    }

    /// Maps a RocksDB error of an operation: a corrupt block (a checksum mismatch) is
    /// [`StoreError::Corrupt`], which the runtime answers by rebuilding the store.
    fn err(&self) -> impl Fn(::rocksdb::Error) -> StoreError + '_ {
        |e| match e.kind() {
            ::rocksdb::ErrorKind::Corruption => StoreError::Corrupt {
                store: self.name.clone(),
                path: self.path.clone(),
                message: e.to_string(),
            },
            _ => op_error(&self.name, e),
        }
    }

    fn iter_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, reverse: bool) -> Result<KeyValueIter<'_>> {
        self.iter_bounds(lower_bound(from), upper_bound(to), reverse)
    }

    /// A lazy iterator over `[lower, upper)`, bounds handed to RocksDB.
    fn iter_bounds(
        &self,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        reverse: bool,
    ) -> Result<KeyValueIter<'_>> {
        let db = self.db()?;
        let Some(opts) = bounded_read_options(lower, upper) else {
            return Ok(KeyValueIter::empty());
        };
        Ok(KeyValueIter::new(RocksIter::new(
            db.raw_iterator_opt(opts),
            &self.name,
            reverse,
        )))
    }

    /// The largest key at or above `lower`, if any.
    fn last_key_from(&self, db: &DB, lower: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut opts = ReadOptions::default();
        opts.set_iterate_lower_bound(lower);
        let mut raw = db.raw_iterator_opt(opts);
        raw.seek_to_last();
        if let Some(key) = raw.key() {
            return Ok(Some(key.to_vec()));
        }
        raw.status().map_err(self.err())?;
        Ok(None)
    }

    /// The checkpoint in the metadata column family.
    fn read_checkpoint(&self) -> Result<Option<i64>> {
        let db = self.db()?;
        let meta = self.family(db, METADATA_CF)?;
        let Some(raw) = db.get_pinned_cf(meta, CHECKPOINT_KEY).map_err(self.err())? else {
            return Ok(None);
        };
        let bytes: [u8; 8] = raw.as_ref().try_into().map_err(|_| StoreError::Corrupt {
            store: self.name.clone(),
            path: self.path.clone(),
            message: format!("checkpoint has {} bytes, expected 8", raw.len()),
        })?;
        Ok(Some(i64::from_be_bytes(bytes)))
    }

    /// Writes the latest checkpoint into the metadata column family if it is not there.
    fn write_down_checkpoint(&mut self) -> Result<()> {
        let Checkpoints { latest, written, .. } = self.checkpoints;
        if latest == written {
            return Ok(());
        }
        let db = self.db()?;
        let meta = self.family(db, METADATA_CF)?;
        match latest {
            Some(offset) => db.put_cf_opt(meta, CHECKPOINT_KEY, offset.to_be_bytes(), &self.write_opts),
            None => db.delete_cf_opt(meta, CHECKPOINT_KEY, &self.write_opts),
        }
        .map_err(self.err())?;
        self.checkpoints.written = latest;
        Ok(())
    }

    /// Flushes the memtables of both column families, atomically, waiting for the flush.
    fn flush_all(&self, db: &DB) -> Result<()> {
        self.flush_families(db, true)
    }

    /// Flushes the memtables of both column families atomically; `wait` waits until the
    /// files are written, else only until the memtables are switched and the flush queued.
    fn flush_families(&self, db: &DB, wait: bool) -> Result<()> {
        let data = self.family(db, DEFAULT_COLUMN_FAMILY_NAME)?;
        let meta = self.family(db, METADATA_CF)?;
        let mut opts = FlushOptions::default();
        opts.set_wait(wait);
        db.flush_cfs_opt(&[data, meta], &opts).map_err(self.err())
    }

    /// Counts `bytes` just written against the shared memtable budget, and flushes the
    /// memtables without waiting when the budget asks this store to (see the `budget`
    /// module).
    fn wrote(&mut self, bytes: usize) -> Result<()> {
        let due = self.share.as_mut().is_some_and(|share| share.wrote(bytes));
        if due {
            self.flush_families(self.db()?, false)?;
        }
        Ok(())
    }
}

impl StateStore for RocksDbKeyValueStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn persistent(&self) -> bool {
        true
    }

    fn is_open(&self) -> bool {
        self.db.is_some()
    }

    /// Nothing to write down: writes are in RocksDB once `put` returns, and durability
    /// comes from the atomic memtable flushes (see the type's docs); fails on a closed store.
    fn flush(&mut self) -> Result<()> {
        self.db().map(|_| ())
    }

    fn close(&mut self) -> Result<()> {
        if self.db.is_none() {
            return Ok(());
        }
        let flushed = self
            .write_down_checkpoint()
            .and_then(|()| self.db().and_then(|db| self.flush_all(db)));
        // Release the DB (and its LOCK) even when the flush failed.
        self.db = None;
        self.share = None;
        flushed
    }

    fn stats(&self) -> StoreStats {
        let Some(db) = &self.db else {
            return StoreStats::default();
        };
        let int = |name: &str| db.property_int_value(name).ok().flatten();
        StoreStats {
            estimated_keys: int("rocksdb.estimate-num-keys"),
            memtable_bytes: int("rocksdb.cur-size-all-mem-tables"),
            block_cache_usage_bytes: int("rocksdb.block-cache-usage"),
            pending_compaction_bytes: int("rocksdb.estimate-pending-compaction-bytes"),
            ..StoreStats::default()
        }
    }
}

impl KeyValueStore for RocksDbKeyValueStore {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let value = self.db()?.get_pinned(key).map_err(self.err())?;
        Ok(value.map(|v| Bytes::copy_from_slice(&v)))
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db()?
            .put_opt(key, value, &self.write_opts)
            .map_err(self.err())?;
        self.wrote(key.len() + value.len())
    }

    fn put_all(&mut self, entries: &[(Bytes, Bytes)]) -> Result<()> {
        let db = self.db()?;
        let mut batch = WriteBatch::default();
        for (key, value) in entries {
            batch.put(key, value);
        }
        let bytes = batch.size_in_bytes();
        db.write_opt(batch, &self.write_opts).map_err(self.err())?;
        self.wrote(bytes)
    }

    fn delete(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        let old = self.get(key)?;
        if old.is_some() {
            self.db()?.delete_opt(key, &self.write_opts).map_err(self.err())?;
            self.wrote(key.len())?;
        }
        Ok(old)
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        self.iter_range(from, to, false)
    }

    fn reverse_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        self.iter_range(from, to, true)
    }

    /// Scans `[prefix, prefix_successor(prefix))`; unbounded above when the prefix has no
    /// successor (empty or all `0xFF`).
    fn prefix_scan(&self, prefix: &[u8]) -> Result<KeyValueIter<'_>> {
        let lower = (!prefix.is_empty()).then(|| prefix.to_vec());
        self.iter_bounds(lower, prefix_successor(prefix), false)
    }

    /// RocksDB's `rocksdb.estimate-num-keys`: approximate, and not reduced by range deletes
    /// until compaction.
    fn approximate_num_entries(&self) -> Result<u64> {
        let db = self.db()?;
        Ok(db
            .property_int_value(::rocksdb::properties::ESTIMATE_NUM_KEYS)
            .map_err(self.err())?
            .unwrap_or(0))
    }

    /// One RocksDB range tombstone over `[lower, upper)`; an unbounded upper end becomes the
    /// successor of the largest key present.
    fn delete_range(&mut self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<()> {
        let db = self.db()?;
        if KeyRange::new(from, to).is_empty() {
            return Ok(());
        }
        // The empty key is the smallest key.
        let lower = lower_bound(from).unwrap_or_default();
        let upper = match upper_bound(to) {
            Some(upper) => upper,
            None => match self.last_key_from(db, &lower)? {
                Some(last) => successor(&last),
                None => return Ok(()),
            },
        };
        if lower >= upper {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        batch.delete_range(&lower, &upper);
        let bytes = batch.size_in_bytes();
        db.write_opt(batch, &self.write_opts).map_err(self.err())?;
        self.wrote(bytes)
    }

    /// One write batch: the records, then, when it is due (see [`Checkpoints`]), the last
    /// offset as the checkpoint.
    fn restore_batch(&mut self, records: &[ChangelogRecord]) -> Result<()> {
        let db = self.db()?;
        let Some(last) = records.last() else { return Ok(()) };
        let meta = self.family(db, METADATA_CF)?;
        let mut batch = WriteBatch::default();
        for record in records {
            match &record.value {
                Some(value) => batch.put(&record.key, value),
                None => batch.delete(&record.key),
            }
        }
        let due = self.checkpoints.due(last.offset);
        if due {
            batch.put_cf(meta, CHECKPOINT_KEY, last.offset.to_be_bytes());
        }
        let bytes = batch.size_in_bytes();
        db.write_opt(batch, &self.write_opts).map_err(self.err())?;
        self.checkpoints.latest = Some(last.offset);
        if due {
            self.checkpoints.written = Some(last.offset);
        }
        self.wrote(bytes)
    }

    /// The latest checkpoint, written down or still held (see [`Checkpoints`]).
    fn checkpoint(&self) -> Result<Option<i64>> {
        self.db()?;
        Ok(self.checkpoints.latest)
    }

    /// Records the checkpoint; it is written after the data it covers when due (see
    /// [`Checkpoints`]; clearing it is always written at once) and reaches disk with that
    /// data, at the next atomic memtable flush (see the type's docs).
    fn write_checkpoint(&mut self, offset: Option<i64>) -> Result<()> {
        self.db()?;
        self.checkpoints.latest = offset;
        match offset {
            Some(offset) if !self.checkpoints.due(offset) => Ok(()),
            _ => self.write_down_checkpoint(),
        }
    }
}

impl Drop for RocksDbKeyValueStore {
    /// A store dropped unclosed still writes its latest checkpoint down (RocksDB flushes
    /// its memtables when the instance closes); a failure leaves the older one, which is
    /// never ahead of the data.
    fn drop(&mut self) {
        if self.db.is_some() {
            let _ = self.write_down_checkpoint();
        }
    }
}

impl fmt::Debug for RocksDbKeyValueStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RocksDbKeyValueStore")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("open", &self.db.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(offset: i64) -> ChangelogRecord {
        ChangelogRecord {
            key: Bytes::from(offset.to_be_bytes().to_vec()),
            value: Some(Bytes::from_static(b"v")),
            offset,
        }
    }

    #[test]
    fn checkpoints_go_down_when_moved_far_enough_and_at_close() {
        let dir = tempfile::tempdir().unwrap();
        let resources = RocksDbResources::shared();
        let mut s = RocksDbKeyValueStore::open("s", dir.path(), &resources).unwrap();
        // The first one goes down at once; nearby ones are held, answered from memory.
        s.write_checkpoint(Some(5)).unwrap();
        assert_eq!(s.read_checkpoint().unwrap(), Some(5));
        s.write_checkpoint(Some(3 + CHECKPOINT_OFFSET_DELTA)).unwrap();
        s.restore_batch(&[record(4 + CHECKPOINT_OFFSET_DELTA)]).unwrap();
        assert_eq!(s.checkpoint().unwrap(), Some(4 + CHECKPOINT_OFFSET_DELTA));
        assert_eq!(s.read_checkpoint().unwrap(), Some(5));
        // Far enough, by a batch or a write; backwards and cleared go down at once.
        s.restore_batch(&[record(5 + CHECKPOINT_OFFSET_DELTA)]).unwrap();
        assert_eq!(s.read_checkpoint().unwrap(), Some(5 + CHECKPOINT_OFFSET_DELTA));
        s.write_checkpoint(Some(7 + 2 * CHECKPOINT_OFFSET_DELTA)).unwrap();
        assert_eq!(
            s.read_checkpoint().unwrap(),
            Some(7 + 2 * CHECKPOINT_OFFSET_DELTA)
        );
        s.write_checkpoint(Some(3)).unwrap();
        assert_eq!(s.read_checkpoint().unwrap(), Some(3));
        s.write_checkpoint(Some(4)).unwrap();
        s.write_checkpoint(None).unwrap();
        assert_eq!(
            (s.checkpoint().unwrap(), s.read_checkpoint().unwrap()),
            (None, None)
        );
        // A held one goes down at close, and at drop.
        s.write_checkpoint(Some(100)).unwrap();
        s.write_checkpoint(Some(200)).unwrap();
        assert_eq!(s.read_checkpoint().unwrap(), Some(100));
        s.close().unwrap();
        let mut s = RocksDbKeyValueStore::open("s", dir.path(), &resources).unwrap();
        assert_eq!(s.checkpoint().unwrap(), Some(200));
        s.write_checkpoint(Some(300)).unwrap();
        drop(s);
        let s = RocksDbKeyValueStore::open("s", dir.path(), &resources).unwrap();
        assert_eq!(s.checkpoint().unwrap(), Some(300));
        // Through the write-ahead log, each one goes down with the data.
        let mut s = s.with_write_ahead_log(true);
        s.write_checkpoint(Some(301)).unwrap();
        assert_eq!(s.read_checkpoint().unwrap(), Some(301));
        s.restore_batch(&[record(302)]).unwrap();
        assert_eq!(s.read_checkpoint().unwrap(), Some(302));
    }
}
