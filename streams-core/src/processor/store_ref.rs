//! [`TypedStoreRef`]: the typed handle of a state store while a topology is built, one
//! generic type for every kind of store ([`StoreRef`], [`WindowStoreRef`],
//! [`SessionStoreRef`] and [`VersionedStoreRef`] name its kinds), and
//! [`ConnectableStore`], what [`TopologyBuilder::connect`](crate::TopologyBuilder::connect)
//! takes of any of them.
//!
//! A reference carries its store's builder, so the handle a processor opens has the
//! builder's serdes (and its windows' size, or its history retention): a processor cannot
//! open a store with the wrong types, and no run-time type check is needed.

use std::fmt;
use std::sync::Arc;

use streams_state::{
    KeyValueStoreBuilder, SessionStoreBuilder, SharedKeyValueStore, StoreBuilder, TypedStoreBuilder,
    VersionedStoreBuilder, WindowStoreBuilder,
};

/// A store handle of a topology, of any kind (see [`TypedStoreRef`]).
pub trait ConnectableStore {
    /// The store's name.
    fn store_name(&self) -> &str;
}

/// A state store of a topology, built by `B` (one of `streams_state`'s builders, see
/// [`TypedStoreBuilder`]).
///
/// Made by [`TopologyBuilder::store`](crate::TopologyBuilder::store) (or
/// [`global_store`](crate::TopologyBuilder::global_store)), connected to processors with
/// [`TopologyBuilder::connect`](crate::TopologyBuilder::connect) and opened by a
/// processor's supplier with [`ProcessorContext::store`](super::ProcessorContext::store),
/// which gives the builder's typed handle (`B::Handle`).
pub struct TypedStoreRef<B> {
    builder: Arc<B>,
}

/// A key-value store of a topology; [`ProcessorContext::store`](super::ProcessorContext::store)
/// opens it as a [`KvStore`](streams_state::KvStore).
pub type StoreRef<KS, VS> = TypedStoreRef<KeyValueStoreBuilder<KS, VS>>;
/// A window store of a topology (see [`streams_state::window`]), opened as a
/// [`WindowStore`](streams_state::WindowStore).
pub type WindowStoreRef<KS, VS> = TypedStoreRef<WindowStoreBuilder<KS, VS>>;
/// A session store of a topology (see [`streams_state::session`]), opened as a
/// [`SessionStore`](streams_state::SessionStore).
pub type SessionStoreRef<KS, VS> = TypedStoreRef<SessionStoreBuilder<KS, VS>>;
/// A versioned key-value store of a topology (see [`streams_state::versioned`]), opened as
/// a [`VersionedKeyValueStore`](streams_state::VersionedKeyValueStore).
pub type VersionedStoreRef<KS, VS> = TypedStoreRef<VersionedStoreBuilder<KS, VS>>;

impl<B: TypedStoreBuilder> TypedStoreRef<B> {
    pub(crate) fn new(builder: Arc<B>) -> Self {
        Self { builder }
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        StoreBuilder::name(&*self.builder)
    }

    /// The typed handle on one task's instance of the store.
    pub(crate) fn open(&self, store: SharedKeyValueStore) -> B::Handle {
        self.builder.open(store)
    }

    /// The serdes of its keys and values.
    pub(crate) fn serdes(&self) -> (B::KeySerde, B::ValueSerde) {
        self.builder.serdes()
    }
}

impl<B: TypedStoreBuilder> ConnectableStore for TypedStoreRef<B> {
    fn store_name(&self) -> &str {
        self.name()
    }
}

impl<B> Clone for TypedStoreRef<B> {
    fn clone(&self) -> Self {
        Self {
            builder: Arc::clone(&self.builder),
        }
    }
}

impl<B: TypedStoreBuilder> fmt::Debug for TypedStoreRef<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedStoreRef")
            .field("name", &self.name())
            .field("handle", &self.builder.type_name())
            .finish()
    }
}
