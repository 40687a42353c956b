//! The names of the properties [`StreamsConfig`](super::StreamsConfig) reads, as Kafka Streams
//! spells them, and the prefixes that route client properties.

/// An identifier for the application: the consumer group id, and the prefix of internal
/// topic names and of the state directory. Required.
pub const APPLICATION_ID: &str = "application.id";
/// The Kafka brokers (`host:port,host:port`). Required by `KafkaStreams::new`.
pub const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";
/// The number of stream threads.
pub const NUM_STREAM_THREADS: &str = "num.stream.threads";
/// `at_least_once` or `exactly_once_v2`.
pub const PROCESSING_GUARANTEE: &str = "processing.guarantee";
/// How often tasks commit, in milliseconds.
pub const COMMIT_INTERVAL_MS: &str = "commit.interval.ms";
/// The directory persistent stores live under.
pub const STATE_DIR: &str = "state.dir";
/// The record cache budget, in bytes.
pub const STATESTORE_CACHE_MAX_BYTES: &str = "statestore.cache.max.bytes";
/// The deprecated name of [`STATESTORE_CACHE_MAX_BYTES`].
pub const CACHE_MAX_BYTES_BUFFERING: &str = "cache.max.bytes.buffering";
/// The handler of records that cannot be deserialized.
pub const DESERIALIZATION_EXCEPTION_HANDLER: &str = "deserialization.exception.handler";
/// The deprecated name of [`DESERIALIZATION_EXCEPTION_HANDLER`].
pub const DEFAULT_DESERIALIZATION_EXCEPTION_HANDLER: &str = "default.deserialization.exception.handler";
/// The handler of records a processor fails on.
pub const PROCESSING_EXCEPTION_HANDLER: &str = "processing.exception.handler";
/// The handler of records that cannot be produced.
pub const PRODUCTION_EXCEPTION_HANDLER: &str = "production.exception.handler";
/// The deprecated name of [`PRODUCTION_EXCEPTION_HANDLER`].
pub const DEFAULT_PRODUCTION_EXCEPTION_HANDLER: &str = "default.production.exception.handler";
/// The dead-letter topic of the `dead_letter_queue` handlers.
pub const DEAD_LETTER_QUEUE_TOPIC_NAME: &str = "errors.dead.letter.queue.topic.name";
/// The socket address of the Prometheus metrics endpoint.
pub const METRICS_ADDRESS: &str = "metrics.address";
/// This instance's endpoint for interactive queries (`host:port`), published to the other
/// instances of the application.
pub const APPLICATION_SERVER: &str = "application.server";
/// Which metrics are recorded: `INFO` (default) or `DEBUG` (adds latency histograms per
/// processor node and store operation).
pub const METRICS_RECORDING_LEVEL: &str = "metrics.recording.level";
/// The longest a stream thread blocks in a poll, in milliseconds.
pub const POLL_MS: &str = "poll.ms";
/// How often a stream thread deletes the committed records of repartition topics, in
/// milliseconds.
pub const REPARTITION_PURGE_INTERVAL_MS: &str = "repartition.purge.interval.ms";
/// The most records a stream thread takes from its consumer per loop iteration (a Java
/// consumer property that librdkafka lacks: the runtime's loop honours it). Also read as
/// `consumer.max.poll.records` and `main.consumer.max.poll.records`, which win.
pub const MAX_POLL_RECORDS: &str = "max.poll.records";
/// How long a task with several input partitions waits, in milliseconds, for records of
/// an empty partition the consumer has caught up on before it goes on without them; it
/// always waits (bounded) for records known to be on the broker. `-1`: never waits.
pub const MAX_TASK_IDLE_MS: &str = "max.task.idle.ms";
/// The number of warm copies (standby replicas) of each task's stores kept on other
/// instances. Needs `group.protocol=streams`, where the broker places standbys; a value
/// above 0 with no `group.protocol` set selects that protocol.
pub const NUM_STANDBY_REPLICAS: &str = "num.standby.replicas";
/// The replication factor of internal topics; -1 for the broker's default.
pub const REPLICATION_FACTOR: &str = "replication.factor";
/// The capacity, in bytes, of the one LRU block cache all RocksDB stores of an instance
/// share (data, index and filter blocks, and the memtables charged to it).
pub const ROCKSDB_BLOCK_CACHE_BYTES: &str = "rocksdb.block.cache.bytes";
/// The memory, in bytes, all memtables of an instance's RocksDB stores may take together
/// (charged to the block cache).
pub const ROCKSDB_WRITE_BUFFER_BYTES: &str = "rocksdb.write.buffer.bytes";
/// The prefix of RocksDB properties: every unprefixed property starting with it must be
/// one of [`ROCKSDB_BLOCK_CACHE_BYTES`], [`ROCKSDB_WRITE_BUFFER_BYTES`] or the unsupported
/// `rocksdb.config.setter`; it never reaches a client.
pub const ROCKSDB_PREFIX: &str = "rocksdb.";

/// Properties with this prefix go (prefix stripped) to every consumer only.
pub const CONSUMER_PREFIX: &str = "consumer.";
/// Properties with this prefix go (prefix stripped) to the main consumer only.
pub const MAIN_CONSUMER_PREFIX: &str = "main.consumer.";
/// Properties with this prefix go (prefix stripped) to the restore consumer only.
pub const RESTORE_CONSUMER_PREFIX: &str = "restore.consumer.";
/// Properties with this prefix go (prefix stripped) to the global consumer only.
pub const GLOBAL_CONSUMER_PREFIX: &str = "global.consumer.";
/// Properties with this prefix go (prefix stripped) to the producer only.
pub const PRODUCER_PREFIX: &str = "producer.";
/// Properties with this prefix go (prefix stripped) to the admin client only.
pub const ADMIN_PREFIX: &str = "admin.";

/// Every property `StreamsConfig` interprets itself.
pub(super) const STREAMS: &[&str] = &[
    APPLICATION_ID,
    BOOTSTRAP_SERVERS,
    NUM_STREAM_THREADS,
    PROCESSING_GUARANTEE,
    COMMIT_INTERVAL_MS,
    STATE_DIR,
    STATESTORE_CACHE_MAX_BYTES,
    CACHE_MAX_BYTES_BUFFERING,
    DESERIALIZATION_EXCEPTION_HANDLER,
    DEFAULT_DESERIALIZATION_EXCEPTION_HANDLER,
    PROCESSING_EXCEPTION_HANDLER,
    PRODUCTION_EXCEPTION_HANDLER,
    DEFAULT_PRODUCTION_EXCEPTION_HANDLER,
    DEAD_LETTER_QUEUE_TOPIC_NAME,
    METRICS_ADDRESS,
    APPLICATION_SERVER,
    METRICS_RECORDING_LEVEL,
    POLL_MS,
    REPARTITION_PURGE_INTERVAL_MS,
    MAX_POLL_RECORDS,
    MAX_TASK_IDLE_MS,
    REPLICATION_FACTOR,
    ROCKSDB_BLOCK_CACHE_BYTES,
    ROCKSDB_WRITE_BUFFER_BYTES,
    NUM_STANDBY_REPLICAS,
];

/// Kafka Streams properties this framework does not implement. They are accepted (so a Java
/// application's properties file loads), logged as ignored, and never passed to a client.
pub(super) const UNSUPPORTED: &[&str] = &[
    "acceptable.recovery.lag",
    "buffered.records.per.partition",
    "built.in.metrics.version",
    "default.client.supplier",
    "default.dsl.store",
    "default.key.serde",
    "default.list.key.serde.inner",
    "default.list.key.serde.type",
    "default.list.value.serde.inner",
    "default.list.value.serde.type",
    "default.timestamp.extractor",
    "default.value.serde",
    "default.windowed.key.serde.inner",
    "default.windowed.value.serde.inner",
    "dsl.store.suppliers.class",
    "ensure.explicit.internal.resource.naming",
    "log.summary.interval.ms",
    "max.warmup.replicas",
    "metric.reporters",
    "metrics.num.samples",
    "metrics.sample.window.ms",
    "probing.rebalance.interval.ms",
    "processor.wrapper.class",
    "rack.aware.assignment.non_overlap_cost",
    "rack.aware.assignment.strategy",
    "rack.aware.assignment.tags",
    "rack.aware.assignment.traffic_cost",
    "rocksdb.config.setter",
    "state.cleanup.delay.ms",
    "task.assignor.class",
    "task.timeout.ms",
    "topology.optimization",
    "upgrade.from",
    "window.size.ms",
    "windowed.inner.class.serde",
    "windowstore.changelog.additional.retention.ms",
];

/// Client (librdkafka) properties whose names have no dot; every other client property has one.
pub(super) const DOTLESS_CLIENT: &[&str] = &["acks", "retries", "debug", "partitioner", "log_level"];
