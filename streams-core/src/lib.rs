//! The Processor API and runtime of a stream-processing framework in the mould of Kafka
//! Streams.
//!
//! - [`Topology::builder`] wires sources, [`Processor`]s, sinks and state stores into a
//!   validated [`Topology`], which [`Topology::describe`] prints in Kafka Streams' format.
//! - Processors run synchronously and depth-first; they reach their stores through typed
//!   handles ([`ProcessorContext::kv_store`]) whose range queries are ordered.
//! - [`KafkaStreams`] runs a topology on a Kafka cluster.
//! - The test kit is a crate of its own, `streams-test-utils` (a dev-dependency): its
//!   `TopologyTestDriver` runs a topology without a broker on the same engine, and its
//!   `kafka` module helps tests against a broker.
//!
//! # Module map
//!
//! Layers as folders, each using only the layers above it in this list (a test,
//! `tests/layering.rs`, fails on any import against the grain):
//!
//! | layer | folder | what |
//! |---|---|---|
//! | model | `model/` | records, errors, serdes, the partitioner, error handlers, task ids, states |
//! | config | `config/` | [`StreamsConfig`]: properties, validation, client properties |
//! | api | `processor/` | [`Processor`], [`ProcessorContext`], and the node contract the engine implements |
//! | topology | `topology/` | the builder, validation, `describe()`, the per-task node adapters |
//! | engine | `engine/` | a task: record queues, stream time, stores, punctuation; one factory for every host; an observer trait |
//! | observers | `metrics/` | Prometheus metrics: the engine's observer, served over HTTP |
//! | hosts | `runtime/` | [`KafkaStreams`], running the engine's tasks |
//!
//! [`engine`] is public for hosts outside this crate (streams-test-utils' driver);
//! applications do not need it.

mod model;

pub mod config;
pub mod processor;
pub mod topology;

pub mod engine;

pub mod metrics;

pub mod runtime;

pub use model::{error, handlers, serdes};

/// The Processor API guide (`docs/processor-api.md`), whose examples are compiled as tests.
#[doc = include_str!("../../docs/processor-api.md")]
pub mod guide {}

/// The async processors' guide (`docs/async-processors.md`), whose examples are compiled
/// as tests.
#[doc = include_str!("../../docs/async-processors.md")]
pub mod async_guide {}

/// The interactive-queries guide (`docs/interactive-queries.md`), whose examples are
/// compiled as tests.
#[doc = include_str!("../../docs/interactive-queries.md")]
pub mod queries_guide {}

pub use config::{ProcessingGuarantee, StreamsConfig, StreamsConfigBuilder};
pub use error::{ProcessResult, ProcessorError, StreamsError, TopologyError, TopologyIssue};
pub use handlers::{ErrorHandling, ErrorPolicy};
pub use metrics::{Metrics, RecordingLevel};
pub use model::TaskId;
pub use model::partitioner::{StreamPartitioner, default_partition, murmur2};
pub use model::record::{Headers, Nulls, OutputRecord, OutputRef, RawRecord, Record, RecordMetadata};
pub use processor::{
    Cancellable, Child, Processor, ProcessorContext, PunctuationType, ScheduleId, StoreAccess,
};
pub use runtime::query::{
    HostInfo, KeyQueryMetadata, KeyValueCursor, LagInfo, Queries, QueryError, QueryableStore,
    ReadOnlyKeyValueStore, ReadOnlySessionStore, ReadOnlyWindowStore, Replica, ResumeToken, StreamsMetadata,
    WindowCursor,
};
pub use runtime::{
    EmbeddedKafka, GroupProtocol, KafkaStreams, NeededTopic, State, ThreadFailureResponse, TopicCheck,
    limit_malloc_arenas,
};
pub use topology::{
    ConnectableStore, DescribedNames, NameDifferences, NodeRef, OffsetReset, SessionStoreRef, SinkConfig,
    SourceConfig, SourceValues, StoreRef, Topology, TopologyBuilder, TopologyDescription, TypedStoreRef,
    VersionedStoreRef, WindowStoreRef,
};

/// The state-store crate, re-exported: stores, builders, serdes.
pub use streams_state as state;
pub use streams_state::{
    KvStore, KvStoreReader, SessionStore, SessionStoreReader, Stores, TypedStoreBuilder, ValueAndTimestamp,
    ValueAndTimestampSerde, WindowStore, WindowStoreReader, Windowed,
};
