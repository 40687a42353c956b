//! The transactional layer: holds a persistent store's writes apart until the Kafka
//! transaction that logged them commits.
//!
//! Under exactly-once, a store's changelog records are part of the stream thread's Kafka
//! transaction, and the local store must never be ahead of the committed changelog: after a
//! crash, local data the aborted transaction wrote would otherwise stay, and be counted
//! twice when the input is processed again. Kafka Streams before KIP-892 clears the
//! checkpoint while running and wipes the store after every crash; this layer keeps it.
//!
//! Invariants:
//! - Writes (`put`, `delete`, range deletes) go to an ordered overlay of pending changes,
//!   never to the inner store; reads see the overlay over the inner store, so a task reads
//!   its own writes.
//! - A range delete is pending as the range itself, not as a delete per key: it drops the
//!   pending changes inside it and hides the inner store's keys inside it, so deleting a
//!   prefix of millions of keys holds one range, not millions of keys (the memory of a
//!   transaction is that of its writes, whatever the size of the ranges it deletes).
//!   Pending changes are always newer than the pending ranges they fall into.
//! - [`commit_writes`](crate::StateStore::commit_writes), called once the transaction has
//!   committed, applies the overlay and the new checkpoint to the inner store in one write
//!   (RocksDB: one write batch, so a memtable flush persists both or neither). The inner
//!   store therefore only ever holds committed state with a checkpoint that matches it;
//!   after a crash it restores just what follows that checkpoint.
//! - `flush` does not apply the overlay (it runs before the transaction commits); `close`
//!   and a drop discard it: what was not committed vanishes with the aborted transaction.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use crate::bounds::KeyRange;
use crate::changelog::ChangelogRecord;
use crate::error::Result;
use crate::iter::KeyValueIter;
use crate::layer::delegate_to_inner;
use crate::overlay::{count_over, overlay};
use crate::store::{KeyValueStore, StateStore};

/// A store whose writes wait for [`commit_writes`](crate::KeyValueStore::commit_writes); see
/// the module docs.
pub struct TransactionalKeyValueStore {
    inner: Box<dyn KeyValueStore>,
    /// Uncommitted changes: a value, or `None` for a delete.
    pending: BTreeMap<Bytes, Option<Bytes>>,
    /// Uncommitted range deletes, applied to the inner store before `pending`.
    deleted: Vec<KeyRange>,
}

impl std::fmt::Debug for TransactionalKeyValueStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionalKeyValueStore")
            .field("name", &self.inner.name())
            .field("pending", &self.pending.len())
            .field("deleted_ranges", &self.deleted.len())
            .finish_non_exhaustive()
    }
}

impl TransactionalKeyValueStore {
    /// Holds the writes to `inner` until they are committed.
    pub fn new(inner: Box<dyn KeyValueStore>) -> Self {
        Self {
            inner,
            pending: BTreeMap::new(),
            deleted: Vec::new(),
        }
    }

    /// How many changes (writes, and range deletes) wait for the commit.
    pub fn pending(&self) -> usize {
        self.pending.len() + self.deleted.len()
    }

    /// Whether a pending range delete covers `key` (a pending change of it is newer).
    fn deleted(&self, key: &[u8]) -> bool {
        self.deleted.iter().any(|r| r.contains(key))
    }

    fn overlaid<'a>(
        &'a self,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<KeyValueIter<'a>> {
        let mut inner = if reverse {
            self.inner.reverse_range(from, to)?
        } else {
            self.inner.range(from, to)?
        };
        if !self.deleted.is_empty() {
            inner = KeyValueIter::new(inner.filter(move |e| match e {
                Ok((k, _)) => !self.deleted(k),
                Err(_) => true,
            }));
        }
        let pending = self
            .pending
            .range::<[u8], _>((from, to))
            .map(|(k, v): (&'a Bytes, &'a Option<Bytes>)| (k, v.as_ref()));
        Ok(overlay(pending, inner, reverse))
    }
}

impl StateStore for TransactionalKeyValueStore {
    delegate_to_inner!(
        name,
        persistent,
        is_open,
        /// Flushes what is committed; the pending changes wait for `commit_writes`.
        flush,
        stats,
    );

    /// Discards the pending changes (they were never committed) and closes the inner store.
    fn close(&mut self) -> Result<()> {
        self.pending.clear();
        self.deleted.clear();
        self.inner.close()
    }
}

impl KeyValueStore for TransactionalKeyValueStore {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        match self.pending.get(key) {
            Some(v) => Ok(v.clone()),
            None if self.deleted(key) => Ok(None),
            None => self.inner.get(key),
        }
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.pending
            .insert(Bytes::copy_from_slice(key), Some(Bytes::copy_from_slice(value)));
        Ok(())
    }

    fn put_all(&mut self, entries: &[(Bytes, Bytes)]) -> Result<()> {
        for (k, v) in entries {
            self.pending.insert(k.clone(), Some(v.clone()));
        }
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        let old = self.get(key)?;
        self.pending.insert(Bytes::copy_from_slice(key), None);
        Ok(old)
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        self.overlaid(from, to, false)
    }

    fn reverse_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        self.overlaid(from, to, true)
    }

    /// The inner store's count with the pending changes applied; the keys of pending range
    /// deletes count until they are committed.
    fn approximate_num_entries(&self) -> Result<u64> {
        count_over(
            self.inner.as_ref(),
            self.pending.iter().map(|(k, v)| (k, v.as_ref())),
        )
    }

    /// A delete of every key in the range, pending as the range: the pending changes inside
    /// it are dropped, and the inner store's keys inside it are hidden until the commit
    /// deletes them.
    fn delete_range(&mut self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<()> {
        let range = KeyRange::new(from, to);
        if range.is_empty() {
            return Ok(());
        }
        let dropped: Vec<Bytes> = self
            .pending
            .range::<[u8], _>(range.as_bounds())
            .map(|(k, _)| k.clone())
            .collect();
        for k in dropped {
            self.pending.remove(&k);
        }
        self.deleted.push(range);
        Ok(())
    }

    delegate_to_inner!(
        /// Restoration writes committed changelog records: straight to the inner store.
        restore_batch,
        checkpoint,
        write_checkpoint,
    );

    fn commit_writes(&mut self, checkpoint: Option<i64>) -> Result<()> {
        // The ranges first: every pending change is newer than them. A crash before the
        // changes and the checkpoint below are written leaves the inner store at its last
        // checkpoint with some committed deletes applied, which restoring the changelog
        // from that checkpoint (it holds the deletes' tombstones) applies again.
        for range in std::mem::take(&mut self.deleted) {
            let (from, to) = range.as_bounds();
            self.inner.delete_range(from, to)?;
        }
        if self.pending.is_empty() {
            return match checkpoint {
                Some(c) => self.inner.write_checkpoint(Some(c)),
                None => Ok(()),
            };
        }
        let pending = std::mem::take(&mut self.pending);
        match checkpoint {
            // One batch: the changes and the checkpoint (the last record's offset).
            Some(c) => {
                let records: Vec<ChangelogRecord> = pending
                    .into_iter()
                    .map(|(key, value)| ChangelogRecord {
                        key,
                        value,
                        offset: c,
                    })
                    .collect();
                self.inner.restore_batch(&records)
            }
            // A store without a changelog has no checkpoint to keep in step.
            None => pending.into_iter().try_for_each(|(k, v)| match v {
                Some(v) => self.inner.put(&k, &v),
                None => self.inner.delete(&k).map(|_| ()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::{InMemoryKeyValueStore, RocksDbKeyValueStore, RocksDbResources};

    fn b(s: &[u8]) -> Bytes {
        Bytes::copy_from_slice(s)
    }

    fn all(s: &dyn KeyValueStore) -> Vec<(Bytes, Bytes)> {
        s.all().unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn writes_are_read_back_but_reach_the_inner_store_only_when_committed() {
        let mut s = TransactionalKeyValueStore::new(Box::new(InMemoryKeyValueStore::new("t")));
        s.put(b"a", b"1").unwrap();
        s.commit_writes(Some(10)).unwrap();
        s.put(b"b", b"2").unwrap();
        s.delete(b"a").unwrap();
        assert_eq!(s.get(b"a").unwrap(), None);
        assert_eq!(all(&s), vec![(b(b"b"), b(b"2"))]);
        assert_eq!(all(s.inner.as_ref()), vec![(b(b"a"), b(b"1"))]);
        s.commit_writes(Some(11)).unwrap();
        assert_eq!(all(s.inner.as_ref()), vec![(b(b"b"), b(b"2"))]);
        assert_eq!(s.pending(), 0);
    }

    /// Deleting a prefix of many keys holds the range, not a delete per key; the keys stay
    /// hidden until the commit deletes them from the inner store (RocksDB: `DeleteRange`).
    #[test]
    fn a_range_delete_is_pending_as_one_range() {
        let dir = tempfile::tempdir().unwrap();
        let inner =
            RocksDbKeyValueStore::open("t".to_owned(), dir.path(), &RocksDbResources::default()).unwrap();
        let mut s = TransactionalKeyValueStore::new(Box::new(inner));
        for i in 0..1000u32 {
            s.put(format!("p-{i:04}").as_bytes(), b"v").unwrap();
        }
        s.put(b"q", b"kept").unwrap();
        s.commit_writes(Some(1)).unwrap();
        s.put(b"p-0001", b"pending, then deleted").unwrap();
        s.delete_prefix(b"p-").unwrap();
        s.put(b"p-0002", b"after the delete").unwrap();
        assert_eq!(s.pending(), 2, "the range and the one later put");
        assert_eq!(s.get(b"p-0001").unwrap(), None);
        assert_eq!(s.get(b"p-0002").unwrap(), Some(b(b"after the delete")));
        assert_eq!(
            all(&s),
            vec![(b(b"p-0002"), b(b"after the delete")), (b(b"q"), b(b"kept"))]
        );
        assert_eq!(
            all(s.inner.as_ref()).len(),
            1001,
            "nothing reaches the inner store before the commit"
        );
        s.commit_writes(Some(2)).unwrap();
        assert_eq!(
            all(s.inner.as_ref()),
            vec![(b(b"p-0002"), b(b"after the delete")), (b(b"q"), b(b"kept"))]
        );
        assert_eq!(s.checkpoint().unwrap(), Some(2));
        assert_eq!(s.pending(), 0);
    }

    /// After a crash (a store reopened without its pending writes), the store holds exactly
    /// the last commit, and its checkpoint says so.
    #[test]
    fn a_reopened_rocksdb_store_holds_the_last_commit_and_its_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            TransactionalKeyValueStore::new(Box::new(
                RocksDbKeyValueStore::open("t".to_owned(), dir.path(), &RocksDbResources::default()).unwrap(),
            ))
        };
        let mut s = open();
        s.put(b"k1", b"committed").unwrap();
        s.commit_writes(Some(41)).unwrap();
        s.put(b"k1", b"aborted").unwrap();
        s.put(b"k2", b"aborted").unwrap();
        s.flush().unwrap();
        s.close().unwrap();
        let s = open();
        assert_eq!(s.get(b"k1").unwrap(), Some(b(b"committed")));
        assert_eq!(s.get(b"k2").unwrap(), None);
        assert_eq!(s.checkpoint().unwrap(), Some(41));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u8, u8),
        Delete(u8),
        DeleteRange(u8, u8),
        Commit,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..16, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
            2 => (0u8..16).prop_map(Op::Delete),
            1 => (0u8..16, 0u8..16).prop_map(|(a, z)| Op::DeleteRange(a.min(z), a.max(z))),
            1 => Just(Op::Commit),
        ]
    }

    proptest! {
        /// Against two `BTreeMap` models: what the store reads is the model with every
        /// write; what its inner store holds is the model as of the last commit.
        #[test]
        fn reads_follow_every_write_and_the_inner_store_the_commits(ops in proptest::collection::vec(op(), 1..80)) {
            let mut s = TransactionalKeyValueStore::new(Box::new(InMemoryKeyValueStore::new("t")));
            let mut live: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let mut committed = live.clone();
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        s.put(&[k], &[v]).unwrap();
                        live.insert(vec![k], vec![v]);
                    }
                    Op::Delete(k) => {
                        let old = s.delete(&[k]).unwrap();
                        prop_assert_eq!(old.map(|v| v.to_vec()), live.remove(&vec![k]));
                    }
                    Op::DeleteRange(a, z) => {
                        s.delete_range(Bound::Included(&[a][..]), Bound::Excluded(&[z][..])).unwrap();
                        live.retain(|k, _| !(k.as_slice() >= &[a][..] && k.as_slice() < &[z][..]));
                    }
                    Op::Commit => {
                        s.commit_writes(Some(1)).unwrap();
                        committed = live.clone();
                    }
                }
                let read: Vec<(Vec<u8>, Vec<u8>)> = all(&s).into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
                prop_assert_eq!(read, live.clone().into_iter().collect::<Vec<_>>());
                let reversed: Vec<Vec<u8>> = s.reverse_all().unwrap().map(|e| e.unwrap().0.to_vec()).collect();
                prop_assert_eq!(reversed, live.keys().rev().cloned().collect::<Vec<_>>());
                let inner: Vec<(Vec<u8>, Vec<u8>)> = all(s.inner.as_ref()).into_iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
                prop_assert_eq!(inner, committed.clone().into_iter().collect::<Vec<_>>());
                for k in 0u8..16 {
                    prop_assert_eq!(s.get(&[k]).unwrap().map(|v| v.to_vec()), live.get(&vec![k]).cloned());
                }
            }
        }
    }
}
