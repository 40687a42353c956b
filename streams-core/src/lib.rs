//! The Processor API and runtime of a stream-processing framework in the mould of Kafka
//! Streams.
//!
//! - [`Topology::builder`] wires sources, [`Processor`]s, sinks and state stores into a
//!   validated [`Topology`], which [`Topology::describe`] prints in Kafka Streams' format.
//! - Processors run synchronously and depth-first; they reach their stores through typed
//!   handles ([`ProcessorContext::kv_store`]) whose range queries are ordered.
//! - [`TopologyTestDriver`] runs a topology without a broker, on the same task code as the
//!   Kafka runtime.

pub mod config;
mod driver;
pub mod error;
pub mod handlers;
pub mod metrics;
mod partitioner;
pub mod processor;
mod record;
pub mod runtime;
pub mod serdes;
pub(crate) mod task;
pub mod testing;
pub mod topology;

/// The Processor API guide (`docs/processor-api.md`), whose examples are compiled as tests.
#[doc = include_str!("../../docs/processor-api.md")]
pub mod guide {}

pub use config::{ProcessingGuarantee, StreamsConfig, StreamsConfigBuilder};
pub use driver::{DriverConfig, TestInputTopic, TestOutputTopic, TestRecord, TopologyTestDriver};
pub use error::{ProcessResult, ProcessorError, StreamsError, TopologyError, TopologyIssue};
pub use handlers::{ErrorHandling, ErrorPolicy};
pub use metrics::{Metrics, RecordingLevel};
pub use partitioner::{StreamPartitioner, default_partition, murmur2};
pub use processor::{Cancellable, Processor, ProcessorContext, PunctuationType, ScheduleId};
pub use record::{Headers, OutputRecord, RawRecord, Record, RecordMetadata};
pub use runtime::{EmbeddedKafka, GroupProtocol, KafkaStreams, State, ThreadFailureResponse};
pub use task::TaskId;
pub use topology::{OffsetReset, SinkConfig, SourceConfig, Topology, TopologyBuilder, TopologyDescription};

/// The state-store crate, re-exported: stores, builders, serdes.
pub use streams_state as state;
pub use streams_state::{KvStore, KvStoreReader, Stores};
