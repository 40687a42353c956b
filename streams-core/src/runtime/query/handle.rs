//! [`Reader`], what every typed query handle holds (where to ask, and how to read the
//! answers), and [`handle_common!`], the methods the handles share.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use streams_state::Serde;

use super::router::{Router, Target};
use super::{DEFAULT_QUERY_TIMEOUT, QueryError};

/// What every handle holds: where to ask, and how to read the answers.
pub(super) struct Reader<KS, VS> {
    pub target: Target,
    pub router: Arc<Router>,
    pub key_serde: KS,
    pub value_serde: VS,
    pub timeout: Duration,
    /// The store's values are timestamped and `value_serde` reads the plain value: drop the
    /// 8-byte timestamp first.
    pub strip_timestamp: bool,
}

impl<KS: Clone, VS: Clone> Clone for Reader<KS, VS> {
    fn clone(&self) -> Self {
        Self {
            target: self.target.clone(),
            router: self.router.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            timeout: self.timeout,
            strip_timestamp: self.strip_timestamp,
        }
    }
}

impl<KS, VS> Reader<KS, VS> {
    /// A reader of every local task's instance of the store `name`, waiting the default
    /// timeout.
    pub fn new(
        name: &str,
        global: bool,
        strip_timestamp: bool,
        router: Arc<Router>,
        key_serde: KS,
        value_serde: VS,
    ) -> Self {
        Self {
            target: Target {
                store: Arc::from(name),
                global,
                partition: None,
                stale: false,
            },
            router,
            key_serde,
            value_serde,
            timeout: DEFAULT_QUERY_TIMEOUT,
            strip_timestamp,
        }
    }

    /// The `Debug` form of a handle named `handle` holding this reader.
    pub fn debug(&self, handle: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(handle)
            .field("name", &self.target.store)
            .field("partition", &self.target.partition)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<KS: Serde, VS: Serde> Reader<KS, VS> {
    /// `key` serialized.
    pub fn key(&self, key: &KS::Target) -> Result<Bytes, QueryError> {
        self.key_serde
            .serialize(key)
            .map(Bytes::from)
            .map_err(|source| QueryError::Serde { what: "key", source })
    }

    /// A key read from its stored bytes.
    pub fn read_key(&self, bytes: &[u8]) -> Result<KS::Target, QueryError> {
        self.key_serde
            .deserialize(bytes)
            .map_err(|source| QueryError::Serde { what: "key", source })
    }

    /// A value read from its stored bytes.
    pub fn value(&self, bytes: &[u8]) -> Result<VS::Target, QueryError> {
        self.value_serde
            .deserialize(plain_value(bytes, self.strip_timestamp)?)
            .map_err(|source| QueryError::Serde {
                what: "value",
                source,
            })
    }
}

/// The value bytes of a stored value: without its leading 8-byte timestamp when `strip`.
fn plain_value(bytes: &[u8], strip: bool) -> Result<&[u8], QueryError> {
    if !strip {
        return Ok(bytes);
    }
    bytes.get(8..).ok_or_else(|| QueryError::Serde {
        what: "value",
        source: streams_state::SerdeError::new(
            "ValueAndTimestamp",
            format!("needs at least 8 bytes of timestamp, got {}", bytes.len()),
        ),
    })
}

/// A range read in chunks: the answers buffered, and how a chunk more is fetched.
pub(super) trait Chunked {
    /// An entry as the stream threads answer it.
    type Raw;

    /// The answers not returned yet.
    fn buffered(&mut self) -> &mut VecDeque<Self::Raw>;

    /// Reads the next chunk into the buffer, unless the range is exhausted.
    fn fetch(&mut self) -> Result<(), QueryError>;

    /// Every buffered answer, after fetching a chunk when none is: `None` at the end.
    fn take_chunk(&mut self) -> Result<Option<Vec<Self::Raw>>, QueryError> {
        if self.buffered().is_empty() {
            self.fetch()?;
        }
        if self.buffered().is_empty() {
            return Ok(None);
        }
        Ok(Some(self.buffered().drain(..).collect()))
    }

    /// The next answer, after fetching a chunk when none is buffered: `None` at the end.
    /// An error ends nothing: the next call retries the same chunk.
    fn next_raw(&mut self) -> Option<Result<Self::Raw, QueryError>> {
        if self.buffered().is_empty()
            && let Err(e) = self.fetch()
        {
            return Some(Err(e));
        }
        self.buffered().pop_front().map(Ok)
    }
}

/// A handle made from a [`Reader`] of a store of the kind `KIND`.
pub(super) trait Handle<KS, VS> {
    /// The store kind the handle reads, as the store's layout names it.
    const KIND: &'static str;

    /// The handle reading with `reader`.
    fn from_reader(reader: Reader<KS, VS>) -> Self;
}

/// `Clone`, `Debug`, [`Handle`] and the methods every handle has, for a handle `$t` that
/// is a [`Reader`] (field `0`) of a store of the kind `$kind`.
macro_rules! handle_common {
    ($t:ident, $kind:literal) => {
        impl<KS: Clone, VS: Clone> Clone for $t<KS, VS> {
            fn clone(&self) -> Self {
                Self(self.0.clone())
            }
        }

        impl<KS, VS> std::fmt::Debug for $t<KS, VS> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.debug(stringify!($t), f)
            }
        }

        impl<KS, VS> $crate::runtime::query::handle::Handle<KS, VS> for $t<KS, VS> {
            const KIND: &'static str = $kind;

            fn from_reader(reader: $crate::runtime::query::handle::Reader<KS, VS>) -> Self {
                Self(reader)
            }
        }

        impl<KS: Serde + Clone, VS: Serde + Clone> $t<KS, VS> {
            /// The store's name.
            pub fn name(&self) -> &str {
                &self.0.target.store
            }

            /// The same handle reading only the task of input partition `partition`, which
            /// this instance must host: otherwise queries fail with the retriable
            /// [`QueryError::NotHosted`] (the partition moved: ask where it is now). Use it
            /// to answer for one key's partition (see
            /// [`KafkaStreams::query_metadata_for_key`](crate::KafkaStreams::query_metadata_for_key)):
            /// a key not found is then known to be absent, not hosted elsewhere.
            #[must_use]
            pub fn for_partition(mut self, partition: i32) -> Self {
                self.0.target.partition = Some(partition);
                self
            }

            /// The same handle, waiting at most `timeout` for the stream threads (default
            /// 10 s).
            #[must_use]
            pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
                self.0.timeout = timeout;
                self
            }

            /// The same handle reading this instance's standby and restoring tasks too,
            /// and answering during a rebalance: Kafka Streams'
            /// `StoreQueryParameters.enableStaleStores()`. A partition this instance holds
            /// only as a standby reads as far as the standby has applied its changelog,
            /// which may be behind the active task elsewhere;
            /// [`partition_lags`](Self::partition_lags) says how far. A range over several
            /// partitions may then mix copies of different freshness, and a partition
            /// moving between two owners of this instance during the query may be missing
            /// from it.
            #[must_use]
            pub fn stale_stores(mut self) -> Self {
                self.0.target.stale = true;
                self
            }

            /// How far each copy of the store on this instance is behind its changelog, by
            /// input partition: a running active task's is 0, a restoring task's and a
            /// standby's what they have not applied yet (Kafka Streams'
            /// `allLocalStorePartitionLags`, for this store). Standbys and restoring tasks
            /// are always included.
            pub fn partition_lags(
                &self,
            ) -> Result<std::collections::BTreeMap<i32, $crate::runtime::query::LagInfo>, QueryError> {
                self.0.router.lags(&self.0.target, self.0.timeout)
            }
        }
    };
}
pub(super) use handle_common;
