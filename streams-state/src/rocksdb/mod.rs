//! The RocksDB-backed persistent key-value store.
//!
//! # Layout
//!
//! Each store is one RocksDB instance in its own directory, `<state dir>/rocksdb/<store>`
//! (see [`RocksDbKeyValueStore::store_dir`]). The data lives in the default column family;
//! a second column family, `streams-metadata`, holds the changelog checkpoint, so the
//! checkpoint is written in the same write batch as the data it describes.
//!
//! # Invariants
//!
//! - **Bounded iteration.** Every iterator is a lazy `DBRawIterator` whose `ReadOptions` carry
//!   `iterate_lower_bound` and `iterate_upper_bound` translated from the requested range (a
//!   prefix `p` scans `[p, successor(p))`; a prefix with no successor — empty or all `0xFF` —
//!   is unbounded above). RocksDB therefore never steps outside the range, and in particular
//!   never walks through tombstones that lie past either end of it.
//! - **Atomic restore.** [`restore_batch`](crate::KeyValueStore::restore_batch) writes the
//!   records and the checkpoint (last offset, when due: see below) in one `WriteBatch`. The DB runs with
//!   `atomic_flush`, so the data and the metadata column families always reach disk together:
//!   after a crash the checkpoint is never ahead of the data.
//! - **Checkpoints go down every 10,000 offsets.** A checkpoint is written into the metadata
//!   column family when it moved by 10,000 changelog offsets from the last one written (as
//!   Kafka Streams writes its checkpoint file), and at close; in between it is held in memory.
//!   A dirty metadata memtable costs a one-key SST file at every flush, and writing it at
//!   every commit made 100 stores 5x slower. The one on disk may be older than the data,
//!   never ahead of it: restoration then replays a few more records, which is idempotent.
//!   A store writing through the write-ahead log (under exactly-once) writes every
//!   checkpoint with its data, so a restart after a crash restores nothing it committed.
//! - **The changelog is the source of truth.** As in Kafka Streams, writes skip RocksDB's
//!   write-ahead log by default; memtables reach disk when they fill, when the memory
//!   budget asks, and at close, and a store that lost unflushed writes in a crash
//!   restores them from its changelog, from the checkpoint on (replaying puts and deletes
//!   is idempotent). Under exactly-once
//!   the store sits below the transactional layer
//!   ([`TransactionalKeyValueStore`](crate::TransactionalKeyValueStore)), which writes
//!   only whole committed transactions with their checkpoint; those go through the
//!   write-ahead log ([`with_write_ahead_log`](RocksDbKeyValueStore::with_write_ahead_log)),
//!   so a process crash loses none of them.
//! - **One owner.** A store is used by one task on one thread. RocksDB's `LOCK` file keeps a
//!   second instance, in this process or another, from opening the same directory
//!   ([`StoreError::Locked`]).
//! - **Bounded memory.** All stores opened with the same [`RocksDbResources`] share one LRU
//!   block cache and one write-buffer manager whose memtable memory is charged to that cache.
//!   When the memtables together pass the budget, a store that wrote at least its fair share
//!   of it since its last flush flushes (module `budget`); RocksDB's own choice, the store
//!   being written, flushed memtables of a few kilobytes in storms.

mod budget;
mod iter;
mod options;
mod store;

pub use options::RocksDbResources;
pub use store::RocksDbKeyValueStore;

use std::path::Path;

use ::rocksdb::ErrorKind;

use crate::error::StoreError;

/// Maps a RocksDB error from an operation on an open store.
fn op_error(store: &str, source: ::rocksdb::Error) -> StoreError {
    StoreError::RocksDb {
        store: store.to_owned(),
        source,
    }
}

/// Maps a RocksDB error from opening a store: a held `LOCK` becomes [`StoreError::Locked`],
/// unreadable or inconsistent files become [`StoreError::Corrupt`].
fn open_error(store: &str, path: &Path, source: ::rocksdb::Error) -> StoreError {
    let message = source.to_string();
    let lower = message.to_ascii_lowercase();
    let is_lock = lower.contains("/lock:") || lower.contains("lock hold") || lower.contains("lock file");
    let about_metadata_files = ["current", "manifest", "options-", "descriptor"]
        .iter()
        .any(|f| lower.contains(f));
    match source.kind() {
        ErrorKind::IOError if is_lock => StoreError::Locked {
            store: store.to_owned(),
            path: path.to_owned(),
        },
        ErrorKind::Corruption => StoreError::Corrupt {
            store: store.to_owned(),
            path: path.to_owned(),
            message,
        },
        ErrorKind::IOError | ErrorKind::InvalidArgument | ErrorKind::NotFound if about_metadata_files => {
            StoreError::Corrupt {
                store: store.to_owned(),
                path: path.to_owned(),
                message,
            }
        }
        _ => StoreError::RocksDb {
            store: store.to_owned(),
            source,
        },
    }
}
