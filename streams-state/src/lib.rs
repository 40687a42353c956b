//! Ordered key-value state stores for stream processing: in-memory and RocksDB, with a
//! write-back cache, change-logging and restore, layered as in Kafka Streams:
//! typed facade -> caching -> change-logging -> inner bytes store.
//!
//! The central promise is the **ordering contract** of [`KeyValueStore`]: every iterator,
//! through every layer, yields keys in byte order, lazily, with memory independent of the
//! number of entries. Range queries over typed keys are offered only for key serdes whose
//! byte order is their logical order ([`OrderedSerde`]).
//!
//! Window and session stores ([`window`], [`session`]) are segmented stores on the same
//! bytes stack: a key schema with the time in it, retention by stream time and whole
//! segments dropped as it passes. Timestamped key-value stores are key-value stores with a
//! [`ValueAndTimestampSerde`] value serde.
//!
//! This crate knows nothing of Kafka: change-logging goes through the [`ChangelogSink`]
//! trait, which the runtime implements with a producer.

mod bounds;
mod builder;
mod caching;
mod changelog;
mod error;
mod flushed;
mod handle;
mod iter;
mod kind;
mod layer;
mod logging;
mod memory;
mod overlay;
mod rocksdb;
pub mod serde;
pub mod session;
mod store;
mod thread_cache;
mod timestamped;
mod transactional;
mod typed;
pub mod versioned;
pub mod window;

pub use crate::rocksdb::{RocksDbKeyValueStore, RocksDbResources};
/// The `rocksdb` crate (rust-rocksdb) the RocksDB stores are built on, re-exported so that
/// options setters ([`RocksDbResources::with_options_setter`], the runtime's
/// `rocksdb_config_setter`) name the same [`Options`](librocksdb::Options) type without a
/// dependency of their own.
pub use ::rocksdb as librocksdb;
pub use bounds::{KeyRange, prefix_successor};
pub use builder::{KeyValueStoreBuilder, StoreBuildContext, StoreBuilder, StoreLayout, Stores};
pub use caching::{CachingKeyValueStore, ENTRY_OVERHEAD};
pub use changelog::{ChangelogError, ChangelogRecord, ChangelogSink, VecChangelog};
pub use error::{Result, SerdeError, StoreError};
pub use flushed::{Flushed, FlushedEntries, FlushedEntry};
pub use iter::{KeyValue, KeyValueIter};
pub use kind::TypedStoreBuilder;
pub use logging::ChangeLoggingKeyValueStore;
pub use memory::InMemoryKeyValueStore;
pub use serde::{OrderedSerde, Serde};
pub use session::{SessionStore, SessionStoreBuilder, SessionStoreReader};
pub use store::{FlushListener, KeyValueStore, StateStore, StoreStats};
pub use thread_cache::ThreadCache;
pub use timestamped::{ValueAndTimestamp, ValueAndTimestampSerde};
pub use transactional::TransactionalKeyValueStore;
pub use typed::{KvStore, KvStoreReader, SharedKeyValueStore, TypedIter};
pub use versioned::{VersionedKeyValueStore, VersionedRecord, VersionedStoreBuilder};
pub use window::{WindowStore, WindowStoreBuilder, WindowStoreReader, Windowed};
