//! Kafka client errors as the runtime reports them, and how long the runtime waits out a
//! cluster fault. A leaf: every other file of the runtime may use it; it uses none of them
//! but `redact.rs`.

use std::time::Duration;

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::model::error::StreamsError;

/// A Kafka client error as a retriable [`StreamsError::Kafka`], saying what was being done
/// (`context`), with secrets librdkafka may echo from the configuration masked.
pub(crate) fn kafka_err(context: &str, e: impl std::fmt::Display) -> StreamsError {
    StreamsError::Kafka {
        // librdkafka's messages may echo configuration: secrets are masked.
        message: crate::runtime::client::redact::redact(&format!("{context}: {e}")).into_owned(),
        retriable: true,
    }
}

/// How long recovery may wait for the cluster (a new producer's `init_transactions`, the
/// committed offsets of a rewind) before the thread fails: Kafka Streams' `task.timeout.ms`
/// default.
pub(crate) const RECOVERY_LIMIT: Duration = Duration::from_secs(300);

/// Whether `e` means the producer can no longer be used.
pub(crate) fn is_fatal(e: &KafkaError) -> bool {
    if let KafkaError::Transaction(t) = e
        && t.is_fatal()
    {
        return true;
    }
    e.rdkafka_error_code().is_some_and(|c| {
        matches!(
            c,
            RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
                | RDKafkaErrorCode::Fenced
        )
    })
}
