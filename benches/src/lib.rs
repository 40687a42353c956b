//! Benchmark support code shared by the criterion benches and harness binaries.

pub mod avro;
pub mod nexmark;
pub mod rocksdb_env;
pub mod store_keys;

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::ToBytes;
use rdkafka::producer::{BaseProducer, BaseRecord, ProducerContext};

/// Sends `record` with `producer`, serving its delivery reports every 10 ms while its
/// queue is full, until the record is taken; any other refusal is returned.
pub fn send_waiting<C, K, P>(
    producer: &BaseProducer<C>,
    mut record: BaseRecord<'_, K, P, C::DeliveryOpaque>,
) -> KafkaResult<()>
where
    C: ProducerContext,
    K: ToBytes + ?Sized,
    P: ToBytes + ?Sized,
{
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                record = r;
                producer.poll(Duration::from_millis(10));
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// The settings of a producer that fills input topics in bulk: large batches, a deep queue
/// and a long delivery timeout.
pub fn bulk_producer_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "500000")
        .set("message.timeout.ms", "120000");
    config
}

/// A producer with the [bulk settings](bulk_producer_config).
pub fn bulk_producer(bootstrap: &str) -> KafkaResult<BaseProducer> {
    bulk_producer_config(bootstrap).create()
}
