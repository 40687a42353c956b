//! Window stores: values per key and time window, with retention, built on the bytes-level
//! [`KeyValueStore`](crate::KeyValueStore) stack so caching, change-logging, restore,
//! checkpoints, exactly-once writes and metrics work as for key-value stores.
//!
//! # Key layout
//!
//! Every entry is one key-value pair of the bytes store, with the key
//!
//! ```text
//! [segment id: 8 B][key bytes][window start: 8 B][seq: 4 B big-endian]
//! ```
//!
//! where `segment id = window start div segment interval` (floor division, so negative
//! starts have negative segments) and both 8-byte numbers are big-endian **with the sign
//! bit flipped**, so byte order is numeric order. (Flipping the segment id's sign bit too,
//! beyond a plain big-endian id, keeps the segments of negative times before the others.)
//! The segment
//! interval is Kafka Streams' `max(retention / 2, 60 s)` (three segments). `seq` is 0,
//! so a put overwrites, unless the store retains duplicates (stream-stream join buffers):
//! then every put gets the next number of a counter of the store instance (from 1, reset
//! when the store is opened again) and adds an entry.
//!
//! # Orders
//!
//! Segments are visited in ascending order (descending for `backward_*`); inside a segment
//! entries come in byte order of `[key bytes][start][seq]` (reversed for `backward_*`), and
//! iteration is lazy: one seek per segment that holds data (none over spans of one or two
//! segments). Iterators come from a [`WindowStoreReader`] ([`WindowStore::read`]), which
//! holds a shared borrow of the store as [`KvStoreReader`](crate::KvStoreReader) does.
//!
//! - `fetch_range(key, from, to)` yields the windows of one key ascending by start, equal
//!   starts (duplicates) in insertion order; `backward_fetch_range` exactly reversed.
//! - `fetch_key_range`, `fetch_all` and `all` yield by segment, then by key bytes, then by
//!   start — where the byte comparison runs over the concatenation `[key][start]`, so when
//!   one key is a byte prefix of another (`"a"`, `"ab"`) their entries interleave by the
//!   bytes after the shorter key. Keys of one fixed width (or none a prefix of another)
//!   come strictly by key, then by start. Their `backward_*` forms are exactly reversed.
//!
//! A byte range inside a segment can hold keys that have the asked key as a byte prefix;
//! each entry's key is read back (its length minus the 20 bytes around it) and compared,
//! so they never leak into a result.
//!
//! # Retention
//!
//! The store's stream time is the largest window start written (or restored) so far,
//! recovered from the last segment when the store is opened. A window is **visible** iff
//! `start > stream time - retention` (Kafka Streams' `observedStreamTime - retention + 1`
//! bound); invisible windows are never returned, and writes to them are dropped. When the
//! stream time passes a segment's end, the whole segment is deleted with one
//! `delete_range` under the change-logging layer (drops are not logged; the changelog
//! topic's `compact,delete` policy with `retention.ms` = retention + 1 day ages them out,
//! and a restore drops what it restores of expired segments). See `retention.rs` for the
//! layers.
//!
//! ```
//! use std::time::Duration;
//! use std::{cell::RefCell, rc::Rc};
//! use streams_state::serde::{StringSerde, U64Serde};
//! use streams_state::{SharedKeyValueStore, StoreBuildContext, StoreBuilder, Stores};
//!
//! let minute = Duration::from_secs(60);
//! let builder = Stores::in_memory_window_store("clicks", minute * 10, minute, false, StringSerde, U64Serde);
//! let shared: SharedKeyValueStore = Rc::new(RefCell::new(builder.build(StoreBuildContext::default())?));
//! let clicks = builder.open(shared);
//! clicks.put(&"ann".to_string(), Some(&3), 0)?;
//! clicks.put(&"ann".to_string(), Some(&5), 60_000)?;
//! let reader = clicks.read()?;
//! let windows: Vec<(i64, u64)> = reader.fetch_range(&"ann".to_string(), 0, 60_000)?.collect::<Result<_, _>>()?;
//! assert_eq!(windows, vec![(0, 3), (60_000, 5)]);
//! drop(reader);
//! clicks.put(&"bob".to_string(), Some(&1), 700_000)?; // stream time 700 s: window 0 expires
//! assert_eq!(clicks.fetch(&"ann".to_string(), 0)?, None);
//! # Ok::<(), streams_state::StoreError>(())
//! ```

mod builder;
mod changelog_keys;
pub(crate) mod retention;
pub(crate) mod scan;
pub(crate) mod schema;
mod store;

pub use builder::{ADDITIONAL_CHANGELOG_RETENTION_MS, WindowStoreBuilder};
pub(crate) use builder::{SegmentedRecipe, millis, recipe_methods};
pub use store::{KeyWindowIter, WindowIter, WindowStore, WindowStoreReader};

/// A key in one time window (or one session).
///
/// For a window store `end` is `start + window size` (exclusive); for a session store
/// `start` and `end` are the session's first and last record times (inclusive).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Windowed<K> {
    /// The record key.
    pub key: K,
    /// The window's start (ms).
    pub start: i64,
    /// The window's end (ms).
    pub end: i64,
}
