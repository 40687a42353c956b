//! [`StoreAccess`]: opening the stores connected to a processor, apart from the
//! processor's output types.

use streams_state::{KvStore, Serde, StoreError, TypedStoreBuilder};

use super::TypedStoreRef;
use super::node::NodeContext;

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

    /// The typed handle of `store` (connected, or a global store): a
    /// [`KvStore`](streams_state::KvStore) of a [`StoreRef`](super::StoreRef), a
    /// [`WindowStore`](streams_state::WindowStore) of a [`WindowStoreRef`](super::WindowStoreRef),
    /// and so on for each kind of store.
    pub fn store<B: TypedStoreBuilder>(&self, store: &TypedStoreRef<B>) -> Result<B::Handle, StoreError> {
        Ok(store.open(self.cx.store(store.name())?.store.clone()))
    }
}
