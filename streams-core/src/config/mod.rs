//! [`StreamsConfig`]: the typed, validated configuration of a streams application, with Kafka
//! Streams' property names.
//!
//! A configuration is built from key/value pairs ([`StreamsConfig::from_properties`]), from a
//! Java-style `.properties` file ([`StreamsConfig::from_file`]) or with the typed
//! [`StreamsConfig::builder`]. Every value is checked once, up front: an invalid one is a
//! [`StreamsError::Config`] naming the property at fault.
//!
//! Properties the framework does not interpret itself go to the Kafka clients: a property
//! with a dot in its name (`session.timeout.ms`) goes to every client; one prefixed with
//! `consumer.`, `producer.` or `admin.` goes, prefix stripped, to that client only, and wins
//! over the unprefixed one ([`StreamsConfig::consumer_properties`] and friends). Streams
//! properties never reach a client. See `docs/configuration.md` for the full reference.
//!
//! ```
//! use std::time::Duration;
//! use streams_core::config::{ProcessingGuarantee, StreamsConfig};
//!
//! let config = StreamsConfig::from_properties([
//!     ("application.id", "word-count"),
//!     ("processing.guarantee", "exactly_once_v2"),
//!     ("session.timeout.ms", "6000"),
//!     ("consumer.fetch.wait.max.ms", "100"),
//!     ("max.poll.records", "500"),
//! ])
//! .unwrap();
//! assert!(config.is_exactly_once());
//! assert_eq!(config.commit_interval(), Duration::from_millis(100));
//! assert_eq!(config.consumer_properties()["fetch.wait.max.ms"], "100");
//! assert!(!config.producer_properties().contains_key("fetch.wait.max.ms"));
//! assert_eq!(config.max_poll_records(), 500);
//!
//! let err = StreamsConfig::builder().application_id("app").num_stream_threads(0).build().unwrap_err();
//! assert!(err.to_string().contains("num.stream.threads"));
//! ```

mod builder;
mod display;
mod file;
mod guarantee;
mod jaas;
mod jaas_oauth;
pub mod keys;
mod oauth;
mod oidc;
mod parse;
mod rocksdb_setter;
mod security;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use builder::StreamsConfigBuilder;
pub(crate) use display::MASK;
pub use display::is_secret;
pub use guarantee::ProcessingGuarantee;
pub use oauth::{OAuthBearerToken, OAuthBearerTokenProvider};
pub use rocksdb_setter::RocksDbConfigSetter;

use crate::model::RecordingLevel;
use crate::model::error::StreamsError;
use crate::model::handlers::{ErrorHandling, ErrorPolicy};

/// Which clients a pass-through property is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Scope {
    /// Every client (an unprefixed property).
    Common,
    Consumer,
    MainConsumer,
    RestoreConsumer,
    GlobalConsumer,
    Producer,
    Admin,
}

/// A [`StreamsError::Config`] for `property`.
pub(crate) fn invalid(property: &str, message: impl Into<String>) -> StreamsError {
    StreamsError::Config {
        property: property.to_owned(),
        message: message.into(),
    }
}

impl Scope {
    /// The prefixed scopes.
    const PREFIXED: [Scope; 6] = [
        Scope::Consumer,
        Scope::MainConsumer,
        Scope::RestoreConsumer,
        Scope::GlobalConsumer,
        Scope::Producer,
        Scope::Admin,
    ];

    fn prefix(self) -> &'static str {
        match self {
            Self::Common => "",
            Self::Consumer => keys::CONSUMER_PREFIX,
            Self::MainConsumer => keys::MAIN_CONSUMER_PREFIX,
            Self::RestoreConsumer => keys::RESTORE_CONSUMER_PREFIX,
            Self::GlobalConsumer => keys::GLOBAL_CONSUMER_PREFIX,
            Self::Producer => keys::PRODUCER_PREFIX,
            Self::Admin => keys::ADMIN_PREFIX,
        }
    }
}

/// The configuration of a streams application. See the [module docs](self).
///
/// Built by [`StreamsConfig::builder`], [`StreamsConfig::from_properties`] or
/// [`StreamsConfig::from_file`]; immutable once built ([`StreamsConfig::to_builder`] starts a
/// modified copy). `Display` lists every effective value, one `key = value` per line;
/// `Display` and `Debug` mask secrets (passwords, JAAS configs, keys) among client properties.
#[derive(Clone, PartialEq, Eq)]
pub struct StreamsConfig {
    application_id: String,
    bootstrap_servers: Option<String>,
    num_stream_threads: usize,
    processing_guarantee: ProcessingGuarantee,
    commit_interval: Duration,
    state_dir: PathBuf,
    cache_max_bytes: usize,
    deserialization_handler: ErrorHandling,
    processing_handler: ErrorHandling,
    production_handler: ErrorHandling,
    dead_letter_topic: Option<String>,
    metrics_address: Option<SocketAddr>,
    application_server: Option<String>,
    recording_level: RecordingLevel,
    poll_interval: Duration,
    repartition_purge_interval: Duration,
    max_poll_records: usize,
    max_task_idle: Option<Duration>,
    replication_factor: i32,
    num_standby_replicas: usize,
    /// `group.protocol=streams` was set (for the main consumer); taken out of the client
    /// properties, as librdkafka has no such protocol.
    streams_protocol: bool,
    rocksdb_block_cache_bytes: usize,
    rocksdb_write_buffer_bytes: usize,
    /// Called on every RocksDB store's options (set by the builder only).
    rocksdb_config_setter: Option<RocksDbConfigSetter>,
    /// Where every client's OAUTHBEARER tokens come from (set by the builder only).
    oauth_bearer_token_provider: Option<OAuthBearerTokenProvider>,
    /// Pass-through client properties, prefix stripped, by scope.
    client: BTreeMap<Scope, BTreeMap<String, String>>,
    /// Kafka Streams properties that were set but are not implemented.
    ignored: BTreeSet<String>,
    /// The properties as given (trimmed), for [`StreamsConfig::to_builder`].
    originals: BTreeMap<String, String>,
}

impl StreamsConfig {
    /// The default `num.stream.threads`.
    pub const DEFAULT_NUM_STREAM_THREADS: usize = 1;
    /// The default `commit.interval.ms` under `at_least_once`.
    pub const DEFAULT_COMMIT_INTERVAL_MS: u64 = 30_000;
    /// The default `commit.interval.ms` under `exactly_once_v2`.
    pub const DEFAULT_EOS_COMMIT_INTERVAL_MS: u64 = 100;
    /// The default `statestore.cache.max.bytes`: 10 MiB.
    pub const DEFAULT_CACHE_MAX_BYTES: usize = 10_485_760;
    /// The default `poll.ms`.
    pub const DEFAULT_POLL_MS: u64 = 100;
    /// The default `repartition.purge.interval.ms` (Kafka Streams' own default).
    pub const DEFAULT_REPARTITION_PURGE_INTERVAL_MS: u64 = 30_000;
    /// The default `max.poll.records` (Kafka Streams' own default).
    pub const DEFAULT_MAX_POLL_RECORDS: usize = 1000;
    /// The longest a task waits for records of an empty input partition that are on the
    /// broker but not yet fetched (or whose position is unknown), before it goes on without
    /// them: a partition whose leader is gone, or whose end is a transaction left open,
    /// does not stop the task's other partitions for good.
    pub const BEHIND_PARTITION_WAIT: Duration = Duration::from_secs(5);
    /// The default `replication.factor`: -1, the broker's `default.replication.factor`.
    pub const DEFAULT_REPLICATION_FACTOR: i32 = -1;
    /// The default `rocksdb.block.cache.bytes`: 64 MiB.
    pub const DEFAULT_ROCKSDB_BLOCK_CACHE_BYTES: usize =
        streams_state::RocksDbResources::DEFAULT_BLOCK_CACHE_BYTES;
    /// The default `rocksdb.write.buffer.bytes`: 32 MiB.
    pub const DEFAULT_ROCKSDB_WRITE_BUFFER_BYTES: usize =
        streams_state::RocksDbResources::DEFAULT_WRITE_BUFFER_BYTES;

    /// A builder with every property unset (`application.id` must be set before `build`).
    pub fn builder() -> StreamsConfigBuilder {
        StreamsConfigBuilder::default()
    }

    /// Builds a configuration from key/value pairs. Keys and values are trimmed; a later pair
    /// for the same key overrides an earlier one.
    ///
    /// # Errors
    /// [`StreamsError::Config`] naming the first property found invalid: a missing
    /// `application.id`, a value that does not parse or is out of range, or an unknown
    /// property without a dot in its name (a typo such as `applicationid`).
    pub fn from_properties<K, V>(properties: impl IntoIterator<Item = (K, V)>) -> Result<Self, StreamsError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let originals = properties
            .into_iter()
            .map(|(k, v)| (k.as_ref().trim().to_owned(), v.as_ref().trim().to_owned()))
            .collect();
        parse::validate(originals, None)
    }

    /// Builds a configuration from the text of a Java-style `.properties` file (see
    /// [`StreamsConfig::from_file`] for the syntax).
    ///
    /// # Errors
    /// As [`StreamsConfig::from_properties`], plus malformed `\uXXXX` escapes; messages name
    /// the line of the property at fault.
    pub fn from_properties_str(text: &str) -> Result<Self, StreamsError> {
        Self::from_entries(text, "line ")
    }

    /// Loads a Java-style `.properties` file: `key=value`, `key: value` or `key value` lines,
    /// `#` and `!` comment lines, blank lines, whitespace around keys and values trimmed,
    /// backslash line continuation and the Java escapes (`\t`, `\n`, `\uXXXX`, `\=`, ...).
    ///
    /// # Errors
    /// [`StreamsError::Config`] naming the file when it cannot be read; otherwise as
    /// [`StreamsError::Config`] from [`StreamsConfig::from_properties`], with the file and
    /// line of the property at fault in the message.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, StreamsError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| StreamsError::Config {
            property: path.display().to_string(),
            message: format!("cannot read properties file: {e}"),
        })?;
        Self::from_entries(&text, &format!("{}:", path.display()))
    }

    /// Parses properties text; errors name their line as `{location}{line}`.
    fn from_entries(text: &str, location: &str) -> Result<Self, StreamsError> {
        let entries = file::parse(text, location)?;
        let lines: BTreeMap<&str, usize> = entries.iter().map(|e| (e.key.trim(), e.line)).collect();
        Self::from_properties(entries.iter().map(|e| (&e.key, &e.value))).map_err(|e| match e {
            StreamsError::Config { property, message } => {
                let message = match lines.get(property.as_str()) {
                    Some(line) => format!("{message} (at {location}{line})"),
                    None => message,
                };
                StreamsError::Config { property, message }
            }
            other => other,
        })
    }

    /// A builder holding this configuration's properties, to derive a modified copy.
    pub fn to_builder(&self) -> StreamsConfigBuilder {
        StreamsConfigBuilder::from_parts(
            self.originals.clone(),
            self.state_dir.clone(),
            self.rocksdb_config_setter.clone(),
            // A provider the OIDC properties made is made again from them.
            self.oauth_bearer_token_provider
                .clone()
                .filter(|_| !oidc::configured(&self.originals)),
        )
    }

    /// `application.id`: the consumer group id and the prefix of internal topics.
    pub fn application_id(&self) -> &str {
        &self.application_id
    }

    /// `bootstrap.servers`; `None` when unset (`KafkaStreams::new` then refuses the config).
    pub fn bootstrap_servers(&self) -> Option<&str> {
        self.bootstrap_servers.as_deref()
    }

    /// `num.stream.threads` (at least 1).
    pub fn num_stream_threads(&self) -> usize {
        self.num_stream_threads
    }

    /// `processing.guarantee`.
    pub fn processing_guarantee(&self) -> ProcessingGuarantee {
        self.processing_guarantee
    }

    /// Whether `processing.guarantee` is `exactly_once_v2`.
    pub fn is_exactly_once(&self) -> bool {
        self.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2
    }

    /// `commit.interval.ms`: as set, or the guarantee's default (30 s, or 100 ms under
    /// exactly-once).
    pub fn commit_interval(&self) -> Duration {
        self.commit_interval
    }

    /// `state.dir`: the directory under which persistent stores live (by default
    /// `<temp dir>/streams-rs`).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// This application's own state directory: `<state.dir>/<application.id>`.
    pub fn application_state_dir(&self) -> PathBuf {
        self.state_dir.join(&self.application_id)
    }

    /// `statestore.cache.max.bytes` (or the deprecated `cache.max.bytes.buffering`).
    pub fn cache_max_bytes(&self) -> usize {
        self.cache_max_bytes
    }

    /// `deserialization.exception.handler` (or `default.deserialization.exception.handler`).
    pub fn deserialization_exception_handler(&self) -> ErrorHandling {
        self.deserialization_handler
    }

    /// `processing.exception.handler`.
    pub fn processing_exception_handler(&self) -> ErrorHandling {
        self.processing_handler
    }

    /// `production.exception.handler` (or `default.production.exception.handler`).
    pub fn production_exception_handler(&self) -> ErrorHandling {
        self.production_handler
    }

    /// `errors.dead.letter.queue.topic.name`.
    pub fn dead_letter_queue_topic(&self) -> Option<&str> {
        self.dead_letter_topic.as_deref()
    }

    /// The three handlers and the dead-letter topic, as tasks take them.
    pub fn error_policy(&self) -> ErrorPolicy {
        ErrorPolicy {
            deserialization: self.deserialization_handler,
            processing: self.processing_handler,
            production: self.production_handler,
            dead_letter_topic: self.dead_letter_topic.clone(),
        }
    }

    /// `application.server`: this instance's endpoint (`host:port`) for interactive
    /// queries, published to the other instances (see `KafkaStreams::all_metadata`).
    pub fn application_server(&self) -> Option<&str> {
        self.application_server.as_deref()
    }

    /// `metrics.address`: where to serve Prometheus metrics; `None` serves none.
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        self.metrics_address
    }

    /// `metrics.recording.level`: `INFO` (default) or `DEBUG` (`TRACE` is read as `DEBUG`).
    pub fn recording_level(&self) -> RecordingLevel {
        self.recording_level
    }

    /// `poll.ms`: the longest a stream thread blocks waiting for records.
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// `repartition.purge.interval.ms`: how often a stream thread, after a commit, deletes
    /// the records of repartition topics below the committed offsets (30 s by default).
    pub fn repartition_purge_interval(&self) -> Duration {
        self.repartition_purge_interval
    }

    /// `max.poll.records`: the most records a stream thread takes per loop iteration.
    pub fn max_poll_records(&self) -> usize {
        self.max_poll_records
    }

    /// `max.task.idle.ms`: how long a task with several input partitions (a join, a
    /// merge) waits for an empty partition the consumer has caught up on before it goes on
    /// without it (zero by default); `None` (`-1`) never waits. Whatever the setting other
    /// than `-1`, a task waits for records already on the broker (up to
    /// [`StreamsConfig::BEHIND_PARTITION_WAIT`]): records of all its partitions are then
    /// processed in timestamp order, so a join does not take the records of a partition
    /// read late for late records.
    pub fn max_task_idle(&self) -> Option<Duration> {
        self.max_task_idle
    }

    /// `replication.factor` of internal (changelog and repartition) topics; -1 means the
    /// broker's `default.replication.factor`.
    pub fn replication_factor(&self) -> i32 {
        self.replication_factor
    }

    /// `num.standby.replicas`: warm copies of each task's stores kept on other instances
    /// (0 by default). Placed by the broker under `group.protocol=streams`.
    pub fn num_standby_replicas(&self) -> usize {
        self.num_standby_replicas
    }

    /// Whether `group.protocol=streams` was set for the main consumer (KIP-1071: the
    /// runtime's own streams-group member joins; no client is given the setting).
    pub fn streams_protocol(&self) -> bool {
        self.streams_protocol
    }

    /// `rocksdb.block.cache.bytes`: the capacity of the block cache all RocksDB stores of an
    /// instance share; the memtables are charged to it.
    pub fn rocksdb_block_cache_bytes(&self) -> usize {
        self.rocksdb_block_cache_bytes
    }

    /// `rocksdb.write.buffer.bytes`: the memory all memtables of an instance's RocksDB stores
    /// may take together, part of the block cache's capacity.
    pub fn rocksdb_write_buffer_bytes(&self) -> usize {
        self.rocksdb_write_buffer_bytes
    }

    /// The RocksDB options setter given to
    /// [`StreamsConfigBuilder::rocksdb_config_setter`], if any.
    pub fn rocksdb_config_setter(&self) -> Option<&RocksDbConfigSetter> {
        self.rocksdb_config_setter.as_ref()
    }

    /// The OAUTHBEARER token provider given to
    /// [`StreamsConfigBuilder::oauth_bearer_token_provider`], if any.
    pub fn oauth_bearer_token_provider(&self) -> Option<&OAuthBearerTokenProvider> {
        self.oauth_bearer_token_provider.as_ref()
    }

    /// New RocksDB resources sized by `rocksdb.block.cache.bytes` and
    /// `rocksdb.write.buffer.bytes`, calling the [options setter](Self::rocksdb_config_setter)
    /// on every store's options: the runtime makes one per application instance, shared by
    /// all its stores. Each call makes new ones.
    pub fn rocksdb_resources(&self) -> streams_state::RocksDbResources {
        let resources = streams_state::RocksDbResources::new(
            self.rocksdb_block_cache_bytes,
            self.rocksdb_write_buffer_bytes,
        );
        match &self.rocksdb_config_setter {
            Some(setter) => setter.install(resources),
            None => resources,
        }
    }

    /// The Kafka Streams properties that were set but that this framework does not implement
    /// (such as `num.standby.replicas`); they are ignored and reach no client.
    pub fn ignored_properties(&self) -> impl Iterator<Item = &str> {
        self.ignored.iter().map(String::as_str)
    }

    /// The properties of every consumer: `bootstrap.servers` (when set), the unprefixed
    /// pass-through properties, then the `consumer.` ones (prefix stripped), which win.
    pub fn consumer_properties(&self) -> BTreeMap<String, String> {
        self.merged(&[Scope::Consumer])
    }

    /// The main consumer's properties: [`StreamsConfig::consumer_properties`] overridden by
    /// `main.consumer.` ones.
    pub fn main_consumer_properties(&self) -> BTreeMap<String, String> {
        self.merged(&[Scope::Consumer, Scope::MainConsumer])
    }

    /// The restore consumer's properties: [`StreamsConfig::consumer_properties`] overridden
    /// by `restore.consumer.` ones.
    pub fn restore_consumer_properties(&self) -> BTreeMap<String, String> {
        self.merged(&[Scope::Consumer, Scope::RestoreConsumer])
    }

    /// The global consumer's properties: [`StreamsConfig::consumer_properties`] overridden
    /// by `global.consumer.` ones.
    pub fn global_consumer_properties(&self) -> BTreeMap<String, String> {
        self.merged(&[Scope::Consumer, Scope::GlobalConsumer])
    }

    /// The producer's properties: `bootstrap.servers` (when set), the unprefixed pass-through
    /// properties, then the `producer.` ones (prefix stripped), which win.
    pub fn producer_properties(&self) -> BTreeMap<String, String> {
        self.merged(&[Scope::Producer])
    }

    /// The admin client's properties: `bootstrap.servers` (when set), the unprefixed
    /// pass-through properties, then the `admin.` ones (prefix stripped), which win.
    pub fn admin_properties(&self) -> BTreeMap<String, String> {
        self.merged(&[Scope::Admin])
    }

    fn merged(&self, scopes: &[Scope]) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if let Some(servers) = &self.bootstrap_servers {
            out.insert(keys::BOOTSTRAP_SERVERS.to_owned(), servers.clone());
        }
        for scope in std::iter::once(&Scope::Common).chain(scopes) {
            if let Some(props) = self.client.get(scope) {
                out.extend(props.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        out
    }

    /// Each client scope's pass-through properties (prefix stripped), with the prefix.
    pub(crate) fn client_scopes(&self) -> impl Iterator<Item = (&'static str, &BTreeMap<String, String>)> {
        self.client.iter().map(|(scope, props)| (scope.prefix(), props))
    }

    /// The values of every secret property ([`is_secret`]) as given and as passed to the
    /// clients, for the runtime to mask wherever a client might echo them.
    pub(crate) fn secret_values(&self) -> BTreeSet<String> {
        let given = self.originals.iter();
        let passed = self.client.values().flat_map(|props| props.iter());
        given
            .chain(passed)
            .filter(|(k, v)| is_secret(k) && !v.is_empty())
            .map(|(_, v)| v.clone())
            .collect()
    }
}
