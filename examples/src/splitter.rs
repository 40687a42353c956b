//! The splitter of the file-aggregation example: one record per line to the pending
//! topic (no key, so lines spread over partitions), then the file's line count to the
//! aggregator, keyed by file id.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

use crate::file_aggregation::{AggregatorMessage, Command, Topics, read_commands};

/// Errors of the example programs.
#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    /// Reading or writing a file failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Kafka failed.
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// JSON encoding failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// The streams framework failed.
    #[error(transparent)]
    Streams(#[from] streams_core::StreamsError),
    /// A topology was invalid.
    #[error(transparent)]
    Topology(#[from] streams_core::TopologyError),
    /// Something else.
    #[error("{0}")]
    Other(String),
}

/// A producer for the examples' own writes.
pub fn producer(bootstrap: &str) -> Result<ThreadedProducer<DefaultProducerContext>, ExampleError> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "10")
        // Java's partitioner, as the framework's sinks use: keyed records land where
        // records with the same key written by a streams application do.
        .set("partitioner", "murmur2_random")
        .set("enable.idempotence", "true")
        .create()?)
}

pub(crate) fn send(
    p: &ThreadedProducer<DefaultProducerContext>,
    topic: &str,
    key: Option<&str>,
    value: &[u8],
) -> Result<(), ExampleError> {
    let mut r: BaseRecord<'_, str, [u8]> = BaseRecord::to(topic).payload(value);
    if let Some(k) = key {
        r = r.key(k);
    }
    let mut r = r;
    loop {
        match p.send(r) {
            Ok(()) => return Ok(()),
            Err((
                rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                back,
            )) => {
                r = back;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err((e, _)) => return Err(e.into()),
        }
    }
}

/// Splits the file at `path` as file `file_id` on the default topics. Returns the number
/// of lines.
pub fn split(bootstrap: &str, file_id: &str, path: &Path) -> Result<u64, ExampleError> {
    split_to(bootstrap, &Topics::default(), file_id, path)
}

/// Splits the file at `path` as file `file_id` on `topics`. Returns the number of lines.
pub fn split_to(bootstrap: &str, topics: &Topics, file_id: &str, path: &Path) -> Result<u64, ExampleError> {
    split_counted(bootstrap, topics, file_id, path, &AtomicU64::new(0))
}

/// [`split_to`], adding one to `sent` for every line handed to the producer, so another
/// thread can show the progress.
pub fn split_counted(
    bootstrap: &str,
    topics: &Topics,
    file_id: &str,
    path: &Path,
    sent: &AtomicU64,
) -> Result<u64, ExampleError> {
    let p = producer(bootstrap)?;
    let mut lines = 0u64;
    for (line, command) in read_commands(path)?.enumerate() {
        let cmd = Command {
            file: file_id.to_owned(),
            line: line as u64,
            command: command?,
        };
        send(&p, &topics.pending, None, &serde_json::to_vec(&cmd)?)?;
        lines += 1;
        sent.fetch_add(1, Ordering::Relaxed);
    }
    // The total goes out after every line was acknowledged, so it never overtakes them.
    p.flush(Duration::from_secs(60))?;
    let total = AggregatorMessage::Total { lines };
    send(
        &p,
        &topics.aggregator_input,
        Some(file_id),
        &serde_json::to_vec(&total)?,
    )?;
    p.flush(Duration::from_secs(60))?;
    Ok(lines)
}
