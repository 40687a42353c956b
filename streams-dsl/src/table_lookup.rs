//! Reading a table's current row by key, whatever store keeps it (Kafka Streams'
//! `KTableValueGetter`).
//!
//! A join reads the other side's table through a [`TableLookup`] its processor opens from
//! the table's [`OpenLookup`]: a key-value table reads its store; the table of a
//! time-windowed aggregation (keys [`Windowed`]) reads the window of the key's start in its
//! window store; the table of a session aggregation reads the session of the key's start
//! and end in its session store, stamped with the session's end.

use std::sync::Arc;

use streams_core::state::StoreError;
use streams_core::{KvStore, SessionStoreRef, StoreAccess, WindowStoreRef};
use streams_state::{SessionStore, ValueAndTimestamp, ValueAndTimestampSerde, WindowStore};

use crate::dyn_serde::DynSerde;
use crate::timestamped::{TimestampedValues, timestamped};
use crate::windowed::Windowed;

/// A table's current row of a key: its value and the timestamp it was written with.
pub(crate) trait TableLookup<K, V> {
    fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<V>>, StoreError>;
}

/// A lookup, opened by a processor.
pub(crate) type Lookup<K, V> = Box<dyn TableLookup<K, V>>;

/// Opens a table's lookup with the stores of the processor that reads it (the table's
/// store must be connected to that processor).
pub(crate) type OpenLookup<K, V> =
    Arc<dyn Fn(StoreAccess<'_>) -> Result<Lookup<K, V>, StoreError> + Send + Sync>;

impl<K: 'static, V: 'static> TableLookup<K, V> for KvStore<DynSerde<K>, TimestampedValues<V>> {
    fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<V>>, StoreError> {
        KvStore::get(self, key)
    }
}

/// The lookup of a key-value table kept in the store `name`.
pub(crate) fn kv_lookup<K: 'static, V: 'static>(name: String) -> OpenLookup<K, V> {
    Arc::new(move |stores| {
        let store: KvStore<DynSerde<K>, TimestampedValues<V>> =
            timestamped(&stores.kv_store::<DynSerde<K>, DynSerde<V>>(&name)?);
        Ok(Box::new(store))
    })
}

/// The window store of a time-windowed aggregation.
type AggWindows<K, A> = WindowStore<DynSerde<K>, ValueAndTimestampSerde<DynSerde<A>>>;

struct WindowLookup<K: 'static, A: 'static>(AggWindows<K, A>);

impl<K: 'static, A: 'static> TableLookup<Windowed<K>, A> for WindowLookup<K, A> {
    fn get(&self, key: &Windowed<K>) -> Result<Option<ValueAndTimestamp<A>>, StoreError> {
        self.0.fetch(&key.key, key.start)
    }
}

/// The lookup of the table of a time-windowed aggregation kept in `store`.
pub(crate) fn window_lookup<K: 'static, A: 'static>(
    store: WindowStoreRef<DynSerde<K>, ValueAndTimestampSerde<DynSerde<A>>>,
) -> OpenLookup<Windowed<K>, A> {
    Arc::new(move |stores| Ok(Box::new(WindowLookup(stores.store(&store)?))))
}

struct SessionLookup<K: 'static, A: 'static>(SessionStore<DynSerde<K>, DynSerde<A>>);

impl<K: 'static, A: 'static> TableLookup<Windowed<K>, A> for SessionLookup<K, A> {
    fn get(&self, key: &Windowed<K>) -> Result<Option<ValueAndTimestamp<A>>, StoreError> {
        let value = self.0.fetch_session(&key.key, key.start, key.end)?;
        Ok(value.map(|value| ValueAndTimestamp {
            value,
            timestamp: key.end,
        }))
    }
}

/// The lookup of the table of a session aggregation kept in `store`.
pub(crate) fn session_lookup<K: 'static, A: 'static>(
    store: SessionStoreRef<DynSerde<K>, DynSerde<A>>,
) -> OpenLookup<Windowed<K>, A> {
    Arc::new(move |stores| Ok(Box::new(SessionLookup(stores.store(&store)?))))
}
