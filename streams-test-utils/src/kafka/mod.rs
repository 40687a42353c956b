//! Helpers for tests that talk to a Kafka broker: finding the broker, fresh names, and
//! synchronous, time-bounded topic creation, producing and consuming.
//!
//! The test broker is described by two environment variables, both set by `scripts/test.sh`
//! (see `docs/kafka-for-tests.md`):
//!
//! - [`BOOTSTRAP_ENV`] (`STREAMS_TEST_BOOTSTRAP`): the bootstrap servers, e.g. `127.0.0.1:9092`.
//! - [`REQUIRE_KAFKA_ENV`] (`STREAMS_REQUIRE_KAFKA`): when `1`, a Kafka test without a broker
//!   fails instead of being skipped, so a CI run can never pass by skipping everything.
//!
//! Every Kafka test starts with [`require_kafka`]:
//!
//! ```no_run
//! use std::time::Duration;
//! use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};
//!
//! let Some(bootstrap) = kafka::require_kafka("my_kafka_test") else {
//!     return Ok(());
//! };
//! let topic = kafka::unique_name("my-topic");
//! kafka::create_topic(&bootstrap, &topic, 1, &[])?;
//! kafka::produce(&bootstrap, &topic, &[ProduceRecord::new("k", "v")], Duration::from_secs(30))?;
//! let records = kafka::consume_all(
//!     &bootstrap,
//!     &topic,
//!     ConsumeUntil::Count(1),
//!     Duration::from_secs(30),
//!     false,
//! )?;
//! assert_eq!(records[0].value.as_deref(), Some(&b"v"[..]));
//! # Ok::<(), streams_test_utils::kafka::TestKafkaError>(())
//! ```
//!
//! Every function here is bounded in time: a dead or unreachable broker makes it return a
//! [`TestKafkaError`] after its timeout, never hang. The functions block the calling thread,
//! so call them from synchronous tests (or from `spawn_blocking` in async ones).
//!
//! The helpers work against librdkafka's in-process mock cluster
//! ([`rdkafka::mocking::MockCluster`]) too, except [`create_topic`]: the mock does not serve
//! the CreateTopics admin request, use `MockCluster::create_topic` there.

pub mod acl;
pub mod secure;

mod blocking;
mod client_config;
mod committed;
mod consume;
mod environment;
mod error;
mod naming;
mod produce;
mod running;
#[cfg(test)]
mod tests;
mod topics;

pub use blocking::{DEFAULT_TIMEOUT, block_on_timeout};
pub use client_config::{consumer_config, producer_config};
pub use committed::{CommittedReader, committed_offsets};
pub use consume::{ConsumeUntil, ConsumedRecord, consume_all, isolation_level, read_to_end};
pub use environment::{BOOTSTRAP_ENV, REQUIRE_KAFKA_ENV, kafka_bootstrap, kafka_required, require_kafka};
pub use error::{TestKafkaError, TestResult};
pub use naming::{recent_minute, unique_name};
pub use produce::{ProduceRecord, produce, transactional_producer};
pub use running::start_running;
pub use topics::{
    create_topic, delete_records, last_stable_offset, topics_with_prefix, wait_for_topic, watermarks,
};

use error::timeout_error;
