//! [`QueryableStore`]: the kinds of store that interactive queries read, each with its
//! read-only view, so that [`Queries::store`] is one method for all of them (Kafka
//! Streams' `QueryableStoreType`, told by the store's builder type instead of an argument).

use streams_state::{
    KeyValueStoreBuilder, Serde, SessionStoreBuilder, TypedStoreBuilder, WindowStoreBuilder,
};

use super::{Queries, QueryError, ReadOnlyKeyValueStore, ReadOnlySessionStore, ReadOnlyWindowStore};

/// A store builder whose stores interactive queries read: key-value
/// ([`ReadOnlyKeyValueStore`]), window ([`ReadOnlyWindowStore`]) and session
/// ([`ReadOnlySessionStore`]) stores. Versioned stores are not queryable.
pub trait QueryableStore: TypedStoreBuilder {
    /// The read-only view of such a store over an application's tasks.
    type ReadOnly;

    /// The view of the store `name`, read with these serdes; fails when the topology has
    /// no such store, or one of another kind.
    ///
    /// # Errors
    /// [`QueryError::UnknownStore`]; [`QueryError::WrongKind`].
    fn read_only(
        queries: &Queries,
        name: &str,
        key_serde: Self::KeySerde,
        value_serde: Self::ValueSerde,
    ) -> Result<Self::ReadOnly, QueryError>;
}

macro_rules! queryable {
    ($($builder:ident => $view:ident, $named:ident;)*) => {
        $(impl<KS: Serde + Clone, VS: Serde + Clone> QueryableStore for $builder<KS, VS> {
            type ReadOnly = $view<KS, VS>;

            fn read_only(
                queries: &Queries,
                name: &str,
                key_serde: KS,
                value_serde: VS,
            ) -> Result<Self::ReadOnly, QueryError> {
                queries.$named(name, key_serde, value_serde)
            }
        })*
    };
}

queryable! {
    KeyValueStoreBuilder => ReadOnlyKeyValueStore, store_named;
    WindowStoreBuilder => ReadOnlyWindowStore, window_store_named;
    SessionStoreBuilder => ReadOnlySessionStore, session_store_named;
}
