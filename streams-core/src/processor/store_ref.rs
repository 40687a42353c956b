//! [`StoreRef`]: the typed handle of a state store while a topology is built.

use std::fmt;
use std::sync::Arc;

use streams_state::{KvStore, Serde, SharedKeyValueStore};

/// A key-value store of a topology, with the serdes of its keys and values.
///
/// Made by [`TopologyBuilder::store`](crate::TopologyBuilder::store) (or
/// [`global_store`](crate::TopologyBuilder::global_store)), connected to processors with
/// [`TopologyBuilder::connect`](crate::TopologyBuilder::connect) and opened by a
/// processor's supplier with [`ProcessorContext::store`](super::ProcessorContext::store).
/// The handle it opens carries the store's own serdes: a processor cannot open a store
/// with the wrong types, and no run-time type check is needed.
pub struct StoreRef<KS, VS> {
    name: Arc<str>,
    key_serde: KS,
    value_serde: VS,
}

impl<KS: Serde + Clone, VS: Serde + Clone> StoreRef<KS, VS> {
    pub(crate) fn new(name: &str, key_serde: KS, value_serde: VS) -> Self {
        Self {
            name: Arc::from(name),
            key_serde,
            value_serde,
        }
    }

    /// The serdes of its keys and values.
    pub(crate) fn serdes(&self) -> (KS, VS) {
        (self.key_serde.clone(), self.value_serde.clone())
    }

    /// The typed handle on one task's instance of the store.
    pub(crate) fn open(&self, store: SharedKeyValueStore) -> KvStore<KS, VS> {
        KvStore::new(store, self.key_serde.clone(), self.value_serde.clone())
    }
}

impl<KS, VS> StoreRef<KS, VS> {
    /// The store's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl<KS: Clone, VS: Clone> Clone for StoreRef<KS, VS> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
        }
    }
}

impl<KS, VS> fmt::Debug for StoreRef<KS, VS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreRef")
            .field("name", &self.name)
            .field("key_serde", &std::any::type_name::<KS>())
            .field("value_serde", &std::any::type_name::<VS>())
            .finish()
    }
}
