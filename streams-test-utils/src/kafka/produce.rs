//! Producing test records: [`ProduceRecord`], and [`produce`], which waits for every
//! record's delivery report.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;

use super::blocking::DEFAULT_TIMEOUT;
use super::client_config::producer_config;
use super::error::{TestKafkaError, TestResult, timeout_error};
use super::naming::unique_name;

/// One record for [`produce`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProduceRecord {
    /// The key, or `None` for a keyless record.
    pub key: Option<Vec<u8>>,
    /// The value, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// The partition, or `None` to let the default partitioner choose.
    pub partition: Option<i32>,
    /// The timestamp in milliseconds since the epoch, or `None` for the producer's clock.
    pub timestamp: Option<i64>,
    /// Headers in order; a header value may be null.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl ProduceRecord {
    /// A record with a key and a value.
    pub fn new(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Self {
        Self {
            key: Some(key.as_ref().to_vec()),
            value: Some(value.as_ref().to_vec()),
            ..Self::default()
        }
    }

    /// A record with a value and no key.
    pub fn keyless(value: impl AsRef<[u8]>) -> Self {
        Self {
            value: Some(value.as_ref().to_vec()),
            ..Self::default()
        }
    }

    /// A tombstone: a key and a null value.
    pub fn tombstone(key: impl AsRef<[u8]>) -> Self {
        Self {
            key: Some(key.as_ref().to_vec()),
            ..Self::default()
        }
    }

    /// Sends the record to the given partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the record's timestamp (milliseconds since the epoch).
    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// Appends a header.
    pub fn with_header(mut self, key: impl Into<String>, value: Option<&[u8]>) -> Self {
        self.headers.push((key.into(), value.map(<[u8]>::to_vec)));
        self
    }
}

/// Collects the delivery report of each record, by its index in the batch.
struct DeliveryCollector {
    reports: Mutex<Vec<DeliveryReport>>,
}

/// One record's delivery: `(partition, offset)` or the error, `None` while pending.
type DeliveryReport = Option<Result<(i32, i64), String>>;

impl ClientContext for DeliveryCollector {}

impl ProducerContext for DeliveryCollector {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, index: usize) {
        let report = match result {
            Ok(message) => Ok((message.partition(), message.offset())),
            Err((error, _)) => Err(error.to_string()),
        };
        let mut reports = self.reports.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = reports.get_mut(index) {
            *slot = Some(report);
        }
    }
}

fn owned_headers(headers: &[(String, Option<Vec<u8>>)]) -> Option<OwnedHeaders> {
    if headers.is_empty() {
        return None;
    }
    let mut owned = OwnedHeaders::new_with_capacity(headers.len());
    for (key, value) in headers {
        owned = owned.insert(Header {
            key,
            value: value.as_deref(),
        });
    }
    Some(owned)
}

/// Produces `records` to `topic` with an idempotent producer ([`producer_config`]) and waits
/// for every delivery report; returns each record's `(partition, offset)`, in order.
///
/// Fails when any record is not acknowledged within `timeout`.
pub fn produce(
    bootstrap: &str,
    topic: &str,
    records: &[ProduceRecord],
    timeout: Duration,
) -> TestResult<Vec<(i32, i64)>> {
    let deadline = Instant::now() + timeout;
    let mut config = producer_config(bootstrap);
    config.set("message.timeout.ms", timeout.as_millis().max(1).to_string());
    let context = DeliveryCollector {
        reports: Mutex::new(vec![None; records.len()]),
    };
    let producer: BaseProducer<DeliveryCollector> = config.create_with_context(context)?;
    for (index, record) in records.iter().enumerate() {
        let mut base = BaseRecord::with_opaque_to(topic, index);
        if let Some(key) = &record.key {
            base = base.key(key.as_slice());
        }
        if let Some(value) = &record.value {
            base = base.payload(value.as_slice());
        }
        if let Some(partition) = record.partition {
            base = base.partition(partition);
        }
        if let Some(timestamp) = record.timestamp {
            base = base.timestamp(timestamp);
        }
        if let Some(headers) = owned_headers(&record.headers) {
            base = base.headers(headers);
        }
        loop {
            match producer.send(base) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), returned)) => {
                    if Instant::now() >= deadline {
                        return Err(timeout_error(
                            format!("producing to {topic}: local queue stayed full"),
                            timeout,
                        ));
                    }
                    base = returned;
                    producer.poll(Duration::from_millis(50));
                }
                Err((error, _)) => return Err(error.into()),
            }
        }
    }
    let remaining = deadline.saturating_duration_since(Instant::now());
    let flushed = producer.flush(remaining);
    let reports = std::mem::take(
        &mut *producer
            .context()
            .reports
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    let mut offsets = Vec::with_capacity(reports.len());
    for (index, report) in reports.into_iter().enumerate() {
        match report {
            Some(Ok(position)) => offsets.push(position),
            Some(Err(error)) => {
                return Err(TestKafkaError::Failed {
                    what: format!("producing record {index} to {topic}"),
                    detail: error,
                });
            }
            None => {
                let detail = flushed
                    .as_ref()
                    .err()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                return Err(timeout_error(
                    format!("producing to {topic}: record {index} was not acknowledged ({detail})"),
                    timeout,
                ));
            }
        }
    }
    Ok(offsets)
}

/// A transactional producer: [`producer_config`] with a fresh `transactional.id` made from
/// `name` and the extra `settings`, its transactions initialised within [`DEFAULT_TIMEOUT`].
pub fn transactional_producer(
    bootstrap: &str,
    name: &str,
    settings: &[(&str, &str)],
) -> TestResult<BaseProducer> {
    let mut config = producer_config(bootstrap);
    config.set("transactional.id", unique_name(name));
    for (key, value) in settings {
        config.set(*key, *value);
    }
    let producer: BaseProducer = config.create()?;
    producer.init_transactions(DEFAULT_TIMEOUT)?;
    Ok(producer)
}
