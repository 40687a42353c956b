//! The typed facade processors use: keys and values as Rust types, serialized once here,
//! over a shared bytes store.
//!
//! The contract is documented on [`KvStore`].

use std::cell::{Ref, RefCell};
use std::ops::Bound;
use std::rc::Rc;

use bytes::Bytes;

use crate::KeyRange;
use crate::error::{Result, SerdeError, StoreError};
use crate::flushed::{Flushed, FlushedEntries, FlushedEntry};
use crate::handle::{StoreHandle, debug_store_name};
use crate::iter::KeyValueIter;
use crate::serde::{OrderedSerde, Serde};
use crate::store::KeyValueStore;

pub use crate::store::SharedKeyValueStore;

/// Serialization buffers kept between calls larger than this are released.
const MAX_KEPT_BUFFER: usize = 64 * 1024;

/// A typed handle to a key-value store.
///
/// The typed facade processors use: keys and values as Rust types, serialized once here,
/// over a shared bytes store.
///
/// # Borrow rules
///
/// A [`KvStore`] is a cheap handle around a [`SharedKeyValueStore`]
/// (`Rc<RefCell<Box<dyn KeyValueStore>>>`). Each method borrows the store only for the
/// duration of the call. Iteration goes through a reader ([`KvStore::read`]) that holds a
/// shared borrow for as long as it lives:
///
/// - reads while reading are fine: any number of readers and handle reads at once;
/// - a write (`put`, `delete`, `flush`, ...) while a reader is alive returns
///   [`StoreError::Borrowed`] — it never panics and never changes the store. Collect what
///   you need, drop the reader, then write; or use `delete_range`/`delete_prefix`.
///
/// # Range queries need ordered keys
///
/// `range`, `reverse_range`, `prefix_scan`, `delete_range` and `delete_prefix` exist only
/// when the key serde is an [`OrderedSerde`], whose byte order is the key's logical order:
///
/// ```
/// use std::{cell::RefCell, ops::Bound, rc::Rc};
/// use streams_state::serde::{StringSerde, U64Serde};
/// use streams_state::{InMemoryKeyValueStore, KvStore, SharedKeyValueStore};
///
/// let shared: SharedKeyValueStore = Rc::new(RefCell::new(Box::new(InMemoryKeyValueStore::new("s"))));
/// let store = KvStore::new(shared, U64Serde, StringSerde);
/// for i in 1..=9u64 {
///     store.put(&i, &format!("v{i}"))?;
/// }
/// let reader = store.read()?;
/// let keys: Vec<u64> = reader.range_inclusive(&3, &5)?.map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
/// assert_eq!(keys, vec![3, 4, 5]);
/// let last = reader.reverse_range(Bound::Excluded(&7), Bound::Unbounded)?.next().transpose()?;
/// assert_eq!(last, Some((9, "v9".to_string())));
/// // Writing while the reader is alive is an error, not a panic.
/// assert!(store.put(&10, &"x".to_string()).is_err());
/// drop(reader);
/// store.delete_range(Bound::Unbounded, Bound::Included(&5))?;
/// assert_eq!(store.approximate_num_entries()?, 4);
/// # Ok::<(), streams_state::StoreError>(())
/// ```
///
/// Kafka's `LongSerde` encoding ([`I64Serde`](crate::serde::I64Serde)) sorts negative numbers
/// after positive ones, so a range over it does not compile:
///
/// ```compile_fail
/// use std::{cell::RefCell, rc::Rc};
/// use streams_state::serde::{I64Serde, StringSerde};
/// use streams_state::{InMemoryKeyValueStore, KvStore, SharedKeyValueStore};
///
/// let shared: SharedKeyValueStore = Rc::new(RefCell::new(Box::new(InMemoryKeyValueStore::new("s"))));
/// let store = KvStore::new(shared, I64Serde, StringSerde);
/// let reader = store.read().unwrap();
/// let _ = reader.range_inclusive(&-5, &5); // error: I64Serde is not an OrderedSerde
/// ```
pub struct KvStore<KS: Serde, VS: Serde> {
    h: StoreHandle<KS, VS>,
    key_buf: RefCell<Vec<u8>>,
    value_buf: RefCell<Vec<u8>>,
}

impl<KS: Serde + Clone, VS: Serde + Clone> Clone for KvStore<KS, VS> {
    fn clone(&self) -> Self {
        Self {
            h: self.h.clone(),
            key_buf: RefCell::default(),
            value_buf: RefCell::default(),
        }
    }
}

debug_store_name!(impl[KS: Serde, VS: Serde] KvStore<KS, VS>, "name", |r| r.h.name);

/// Runs `f` with `cell`'s buffer cleared, or a fresh one if it is in use.
fn with_buf<R>(cell: &RefCell<Vec<u8>>, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    match cell.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            let r = f(&mut buf);
            if buf.capacity() > MAX_KEPT_BUFFER {
                *buf = Vec::new();
            }
            r
        }
        Err(_) => f(&mut Vec::new()),
    }
}

impl<KS: Serde, VS: Serde> KvStore<KS, VS> {
    /// A handle to `store` converting keys with `key_serde` and values with `value_serde`.
    pub fn new(store: SharedKeyValueStore, key_serde: KS, value_serde: VS) -> Self {
        // The store is only mutably borrowed during a handle's write call, so this borrow
        // succeeds unless a handle is created from inside a flush listener.
        Self {
            h: StoreHandle::new(store, key_serde, value_serde),
            key_buf: RefCell::default(),
            value_buf: RefCell::default(),
        }
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        &self.h.name
    }

    /// The serde of this handle's values.
    pub fn value_serde(&self) -> &VS {
        &self.h.value_serde
    }

    /// A handle to the same store reading and writing values with `value_serde` instead
    /// (e.g. a [`ValueAndTimestampSerde`](crate::ValueAndTimestampSerde) view of a store whose
    /// values carry timestamps).
    pub fn with_value_serde<VS2: Serde>(&self, value_serde: VS2) -> KvStore<KS, VS2>
    where
        KS: Clone,
    {
        KvStore {
            h: StoreHandle {
                store: Rc::clone(&self.h.store),
                key_serde: self.h.key_serde.clone(),
                value_serde,
                name: Rc::clone(&self.h.name),
            },
            key_buf: RefCell::default(),
            value_buf: RefCell::default(),
        }
    }

    fn reading(&self) -> Result<Ref<'_, Box<dyn KeyValueStore>>> {
        self.h.reading()
    }

    fn writing<R>(&self, f: impl FnOnce(&mut dyn KeyValueStore) -> Result<R>) -> Result<R> {
        self.h.writing("write", f)
    }

    fn key_bytes<R>(&self, key: &KS::Target, f: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        with_buf(&self.key_buf, |buf| {
            self.h
                .key_serde
                .serialize_into(key, buf)
                .map_err(|e| self.h.serde_err(e))?;
            f(buf)
        })
    }

    fn value_bytes<R>(&self, value: &VS::Target, f: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        with_buf(&self.value_buf, |buf| {
            self.h
                .value_serde
                .serialize_into(value, buf)
                .map_err(|e| self.h.serde_err(e))?;
            f(buf)
        })
    }

    fn value(&self, bytes: Option<Bytes>) -> Result<Option<VS::Target>> {
        bytes.map(|b| self.h.value(&b)).transpose()
    }

    /// Keeps what the store's write-back cache writes down (at a flush or an eviction) for
    /// the caller to forward, with the store's previous values when `old_values`: Kafka
    /// Streams' forwarding of cached aggregates (see [`FlushedEntries`]). `None` when the
    /// store has no cache: every write goes down at once.
    pub fn forward_on_flush(&self, old_values: bool) -> Result<Option<FlushedEntries>> {
        self.h.forward_on_flush(old_values)
    }

    /// Writes the dirty entries of the store's cache down (its flushed entries see them),
    /// without flushing the layers below.
    pub fn flush_cache(&self) -> Result<()> {
        self.h.flush_cache()
    }

    /// The key, new value and old value of an entry the cache wrote down.
    pub fn decode_flushed(&self, entry: &FlushedEntry) -> Result<Flushed<KS::Target, VS::Target>> {
        self.h.flushed(self.h.key(&entry.key)?, entry)
    }

    /// The value of `key`, if any.
    pub fn get(&self, key: &KS::Target) -> Result<Option<VS::Target>> {
        let bytes = self.key_bytes(key, |k| self.reading()?.get(k))?;
        self.value(bytes)
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &KS::Target, value: &VS::Target) -> Result<()> {
        self.key_bytes(key, |k| {
            self.value_bytes(value, |v| self.writing(|s| s.put(k, v)))
        })
    }

    /// Sets `key` to `value` unless it has a value; returns the value it had.
    pub fn put_if_absent(&self, key: &KS::Target, value: &VS::Target) -> Result<Option<VS::Target>> {
        let old = self.key_bytes(key, |k| {
            self.value_bytes(value, |v| self.writing(|s| s.put_if_absent(k, v)))
        })?;
        self.value(old)
    }

    /// Sets every key to its value, in order.
    pub fn put_all(&self, entries: &[(KS::Target, VS::Target)]) -> Result<()> {
        let mut bytes = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let k = self.h.key_bytes(k)?;
            let v = self.h.value_bytes(v)?;
            bytes.push((Bytes::from(k), Bytes::from(v)));
        }
        self.writing(|s| s.put_all(&bytes))
    }

    /// Removes `key`; returns the value it had.
    pub fn delete(&self, key: &KS::Target) -> Result<Option<VS::Target>> {
        let old = self.key_bytes(key, |k| self.writing(|s| s.delete(k)))?;
        self.value(old)
    }

    /// An estimate of the number of entries.
    pub fn approximate_num_entries(&self) -> Result<u64> {
        self.reading()?.approximate_num_entries()
    }

    /// Writes buffered changes down (cache, changelog).
    pub fn flush(&self) -> Result<()> {
        self.writing(|s| s.flush())
    }

    /// A reader for iteration, holding a shared borrow of the store while it lives (writes
    /// through any handle fail with [`StoreError::Borrowed`] meanwhile).
    pub fn read(&self) -> Result<KvStoreReader<'_, KS, VS>> {
        Ok(KvStoreReader {
            store: self.reading()?,
            kv: self,
        })
    }
}

/// Serializes the bounds of a typed range with `serde`.
fn key_range<S: Serde>(
    serde: &S,
    from: Bound<&S::Target>,
    to: Bound<&S::Target>,
) -> Result<KeyRange, SerdeError> {
    let bytes = |b: Bound<&S::Target>| -> Result<Bound<Vec<u8>>, SerdeError> {
        Ok(match b {
            Bound::Included(k) => Bound::Included(serde.serialize(k)?),
            Bound::Excluded(k) => Bound::Excluded(serde.serialize(k)?),
            Bound::Unbounded => Bound::Unbounded,
        })
    };
    Ok(KeyRange {
        from: bytes(from)?,
        to: bytes(to)?,
    })
}

impl<KS: Serde, VS: Serde + Clone> KvStore<KS, VS> {
    /// A handle to the same store reading and writing keys with `key_serde` instead, which
    /// must write the same bytes for the same keys: e.g. an [`OrderedSerde`] view of a store
    /// built with a type-erased key serde, for range and prefix scans.
    pub fn with_key_serde<KS2: Serde<Target = KS::Target>>(&self, key_serde: KS2) -> KvStore<KS2, VS> {
        KvStore {
            h: StoreHandle {
                store: Rc::clone(&self.h.store),
                key_serde,
                value_serde: self.h.value_serde.clone(),
                name: Rc::clone(&self.h.name),
            },
            key_buf: RefCell::default(),
            value_buf: RefCell::default(),
        }
    }
}

impl<KS: OrderedSerde, VS: Serde> KvStore<KS, VS> {
    /// Removes every key between `from` and `to` (see [`KvStoreReader::range`]).
    pub fn delete_range(&self, from: Bound<&KS::Target>, to: Bound<&KS::Target>) -> Result<()> {
        let range = key_range(&self.h.key_serde, from, to).map_err(|e| self.h.serde_err(e))?;
        let (from, to) = range.as_bounds();
        self.writing(|s| s.delete_range(from, to))
    }

    /// Removes every key whose serialized form starts with `prefix` serialized by
    /// `prefix_serde` (see [`KvStoreReader::prefix_scan`]).
    pub fn delete_prefix<PS: OrderedSerde>(&self, prefix: &PS::Target, prefix_serde: &PS) -> Result<()> {
        let p = prefix_serde.serialize(prefix).map_err(|e| self.h.serde_err(e))?;
        self.writing(|s| s.delete_prefix(&p))
    }
}

/// A shared borrow of a typed store for reading and iterating; see [`KvStore::read`].
pub struct KvStoreReader<'a, KS: Serde, VS: Serde> {
    store: Ref<'a, Box<dyn KeyValueStore>>,
    kv: &'a KvStore<KS, VS>,
}

debug_store_name!(impl[KS: Serde, VS: Serde] KvStoreReader<'_, KS, VS>, "name", |r| r.kv.h.name);

impl<KS: Serde, VS: Serde> KvStoreReader<'_, KS, VS> {
    fn typed<'r>(&'r self, inner: KeyValueIter<'r>) -> TypedIter<'r, KS, VS> {
        TypedIter {
            inner,
            key_serde: &self.kv.h.key_serde,
            value_serde: &self.kv.h.value_serde,
            store: &self.kv.h.name,
        }
    }

    /// The value of `key`, if any.
    pub fn get(&self, key: &KS::Target) -> Result<Option<VS::Target>> {
        let bytes = self.kv.key_bytes(key, |k| self.store.get(k))?;
        self.kv.value(bytes)
    }

    /// Every entry, ascending by serialized key.
    pub fn all(&self) -> Result<TypedIter<'_, KS, VS>> {
        Ok(self.typed(self.store.all()?))
    }

    /// Every entry, descending by serialized key.
    pub fn reverse_all(&self) -> Result<TypedIter<'_, KS, VS>> {
        Ok(self.typed(self.store.reverse_all()?))
    }

    /// An estimate of the number of entries.
    pub fn approximate_num_entries(&self) -> Result<u64> {
        self.store.approximate_num_entries()
    }
}

impl<KS: OrderedSerde, VS: Serde> KvStoreReader<'_, KS, VS> {
    fn bounds(&self, from: Bound<&KS::Target>, to: Bound<&KS::Target>) -> Result<KeyRange> {
        key_range(&self.kv.h.key_serde, from, to).map_err(|e| self.kv.h.serde_err(e))
    }

    /// The entries with keys between `from` and `to`, ascending. A range whose lower end
    /// lies above its upper end is empty.
    pub fn range(&self, from: Bound<&KS::Target>, to: Bound<&KS::Target>) -> Result<TypedIter<'_, KS, VS>> {
        let range = self.bounds(from, to)?;
        let (from, to) = range.as_bounds();
        Ok(self.typed(self.store.range(from, to)?))
    }

    /// Kafka Streams' `range(from, to)`: both ends inclusive, ascending.
    pub fn range_inclusive(&self, from: &KS::Target, to: &KS::Target) -> Result<TypedIter<'_, KS, VS>> {
        self.range(Bound::Included(from), Bound::Included(to))
    }

    /// The entries with keys between `from` and `to`, descending.
    pub fn reverse_range(
        &self,
        from: Bound<&KS::Target>,
        to: Bound<&KS::Target>,
    ) -> Result<TypedIter<'_, KS, VS>> {
        let range = self.bounds(from, to)?;
        let (from, to) = range.as_bounds();
        Ok(self.typed(self.store.reverse_range(from, to)?))
    }

    /// The entries whose serialized keys start with `prefix` serialized by `prefix_serde`,
    /// ascending (KIP-614): the prefix has its own type, e.g. the `u64` first part of a
    /// `PairSerde(U64Serde, StringSerde)` key.
    pub fn prefix_scan<PS: OrderedSerde>(
        &self,
        prefix: &PS::Target,
        prefix_serde: &PS,
    ) -> Result<TypedIter<'_, KS, VS>> {
        let p = prefix_serde
            .serialize(prefix)
            .map_err(|e| self.kv.h.serde_err(e))?;
        Ok(self.typed(self.store.prefix_scan(&p)?))
    }
}

/// A typed iterator: deserializes each entry lazily as it is reached.
///
/// A store error ends the iteration after it is yielded; a serde error is yielded for the
/// entry that failed and the iteration continues with the next entry.
pub struct TypedIter<'a, KS: Serde, VS: Serde> {
    inner: KeyValueIter<'a>,
    key_serde: &'a KS,
    value_serde: &'a VS,
    store: &'a str,
}

debug_store_name!(impl[KS: Serde, VS: Serde] TypedIter<'_, KS, VS>, "store", |r| r.store);

impl<KS: Serde, VS: Serde> Iterator for TypedIter<'_, KS, VS> {
    type Item = Result<(KS::Target, VS::Target)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (k, v) = match self.inner.next()? {
            Ok(kv) => kv,
            Err(e) => return Some(Err(e)),
        };
        let err = |source| StoreError::Serde {
            store: self.store.to_owned(),
            source,
        };
        let entry = self
            .key_serde
            .deserialize(&k)
            .and_then(|k| Ok((k, self.value_serde.deserialize(&v)?)));
        Some(entry.map_err(err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InMemoryKeyValueStore;
    use crate::serde::{PairSerde, StringSerde, U64Serde};

    fn shared() -> SharedKeyValueStore {
        Rc::new(RefCell::new(Box::new(InMemoryKeyValueStore::new("hooks"))))
    }

    #[test]
    fn a_value_serde_view_shares_the_store() {
        let plain = KvStore::new(shared(), StringSerde, StringSerde);
        let stamped = plain.with_value_serde(crate::ValueAndTimestampSerde(StringSerde));
        stamped
            .put(&"k".to_owned(), &crate::ValueAndTimestamp::new("v".to_owned(), 5))
            .unwrap();
        let stored = plain.get(&"k".to_owned()).unwrap().unwrap();
        assert_eq!(stored.as_bytes(), b"\0\0\0\0\0\0\0\x05v");
        assert_eq!(stamped.name(), "hooks");
    }

    #[test]
    fn prefix_scan_with_its_own_serde() {
        let store = KvStore::new(shared(), PairSerde(U64Serde, StringSerde), StringSerde);
        for (user, hook) in [(1, "a"), (2, "b"), (2, "c"), (3, "d")] {
            store
                .put(&(user, hook.to_owned()), &format!("{user}{hook}"))
                .unwrap();
        }
        let reader = store.read().unwrap();
        let got: Vec<_> = reader
            .prefix_scan(&2, &U64Serde)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(
            got,
            vec![((2, "b".into()), "2b".into()), ((2, "c".into()), "2c".into())]
        );
        drop(reader);
        store.delete_prefix(&2, &U64Serde).unwrap();
        assert_eq!(store.approximate_num_entries().unwrap(), 2);
    }

    #[test]
    fn borrow_conflicts_are_errors() {
        let store = KvStore::new(shared(), StringSerde, StringSerde);
        store.put(&"a".into(), &"1".into()).unwrap();
        let reader = store.read().unwrap();
        let also = store.clone();
        assert_eq!(also.get(&"a".into()).unwrap().as_deref(), Some("1"));
        let mut it = reader.all().unwrap();
        assert!(matches!(
            store.delete(&"a".into()),
            Err(StoreError::Borrowed { .. })
        ));
        assert!(matches!(store.flush(), Err(StoreError::Borrowed { .. })));
        assert!(it.next().is_some());
        drop(it);
        drop(reader);
        assert_eq!(store.delete(&"a".into()).unwrap().as_deref(), Some("1"));
    }

    #[test]
    fn bad_bytes_are_serde_errors() {
        let raw = shared();
        raw.borrow_mut().put(b"k", b"\xc3\x28").unwrap();
        let store = KvStore::new(raw, StringSerde, StringSerde);
        let err = store.get(&"k".into()).unwrap_err();
        assert!(
            matches!(&err, StoreError::Serde { store, .. } if store == "hooks"),
            "{err}"
        );
        let reader = store.read().unwrap();
        assert!(reader.all().unwrap().next().is_some_and(|r| r.is_err()));
    }
}
