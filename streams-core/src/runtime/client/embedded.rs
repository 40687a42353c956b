//! An in-process cluster for small, quick tests: librdkafka's mock cluster.
//!
//! It is never a default. The mock keeps at most 5 MiB or 100,000 message sets per
//! partition and deletes older ones without a word, so anything that lags by more than that
//! would lose records: an application on it stops with an error as soon as a source or
//! changelog offset falls out of its log (see `resets.rs`).
//!
//! The mock serves produce, consumer groups with committed offsets and auto-created
//! topics; it does not hide aborted transactions from `read_committed` consumers, so
//! exactly-once is refused on it (see `docs/kafka-for-tests.md`).

use std::rc::Rc;

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

use crate::model::error::StreamsError;

/// An in-process Kafka cluster (librdkafka's mock). Keep it alive as long as anything uses
/// its bootstrap servers; several applications in one process can share it (clones share
/// the same cluster).
#[derive(Clone)]
pub struct EmbeddedKafka {
    cluster: Rc<MockCluster<'static, DefaultProducerContext>>,
    bootstrap: String,
}

impl EmbeddedKafka {
    /// Starts a one-broker mock cluster.
    pub fn start() -> Result<Self, StreamsError> {
        let cluster = MockCluster::new(1).map_err(|e| StreamsError::Kafka {
            message: format!("mock cluster: {e}"),
            retriable: false,
        })?;
        let bootstrap = cluster.bootstrap_servers();
        Ok(Self {
            cluster: Rc::new(cluster),
            bootstrap,
        })
    }

    /// The address clients connect to.
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }

    /// Creates a topic (the admin API's `create_topics` is not served by the mock).
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<(), StreamsError> {
        self.cluster
            .create_topic(name, partitions, 1)
            .map_err(|e| StreamsError::Kafka {
                message: format!("create topic {name}: {e}"),
                retriable: false,
            })
    }
}

impl std::fmt::Debug for EmbeddedKafka {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedKafka")
            .field("bootstrap", &self.bootstrap)
            .finish()
    }
}
