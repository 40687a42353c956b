//! The change-logging layer: sends every change of the inner store to a [`ChangelogSink`].
//!
//! The contract is documented on [`ChangeLoggingKeyValueStore`].

use std::ops::Bound;

use bytes::Bytes;

use crate::changelog::{ChangelogError, ChangelogSink};
use crate::error::{Result, StoreError};
use crate::iter::KeyValueIter;
use crate::layer::delegate_to_inner;
use crate::store::{KeyValueStore, StateStore};

/// A store that logs every change of its inner store.
///
/// The change-logging layer: sends every change of the inner store to a [`ChangelogSink`].
///
/// Each write goes to the inner store first and to the sink once the inner write
/// succeeded: `put` and `put_all` log each value, `put_if_absent` logs only when it wrote,
/// and `delete` logs a tombstone for every delete (whether or not the key existed, as Kafka
/// Streams does). `delete_range`/`delete_prefix` log one tombstone per key present in the
/// range — streamed while iterating the range's keys, before the range is deleted below, so
/// memory does not grow with the range — then delegate the range delete.
///
/// Reads pass through. `restore_batch` applies changelog records without logging them
/// again. `flush` flushes the inner store, then the sink.
pub struct ChangeLoggingKeyValueStore {
    inner: Box<dyn KeyValueStore>,
    sink: Box<dyn ChangelogSink>,
}

impl std::fmt::Debug for ChangeLoggingKeyValueStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeLoggingKeyValueStore")
            .field("name", &self.inner.name())
            .finish_non_exhaustive()
    }
}

impl ChangeLoggingKeyValueStore {
    /// Logs the changes of `inner` to `sink`.
    pub fn new(inner: Box<dyn KeyValueStore>, sink: Box<dyn ChangelogSink>) -> Self {
        Self { inner, sink }
    }

    fn log(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let store = self.inner.name();
        self.sink.send(key, value).map_err(|e| changelog_error(store, e))
    }
}

fn changelog_error(store: &str, e: ChangelogError) -> StoreError {
    StoreError::Changelog {
        store: store.to_owned(),
        message: e.message,
    }
}

/// Sends a tombstone to `sink` for every key `keys` yields.
fn tombstones(store: &str, keys: KeyValueIter<'_>, sink: &mut dyn ChangelogSink) -> Result<()> {
    for entry in keys {
        let (key, _) = entry?;
        sink.send(&key, None).map_err(|e| changelog_error(store, e))?;
    }
    Ok(())
}

impl StateStore for ChangeLoggingKeyValueStore {
    delegate_to_inner!(name, persistent, is_open, stats);

    fn flush(&mut self) -> Result<()> {
        self.inner.flush()?;
        let store = self.inner.name();
        self.sink.flush().map_err(|e| changelog_error(store, e))
    }
    fn close(&mut self) -> Result<()> {
        if !self.inner.is_open() {
            return Ok(());
        }
        self.flush()?;
        self.inner.close()
    }
}

impl KeyValueStore for ChangeLoggingKeyValueStore {
    delegate_to_inner!(
        get,
        range,
        reverse_range,
        prefix_scan,
        all,
        reverse_all,
        approximate_num_entries,
        restore_batch,
        checkpoint,
        write_checkpoint,
        commit_writes,
    );

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.inner.put(key, value)?;
        self.log(key, Some(value))
    }

    fn put_if_absent(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Bytes>> {
        let existing = self.inner.put_if_absent(key, value)?;
        if existing.is_none() {
            self.log(key, Some(value))?;
        }
        Ok(existing)
    }

    fn put_all(&mut self, entries: &[(Bytes, Bytes)]) -> Result<()> {
        self.inner.put_all(entries)?;
        entries.iter().try_for_each(|(k, v)| self.log(k, Some(v)))
    }

    fn delete(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        let old = self.inner.delete(key)?;
        self.log(key, None)?;
        Ok(old)
    }

    fn delete_range(&mut self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<()> {
        tombstones(self.inner.name(), self.inner.range(from, to)?, self.sink.as_mut())?;
        self.inner.delete_range(from, to)
    }

    fn delete_prefix(&mut self, prefix: &[u8]) -> Result<()> {
        tombstones(
            self.inner.name(),
            self.inner.prefix_scan(prefix)?,
            self.sink.as_mut(),
        )?;
        self.inner.delete_prefix(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChangelogRecord, InMemoryKeyValueStore, VecChangelog};

    struct FailingSink;
    impl ChangelogSink for FailingSink {
        fn send(&mut self, _: &[u8], _: Option<&[u8]>) -> Result<(), ChangelogError> {
            Err(ChangelogError::new("broker down"))
        }
    }

    fn logged() -> (ChangeLoggingKeyValueStore, VecChangelog) {
        let log = VecChangelog::default();
        let store =
            ChangeLoggingKeyValueStore::new(Box::new(InMemoryKeyValueStore::new("l")), Box::new(log.clone()));
        (store, log)
    }

    fn change(k: &[u8], v: Option<&[u8]>) -> (Bytes, Option<Bytes>) {
        (Bytes::copy_from_slice(k), v.map(Bytes::copy_from_slice))
    }

    #[test]
    fn logs_writes_and_tombstones() {
        let (mut s, log) = logged();
        s.put(b"a", b"1").unwrap();
        assert_eq!(s.put_if_absent(b"a", b"2").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(s.put_if_absent(b"b", b"2").unwrap(), None);
        s.delete(b"zz").unwrap();
        s.put_all(&[(Bytes::from_static(b"ab"), Bytes::from_static(b"3"))])
            .unwrap();
        s.delete_prefix(b"a").unwrap();
        s.restore_batch(&[ChangelogRecord {
            key: Bytes::from_static(b"r"),
            value: None,
            offset: 9,
        }])
        .unwrap();
        let want = vec![
            change(b"a", Some(b"1")),
            change(b"b", Some(b"2")),
            change(b"zz", None),
            change(b"ab", Some(b"3")),
            change(b"a", None),
            change(b"ab", None),
        ];
        assert_eq!(log.changes(), want);
    }

    #[test]
    fn sink_failure_names_the_store() {
        let mut s =
            ChangeLoggingKeyValueStore::new(Box::new(InMemoryKeyValueStore::new("l")), Box::new(FailingSink));
        let err = s.put(b"a", b"1").unwrap_err();
        assert!(
            matches!(&err, StoreError::Changelog { store, .. } if store == "l"),
            "{err}"
        );
    }
}
