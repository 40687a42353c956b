//! Versioned key-value stores (Kafka Streams' KIP-889): every key keeps its values over
//! time, so a reader asks for the value a key had *as of* a timestamp, as a stream-table
//! join of late records needs.
//!
//! # Model
//!
//! A key's history is a sequence of versions ordered by timestamp; a version holds a value
//! or a tombstone (a deletion) and is valid from its own timestamp until the timestamp of
//! the next newer version (`valid_to`, exclusive; none for the latest). A put at a
//! timestamp that already has a version replaces it. `get` is the latest version,
//! `get_as_of(t)` the newest version with timestamp `<= t`; a tombstone answers `None`.
//!
//! The store's **observed stream time** is the largest timestamp put so far. With a history
//! retention `r`, a put older than `stream time - r` is dropped ([`PutOutcome::Expired`])
//! and `get_as_of(t)` for `t < stream time - r` answers `None`, as in Kafka Streams. The
//! latest version of a key never expires. Versions that can no longer answer any query
//! (a newer version exists at or before `stream time - r`) are removed when their key is
//! written again.
//!
//! # Byte layout
//!
//! Built on the bytes-level [`KeyValueStore`](crate::KeyValueStore) stack (in memory or
//! RocksDB, change-logged and restored like any key-value store; never cached), every
//! version is one entry:
//!
//! ```text
//! key:   [key length: 4 B big-endian][key bytes][!(timestamp with its sign bit flipped): 8 B big-endian]
//! value: [0] for a tombstone, or [1][value bytes]
//! ```
//!
//! The length prefix keeps every key's versions contiguous (no key is a byte prefix of
//! another's entries); the inverted timestamp orders a key's versions newest first, so the
//! version as of `t` is the first entry at or after `[key][inverted t]`. The stream time is
//! kept under the key `[0xFF 0xFF 0xFF 0xFF]`, which no version's key can be. The changelog
//! is Kafka Streams' (see [`changelog`]): one record per version, at its timestamp.
//!
//! ```
//! use std::{cell::RefCell, rc::Rc, time::Duration};
//! use streams_state::serde::{StringSerde, U64Serde};
//! use streams_state::versioned::PutOutcome;
//! use streams_state::{SharedKeyValueStore, StoreBuildContext, StoreBuilder, Stores};
//!
//! let builder = Stores::in_memory_versioned_kv("prices", Duration::from_secs(60), StringSerde, U64Serde);
//! let shared: SharedKeyValueStore = Rc::new(RefCell::new(builder.build(StoreBuildContext::default())?));
//! let prices = builder.open(shared);
//! let k = "apple".to_string();
//! assert_eq!(prices.put(&k, Some(&10), 1_000)?, PutOutcome::Latest);
//! assert_eq!(prices.put(&k, Some(&12), 5_000)?, PutOutcome::Latest);
//! assert_eq!(prices.put(&k, Some(&11), 3_000)?, PutOutcome::ValidTo(5_000)); // out of order
//! assert_eq!(prices.get_as_of(&k, 4_000)?.map(|r| r.value), Some(11));
//! assert_eq!(prices.get(&k)?.map(|r| (r.value, r.timestamp, r.valid_to)), Some((12, 5_000, None)));
//! prices.delete(&k, 6_000)?;
//! assert_eq!(prices.get(&k)?, None);
//! assert_eq!(prices.get_as_of(&k, 5_500)?.map(|r| r.valid_to), Some(Some(6_000)));
//! # Ok::<(), streams_state::StoreError>(())
//! ```

mod builder;
pub mod changelog;
mod schema;
mod store;

pub use builder::VersionedStoreBuilder;
pub use store::{PutOutcome, VersionedKeyValueStore, VersionedRecord};

#[cfg(test)]
mod tests;
