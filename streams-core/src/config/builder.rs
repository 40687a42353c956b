//! [`StreamsConfigBuilder`]: typed setters over the same properties and validation as
//! [`StreamsConfig::from_properties`].

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::display::mask;
use super::{
    OAuthBearerToken, OAuthBearerTokenProvider, ProcessingGuarantee, RocksDbConfigSetter, StreamsConfig,
    keys, parse,
};
use crate::model::error::StreamsError;
use crate::model::handlers::{ErrorHandling, ErrorPolicy};

/// Builds a [`StreamsConfig`] with typed setters; [`StreamsConfigBuilder::build`] validates.
///
/// Each setter records its Kafka Streams property, so a value set here behaves exactly as
/// the same property in a properties file (a set `commit.interval.ms` is explicit and not
/// replaced by the exactly-once default). Durations are truncated to whole milliseconds.
///
/// ```
/// use std::time::Duration;
/// use streams_core::config::{ProcessingGuarantee, StreamsConfig};
/// use streams_core::ErrorHandling;
///
/// let config = StreamsConfig::builder()
///     .application_id("orders")
///     .bootstrap_servers("localhost:9092")
///     .num_stream_threads(4)
///     .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
///     .processing_exception_handler(ErrorHandling::DeadLetterQueue)
///     .dead_letter_queue_topic("orders-dlq")
///     .producer_property("linger.ms", "5")
///     .build()
///     .unwrap();
/// assert_eq!(config.commit_interval(), Duration::from_millis(100));
/// assert_eq!(config.producer_properties()["linger.ms"], "5");
/// ```
#[derive(Clone, Default)]
pub struct StreamsConfigBuilder {
    properties: BTreeMap<String, String>,
    /// A typed `state.dir`, which overrides the property (and need not be UTF-8).
    state_dir: Option<PathBuf>,
    /// The RocksDB options setter (no property form).
    rocksdb_config_setter: Option<RocksDbConfigSetter>,
    /// The OAUTHBEARER token provider (no property form).
    oauth_bearer_token_provider: Option<OAuthBearerTokenProvider>,
}

impl StreamsConfigBuilder {
    pub(super) fn from_parts(
        mut properties: BTreeMap<String, String>,
        state_dir: PathBuf,
        rocksdb_config_setter: Option<RocksDbConfigSetter>,
        oauth_bearer_token_provider: Option<OAuthBearerTokenProvider>,
    ) -> Self {
        properties.remove(keys::STATE_DIR);
        Self {
            properties,
            state_dir: Some(state_dir),
            rocksdb_config_setter,
            oauth_bearer_token_provider,
        }
    }

    /// Sets where the application's OAUTHBEARER tokens come from (Kafka's
    /// `sasl.login.callback.handler.class`): `f` is called for a token when the first client
    /// connects and again before each token expires, from the runtime's own threads. Every
    /// client presents the token, the streams-group members included, and renews its
    /// sessions with it when the broker asks (KIP-368). See [`OAuthBearerTokenProvider`].
    ///
    /// The clients must use `sasl.mechanism=OAUTHBEARER`, without librdkafka's own token
    /// sources (`enable.sasl.oauthbearer.unsecure.jwt`, `sasl.oauthbearer.method=oidc`):
    /// `build` refuses a configuration that mixes them, naming the property.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use streams_core::StreamsConfig;
    /// use streams_core::config::OAuthBearerToken;
    ///
    /// let config = StreamsConfig::builder()
    ///     .application_id("counts")
    ///     .bootstrap_servers("broker:9093")
    ///     .set("security.protocol", "SASL_SSL")
    ///     .set("sasl.mechanism", "OAUTHBEARER")
    ///     .oauth_bearer_token_provider(|| {
    ///         // Ask the identity provider here (client credentials, a workload identity).
    ///         let expires_at = SystemTime::now() + Duration::from_secs(3600);
    ///         Ok(OAuthBearerToken::new("eyJhbGciOi...", "counts-app", expires_at))
    ///     })
    ///     .build()
    ///     .unwrap();
    /// assert!(config.oauth_bearer_token_provider().is_some());
    /// ```
    pub fn oauth_bearer_token_provider(
        mut self,
        f: impl Fn() -> Result<OAuthBearerToken, String> + Send + Sync + 'static,
    ) -> Self {
        self.oauth_bearer_token_provider = Some(OAuthBearerTokenProvider::new(f));
        self
    }

    /// Sets the RocksDB options setter (Kafka Streams' `rocksdb.config.setter`): `f` is called
    /// with each RocksDB store's name and options before the store opens, after the
    /// runtime's defaults (the shared block cache and write-buffer manager stay in place
    /// unless `f` replaces them). See [`RocksDbConfigSetter`].
    ///
    /// ```
    /// use streams_core::StreamsConfig;
    /// use streams_core::state::librocksdb::{DBCompactionStyle, DBCompressionType, Options};
    ///
    /// // Kafka Streams' own store options: universal compaction, no compression.
    /// let config = StreamsConfig::builder()
    ///     .application_id("counts")
    ///     .bootstrap_servers("localhost:9092")
    ///     .rocksdb_config_setter(|_store: &str, options: &mut Options| {
    ///         options.set_compaction_style(DBCompactionStyle::Universal);
    ///         options.set_compression_type(DBCompressionType::None);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// assert!(config.rocksdb_config_setter().is_some());
    /// ```
    pub fn rocksdb_config_setter(
        mut self,
        f: impl Fn(&str, &mut streams_state::librocksdb::Options) + Send + Sync + 'static,
    ) -> Self {
        self.rocksdb_config_setter = Some(RocksDbConfigSetter::new(f));
        self
    }

    /// Sets any property, streams or client, by name (validated by `build`); for example
    /// `set("session.timeout.ms", "6000")` or `set("consumer.fetch.wait.max.ms", "100")`.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into().trim().to_owned();
        if key == keys::STATE_DIR {
            self.state_dir = None;
        }
        self.properties.insert(key, value.into().trim().to_owned());
        self
    }

    /// Sets every property of `properties`, in order (see [`StreamsConfigBuilder::set`]).
    pub fn set_all<K: Into<String>, V: Into<String>>(
        mut self,
        properties: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (k, v) in properties {
            self = self.set(k, v);
        }
        self
    }

    /// Sets `application.id` (required).
    pub fn application_id(self, id: impl Into<String>) -> Self {
        self.set(keys::APPLICATION_ID, id)
    }

    /// Sets `bootstrap.servers` (`host:port,host:port`); required by `KafkaStreams::new`.
    pub fn bootstrap_servers(self, servers: impl Into<String>) -> Self {
        self.set(keys::BOOTSTRAP_SERVERS, servers)
    }

    /// Sets `num.stream.threads` (at least 1).
    pub fn num_stream_threads(self, threads: usize) -> Self {
        self.set(keys::NUM_STREAM_THREADS, threads.to_string())
    }

    /// Sets `processing.guarantee`.
    pub fn processing_guarantee(self, guarantee: ProcessingGuarantee) -> Self {
        self.set(keys::PROCESSING_GUARANTEE, guarantee.as_str())
    }

    /// Sets `commit.interval.ms`.
    pub fn commit_interval(self, interval: Duration) -> Self {
        self.set(keys::COMMIT_INTERVAL_MS, interval.as_millis().to_string())
    }

    /// Sets `state.dir`.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.properties.remove(keys::STATE_DIR);
        self.state_dir = Some(dir.into());
        self
    }

    /// Sets `statestore.cache.max.bytes`.
    pub fn cache_max_bytes(self, bytes: usize) -> Self {
        self.set(keys::STATESTORE_CACHE_MAX_BYTES, bytes.to_string())
    }

    /// Sets `rocksdb.block.cache.bytes`: the block cache all RocksDB stores share.
    pub fn rocksdb_block_cache_bytes(self, bytes: usize) -> Self {
        self.set(keys::ROCKSDB_BLOCK_CACHE_BYTES, bytes.to_string())
    }

    /// Sets `rocksdb.write.buffer.bytes`: the memtables' part of the block cache.
    pub fn rocksdb_write_buffer_bytes(self, bytes: usize) -> Self {
        self.set(keys::ROCKSDB_WRITE_BUFFER_BYTES, bytes.to_string())
    }

    /// Sets `deserialization.exception.handler`.
    pub fn deserialization_exception_handler(self, handling: ErrorHandling) -> Self {
        self.set(
            keys::DESERIALIZATION_EXCEPTION_HANDLER,
            parse::handling_name(handling),
        )
    }

    /// Sets `processing.exception.handler`.
    pub fn processing_exception_handler(self, handling: ErrorHandling) -> Self {
        self.set(keys::PROCESSING_EXCEPTION_HANDLER, parse::handling_name(handling))
    }

    /// Sets `production.exception.handler`.
    pub fn production_exception_handler(self, handling: ErrorHandling) -> Self {
        self.set(keys::PRODUCTION_EXCEPTION_HANDLER, parse::handling_name(handling))
    }

    /// Sets `errors.dead.letter.queue.topic.name`.
    pub fn dead_letter_queue_topic(self, topic: impl Into<String>) -> Self {
        self.set(keys::DEAD_LETTER_QUEUE_TOPIC_NAME, topic)
    }

    /// Sets the three handlers and the dead-letter topic (removing it when `None`).
    pub fn error_policy(mut self, policy: &ErrorPolicy) -> Self {
        match &policy.dead_letter_topic {
            Some(topic) => self = self.dead_letter_queue_topic(topic.clone()),
            None => {
                self.properties.remove(keys::DEAD_LETTER_QUEUE_TOPIC_NAME);
            }
        }
        self.deserialization_exception_handler(policy.deserialization)
            .processing_exception_handler(policy.processing)
            .production_exception_handler(policy.production)
    }

    /// Sets `metrics.address`, where the Prometheus endpoint listens.
    pub fn metrics_address(self, address: SocketAddr) -> Self {
        self.set(keys::METRICS_ADDRESS, address.to_string())
    }

    /// Sets `poll.ms`.
    pub fn poll_interval(self, interval: Duration) -> Self {
        self.set(keys::POLL_MS, interval.as_millis().to_string())
    }

    /// Sets `repartition.purge.interval.ms`.
    pub fn repartition_purge_interval(self, interval: Duration) -> Self {
        self.set(
            keys::REPARTITION_PURGE_INTERVAL_MS,
            interval.as_millis().to_string(),
        )
    }

    /// Sets `max.task.idle.ms`; `None` sets `-1` (never wait for an empty input partition).
    pub fn max_task_idle(self, idle: Option<Duration>) -> Self {
        let ms = idle.map_or("-1".to_owned(), |d| d.as_millis().to_string());
        self.set(keys::MAX_TASK_IDLE_MS, ms)
    }

    /// Sets `replication.factor` of internal topics (-1 for the broker's default).
    pub fn replication_factor(self, factor: i32) -> Self {
        self.set(keys::REPLICATION_FACTOR, factor.to_string())
    }

    /// Sets a property of every consumer only (`consumer.<key>`).
    pub fn consumer_property(self, key: &str, value: impl Into<String>) -> Self {
        self.set(format!("{}{}", keys::CONSUMER_PREFIX, key.trim()), value)
    }

    /// Sets a property of the producer only (`producer.<key>`).
    pub fn producer_property(self, key: &str, value: impl Into<String>) -> Self {
        self.set(format!("{}{}", keys::PRODUCER_PREFIX, key.trim()), value)
    }

    /// Sets a property of the admin client only (`admin.<key>`).
    pub fn admin_property(self, key: &str, value: impl Into<String>) -> Self {
        self.set(format!("{}{}", keys::ADMIN_PREFIX, key.trim()), value)
    }

    /// Validates the properties and builds the configuration.
    ///
    /// # Errors
    /// [`StreamsError::Config`] naming the first property found invalid, as
    /// [`StreamsConfig::from_properties`].
    pub fn build(&self) -> Result<StreamsConfig, StreamsError> {
        let mut config = parse::validate(self.properties.clone(), self.state_dir.clone())?;
        config.rocksdb_config_setter = self.rocksdb_config_setter.clone();
        if let Some(provider) = &self.oauth_bearer_token_provider {
            if config.oauth_bearer_token_provider.is_some() {
                return Err(super::invalid(
                    "sasl.oauthbearer.method",
                    "a token provider is set: the clients present its tokens, not OIDC ones; \
                     remove the sasl.oauthbearer.* properties of the OIDC source",
                ));
            }
            config.oauth_bearer_token_provider = Some(provider.clone());
            super::oauth::check(&config)?;
        }
        Ok(config)
    }
}

impl fmt::Debug for StreamsConfigBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let properties: BTreeMap<&str, &str> = self
            .properties
            .iter()
            .map(|(k, v)| (k.as_str(), mask(k, v)))
            .collect();
        f.debug_struct("StreamsConfigBuilder")
            .field("properties", &properties)
            .field("state_dir", &self.state_dir)
            .field("rocksdb_config_setter", &self.rocksdb_config_setter)
            .field("oauth_bearer_token_provider", &self.oauth_bearer_token_provider)
            .finish()
    }
}
