//! The test kit of the streams framework, as Kafka Streams' `kafka-streams-test-utils`
//! artifact: a dev-dependency of applications' tests, kept out of the production library.
//!
//! - [`TopologyTestDriver`] runs a [`Topology`](streams_core::Topology) synchronously and
//!   without a broker, on the engine's own task code (the same nodes, stores, caches,
//!   changelogs, punctuation and error handlers as `KafkaStreams`): pipe records in through a
//!   [`TestInputTopic`], read what the topology produced from a [`TestOutputTopic`], look
//!   into its stores.
//! - [`kafka`] has helpers for tests against a real broker: finding it
//!   ([`kafka::require_kafka`]), fresh names ([`kafka::unique_name`]), and synchronous,
//!   time-bounded topic creation, producing and consuming.
//!
//! # Module map
//!
//! | module | what |
//! |---|---|
//! | `driver/` | [`TopologyTestDriver`] and [`DriverConfig`]; its typed topics ([`TestInputTopic`], [`TestOutputTopic`], [`TestRecord`]); its in-memory topic log, record collector and changelog sinks |
//! | [`kafka`] | the broker test kit: [`kafka::kafka_bootstrap`], [`kafka::require_kafka`], [`kafka::create_topic`], [`kafka::produce`], [`kafka::consume_all`], ... |
//! | [`processors`] | processors whose work is not the point: [`processors::Pass`], [`processors::Discard`], [`processors::Count`] |
//! | [`queries`] | interactive queries in tests: [`queries::retry`] |
//! | [`tls`] | certificates for TLS tests: [`tls::TestCerts`] |
//!
//! The driver is a host of `streams_core::engine`, as the runtime is: it builds tasks with
//! the engine's task factory and feeds them records.

mod driver;
pub mod kafka;
pub mod processors;
pub mod queries;
pub mod tls;

pub use driver::{DriverConfig, TestInputTopic, TestOutputTopic, TestRecord, TopologyTestDriver};
