//! [`TypedStoreBuilder`]: what a builder of one kind of store (key-value, window, session,
//! versioned) tells the layers above it, beyond the object-safe [`StoreBuilder`]: the
//! serdes of its keys and values and the typed handle it opens on a built instance.
//!
//! The topology's store references, its `store` method and the processor context's
//! `store` are each written once against this trait, so a new kind of store plugs in by
//! implementing it for its builder.

use crate::builder::{KeyValueStoreBuilder, StoreBuilder};
use crate::serde::Serde;
use crate::session::{SessionStore, SessionStoreBuilder};
use crate::typed::{KvStore, SharedKeyValueStore};
use crate::versioned::{VersionedKeyValueStore, VersionedStoreBuilder};
use crate::window::{WindowStore, WindowStoreBuilder};

/// A builder of one kind of store, with the typed handle it opens.
///
/// Implemented by [`KeyValueStoreBuilder`] ([`KvStore`]), [`WindowStoreBuilder`]
/// ([`WindowStore`]), [`SessionStoreBuilder`] ([`SessionStore`]) and
/// [`VersionedStoreBuilder`] ([`VersionedKeyValueStore`]).
pub trait TypedStoreBuilder: StoreBuilder + Sized {
    /// The serde of the store's keys.
    type KeySerde: Serde + Clone;
    /// The serde of the store's values.
    type ValueSerde: Serde + Clone;
    /// The typed handle on one instance of the store.
    type Handle: 'static;

    /// The typed handle on `store`, an instance this builder built.
    fn open(&self, store: SharedKeyValueStore) -> Self::Handle;

    /// The serdes of the store's keys and values.
    fn serdes(&self) -> (Self::KeySerde, Self::ValueSerde);
}

macro_rules! typed_store_builder {
    ($($builder:ident => $handle:ident,)*) => {
        $(impl<KS: Serde + Clone, VS: Serde + Clone> TypedStoreBuilder for $builder<KS, VS> {
            type KeySerde = KS;
            type ValueSerde = VS;
            type Handle = $handle<KS, VS>;

            fn open(&self, store: SharedKeyValueStore) -> Self::Handle {
                // The builder's inherent `open` (inherent methods come first).
                $builder::open(self, store)
            }

            fn serdes(&self) -> (KS, VS) {
                ($builder::key_serde(self), $builder::value_serde(self))
            }
        })*
    };
}

typed_store_builder! {
    KeyValueStoreBuilder => KvStore,
    WindowStoreBuilder => WindowStore,
    SessionStoreBuilder => SessionStore,
    VersionedStoreBuilder => VersionedKeyValueStore,
}
