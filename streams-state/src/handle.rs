//! [`StoreHandle`]: what every typed store handle holds, and the conversions they share.
//!
//! A typed handle ([`KvStore`](crate::KvStore), [`WindowStore`](crate::WindowStore),
//! [`SessionStore`](crate::SessionStore),
//! [`VersionedKeyValueStore`](crate::versioned::VersionedKeyValueStore)) is a cheap view of one
//! [`SharedKeyValueStore`] with a key and a value serde. The invariants kept here:
//!
//! - the name is read once, when the handle is made (`"<borrowed>"` if the store is mutably
//!   borrowed at that moment), so errors can name the store without borrowing it;
//! - a serde failure becomes [`StoreError::Serde`] and a borrow conflict
//!   [`StoreError::Borrowed`], both naming the store; the store is borrowed only for the
//!   length of one call (or of a reader the handle hands out).

use std::cell::Ref;
use std::rc::Rc;

use crate::error::{Result, SerdeError, StoreError};
use crate::flushed::{Flushed, FlushedEntries, FlushedEntry};
use crate::serde::Serde;
use crate::store::{KeyValueStore, SharedKeyValueStore};

/// The shared store, its serdes and its name, as held by each typed store handle.
#[derive(Clone)]
pub(crate) struct StoreHandle<KS, VS> {
    pub(crate) store: SharedKeyValueStore,
    pub(crate) key_serde: KS,
    pub(crate) value_serde: VS,
    pub(crate) name: Rc<str>,
}

impl<KS: Serde, VS: Serde> StoreHandle<KS, VS> {
    /// A handle to `store`; reads the store's name now.
    pub(crate) fn new(store: SharedKeyValueStore, key_serde: KS, value_serde: VS) -> Self {
        let name: Rc<str> = store
            .try_borrow()
            .map_or_else(|_| Rc::from("<borrowed>"), |s| Rc::from(s.name()));
        Self {
            store,
            key_serde,
            value_serde,
            name,
        }
    }

    /// `source` as a serde error of this store.
    pub(crate) fn serde_err(&self, source: SerdeError) -> StoreError {
        StoreError::Serde {
            store: self.name.to_string(),
            source,
        }
    }

    /// The error of an `access` that found the store borrowed.
    pub(crate) fn borrowed(&self, access: &str) -> StoreError {
        StoreError::Borrowed {
            store: self.name.to_string(),
            message: format!("cannot {access}: the store is borrowed (drop open readers first)"),
        }
    }

    /// The bytes of `key`.
    pub(crate) fn key_bytes(&self, key: &KS::Target) -> Result<Vec<u8>> {
        self.key_serde.serialize(key).map_err(|e| self.serde_err(e))
    }

    /// The key stored as `bytes`.
    pub(crate) fn key(&self, bytes: &[u8]) -> Result<KS::Target> {
        self.key_serde.deserialize(bytes).map_err(|e| self.serde_err(e))
    }

    /// The bytes of `value`.
    pub(crate) fn value_bytes(&self, value: &VS::Target) -> Result<Vec<u8>> {
        self.value_serde.serialize(value).map_err(|e| self.serde_err(e))
    }

    /// The value stored as `bytes`.
    pub(crate) fn value(&self, bytes: &[u8]) -> Result<VS::Target> {
        self.value_serde.deserialize(bytes).map_err(|e| self.serde_err(e))
    }

    /// A shared borrow of the store for reading.
    pub(crate) fn reading(&self) -> Result<Ref<'_, Box<dyn KeyValueStore>>> {
        self.store.try_borrow().map_err(|_| self.borrowed("read"))
    }

    /// Runs `f` on the mutably borrowed store; `access` names the operation in the error.
    pub(crate) fn writing<R>(
        &self,
        access: &str,
        f: impl FnOnce(&mut dyn KeyValueStore) -> Result<R>,
    ) -> Result<R> {
        let mut store = self.store.try_borrow_mut().map_err(|_| self.borrowed(access))?;
        f(&mut **store)
    }

    /// Has the store's cache keep what it writes down for the caller (see `flushed.rs`);
    /// `None` when the store has no cache (writes go down at once).
    pub(crate) fn forward_on_flush(&self, old_values: bool) -> Result<Option<FlushedEntries>> {
        let flushed = FlushedEntries::default();
        let taken = self.writing("set a flush listener", |s| {
            Ok(s.set_flush_listener(flushed.listener(), old_values))
        })?;
        Ok(taken.then_some(flushed))
    }

    /// An entry the store's cache wrote down, under `key` (its key, decoded by the caller's
    /// key layout), with its values decoded.
    pub(crate) fn flushed<K>(&self, key: K, entry: &FlushedEntry) -> Result<Flushed<K, VS::Target>> {
        let value = |b: &Option<bytes::Bytes>| b.as_ref().map(|b| self.value(b)).transpose();
        Ok(Flushed {
            key,
            new: value(&entry.new)?,
            old: value(&entry.old)?,
        })
    }

    /// Writes the store's dirty cached entries down, without flushing the layers below.
    pub(crate) fn flush_cache(&self) -> Result<()> {
        self.writing("flush the cache", |s| s.flush_cache())
    }
}

/// Implements `Debug` for a type of a typed handle's family (the handle, its reader, its
/// iterators) that shows only the name of its store: `Type { <field>: "<name>", .. }`.
/// `|x| expr` reads the name from the value `x`:
/// `debug_store_name!(impl[KS: Serde, VS: Serde] KvStoreReader<'_, KS, VS>, "name", |r| r.kv.h.name);`
macro_rules! debug_store_name {
    (impl[$($generics:tt)*] $ty:ident<$($arg:tt),*>, $field:literal, |$this:ident| $name:expr) => {
        impl<$($generics)*> ::std::fmt::Debug for $ty<$($arg),*> {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let $this = self;
                f.debug_struct(stringify!($ty))
                    .field($field, &$name)
                    .finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use debug_store_name;

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::InMemoryKeyValueStore;
    use crate::serde::StringSerde;

    fn handle() -> StoreHandle<StringSerde, StringSerde> {
        let store: SharedKeyValueStore = Rc::new(RefCell::new(Box::new(InMemoryKeyValueStore::new("s"))));
        StoreHandle::new(store, StringSerde, StringSerde)
    }

    #[test]
    fn round_trips_keys_and_values_and_names_the_store_in_errors() {
        let h = handle();
        assert_eq!(&*h.name, "s");
        let k = h.key_bytes(&"k".to_string()).unwrap();
        assert_eq!(h.key(&k).unwrap(), "k");
        let v = h.value_bytes(&"v".to_string()).unwrap();
        assert_eq!(h.value(&v).unwrap(), "v");
        assert!(matches!(h.value(&[0xFF]), Err(StoreError::Serde { store, .. }) if store == "s"));
    }

    #[test]
    fn a_write_while_reading_is_a_borrow_error() {
        let h = handle();
        let reader = h.reading().unwrap();
        let err = h.writing("flush", |s| s.flush()).unwrap_err();
        assert!(
            matches!(err, StoreError::Borrowed { ref message, .. } if message.starts_with("cannot flush"))
        );
        drop(reader);
        h.writing("write", |s| s.put(b"k", b"v")).unwrap();
    }
}
