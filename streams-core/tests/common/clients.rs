//! Kafka client helpers of the smoke tests, against a broker or the in-process mock.

use std::error::Error;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use streams_test_utils::kafka::{self, ConsumedRecord, ProduceRecord};

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

/// Sends one record (without waiting for it to be written).
pub fn send(producer: &BaseProducer, topic: &str, key: &str, value: &str) -> Result<(), Box<dyn Error>> {
    producer
        .send(BaseRecord::to(topic).key(key).payload(value))
        .map_err(|(e, _)| e)?;
    Ok(())
}

/// Reads 3 of the 5 records of the one-partition `topic` in `group` and commits after
/// them; checks that the group's offset is then 3, and that a new member of the group
/// resumes after it (offsets 3 and 4). Every wait is bounded by `timeout`.
pub fn commit_three_then_resume(
    bootstrap: &str,
    topic: &str,
    group: &str,
    timeout: Duration,
) -> Result<(), Box<dyn Error>> {
    {
        let consumer: BaseConsumer = kafka::consumer_config(bootstrap, group).create()?;
        consumer.subscribe(&[topic])?;
        let seen = poll_n(&consumer, 3, timeout)?;
        let mut offsets = TopicPartitionList::new();
        offsets.add_partition_offset(topic, 0, Offset::Offset(seen[2].1 + 1))?;
        consumer.commit(&offsets, CommitMode::Sync)?;
    }
    assert_eq!(
        kafka::committed_offsets(bootstrap, group, topic, timeout)?,
        vec![(0, Some(3))]
    );

    // A new member of the group resumes after the committed offset.
    let consumer: BaseConsumer = kafka::consumer_config(bootstrap, group).create()?;
    consumer.subscribe(&[topic])?;
    let rest = poll_n(&consumer, 2, timeout)?;
    assert_eq!(rest.iter().map(|r| r.1).collect::<Vec<_>>(), vec![3, 4]);
    Ok(())
}

/// Writes one record to each of the 2 partitions of `topic`, reads both in `group` under
/// `group.protocol=consumer` (KIP-848) and commits; checks what was read and committed.
pub fn kip848_round_trip(
    bootstrap: &str,
    topic: &str,
    group: &str,
    timeout: Duration,
) -> Result<(), Box<dyn Error>> {
    let records = [
        ProduceRecord::keyless("a").with_partition(0),
        ProduceRecord::keyless("b").with_partition(1),
    ];
    kafka::produce(bootstrap, topic, &records, timeout)?;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("group.protocol", "consumer")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()?;
    consumer.subscribe(&[topic])?;
    let mut seen = poll_n(&consumer, 2, timeout)?;
    seen.sort();
    assert_eq!(seen, vec![(0, 0, b"a".to_vec()), (1, 0, b"b".to_vec())]);
    consumer.commit_consumer_state(CommitMode::Sync)?;
    assert_eq!(
        kafka::committed_offsets(bootstrap, group, topic, timeout)?,
        vec![(0, Some(1)), (1, Some(1))]
    );
    Ok(())
}
