//! Kafka client helpers of the smoke tests, against a broker or the in-process mock.

use std::error::Error;
use std::time::{Duration, Instant};

use rdkafka::consumer::BaseConsumer;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use streams_test_utils::kafka::{self, ConsumedRecord};

/// Polls a subscribed consumer until it has `n` records (partition, offset, payload) or
/// the bound runs out.
pub fn poll_n(
    consumer: &BaseConsumer,
    n: usize,
    timeout: Duration,
) -> Result<Vec<(i32, i64, Vec<u8>)>, String> {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    while seen.len() < n {
        if Instant::now() >= deadline {
            return Err(format!("got {} of {n} records within {timeout:?}", seen.len()));
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => seen.push((
                m.partition(),
                m.offset(),
                m.payload().unwrap_or_default().to_vec(),
            )),
            Some(Err(e)) => eprintln!("consumer: {e}"),
            None => {}
        }
    }
    Ok(seen)
}

/// The values of `records` as text.
pub fn values(records: &[ConsumedRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| r.value_str().unwrap_or_default())
        .collect()
}

/// A producer with a fresh `transactional.id` (from `name`) and the extra `settings`, its
/// transactions initialised within `timeout`.
pub fn transactional_producer(
    bootstrap: &str,
    name: &str,
    settings: &[(&str, &str)],
    timeout: Duration,
) -> Result<BaseProducer, Box<dyn Error>> {
    let mut config = kafka::producer_config(bootstrap);
    config.set("transactional.id", kafka::unique_name(name));
    for (key, value) in settings {
        config.set(*key, *value);
    }
    let producer: BaseProducer = config.create()?;
    producer.init_transactions(timeout)?;
    Ok(producer)
}

/// Sends one record (without waiting for it to be written).
pub fn send(producer: &BaseProducer, topic: &str, key: &str, value: &str) -> Result<(), Box<dyn Error>> {
    producer
        .send(BaseRecord::to(topic).key(key).payload(value))
        .map_err(|(e, _)| e)?;
    Ok(())
}
