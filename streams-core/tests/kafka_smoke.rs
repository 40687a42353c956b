//! Smoke tests against a real Kafka broker (`scripts/test.sh` starts one; see
//! docs/kafka-for-tests.md): admin, produce/consume, consumer-group commits and
//! exactly-once transactions. Each test uses fresh topics and groups, and every wait is
//! bounded so a dead broker fails the test instead of hanging it.

mod common;

use std::error::Error;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use streams_test_utils::kafka::{self, ConsumeUntil, DEFAULT_TIMEOUT, ProduceRecord, TestKafkaError};

use common::clients::{self, poll_n, send, values};

type TestResult = Result<(), Box<dyn Error>>;

const T: Duration = DEFAULT_TIMEOUT;

fn transactional_producer(bootstrap: &str, name: &str) -> Result<BaseProducer, Box<dyn Error>> {
    Ok(kafka::transactional_producer(
        bootstrap,
        name,
        &[("transaction.timeout.ms", "60000")],
    )?)
}

#[test]
fn admin_creates_topic_with_partitions_and_config() -> TestResult {
    let Some(bootstrap) = kafka::require_kafka("admin_creates_topic_with_partitions_and_config") else {
        return Ok(());
    };
    let topic = kafka::unique_name("smoke-admin");
    kafka::create_topic(&bootstrap, &topic, 3, &[("cleanup.policy", "compact")])?;

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()?;
    let metadata = consumer.fetch_metadata(Some(&topic), T)?;
    let partitions = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .map(|t| t.partitions().len());
    assert_eq!(partitions, Some(3));

    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()?;
    let options = AdminOptions::new().request_timeout(Some(T));
    let described = kafka::block_on_timeout(
        admin.describe_configs([&ResourceSpecifier::Topic(&topic)], &options),
        T,
    )
    .ok_or("describe_configs timed out")??;
    let config = described.into_iter().next().ok_or("no config resource")??;
    assert_eq!(
        config.get("cleanup.policy").and_then(|e| e.value.as_deref()),
        Some("compact")
    );

    // A second create of the same name is reported, not ignored.
    match kafka::create_topic(&bootstrap, &topic, 1, &[]) {
        Err(TestKafkaError::Failed { detail, .. }) => {
            assert!(detail.contains("TopicAlreadyExists"), "{detail}")
        }
        other => panic!("expected TopicAlreadyExists, got {other:?}"),
    }
    Ok(())
}

#[test]
fn produce_and_consume_roundtrip() -> TestResult {
    let Some(bootstrap) = kafka::require_kafka("produce_and_consume_roundtrip") else {
        return Ok(());
    };
    let topic = kafka::unique_name("smoke-roundtrip");
    kafka::create_topic(&bootstrap, &topic, 2, &[])?;
    let records = vec![
        ProduceRecord::new("a", "1")
            .with_partition(0)
            .with_header("trace", Some(b"x")),
        ProduceRecord::new("b", "2")
            .with_partition(1)
            .with_timestamp(1_700_000_000_000),
        ProduceRecord::tombstone("a").with_partition(0),
        ProduceRecord::keyless("3")
            .with_partition(1)
            .with_header("null", None),
    ];
    let positions = kafka::produce(&bootstrap, &topic, &records, T)?;
    assert_eq!(positions, vec![(0, 0), (1, 0), (0, 1), (1, 1)]);

    let mut read = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Count(4), T, false)?;
    read.sort_by_key(|r| (r.partition, r.offset));
    assert_eq!(read.len(), 4);
    assert_eq!(read[0].key_str().as_deref(), Some("a"));
    assert_eq!(read[0].value_str().as_deref(), Some("1"));
    assert_eq!(read[0].headers, vec![("trace".to_owned(), Some(b"x".to_vec()))]);
    assert_eq!(
        (read[1].partition, read[1].offset, read[1].value.as_deref()),
        (0, 1, None)
    );
    assert_eq!(read[2].timestamp, Some(1_700_000_000_000));
    assert_eq!(read[3].key, None);
    assert_eq!(read[3].headers, vec![("null".to_owned(), None)]);

    // Reading to the end returns exactly what is there.
    let all = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Idle(Duration::ZERO), T, false)?;
    assert_eq!(all.len(), 4);
    Ok(())
}

#[test]
fn consumer_group_commits_and_resumes() -> TestResult {
    let Some(bootstrap) = kafka::require_kafka("consumer_group_commits_and_resumes") else {
        return Ok(());
    };
    let topic = kafka::unique_name("smoke-group");
    let group = kafka::unique_name("smoke-group");
    kafka::create_topic(&bootstrap, &topic, 1, &[])?;
    let batch: Vec<_> = (0..5)
        .map(|i| ProduceRecord::new(format!("k{i}"), format!("v{i}")))
        .collect();
    kafka::produce(&bootstrap, &topic, &batch, T)?;
    clients::commit_three_then_resume(&bootstrap, &topic, &group, T)
}

#[test]
fn transaction_commits_output_and_group_offsets() -> TestResult {
    let Some(bootstrap) = kafka::require_kafka("transaction_commits_output_and_group_offsets") else {
        return Ok(());
    };
    let input = kafka::unique_name("smoke-eos-in");
    let output = kafka::unique_name("smoke-eos-out");
    let group = kafka::unique_name("smoke-eos-group");
    kafka::create_topic(&bootstrap, &input, 1, &[])?;
    kafka::create_topic(&bootstrap, &output, 1, &[])?;
    let batch: Vec<_> = (0..3)
        .map(|i| ProduceRecord::new(format!("k{i}"), format!("v{i}")))
        .collect();
    kafka::produce(&bootstrap, &input, &batch, T)?;

    // Consume-transform-produce: read the input in a group, write the output and the
    // group's offsets in one transaction.
    let consumer: BaseConsumer = kafka::consumer_config(&bootstrap, &group).create()?;
    consumer.subscribe(&[&input])?;
    let seen = poll_n(&consumer, 3, T)?;
    let group_metadata = consumer
        .group_metadata()
        .ok_or("consumer has no group metadata")?;

    let producer = transactional_producer(&bootstrap, "smoke-eos-txn")?;
    producer.begin_transaction()?;
    for (_, offset, value) in &seen {
        let upper = String::from_utf8_lossy(value).to_uppercase();
        send(&producer, &output, &offset.to_string(), &upper)?;
    }
    let mut offsets = TopicPartitionList::new();
    offsets.add_partition_offset(&input, 0, Offset::Offset(seen[2].1 + 1))?;
    producer.send_offsets_to_transaction(&offsets, &group_metadata, T)?;
    producer.commit_transaction(T)?;

    let committed = kafka::consume_all(&bootstrap, &output, ConsumeUntil::Idle(Duration::ZERO), T, true)?;
    assert_eq!(values(&committed), vec!["V0", "V1", "V2"]);
    assert_eq!(
        kafka::committed_offsets(&bootstrap, &group, &input, T)?,
        vec![(0, Some(3))]
    );
    Ok(())
}

#[test]
fn aborted_transaction_is_invisible_to_read_committed() -> TestResult {
    let Some(bootstrap) = kafka::require_kafka("aborted_transaction_is_invisible_to_read_committed") else {
        return Ok(());
    };
    let topic = kafka::unique_name("smoke-abort");
    kafka::create_topic(&bootstrap, &topic, 1, &[])?;

    let producer = transactional_producer(&bootstrap, "smoke-abort-txn")?;
    producer.begin_transaction()?;
    send(&producer, &topic, "a", "aborted-1")?;
    send(&producer, &topic, "a", "aborted-2")?;
    producer.flush(T)?;
    producer.abort_transaction(T)?;
    producer.begin_transaction()?;
    send(&producer, &topic, "b", "committed")?;
    producer.commit_transaction(T)?;

    let committed = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Idle(Duration::ZERO), T, true)?;
    assert_eq!(values(&committed), vec!["committed"]);
    // The aborted records are in the log: read_uncommitted sees them.
    let everything = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Idle(Duration::ZERO), T, false)?;
    assert_eq!(values(&everything), vec!["aborted-1", "aborted-2", "committed"]);
    Ok(())
}

#[test]
fn open_transaction_holds_back_read_committed() -> TestResult {
    let Some(bootstrap) = kafka::require_kafka("open_transaction_holds_back_read_committed") else {
        return Ok(());
    };
    let topic = kafka::unique_name("smoke-open-txn");
    kafka::create_topic(&bootstrap, &topic, 1, &[])?;
    let producer = transactional_producer(&bootstrap, "smoke-open-txn")?;
    producer.begin_transaction()?;
    send(&producer, &topic, "k", "pending")?;
    producer.flush(T)?;

    // Until the commit, read_committed reads nothing (the last stable offset is 0) ...
    let before = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Idle(Duration::ZERO), T, true)?;
    assert!(before.is_empty(), "{before:?}");
    // ... while read_uncommitted already sees the record.
    let uncommitted = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Count(1), T, false)?;
    assert_eq!(values(&uncommitted), vec!["pending"]);

    producer.commit_transaction(T)?;
    let after = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Count(1), T, true)?;
    assert_eq!(values(&after), vec!["pending"]);
    Ok(())
}

#[test]
fn consumer_group_protocol_kip848() -> TestResult {
    let Some(bootstrap) = kafka::require_kafka("consumer_group_protocol_kip848") else {
        return Ok(());
    };
    let topic = kafka::unique_name("smoke-kip848");
    let group = kafka::unique_name("smoke-kip848");
    kafka::create_topic(&bootstrap, &topic, 2, &[])?;
    // The next-generation protocol: the broker sets the session timeout and heartbeat interval.
    clients::kip848_round_trip(&bootstrap, &topic, &group, T)
}
