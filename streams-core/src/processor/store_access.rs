//! [`StoreAccess`]: opening the stores connected to a processor, apart from the
//! processor's output types.

use streams_state::{KvStore, Serde, SessionStore, StoreError, VersionedKeyValueStore, WindowStore};

use super::node::NodeContext;
use super::{SessionStoreRef, StoreRef, VersionedStoreRef, WindowStoreRef};

/// Opens the stores connected to one processor ([`ProcessorContext::stores`](super::ProcessorContext::stores)).
///
/// Call its methods in the processor's supplier (see
/// [`TopologyBuilder::processor`](crate::TopologyBuilder::processor)) and keep the handles:
/// they read and write this task's instance of each store. Each fails with
/// [`StoreError::NotConnected`] for a store not connected to the processor.
#[derive(Clone, Copy)]
pub struct StoreAccess<'a> {
    cx: &'a dyn NodeContext,
}

impl<'a> StoreAccess<'a> {
    pub(crate) fn new(cx: &'a dyn NodeContext) -> Self {
        Self { cx }
    }

    /// The typed handle of the key-value store `name` (connected, or a global store), with
    /// the serdes it was built with: [`StoreError::WrongType`] when `KS`/`VS` are not them.
    pub fn kv_store<KS, VS>(&self, name: &str) -> Result<KvStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        self.cx.store(name)?.typed()
    }

    /// The typed handle of the key-value store `store` (connected, or a global store).
    pub fn store<KS, VS>(&self, store: &StoreRef<KS, VS>) -> Result<KvStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        Ok(store.open(self.cx.store(store.name())?.store.clone()))
    }

    /// The typed handle of the window store `store`.
    pub fn window_store<KS, VS>(
        &self,
        store: &WindowStoreRef<KS, VS>,
    ) -> Result<WindowStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        Ok(store.open(self.cx.store(store.name())?.store.clone()))
    }

    /// The typed handle of the session store `store`.
    pub fn session_store<KS, VS>(
        &self,
        store: &SessionStoreRef<KS, VS>,
    ) -> Result<SessionStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        Ok(store.open(self.cx.store(store.name())?.store.clone()))
    }

    /// The typed handle of the versioned key-value store `store`.
    pub fn versioned_store<KS, VS>(
        &self,
        store: &VersionedStoreRef<KS, VS>,
    ) -> Result<VersionedKeyValueStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        Ok(store.open(self.cx.store(store.name())?.store.clone()))
    }
}
