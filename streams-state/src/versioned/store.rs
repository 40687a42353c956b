//! [`VersionedKeyValueStore`]: the typed handle of a versioned store (see the
//! [module docs](crate::versioned) for the model and the byte layout).

use std::ops::Bound;

use crate::error::{Result, SerdeError, StoreError};
use crate::handle::StoreHandle;
use crate::serde::Serde;
use crate::store::KeyValueStore;
use crate::typed::SharedKeyValueStore;
use crate::versioned::changelog::{decode_stream_time, encode_stream_time};
use crate::versioned::schema::{
    STREAM_TIME_KEY, decode_value, encode_value, key_prefix, timestamp_of, version_key,
};

/// One version of a key's value: valid from `timestamp` until `valid_to` (exclusive; `None`
/// for the latest version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedRecord<V> {
    /// The value.
    pub value: V,
    /// When this version became valid.
    pub timestamp: i64,
    /// When the next version replaced it, if one did.
    pub valid_to: Option<i64>,
}

/// What a [`VersionedKeyValueStore::put`] did (Kafka Streams' return codes of `put`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The version is the key's latest (`PUT_RETURN_CODE_VALID_TO_UNDEFINED`).
    Latest,
    /// The version went into the key's history, valid until this timestamp.
    ValidTo(i64),
    /// The timestamp is older than the history retention allows: nothing was written
    /// (`PUT_RETURN_CODE_NOT_PUT`).
    Expired,
}

/// A versioned key-value store with keys of `KS` and values of `VS`, over one task's bytes
/// store; made by [`VersionedStoreBuilder::open`](crate::versioned::VersionedStoreBuilder::open).
/// Clones share the store.
#[derive(Clone)]
pub struct VersionedKeyValueStore<KS: Serde, VS: Serde> {
    h: StoreHandle<KS, VS>,
    history_retention: i64,
}

impl<KS: Serde, VS: Serde> std::fmt::Debug for VersionedKeyValueStore<KS, VS> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionedKeyValueStore")
            .field("name", &self.h.name)
            .field("history_retention", &self.history_retention)
            .finish()
    }
}

/// A version as read from the store: its timestamp and value bytes (`None`: tombstone).
type RawVersion = (i64, Option<Vec<u8>>);

impl<KS: Serde, VS: Serde> VersionedKeyValueStore<KS, VS> {
    pub(crate) fn new(
        store: SharedKeyValueStore,
        key_serde: KS,
        value_serde: VS,
        history_retention: i64,
    ) -> Self {
        Self {
            h: StoreHandle::new(store, key_serde, value_serde),
            history_retention,
        }
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        &self.h.name
    }

    /// How long (ms) behind the observed stream time versions stay readable.
    pub fn history_retention_ms(&self) -> i64 {
        self.history_retention
    }

    /// The largest timestamp put so far (`i64::MIN` before any).
    pub fn observed_stream_time(&self) -> Result<i64> {
        let store = self.h.store.try_borrow().map_err(|_| self.borrowed("read"))?;
        self.stream_time(&**store)
    }

    /// Adds the version of `key` valid from `timestamp`: `value`, or a tombstone for
    /// `None`. A version at the same timestamp is replaced. The observed stream time moves
    /// to `timestamp` if later; a timestamp older than the stream time minus the history
    /// retention writes nothing.
    pub fn put(&self, key: &KS::Target, value: Option<&VS::Target>, timestamp: i64) -> Result<PutOutcome> {
        let prefix = self.prefix(key)?;
        let value = value.map(|v| self.h.value_bytes(v)).transpose()?;
        let mut store = self
            .h
            .store
            .try_borrow_mut()
            .map_err(|_| self.borrowed("write"))?;
        let previous = self.stream_time(&**store)?;
        let stream_time = previous.max(timestamp);
        if timestamp < stream_time.saturating_sub(self.history_retention) {
            return Ok(PutOutcome::Expired);
        }
        if stream_time != previous {
            store.put(&STREAM_TIME_KEY, &encode_stream_time(stream_time))?;
        }
        let newer = self.newer_than(&**store, &prefix, timestamp)?;
        store.put(&version_key(&prefix, timestamp), &encode_value(value.as_deref()))?;
        self.expire(&mut **store, &prefix, stream_time)?;
        Ok(newer.map_or(PutOutcome::Latest, PutOutcome::ValidTo))
    }

    /// Deletes `key` as of `timestamp` (a tombstone version); returns the version that was
    /// valid then, as [`get_as_of`](Self::get_as_of) before the delete.
    pub fn delete(&self, key: &KS::Target, timestamp: i64) -> Result<Option<VersionedRecord<VS::Target>>> {
        let previous = self.get_as_of(key, timestamp)?;
        self.put(key, None, timestamp)?;
        Ok(previous)
    }

    /// The latest version of `key`; `None` if it has none or the latest is a tombstone.
    pub fn get(&self, key: &KS::Target) -> Result<Option<VersionedRecord<VS::Target>>> {
        let prefix = self.prefix(key)?;
        let store = self.h.store.try_borrow().map_err(|_| self.borrowed("read"))?;
        let latest = self.at_or_before(&**store, &prefix, i64::MAX)?;
        self.record(latest, None)
    }

    /// The version of `key` valid at `as_of`: the newest with a timestamp `<= as_of`.
    /// `None` if there is none, it is a tombstone, or `as_of` is older than the observed
    /// stream time minus the history retention.
    pub fn get_as_of(&self, key: &KS::Target, as_of: i64) -> Result<Option<VersionedRecord<VS::Target>>> {
        let prefix = self.prefix(key)?;
        let store = self.h.store.try_borrow().map_err(|_| self.borrowed("read"))?;
        if as_of < self.stream_time(&**store)?.saturating_sub(self.history_retention) {
            return Ok(None);
        }
        let Some(found) = self.at_or_before(&**store, &prefix, as_of)? else {
            return Ok(None);
        };
        let valid_to = self.newer_than(&**store, &prefix, found.0)?;
        self.record(Some(found), valid_to)
    }

    /// The typed record of a raw version.
    fn record(
        &self,
        version: Option<RawVersion>,
        valid_to: Option<i64>,
    ) -> Result<Option<VersionedRecord<VS::Target>>> {
        let Some((timestamp, Some(bytes))) = version else {
            return Ok(None);
        };
        let value = self.h.value(&bytes)?;
        Ok(Some(VersionedRecord {
            value,
            timestamp,
            valid_to,
        }))
    }

    /// The newest version of `prefix`'s key with a timestamp `<= t`.
    fn at_or_before(&self, store: &dyn KeyValueStore, prefix: &[u8], t: i64) -> Result<Option<RawVersion>> {
        let from = version_key(prefix, t);
        let to = version_key(prefix, i64::MIN);
        let mut iter = store.range(Bound::Included(&from), Bound::Included(&to))?;
        let Some(entry) = iter.next().transpose()? else {
            return Ok(None);
        };
        let (k, v) = entry;
        let timestamp = timestamp_of(prefix, &k).ok_or_else(|| self.malformed("key"))?;
        let value = decode_value(&v).map_err(|()| self.malformed("value"))?;
        Ok(Some((timestamp, value.map(<[u8]>::to_vec))))
    }

    /// The timestamp of the oldest version of `prefix`'s key newer than `t`.
    fn newer_than(&self, store: &dyn KeyValueStore, prefix: &[u8], t: i64) -> Result<Option<i64>> {
        if t == i64::MAX {
            return Ok(None);
        }
        let from = version_key(prefix, i64::MAX);
        let to = version_key(prefix, t + 1);
        let mut iter = store.reverse_range(Bound::Included(&from), Bound::Included(&to))?;
        match iter.next().transpose()? {
            Some((k, _)) => Ok(Some(
                timestamp_of(prefix, &k).ok_or_else(|| self.malformed("key"))?,
            )),
            None => Ok(None),
        }
    }

    /// Removes the versions of `prefix`'s key that no query can reach any more: those
    /// older than the newest version at or before `stream_time - history retention`.
    fn expire(&self, store: &mut dyn KeyValueStore, prefix: &[u8], stream_time: i64) -> Result<()> {
        let horizon = stream_time.saturating_sub(self.history_retention);
        let Some((oldest_needed, _)) = self.at_or_before(store, prefix, horizon)? else {
            return Ok(());
        };
        if oldest_needed == i64::MIN {
            return Ok(());
        }
        let from = version_key(prefix, oldest_needed - 1);
        let to = version_key(prefix, i64::MIN);
        store.delete_range(Bound::Included(&from), Bound::Included(&to))
    }

    fn stream_time(&self, store: &dyn KeyValueStore) -> Result<i64> {
        match store.get(&STREAM_TIME_KEY)? {
            None => Ok(i64::MIN),
            Some(b) => decode_stream_time(&b).ok_or_else(|| self.malformed("stream time")),
        }
    }

    fn prefix(&self, key: &KS::Target) -> Result<Vec<u8>> {
        let bytes = self.h.key_bytes(key)?;
        key_prefix(&bytes).ok_or_else(|| {
            self.h
                .serde_err(SerdeError::new("VersionedKey", "key longer than 4 GiB"))
        })
    }

    fn malformed(&self, what: &str) -> StoreError {
        self.h.serde_err(SerdeError::new(
            "VersionedSchema",
            format!("malformed versioned {what}"),
        ))
    }

    fn borrowed(&self, access: &str) -> StoreError {
        StoreError::Borrowed {
            store: self.h.name.to_string(),
            message: format!("cannot {access}: the store is borrowed"),
        }
    }
}
