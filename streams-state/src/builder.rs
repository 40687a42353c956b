//! Store builders: how a topology declares a store before any task exists, and how each
//! task builds its own instance.
//!
//! A builder is a recipe, shared by all tasks (hence `Send + Sync`); each task calls
//! [`StoreBuilder::build`] with its own [`StoreBuildContext`] (state directory, changelog
//! sink, the thread's cache budget, RocksDB's shared memory). The built store is layered as in Kafka Streams, outermost first:
//!
//! ```text
//! caching (if enabled) -> change-logging (if enabled and a sink is given) -> inner store
//! ```
//!
//! where the inner store is an [`InMemoryKeyValueStore`] or a [`RocksDbKeyValueStore`].
//! As in Kafka Streams' `Stores.keyValueStoreBuilder`, logging is **enabled** and caching
//! **disabled** by default.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::caching::CachingKeyValueStore;
use crate::changelog::ChangelogSink;
use crate::error::{Result, StoreError};
use crate::logging::ChangeLoggingKeyValueStore;
use crate::memory::InMemoryKeyValueStore;
use crate::rocksdb::{RocksDbKeyValueStore, RocksDbResources};
use crate::serde::{BytesSerde, Serde};
use crate::session::SessionStoreBuilder;
use crate::store::KeyValueStore;
use crate::thread_cache::ThreadCache;
use crate::transactional::TransactionalKeyValueStore;
use crate::typed::{KvStore, SharedKeyValueStore};
use crate::window::{SegmentedRecipe, WindowStoreBuilder};

/// What a task gives a [`StoreBuilder`] to build its instance of a store.
pub struct StoreBuildContext {
    /// The task's state directory; required by persistent stores, which live in
    /// `<state_dir>/rocksdb/<store>`.
    pub state_dir: Option<PathBuf>,
    /// Where a logged store sends its changes; `None` builds the store without logging
    /// (e.g. in tests, or for a store restored from a source topic).
    pub changelog: Option<Box<dyn ChangelogSink>>,
    /// The record-cache budget the store's cache draws on, when caching is enabled: the
    /// budget of the stream thread, shared with the caches of its other stores. A budget of
    /// zero means no cache.
    pub thread_cache: ThreadCache,
    /// Memory and options shared by the process's RocksDB stores.
    pub rocksdb: RocksDbResources,
    /// Persistent stores hold their writes until
    /// [`commit_writes`](crate::KeyValueStore::commit_writes) (exactly-once: the
    /// [`TransactionalKeyValueStore`] layer), so their local data never runs ahead of the
    /// committed changelog.
    pub transactional: bool,
}

impl StoreBuildContext {
    /// Kafka Streams' default `statestore.cache.max.bytes`: 10 MiB.
    pub const DEFAULT_CACHE_MAX_BYTES: usize = 10 << 20;

    /// A context with the given state directory, no changelog, a cache budget of its own of
    /// the default size and the process-wide RocksDB resources.
    pub fn new(state_dir: Option<PathBuf>) -> Self {
        Self {
            state_dir,
            changelog: None,
            thread_cache: ThreadCache::new(Self::DEFAULT_CACHE_MAX_BYTES),
            rocksdb: RocksDbResources::shared(),
            transactional: false,
        }
    }

    /// Sets the changelog sink.
    pub fn with_changelog(mut self, sink: Box<dyn ChangelogSink>) -> Self {
        self.changelog = Some(sink);
        self
    }

    /// Gives the store's cache a budget of `bytes` of its own.
    pub fn with_cache_max_bytes(mut self, bytes: usize) -> Self {
        self.thread_cache = ThreadCache::new(bytes);
        self
    }

    /// Makes the store's cache draw on `budget`, shared with the other stores given it.
    pub fn with_thread_cache(mut self, budget: ThreadCache) -> Self {
        self.thread_cache = budget;
        self
    }

    /// Sets the RocksDB resources.
    pub fn with_rocksdb(mut self, resources: RocksDbResources) -> Self {
        self.rocksdb = resources;
        self
    }

    /// Makes persistent stores hold their writes until they are committed (see
    /// [`transactional`](Self::transactional)).
    pub fn with_transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }
}

impl Default for StoreBuildContext {
    /// No state directory (in-memory stores only), see [`new`](Self::new).
    fn default() -> Self {
        Self::new(None)
    }
}

impl fmt::Debug for StoreBuildContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreBuildContext")
            .field("state_dir", &self.state_dir)
            .field("changelog", &self.changelog.is_some())
            .field("thread_cache", &self.thread_cache)
            .field("rocksdb", &self.rocksdb)
            .field("transactional", &self.transactional)
            .finish()
    }
}

/// A store recipe, object-safe so a topology can hold builders of different types.
pub trait StoreBuilder: Send + Sync + 'static {
    /// The store's name, unique within a topology.
    fn name(&self) -> &str;

    /// Whether the built store keeps its data on disk.
    fn persistent(&self) -> bool;

    /// The changelog topic's configuration when the store is logged, `None` when not.
    fn logging_config(&self) -> Option<&BTreeMap<String, String>>;

    /// Whether the built store has a write-back cache.
    fn caching(&self) -> bool;

    /// Builds one task's instance, outermost layer first: caching (when enabled and the
    /// budget `ctx.thread_cache` is not zero) -> change-logging (when enabled and `ctx.changelog` is
    /// given) -> the inner in-memory or RocksDB store (in `<state_dir>/rocksdb/<name>`).
    ///
    /// # Errors
    ///
    /// A persistent store without `ctx.state_dir` fails with [`StoreError::Io`]; opening
    /// RocksDB may fail as [`RocksDbKeyValueStore::open`] does.
    fn build(&self, ctx: StoreBuildContext) -> Result<Box<dyn KeyValueStore>>;

    /// A typed handle on a built store: a boxed [`KvStore`] with the builder's serdes, to be
    /// downcast by the caller who knows the types (see [`type_name`](Self::type_name)).
    fn typed_handle(&self, store: SharedKeyValueStore) -> Box<dyn Any>;

    /// The typed handle's type, e.g. `KvStore<StringSerde, U64Serde>`, for error messages.
    fn type_name(&self) -> String;

    /// How the built store lays out its bytes, for readers that hold only this builder
    /// (interactive queries). A plain key-value store by default.
    fn layout(&self) -> StoreLayout {
        StoreLayout::KeyValue { timestamped: false }
    }

    /// Headers every record of the store's changelog carries, except tombstones (Kafka
    /// Streams marks its suppression buffer's records `v` = 3, the value's format). None by
    /// default.
    fn changelog_headers(&self) -> &[(String, Vec<u8>)] {
        &[]
    }
}

/// What kind of store a builder builds and how its bytes read back without its serdes
/// ([`StoreBuilder::layout`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StoreLayout {
    /// A key-value store; `timestamped` when its values are
    /// [`ValueAndTimestamp`](crate::ValueAndTimestamp) bytes (an 8-byte timestamp first).
    KeyValue {
        /// Whether each value starts with an 8-byte timestamp.
        timestamped: bool,
    },
    /// A window store: `store` opens a built instance with raw-bytes serdes.
    Window {
        /// The same store's builder with [`BytesSerde`](crate::serde::BytesSerde) keys and values.
        store: WindowStoreBuilder<BytesSerde, BytesSerde>,
        /// Whether each value starts with an 8-byte timestamp.
        timestamped: bool,
    },
    /// A session store: `store` opens a built instance with raw-bytes serdes.
    Session {
        /// The same store's builder with [`BytesSerde`](crate::serde::BytesSerde) keys and values.
        store: SessionStoreBuilder<BytesSerde, BytesSerde>,
    },
    /// A versioned key-value store (its bytes hold every version of a key, not one value).
    Versioned,
}

impl StoreLayout {
    /// "key-value", "window" or "session".
    pub fn kind(&self) -> &'static str {
        match self {
            Self::KeyValue { .. } => "key-value",
            Self::Window { .. } => "window",
            Self::Session { .. } => "session",
            Self::Versioned => "versioned key-value",
        }
    }

    /// Whether each value starts with an 8-byte timestamp.
    pub fn timestamped(&self) -> bool {
        match self {
            Self::KeyValue { timestamped } | Self::Window { timestamped, .. } => *timestamped,
            Self::Session { .. } | Self::Versioned => false,
        }
    }
}

/// Entry points for store builders, as Kafka Streams' `Stores`.
#[derive(Debug, Clone, Copy)]
pub struct Stores;

impl Stores {
    /// A builder of an in-memory key-value store.
    pub fn in_memory_kv<KS: Serde + Clone, VS: Serde + Clone>(
        name: impl Into<String>,
        key_serde: KS,
        value_serde: VS,
    ) -> KeyValueStoreBuilder<KS, VS> {
        KeyValueStoreBuilder::new(name.into(), false, key_serde, value_serde)
    }

    /// A builder of a persistent (RocksDB) key-value store.
    pub fn persistent_kv<KS: Serde + Clone, VS: Serde + Clone>(
        name: impl Into<String>,
        key_serde: KS,
        value_serde: VS,
    ) -> KeyValueStoreBuilder<KS, VS> {
        KeyValueStoreBuilder::new(name.into(), true, key_serde, value_serde)
    }

    /// A builder of an in-memory window store keeping windows of `window_size` for
    /// `retention` behind the stream time (see [`crate::window`]); `retain_duplicates`
    /// makes every put a new entry (stream-stream join buffers).
    pub fn in_memory_window_store<KS: Serde + Clone, VS: Serde + Clone>(
        name: impl Into<String>,
        retention: Duration,
        window_size: Duration,
        retain_duplicates: bool,
        key_serde: KS,
        value_serde: VS,
    ) -> WindowStoreBuilder<KS, VS> {
        let recipe = SegmentedRecipe::new(name.into(), false, retention);
        WindowStoreBuilder::new(recipe, window_size, retain_duplicates, key_serde, value_serde)
    }

    /// A builder of a persistent (RocksDB) window store; see
    /// [`in_memory_window_store`](Self::in_memory_window_store).
    pub fn persistent_window_store<KS: Serde + Clone, VS: Serde + Clone>(
        name: impl Into<String>,
        retention: Duration,
        window_size: Duration,
        retain_duplicates: bool,
        key_serde: KS,
        value_serde: VS,
    ) -> WindowStoreBuilder<KS, VS> {
        let recipe = SegmentedRecipe::new(name.into(), true, retention);
        WindowStoreBuilder::new(recipe, window_size, retain_duplicates, key_serde, value_serde)
    }

    /// A builder of an in-memory session store keeping sessions for `retention` behind the
    /// stream time (by session end; see [`crate::session`]).
    pub fn in_memory_session_store<KS: Serde + Clone, VS: Serde + Clone>(
        name: impl Into<String>,
        retention: Duration,
        key_serde: KS,
        value_serde: VS,
    ) -> SessionStoreBuilder<KS, VS> {
        let recipe = SegmentedRecipe::new(name.into(), false, retention);
        SessionStoreBuilder::new(recipe, key_serde, value_serde)
    }

    /// A builder of a persistent (RocksDB) session store; see
    /// [`in_memory_session_store`](Self::in_memory_session_store).
    pub fn persistent_session_store<KS: Serde + Clone, VS: Serde + Clone>(
        name: impl Into<String>,
        retention: Duration,
        key_serde: KS,
        value_serde: VS,
    ) -> SessionStoreBuilder<KS, VS> {
        let recipe = SegmentedRecipe::new(name.into(), true, retention);
        SessionStoreBuilder::new(recipe, key_serde, value_serde)
    }
}

/// Builds key-value stores with keys of `KS` and values of `VS`. Made by [`Stores`];
/// logging is enabled (with no topic overrides) and caching disabled until changed.
#[derive(Debug, Clone)]
pub struct KeyValueStoreBuilder<KS, VS> {
    name: String,
    persistent: bool,
    key_serde: KS,
    value_serde: VS,
    logging: Option<BTreeMap<String, String>>,
    caching: bool,
    changelog_headers: Vec<(String, Vec<u8>)>,
}

impl<KS, VS> KeyValueStoreBuilder<KS, VS> {
    fn new(name: String, persistent: bool, key_serde: KS, value_serde: VS) -> Self {
        Self {
            name,
            persistent,
            key_serde,
            value_serde,
            logging: Some(BTreeMap::new()),
            caching: false,
            changelog_headers: Vec::new(),
        }
    }

    /// Adds the header `name` = `value` to every record the store writes to its changelog,
    /// tombstones aside (see [`StoreBuilder::changelog_headers`]): for changelogs that
    /// another implementation reads, as Kafka Streams' suppression buffer marks the format
    /// of its values.
    pub fn with_changelog_header(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.changelog_headers.push((name.into(), value.into()));
        self
    }

    /// Puts a write-back cache in front of the store.
    pub fn with_caching(mut self) -> Self {
        self.caching = true;
        self
    }

    /// Builds the store without a cache (the default).
    pub fn without_caching(mut self) -> Self {
        self.caching = false;
        self
    }

    /// Logs every change to a changelog topic created with `topic_config` (e.g.
    /// `("min.insync.replicas", "2")`). Logging is on by default with no overrides.
    pub fn with_logging(mut self, topic_config: impl IntoIterator<Item = (String, String)>) -> Self {
        self.logging = Some(topic_config.into_iter().collect());
        self
    }

    /// Builds the store without a changelog: it is not restored after a failure.
    pub fn without_logging(mut self) -> Self {
        self.logging = None;
        self
    }
}

impl<KS: Clone, VS: Clone> KeyValueStoreBuilder<KS, VS> {
    /// The serde of the store's keys.
    pub fn key_serde(&self) -> KS {
        self.key_serde.clone()
    }

    /// The serde of the store's values.
    pub fn value_serde(&self) -> VS {
        self.value_serde.clone()
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> KeyValueStoreBuilder<KS, VS> {
    /// The typed handle on `store`, a store this builder built.
    pub fn open(&self, store: SharedKeyValueStore) -> KvStore<KS, VS> {
        KvStore::new(store, self.key_serde.clone(), self.value_serde.clone())
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> StoreBuilder for KeyValueStoreBuilder<KS, VS> {
    fn name(&self) -> &str {
        &self.name
    }

    fn persistent(&self) -> bool {
        self.persistent
    }

    fn logging_config(&self) -> Option<&BTreeMap<String, String>> {
        self.logging.as_ref()
    }

    fn caching(&self) -> bool {
        self.caching
    }

    fn build(&self, ctx: StoreBuildContext) -> Result<Box<dyn KeyValueStore>> {
        let mut store = inner_store(&self.name, self.persistent, &ctx)?;
        if let (Some(_), Some(sink)) = (&self.logging, ctx.changelog) {
            store = Box::new(ChangeLoggingKeyValueStore::new(store, sink));
        }
        if self.caching && ctx.thread_cache.max_bytes() > 0 {
            store = Box::new(CachingKeyValueStore::with_thread_cache(store, ctx.thread_cache));
        }
        Ok(store)
    }

    fn typed_handle(&self, store: SharedKeyValueStore) -> Box<dyn Any> {
        Box::new(self.open(store))
    }

    fn layout(&self) -> StoreLayout {
        StoreLayout::KeyValue {
            timestamped: self.value_serde.is_value_and_timestamp(),
        }
    }

    fn changelog_headers(&self) -> &[(String, Vec<u8>)] {
        &self.changelog_headers
    }

    fn type_name(&self) -> String {
        handle_type_name::<KS, VS>("KvStore")
    }
}

/// The innermost store of a stack: RocksDB in `<state_dir>/rocksdb/<name>` (behind the
/// transactional layer when `ctx.transactional`) if `persistent`, else in memory.
pub(crate) fn inner_store(
    name: &str,
    persistent: bool,
    ctx: &StoreBuildContext,
) -> Result<Box<dyn KeyValueStore>> {
    if !persistent {
        return Ok(Box::new(InMemoryKeyValueStore::new(name.to_owned())));
    }
    let Some(dir) = &ctx.state_dir else {
        let source = std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a persistent store needs a state directory",
        );
        return Err(StoreError::Io {
            store: name.to_owned(),
            path: PathBuf::new(),
            source,
        });
    };
    let rocksdb = RocksDbKeyValueStore::open(name.to_owned(), dir, &ctx.rocksdb)?;
    Ok(if ctx.transactional {
        // Committed transactions, written whole, survive a crash: a restart
        // restores only what the changelog has beyond them.
        Box::new(TransactionalKeyValueStore::new(Box::new(
            rocksdb.with_write_ahead_log(true),
        )))
    } else {
        Box::new(rocksdb)
    })
}

/// The type name of the typed handle `handle` with key serde `KS` and value serde `VS`,
/// without module paths: `KvStore<StringSerde, U64Serde>`.
pub(crate) fn handle_type_name<KS, VS>(handle: &str) -> String {
    format!(
        "{handle}<{}, {}>",
        short_type_name(std::any::type_name::<KS>()),
        short_type_name(std::any::type_name::<VS>())
    )
}

/// A type name without module paths: `a::B<c::D, E>` becomes `B<D, E>`.
pub(crate) fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut segment_start = 0;
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.truncate(segment_start);
        } else {
            out.push(c);
            if !(c.is_alphanumeric() || c == '_') {
                segment_start = out.len();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serde::{PairSerde, StringSerde, U64Serde};

    #[test]
    fn layouts_tell_the_kind_and_timestamps_and_open_the_same_bytes() {
        use crate::ValueAndTimestampSerde;
        let kv = Stores::in_memory_kv("kv", StringSerde, U64Serde);
        assert_eq!(
            (kv.layout().kind(), kv.layout().timestamped()),
            ("key-value", false)
        );
        let kv = Stores::in_memory_kv("kv", StringSerde, ValueAndTimestampSerde(U64Serde));
        assert!(kv.layout().timestamped());
        let minute = Duration::from_secs(60);
        let w = Stores::in_memory_window_store("w", minute * 600, minute, false, StringSerde, U64Serde);
        let shared: SharedKeyValueStore = std::rc::Rc::new(std::cell::RefCell::new(
            w.build(StoreBuildContext::default()).unwrap(),
        ));
        w.open(shared.clone())
            .put(&"a".to_owned(), Some(&7), 60_000)
            .unwrap();
        let StoreLayout::Window { store, timestamped } = w.layout() else {
            panic!("{:?}", w.layout().kind());
        };
        assert!(!timestamped);
        assert_eq!(store.segment_interval_ms(), w.segment_interval_ms());
        let raw = store.open(shared).fetch(&b"a".to_vec(), 60_000).unwrap();
        assert_eq!(raw, Some(7u64.to_be_bytes().to_vec()));
        let s = Stores::in_memory_session_store("s", minute, StringSerde, U64Serde);
        assert_eq!((s.layout().kind(), s.layout().timestamped()), ("session", false));
    }

    #[test]
    fn defaults_follow_kafka_streams() {
        let b = Stores::in_memory_kv("counts", StringSerde, U64Serde);
        assert!(b.logging_config().is_some() && !b.caching() && !b.persistent());
        let b = b.with_caching().without_logging();
        assert!(b.logging_config().is_none() && b.caching());
        let b = Stores::persistent_kv("p", StringSerde, U64Serde).with_logging([("a".into(), "b".into())]);
        assert_eq!(
            b.logging_config().and_then(|c| c.get("a")).map(String::as_str),
            Some("b")
        );
        assert!(b.persistent());
    }

    #[test]
    fn type_names_are_short() {
        assert_eq!(
            Stores::in_memory_kv("s", StringSerde, U64Serde).type_name(),
            "KvStore<StringSerde, U64Serde>"
        );
        let b = Stores::in_memory_kv("s", PairSerde(U64Serde, StringSerde), U64Serde);
        assert_eq!(
            b.type_name(),
            "KvStore<PairSerde<U64Serde, StringSerde>, U64Serde>"
        );
    }

    #[test]
    fn persistent_store_without_state_dir_is_an_error() {
        let b = Stores::persistent_kv("p", StringSerde, U64Serde);
        assert!(matches!(
            b.build(StoreBuildContext::default()),
            Err(StoreError::Io { .. })
        ));
    }

    #[test]
    fn typed_handle_downcasts() {
        let b = Stores::in_memory_kv("s", StringSerde, U64Serde);
        let store = b.build(StoreBuildContext::default()).unwrap();
        let shared: SharedKeyValueStore = std::rc::Rc::new(std::cell::RefCell::new(store));
        let handle = b.typed_handle(shared);
        assert!(handle.downcast::<KvStore<StringSerde, U64Serde>>().is_ok());
    }
}
