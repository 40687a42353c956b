//! [`VersionedStoreRef`]: the handle of a versioned key-value store of a topology (see
//! [`streams_state::versioned`]), as [`WindowStoreRef`](super::WindowStoreRef) is for window
//! stores: made by [`TopologyBuilder::versioned_store`](crate::TopologyBuilder::versioned_store),
//! connected with [`TopologyBuilder::connect`](crate::TopologyBuilder::connect), opened with
//! [`ProcessorContext::versioned_store`](super::ProcessorContext::versioned_store). The
//! handle carries the builder, so the opened store has the builder's serdes and history
//! retention.

use std::fmt;
use std::sync::Arc;

use streams_state::{Serde, SharedKeyValueStore, VersionedKeyValueStore, VersionedStoreBuilder};

use super::ConnectableStore;

/// A versioned key-value store of a topology.
pub struct VersionedStoreRef<KS, VS> {
    builder: Arc<VersionedStoreBuilder<KS, VS>>,
}

impl<KS: Serde + Clone, VS: Serde + Clone> VersionedStoreRef<KS, VS> {
    pub(crate) fn new(builder: Arc<VersionedStoreBuilder<KS, VS>>) -> Self {
        Self { builder }
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        streams_state::StoreBuilder::name(&*self.builder)
    }

    /// The typed handle on one task's instance of the store.
    pub(crate) fn open(&self, store: SharedKeyValueStore) -> VersionedKeyValueStore<KS, VS> {
        self.builder.open(store)
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> ConnectableStore for VersionedStoreRef<KS, VS> {
    fn store_name(&self) -> &str {
        self.name()
    }
}

impl<KS, VS> Clone for VersionedStoreRef<KS, VS> {
    fn clone(&self) -> Self {
        Self {
            builder: Arc::clone(&self.builder),
        }
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> fmt::Debug for VersionedStoreRef<KS, VS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VersionedStoreRef")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}
