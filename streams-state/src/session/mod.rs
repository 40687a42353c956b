//! Session stores: values per key and session (a `[start, end]` span of activity), with
//! retention by session end, built on the same segmented bytes stack as the
//! [window stores](crate::window) (caching, change-logging, restore and exactly-once work
//! unchanged).
//!
//! # Key layout
//!
//! ```text
//! [segment id of end: 8 B][key bytes][end: 8 B][start: 8 B]
//! ```
//!
//! with the numbers big-endian, sign bit flipped (byte order is numeric order), and
//! `segment id = end div segment interval` (floor), the interval being
//! `max(retention / 2, 60 s)`. A put of the same key, start and end overwrites.
//!
//! # Orders
//!
//! Segments ascending (by end), and inside a segment byte order of `[key][end][start]`;
//! `backward_*` exactly reversed. So `find_sessions` and `fetch` of one key yield sessions
//! by end, then by start. The key-range forms and `all` interleave keys that are byte
//! prefixes of one another, as described for window stores; each entry's key is read back
//! and compared, so other keys never leak into a result.
//!
//! # Retention
//!
//! The stream time is the largest session end written or restored (recovered from the last
//! segment on open). A session is visible iff `end > stream time - retention`; writes of
//! invisible sessions are dropped, and segments whose ends are all invisible are deleted
//! whole, unlogged, as for window stores.
//!
//! ```
//! use std::time::Duration;
//! use std::{cell::RefCell, rc::Rc};
//! use streams_state::serde::{StringSerde, U64Serde};
//! use streams_state::{SharedKeyValueStore, StoreBuildContext, StoreBuilder, Stores, Windowed};
//!
//! let b = Stores::in_memory_session_store("visits", Duration::from_secs(600), StringSerde, U64Serde);
//! let shared: SharedKeyValueStore = Rc::new(RefCell::new(b.build(StoreBuildContext::default())?));
//! let visits = b.open(shared);
//! let s = |start, end| Windowed { key: "ann".to_string(), start, end };
//! visits.put(&s(0, 10_000), &2)?;
//! visits.put(&s(50_000, 70_000), &3)?;
//! let reader = visits.read()?;
//! // Sessions a record at 65 s with a 10 s gap would merge with: end >= 55 s, start <= 75 s.
//! let found: Vec<_> = reader.find_sessions(&"ann".to_string(), 55_000, 75_000)?.collect::<Result<_, _>>()?;
//! assert_eq!(found, vec![(s(50_000, 70_000), 3)]);
//! # Ok::<(), streams_state::StoreError>(())
//! ```

mod builder;
mod store;

pub use builder::SessionStoreBuilder;
pub use store::{SessionIter, SessionStore, SessionStoreReader};
