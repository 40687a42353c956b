//! The producer the dead-letter tool replays with and the web-hook producer writes with
//! (the ladder's own moves are the runtime's sinks).
//!
//! Invariants: sends are queued, never awaited one by one, and confirmed together by
//! [`Forwarder::flush`], which fails when any of them failed since the last flush; a full
//! local queue is waited out, never reported; the producer is idempotent, so librdkafka's
//! own retries do not duplicate.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;

use crate::ExampleError;

/// Collects delivery failures of a [`Forwarder`].
#[derive(Default)]
pub(crate) struct ForwardContext {
    failures: Mutex<Vec<String>>,
}

impl ClientContext for ForwardContext {}

impl ProducerContext for ForwardContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, m)) = result {
            self.failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(format!("{}: {e}", m.topic()));
        }
    }
}

/// An idempotent producer whose sends are confirmed together by [`Forwarder::flush`].
pub(crate) struct Forwarder {
    producer: BaseProducer<ForwardContext>,
}

impl Forwarder {
    /// A producer on `bootstrap` with `extra` librdkafka properties.
    pub(crate) fn new(bootstrap: &str, extra: &[(String, String)]) -> Result<Self, ExampleError> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .set("message.timeout.ms", "60000");
        for (k, v) in extra {
            config.set(k, v);
        }
        Ok(Self {
            producer: config.create_with_context(ForwardContext::default())?,
        })
    }

    /// Queues a record; the producer picks its partition from the key.
    pub(crate) fn send(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: OwnedHeaders,
    ) -> Result<(), ExampleError> {
        self.send_to(topic, None, key, value, headers)
    }

    /// Queues a record for `partition` (`None`: the producer picks it from the key).
    pub(crate) fn send_to(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: OwnedHeaders,
    ) -> Result<(), ExampleError> {
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic).headers(headers);
        if let Some(p) = partition {
            record = record.partition(p);
        }
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(v) = value {
            record = record.payload(v);
        }
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    self.producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(e.into()),
            }
        }
    }

    /// The partition count of `topic`.
    pub(crate) fn partitions(&self, topic: &str, timeout: Duration) -> Result<i32, ExampleError> {
        let metadata = self.producer.client().fetch_metadata(Some(topic), timeout)?;
        match metadata.topics().iter().find(|t| t.name() == topic) {
            Some(t) if t.error().is_none() && !t.partitions().is_empty() => Ok(t.partitions().len() as i32),
            _ => Err(ExampleError::Other(format!("topic {topic} not found"))),
        }
    }

    /// Waits until every queued record is acknowledged; an error when one failed or the
    /// timeout passed.
    pub(crate) fn flush(&self, timeout: Duration) -> Result<(), ExampleError> {
        let flushed = self.producer.flush(timeout);
        let failures = std::mem::take(
            &mut *self
                .producer
                .context()
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if !failures.is_empty() {
            return Err(ExampleError::Other(format!(
                "forwarding failed: {}",
                failures.join("; ")
            )));
        }
        Ok(flushed?)
    }
}
