//! [`StoreRef`], [`WindowStoreRef`] and [`SessionStoreRef`]: the typed handles of state
//! stores while a topology is built, one per kind of store, and [`ConnectableStore`], what
//! [`TopologyBuilder::connect`](crate::TopologyBuilder::connect) takes of any of them.

use std::fmt;
use std::sync::Arc;

use streams_state::{
    KvStore, Serde, SessionStore, SessionStoreBuilder, SharedKeyValueStore, WindowStore, WindowStoreBuilder,
};

/// A store handle of a topology, of any kind: [`StoreRef`], [`WindowStoreRef`] or
/// [`SessionStoreRef`].
pub trait ConnectableStore {
    /// The store's name.
    fn store_name(&self) -> &str;
}

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

impl<KS, VS> ConnectableStore for StoreRef<KS, VS> {
    fn store_name(&self) -> &str {
        &self.name
    }
}

/// A window store of a topology (see [`streams_state::window`]).
///
/// Made by [`TopologyBuilder::window_store`](crate::TopologyBuilder::window_store),
/// connected with [`TopologyBuilder::connect`](crate::TopologyBuilder::connect) and opened
/// with [`ProcessorContext::window_store`](super::ProcessorContext::window_store).
pub struct WindowStoreRef<KS, VS> {
    builder: Arc<WindowStoreBuilder<KS, VS>>,
}

impl<KS: Serde + Clone, VS: Serde + Clone> WindowStoreRef<KS, VS> {
    pub(crate) fn new(builder: Arc<WindowStoreBuilder<KS, VS>>) -> Self {
        Self { builder }
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        streams_state::StoreBuilder::name(&*self.builder)
    }

    /// The typed handle on one task's instance of the store.
    pub(crate) fn open(&self, store: SharedKeyValueStore) -> WindowStore<KS, VS> {
        self.builder.open(store)
    }

    /// The serdes of its keys and values.
    pub(crate) fn serdes(&self) -> (KS, VS) {
        (self.builder.key_serde(), self.builder.value_serde())
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> ConnectableStore for WindowStoreRef<KS, VS> {
    fn store_name(&self) -> &str {
        self.name()
    }
}

impl<KS, VS> Clone for WindowStoreRef<KS, VS> {
    fn clone(&self) -> Self {
        Self {
            builder: Arc::clone(&self.builder),
        }
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> fmt::Debug for WindowStoreRef<KS, VS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WindowStoreRef")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// A session store of a topology (see [`streams_state::session`]).
///
/// Made by [`TopologyBuilder::session_store`](crate::TopologyBuilder::session_store),
/// connected with [`TopologyBuilder::connect`](crate::TopologyBuilder::connect) and opened
/// with [`ProcessorContext::session_store`](super::ProcessorContext::session_store).
pub struct SessionStoreRef<KS, VS> {
    builder: Arc<SessionStoreBuilder<KS, VS>>,
}

impl<KS: Serde + Clone, VS: Serde + Clone> SessionStoreRef<KS, VS> {
    pub(crate) fn new(builder: Arc<SessionStoreBuilder<KS, VS>>) -> Self {
        Self { builder }
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        streams_state::StoreBuilder::name(&*self.builder)
    }

    /// The typed handle on one task's instance of the store.
    pub(crate) fn open(&self, store: SharedKeyValueStore) -> SessionStore<KS, VS> {
        self.builder.open(store)
    }

    /// The serdes of its keys and values.
    pub(crate) fn serdes(&self) -> (KS, VS) {
        (self.builder.key_serde(), self.builder.value_serde())
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> ConnectableStore for SessionStoreRef<KS, VS> {
    fn store_name(&self) -> &str {
        self.name()
    }
}

impl<KS, VS> Clone for SessionStoreRef<KS, VS> {
    fn clone(&self) -> Self {
        Self {
            builder: Arc::clone(&self.builder),
        }
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> fmt::Debug for SessionStoreRef<KS, VS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionStoreRef")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}
