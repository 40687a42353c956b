//! Interactive queries: reading a running application's stores from outside its topology
//! (an HTTP handler, a test, another thread).
//!
//! [`KafkaStreams::store`](crate::KafkaStreams::store) returns, for a key-value store's
//! reference, a [`ReadOnlyKeyValueStore`]: a typed, cloneable, `Send + Sync` handle over
//! every local task's instance of one store; for a window or session store's, a
//! [`ReadOnlyWindowStore`] or a [`ReadOnlySessionStore`], served the same way (the kinds
//! are [`QueryableStore`]'s). See `docs/interactive-queries.md`.
//!
//! # Kinds and timestamped stores
//!
//! A handle is made only for a store of its kind (else [`QueryError::WrongKind`]); the kind
//! comes from the store's builder ([`streams_state::StoreLayout`]), which also says whether
//! its values are timestamped (stored with
//! [`ValueAndTimestampSerde`](streams_state::ValueAndTimestampSerde), as the DSL's stores).
//! Asked with a `ValueAndTimestampSerde`, a timestamped store returns values with their
//! timestamps; asked with a plain value serde, the handle drops each value's 8-byte
//! timestamp before decoding it (Kafka Streams' `keyValueStore()` of a timestamped store).
//! A plain store asked for timestamps is the wrong kind.
//!
//! # How a query is served
//!
//! The stores stay owned by their stream threads: no store is shared across threads and no
//! lock is taken on the per-record path. A query is sent to every stream thread's inbox;
//! each thread answers between two loop iterations, for the tasks it runs, reading
//! through the same layers its processors read (cache included); the answers are merged
//! in key order. An idle thread waits for records in slices of at most 5 ms and checks
//! its inbox between them, so a query waits at most that long plus the thread's current
//! batch.
//!
//! # Consistency
//!
//! - Each task's part reflects its store after some record and before the next: never
//!   half a record.
//! - A query sees every record its tasks have processed, including writes still in the
//!   cache and, under exactly-once, writes of the open transaction (read-uncommitted, as
//!   Kafka Streams' interactive queries before KIP-892).
//! - Parts of different tasks are read at slightly different moments.
//! - A query never returns a partial answer: while this instance is rebalancing or
//!   restoring, or if a rebalance began while it was answered, it fails with
//!   [`QueryError::Rebalancing`] (retry).
//! - Ranges are read in chunks (at most [`KeyValueCursor::chunk_size`] entries per round
//!   trip to the threads). A [`KeyValueCursor`] continues after the last key it returned,
//!   also across calls ([`KeyValueCursor::resume_token`], [`KeyValueCursor::resume`]): no
//!   key present throughout is skipped or returned twice; keys written between chunks may
//!   or may not appear. A scan never continues across a rebalance of this instance (its
//!   tasks may have changed): the cursor then fails with [`QueryError::Rebalancing`] for
//!   good, and the scan must start over.
//! - Without [`ReadOnlyKeyValueStore::for_partition`] a query covers the partitions this
//!   instance hosts when it is answered: a key of another partition reads as absent, and
//!   during an incremental rebalance a partition moving between two threads of this
//!   instance is briefly hosted by neither. With it, a partition not hosted here fails
//!   with [`QueryError::NotHosted`]: the answer for one key is exact.
//!
//! # Stale stores
//!
//! A handle made [`stale_stores`](ReadOnlyKeyValueStore::stale_stores) also reads this
//! instance's standby and restoring tasks, and is answered during rebalances: each thread
//! answers for its running tasks and passes the query to its state updater, which answers
//! for the copies it holds (`stale.rs`). Such an answer may be behind the active
//! task elsewhere; [`partition_lags`](ReadOnlyKeyValueStore::partition_lags) says by how
//! much ([`LagInfo`]).

mod app;
pub use app::Queries;
mod kinds;
pub use kinds::QueryableStore;
pub(crate) mod discovery;
mod handle;
mod read;
mod router;
pub(crate) mod serve;
mod stale;
mod store;
mod window_store;
mod windowed;

pub(crate) use router::{Inbox, Router};
pub use store::{
    Chunk, DEFAULT_CHUNK_SIZE, DEFAULT_QUERY_TIMEOUT, KeyValueCursor, ReadOnlyKeyValueStore, ResumeToken,
};
pub use window_store::{ReadOnlySessionStore, ReadOnlyWindowStore, WindowChunk, WindowCursor};

use std::collections::BTreeSet;
use std::time::Duration;

use crate::model::{State, TaskId};
use crate::runtime::restore::held::ChangelogLag;

/// An instance of the application: how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostInfo {
    /// Its process id (kept in its state directory across restarts); `None` for an instance
    /// known from the streams group's endpoint map (`group.protocol=streams`), which names
    /// instances by endpoint only.
    pub process_id: Option<String>,
    /// Its `application.server`, if it set one.
    pub endpoint: Option<String>,
    /// Whether it is this instance.
    pub local: bool,
}

/// An instance of the application and what it hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamsMetadata {
    /// The instance.
    pub host: HostInfo,
    /// The tasks it hosts (running, restoring, or about to run).
    pub tasks: BTreeSet<TaskId>,
    /// The stores of those tasks.
    pub stores: BTreeSet<String>,
    /// The standby tasks it keeps (held, or waiting for their state directory): warm
    /// copies it can answer stale queries from.
    pub standby_tasks: BTreeSet<TaskId>,
    /// The stores of those standby tasks.
    pub standby_stores: BTreeSet<String>,
}

impl StreamsMetadata {
    /// The input partitions of its tasks (of every sub-topology).
    pub fn partitions(&self) -> BTreeSet<i32> {
        self.tasks.iter().map(|t| t.partition).collect()
    }
}

/// Where one key of a store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyQueryMetadata {
    /// The key's partition (of the store's input topics).
    pub partition: i32,
    /// The instance hosting that partition's task; `None` while none is known (retry).
    pub active: Option<HostInfo>,
    /// The instances keeping a standby of that task, which answer a
    /// [`stale_stores`](ReadOnlyKeyValueStore::stale_stores) query for it (Kafka Streams'
    /// `standbyHosts`).
    pub standbys: Vec<HostInfo>,
}

/// Which kind of copy of a store a task's part was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Replica {
    /// A running active task: up to date with what this instance processed.
    Active,
    /// An active task restoring its stores from their changelogs.
    Restoring,
    /// A standby task following the changelogs of a task another instance runs.
    Standby,
}

/// How far one store instance is behind its changelog, as Kafka Streams' `LagInfo`
/// ([`ReadOnlyKeyValueStore::partition_lags`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LagInfo {
    /// The kind of copy.
    pub replica: Replica,
    /// The next changelog offset it will apply, when known.
    pub position: Option<i64>,
    /// The changelog's end offset when last asked, when known.
    pub end: Option<i64>,
    /// Changelog records it has not applied yet: 0 for a running active task (its store is
    /// where the changelog comes from); `None` while not known (a standby before its first
    /// look at the changelog's end, a store queued for restoration).
    pub offset_lag: Option<i64>,
}

impl LagInfo {
    /// A copy of kind `replica` standing at `lag`.
    pub(crate) fn of(replica: Replica, lag: ChangelogLag) -> Self {
        Self {
            replica,
            position: lag.position,
            end: lag.end,
            offset_lag: lag.offset_lag,
        }
    }
}

/// Why a query was not answered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The topology has no store of that name.
    #[error("store `{0}` is not a store of this topology")]
    UnknownStore(String),
    /// The store is not of the kind the query asked for (e.g. a window query of a
    /// key-value store, or timestamped values of a plain store).
    #[error("store `{store}` is a {kind} store, not a {asked} store")]
    WrongKind {
        /// The store.
        store: String,
        /// Its kind: `key-value`, `timestamped key-value`, `window`, `timestamped window`
        /// or `session`.
        kind: String,
        /// The kind asked for.
        asked: String,
    },
    /// This instance is rebalancing or restoring the store, or a rebalance began while the
    /// query was answered: not available here now. Retry, after asking again which
    /// instance hosts the key.
    #[error("not available here now (a rebalance or restoration is under way): retry")]
    Rebalancing,
    /// The application is not running (not started yet, shutting down, or failed).
    #[error("the application is not running (state {state:?})")]
    NotRunning {
        /// Its state.
        state: State,
    },
    /// The query named one partition, whose task this instance does not host (now): ask
    /// [`KafkaStreams::query_metadata_for_key`](crate::KafkaStreams::query_metadata_for_key)
    /// again and retry there.
    #[error("partition {partition} of store `{store}` is not hosted by this instance: retry where it is")]
    NotHosted {
        /// The store.
        store: String,
        /// The partition.
        partition: i32,
    },
    /// A stream thread did not answer in time (e.g. a long commit).
    #[error("no answer from the stream threads within {0:?}: retry")]
    Timeout(Duration),
    /// Reading the store failed.
    #[error("store `{store}`: {message}")]
    Store {
        /// The store.
        store: String,
        /// What failed.
        message: String,
    },
    /// A resume token's text is not one ([`ResumeToken`]'s `<epoch>.<key in hex>`).
    #[error("`{0}` is not a resume token")]
    BadToken(String),
    /// A key, bound or value could not be converted.
    #[error("cannot convert {what}: {source}")]
    Serde {
        /// "key", "value" or "bound".
        what: &'static str,
        /// The serde's error.
        #[source]
        source: streams_state::SerdeError,
    },
}

impl QueryError {
    /// Whether asking again later may succeed.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            Self::Rebalancing | Self::Timeout(_) | Self::NotHosted { .. }
        )
    }
}
