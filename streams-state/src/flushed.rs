//! What a store's write-back cache wrote down, kept for the processor that owns the store.
//!
//! Kafka Streams forwards a cached DSL aggregate when its cache writes it down (at a commit,
//! or when the thread's cache budget evicts it), not at every update: updates of one key
//! between two flushes reach downstream once. A processor gets that behaviour by asking its
//! typed handle for the store's [`FlushedEntries`] (`KvStore::forward_on_flush`,
//! `WindowStore::forward_on_flush`): the cache's flush listener appends each entry written
//! down, and the processor takes them after each of its writes (an eviction happens inside
//! a write of the same store) and when the task flushes (`Processor::flush` in
//! `streams-core`), decoding them with the same handle.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

use crate::store::FlushListener;

/// One entry a cache wrote down: its key, its new value (`None`: deleted) and, when asked
/// for, the value the store below held before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushedEntry {
    /// The stored key bytes.
    pub key: Bytes,
    /// The new value's bytes; `None` for a delete.
    pub new: Option<Bytes>,
    /// The previous value's bytes, if old values were asked for and there was one.
    pub old: Option<Bytes>,
}

/// The entries a store's cache wrote down and nobody has taken yet (shared with the
/// cache's flush listener: a clone is another handle on the same entries).
#[derive(Debug, Clone, Default)]
pub struct FlushedEntries {
    entries: Arc<Mutex<Vec<FlushedEntry>>>,
}

impl FlushedEntries {
    /// The entries written down since the last call, oldest first; none without a lock or
    /// an allocation when nothing was written down.
    pub fn take(&self) -> Vec<FlushedEntry> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.is_empty() {
            return Vec::new();
        }
        std::mem::take(&mut *entries)
    }

    /// The listener that appends to these entries.
    pub(crate) fn listener(&self) -> FlushListener {
        let entries = Arc::clone(&self.entries);
        Box::new(move |key, new, old| {
            entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(FlushedEntry {
                    key: Bytes::copy_from_slice(key),
                    new: new.map(Bytes::copy_from_slice),
                    old: old.map(Bytes::copy_from_slice),
                });
        })
    }
}

/// An entry a store's cache wrote down, decoded by its typed handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flushed<K, V> {
    /// The key (a [`Windowed`](crate::window::Windowed) key for a window store).
    pub key: K,
    /// The new value; `None` for a delete.
    pub new: Option<V>,
    /// The previous value, when old values were asked for and there was one.
    pub old: Option<V>,
}
