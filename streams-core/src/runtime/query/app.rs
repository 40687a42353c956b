//! The interactive-query methods of [`KafkaStreams`], and [`Queries`], the same methods on
//! a cloneable `Send + Sync` handle for servers that answer from threads of their own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use streams_state::Serde;

use super::HostInfo;
use super::KeyQueryMetadata;
use super::QueryError;
use super::ReadOnlyKeyValueStore;
use super::ReadOnlySessionStore;
use super::ReadOnlyWindowStore;
use super::StreamsMetadata;
use super::discovery::Directory;
use super::discovery::Resolved;
use super::handle::{Handle, Reader};
use super::kinds::QueryableStore;
use super::router::Router;
use crate::model::State;
use crate::model::TaskId;
use crate::model::partitioner::default_partition;
use crate::processor::TypedStoreRef;
use crate::runtime::KafkaStreams;
use crate::runtime::status::Status;
use crate::topology::Topology;

/// Interactive queries on a running application from any thread: cheap to clone, `Send`
/// and `Sync` (a [`KafkaStreams`] is neither, as it may hold an embedded mock cluster).
/// Made by [`KafkaStreams::queries`]; its methods are those of [`KafkaStreams`] of the same
/// names.
#[derive(Clone)]
pub struct Queries {
    pub(crate) router: Arc<Router>,
    pub(crate) directory: Arc<Directory>,
    pub(crate) topology: Arc<Topology>,
    pub(crate) status: Arc<Status>,
    /// The partition count of each (non-global) sub-topology, set by `start`.
    pub(crate) partitions: Arc<OnceLock<BTreeMap<u32, i32>>>,
}

impl std::fmt::Debug for Queries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queries")
            .field("process_id", &self.directory.process_id())
            .finish_non_exhaustive()
    }
}

impl KafkaStreams {
    /// A `Send + Sync` handle for interactive queries, e.g. for an HTTP server's threads.
    pub fn queries(&self) -> Queries {
        self.queries.clone()
    }

    /// See [`Queries::store`].
    ///
    /// # Errors
    /// As [`Queries::store`].
    pub fn store<B: QueryableStore>(&self, store: &TypedStoreRef<B>) -> Result<B::ReadOnly, QueryError> {
        self.queries.store(store)
    }

    /// See [`Queries::all_metadata`].
    pub fn all_metadata(&self) -> Vec<StreamsMetadata> {
        self.queries.all_metadata()
    }

    /// See [`Queries::metadata_for_store`].
    pub fn metadata_for_store(&self, store: &str) -> Vec<StreamsMetadata> {
        self.queries.metadata_for_store(store)
    }

    /// See [`Queries::query_metadata_for_key`].
    ///
    /// # Errors
    /// As [`Queries::query_metadata_for_key`].
    pub fn query_metadata_for_key<KS: Serde>(
        &self,
        store: &str,
        key: &KS::Target,
        key_serde: &KS,
    ) -> Result<KeyQueryMetadata, QueryError> {
        self.queries.query_metadata_for_key(store, key, key_serde)
    }

    /// See [`Queries::query_metadata_for_partition`].
    ///
    /// # Errors
    /// As [`Queries::query_metadata_for_partition`].
    pub fn query_metadata_for_partition(
        &self,
        store: &str,
        partition: i32,
    ) -> Result<KeyQueryMetadata, QueryError> {
        self.queries.query_metadata_for_partition(store, partition)
    }
}

impl Queries {
    /// The application's state.
    pub fn state(&self) -> State {
        self.status.state()
    }

    /// A read-only view of the store `store` over this instance's tasks, for interactive
    /// queries (see [`query`](crate::runtime::query)): a [`ReadOnlyKeyValueStore`] of a
    /// [`StoreRef`](crate::StoreRef), a [`ReadOnlyWindowStore`] of a
    /// [`WindowStoreRef`](crate::WindowStoreRef), a [`ReadOnlySessionStore`] of a
    /// [`SessionStoreRef`](crate::SessionStoreRef). Usable once the application runs;
    /// while it rebalances, queries fail with the retriable [`QueryError::Rebalancing`].
    ///
    /// # Errors
    /// [`QueryError::UnknownStore`] when the topology has no store of that name.
    pub fn store<B: QueryableStore>(&self, store: &TypedStoreRef<B>) -> Result<B::ReadOnly, QueryError> {
        let (key_serde, value_serde) = store.serdes();
        B::read_only(self, store.name(), key_serde, value_serde)
    }

    /// The view of the store `name` of the kind `H` reads, with these serdes.
    fn named<H, KS, VS>(&self, name: &str, key_serde: KS, value_serde: VS) -> Result<H, QueryError>
    where
        H: Handle<KS, VS>,
        VS: Serde,
    {
        let (global, strip) = self.check_kind(name, H::KIND, &value_serde)?;
        let router = self.router.clone();
        Ok(H::from_reader(Reader::new(
            name,
            global,
            strip,
            router,
            key_serde,
            value_serde,
        )))
    }

    /// Checks that the store `name` is of kind `asked` ("key-value", "window" or
    /// "session") and readable with `value_serde`: whether it is global, and whether its
    /// values' timestamps are to be dropped before `value_serde` reads them.
    fn check_kind<VS: Serde>(
        &self,
        name: &str,
        asked: &str,
        value_serde: &VS,
    ) -> Result<(bool, bool), QueryError> {
        let def = self
            .topology
            .store_def(name)
            .ok_or_else(|| QueryError::UnknownStore(name.to_owned()))?;
        let layout = def.builder.layout();
        let timestamped = layout.timestamped();
        let wants_timestamps = value_serde.is_value_and_timestamp();
        let stamped = |t: bool, kind: &str| {
            if t {
                format!("timestamped {kind}")
            } else {
                kind.to_owned()
            }
        };
        if layout.kind() != asked || (wants_timestamps && !timestamped) {
            return Err(QueryError::WrongKind {
                store: name.to_owned(),
                kind: stamped(timestamped, layout.kind()),
                asked: stamped(wants_timestamps, asked),
            });
        }
        Ok((def.global, timestamped && !wants_timestamps))
    }

    /// Every instance of the application this one knows of, with the tasks it hosts and
    /// their stores. Other instances are known only when `application.server` is set:
    /// under `group.protocol=streams` from the group coordinator's endpoint map, otherwise
    /// from their announcements on the `<application.id>-instances` topic (see
    /// `docs/interactive-queries.md`). Without it, only this instance is listed.
    pub fn all_metadata(&self) -> Vec<StreamsMetadata> {
        self.directory
            .instances()
            .into_iter()
            .map(|r| self.metadata(r))
            .collect()
    }

    /// The instances hosting at least one task of the store `store`, or a standby of one.
    pub fn metadata_for_store(&self, store: &str) -> Vec<StreamsMetadata> {
        self.all_metadata()
            .into_iter()
            .filter(|m| m.stores.contains(store) || m.standby_stores.contains(store))
            .collect()
    }

    /// Which instance hosts `key` of the store `store`, and in which partition: the key is
    /// serialized with `key_serde` and placed by the default partitioner (murmur2), as a
    /// producer places a record with that key in the store's input topics. With another
    /// partitioner, compute the partition and call
    /// [`query_metadata_for_partition`](Self::query_metadata_for_partition).
    ///
    /// # Errors
    /// [`QueryError::UnknownStore`], [`QueryError::Serde`];
    /// [`QueryError::NotRunning`] before `start`.
    pub fn query_metadata_for_key<KS: Serde>(
        &self,
        store: &str,
        key: &KS::Target,
        key_serde: &KS,
    ) -> Result<KeyQueryMetadata, QueryError> {
        let (_, partitions) = self.store_subtopology(store)?;
        let bytes = key_serde
            .serialize(key)
            .map_err(|source| QueryError::Serde { what: "key", source })?;
        self.query_metadata_for_partition(store, default_partition(&bytes, partitions))
    }

    /// Which instance hosts partition `partition` of the store `store`. `active` is `None`
    /// while no instance is known to host it (e.g. during a rebalance): retry.
    ///
    /// # Errors
    /// [`QueryError::UnknownStore`]; [`QueryError::NotRunning`] before `start`.
    pub fn query_metadata_for_partition(
        &self,
        store: &str,
        partition: i32,
    ) -> Result<KeyQueryMetadata, QueryError> {
        let (subtopology, _) = self.store_subtopology(store)?;
        let task = TaskId {
            subtopology,
            partition,
        };
        let instances = self.directory.instances();
        let active = instances
            .iter()
            .find(|r| r.tasks.contains(&task))
            .map(|r| self.host(r));
        let standbys = instances
            .iter()
            .filter(|r| r.standbys.contains(&task))
            .map(|r| self.host(r))
            .collect();
        Ok(KeyQueryMetadata {
            partition,
            active,
            standbys,
        })
    }

    /// The sub-topology of `store` (a non-global store) and its partition count.
    fn store_subtopology(&self, store: &str) -> Result<(u32, i32), QueryError> {
        let index = self
            .topology
            .stores
            .iter()
            .position(|s| s.builder.name() == store && !s.global)
            .ok_or_else(|| QueryError::UnknownStore(store.to_owned()))?;
        let sub = self
            .topology
            .subtopologies()
            .iter()
            .find(|s| s.stores.contains(&index))
            .ok_or_else(|| QueryError::UnknownStore(store.to_owned()))?;
        let partitions = self
            .partitions
            .get()
            .and_then(|p| p.get(&sub.id))
            .copied()
            .ok_or(QueryError::NotRunning { state: self.state() })?;
        Ok((sub.id, partitions))
    }

    fn host(&self, r: &Resolved) -> HostInfo {
        HostInfo {
            process_id: r.process_id.clone(),
            endpoint: r.endpoint.clone(),
            local: r.process_id.as_deref() == Some(self.directory.process_id()),
        }
    }

    fn metadata(&self, r: Resolved) -> StreamsMetadata {
        StreamsMetadata {
            host: self.host(&r),
            stores: self.stores_of(&r.tasks),
            standby_stores: self.stores_of(&r.standbys),
            tasks: r.tasks,
            standby_tasks: r.standbys,
        }
    }

    /// The stores of `tasks`' sub-topologies.
    fn stores_of(&self, tasks: &BTreeSet<TaskId>) -> BTreeSet<String> {
        let subs: BTreeSet<u32> = tasks.iter().map(|t| t.subtopology).collect();
        self.topology
            .subtopologies()
            .iter()
            .filter(|s| subs.contains(&s.id))
            .flat_map(|s| {
                s.stores
                    .iter()
                    .map(|&i| self.topology.stores[i].builder.name().to_owned())
            })
            .collect()
    }
}

/// The methods that read a store by name with the serdes given, one per kind of store:
/// on [`Queries`] with the docs given here, and on [`KafkaStreams`] as the same.
macro_rules! named_stores {
    (@method $(#[$doc:meta])* fn $method:ident -> $view:ident = self $(.$call:ident)+) => {
        $(#[$doc])*
        pub fn $method<KS, VS>(
            &self,
            name: &str,
            key_serde: KS,
            value_serde: VS,
        ) -> Result<$view<KS, VS>, QueryError>
        where
            KS: Serde + Clone,
            VS: Serde + Clone,
        {
            self $(.$call)+(name, key_serde, value_serde)
        }
    };
    ($($(#[$doc:meta])* fn $method:ident -> $view:ident;)*) => {
        impl KafkaStreams {
            $(named_stores! {
                @method
                #[doc = concat!("See [`Queries::", stringify!($method), "`].")]
                ///
                /// # Errors
                #[doc = concat!("As [`Queries::", stringify!($method), "`].")]
                fn $method -> $view = self.queries.$method
            })*
        }

        impl Queries {
            $(named_stores! { @method $(#[$doc])* fn $method -> $view = self.named })*
        }
    };
}

named_stores! {
    /// [`store`](Self::store) by name, with the serdes given here: for stores made
    /// elsewhere (e.g. named by the DSL's `Materialized`). For a timestamped store (the
    /// DSL's), a plain `value_serde` reads the values without their timestamps and a
    /// [`ValueAndTimestampSerde`](streams_state::ValueAndTimestampSerde) with them.
    ///
    /// # Errors
    /// [`QueryError::UnknownStore`] when the topology has no store of that name;
    /// [`QueryError::WrongKind`] when it is not a key-value store, or when timestamps are
    /// asked of a plain one.
    fn store_named -> ReadOnlyKeyValueStore;

    /// A window store by name (see [`store`](Self::store)), with the serdes given here (e.g. for
    /// the DSL's windowed aggregations: a plain value serde reads values without their
    /// timestamps, a [`ValueAndTimestampSerde`](streams_state::ValueAndTimestampSerde)
    /// with them).
    ///
    /// # Errors
    /// [`QueryError::UnknownStore`]; [`QueryError::WrongKind`] when it is not a window
    /// store, or when timestamps are asked of a plain one.
    fn window_store_named -> ReadOnlyWindowStore;

    /// A session store by name (see [`store`](Self::store)), with the serdes given here (e.g.
    /// for the DSL's session aggregations).
    ///
    /// # Errors
    /// [`QueryError::UnknownStore`]; [`QueryError::WrongKind`] when it is not a session
    /// store.
    fn session_store_named -> ReadOnlySessionStore;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync + Clone>() {}

    #[test]
    fn query_handles_cross_threads() {
        send_sync::<Queries>();
        send_sync::<ReadOnlyKeyValueStore<streams_state::serde::StringSerde, streams_state::serde::U64Serde>>(
        );
        send_sync::<ReadOnlyWindowStore<streams_state::serde::StringSerde, streams_state::serde::U64Serde>>();
        send_sync::<ReadOnlySessionStore<streams_state::serde::StringSerde, streams_state::serde::U64Serde>>(
        );
    }
}
