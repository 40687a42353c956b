//! The in-memory key-value store: a `BTreeMap` of byte strings.
//!
//! Not persistent: it starts empty on every open and is rebuilt from its changelog (when
//! logged). Its checkpoint lives only as long as the store.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use crate::KeyRange;
use crate::changelog::ChangelogRecord;
use crate::error::{Result, StoreError};
use crate::iter::KeyValueIter;
use crate::store::{KeyValueStore, StateStore};

/// An ordered in-memory store. Reads and iteration are zero-copy: values are reference
/// counted [`Bytes`].
#[derive(Debug)]
pub struct InMemoryKeyValueStore {
    name: String,
    map: BTreeMap<Bytes, Bytes>,
    checkpoint: Option<i64>,
    open: bool,
}

impl InMemoryKeyValueStore {
    /// A new, empty, open store.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            map: BTreeMap::new(),
            checkpoint: None,
            open: true,
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.open {
            Ok(())
        } else {
            Err(StoreError::Closed {
                store: self.name.clone(),
            })
        }
    }

    fn iter_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, reverse: bool) -> Result<KeyValueIter<'_>> {
        self.check_open()?;
        let range = KeyRange::new(from, to);
        if range.is_empty() {
            return Ok(KeyValueIter::empty());
        }
        // `BTreeMap<Bytes, _>::range` takes bounds of `[u8]` through `Bytes: Borrow<[u8]>`.
        let iter = self
            .map
            .range::<[u8], _>((from, to))
            .map(|(k, v)| Ok((k.clone(), v.clone())));
        Ok(if reverse {
            KeyValueIter::new(iter.rev())
        } else {
            KeyValueIter::new(iter)
        })
    }
}

impl StateStore for InMemoryKeyValueStore {
    fn name(&self) -> &str {
        &self.name
    }
    fn persistent(&self) -> bool {
        false
    }
    fn is_open(&self) -> bool {
        self.open
    }
    fn flush(&mut self) -> Result<()> {
        self.check_open()
    }
    fn close(&mut self) -> Result<()> {
        self.open = false;
        self.map.clear();
        Ok(())
    }
}

impl KeyValueStore for InMemoryKeyValueStore {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.check_open()?;
        Ok(self.map.get(key).cloned())
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_open()?;
        self.map
            .insert(Bytes::copy_from_slice(key), Bytes::copy_from_slice(value));
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        self.check_open()?;
        Ok(self.map.remove(key))
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        self.iter_range(from, to, false)
    }

    fn reverse_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        self.iter_range(from, to, true)
    }

    fn approximate_num_entries(&self) -> Result<u64> {
        self.check_open()?;
        Ok(self.map.len() as u64)
    }

    fn delete_range(&mut self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<()> {
        self.check_open()?;
        if KeyRange::new(from, to).is_empty() {
            return Ok(());
        }
        let keys: Vec<Bytes> = self
            .map
            .range::<[u8], _>((from, to))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            self.map.remove(&k);
        }
        Ok(())
    }

    fn restore_batch(&mut self, batch: &[ChangelogRecord]) -> Result<()> {
        self.check_open()?;
        for rec in batch {
            match &rec.value {
                Some(v) => self.map.insert(rec.key.clone(), v.clone()),
                None => self.map.remove(&rec.key),
            };
        }
        if let Some(last) = batch.last() {
            self.checkpoint = Some(last.offset);
        }
        Ok(())
    }

    fn checkpoint(&self) -> Result<Option<i64>> {
        Ok(self.checkpoint)
    }

    fn write_checkpoint(&mut self, offset: Option<i64>) -> Result<()> {
        self.checkpoint = offset;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(it: KeyValueIter<'_>) -> Vec<Vec<u8>> {
        it.map(|r| r.unwrap().0.to_vec()).collect()
    }

    #[test]
    fn ranges_are_inclusive_and_ordered() {
        let mut s = InMemoryKeyValueStore::new("s");
        for k in [b"c".as_slice(), b"a", b"b", b"d"] {
            s.put(k, b"v").unwrap();
        }
        let r = s.range(Bound::Included(b"b"), Bound::Included(b"c")).unwrap();
        assert_eq!(keys(r), vec![b"b".to_vec(), b"c".to_vec()]);
        let r = s.reverse_all().unwrap();
        assert_eq!(
            keys(r),
            vec![b"d".to_vec(), b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]
        );
        assert_eq!(
            keys(s.range(Bound::Included(b"c"), Bound::Included(b"a")).unwrap()).len(),
            0
        );
    }

    #[test]
    fn closed_store_errors() {
        let mut s = InMemoryKeyValueStore::new("s");
        s.close().unwrap();
        assert!(matches!(s.get(b"a"), Err(StoreError::Closed { .. })));
    }
}
