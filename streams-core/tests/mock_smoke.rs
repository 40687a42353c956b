//! What librdkafka's in-process mock cluster (`rdkafka::mocking::MockCluster`, librdkafka
//! 2.12) supports, pinned down by tests. They need no broker and always run.
//!
//! The assertions record what actually holds, including the gaps, so a librdkafka upgrade
//! that changes the mock makes these tests fail and docs/kafka-for-tests.md gets updated:
//!
//! | feature | mock |
//! |---|---|
//! | produce, idempotent producer, consume (assign) | yes |
//! | topics created with `MockCluster::create_topic` | yes |
//! | topics auto-created on first produce | yes |
//! | consumer groups (subscribe, rebalance) and offset commits | yes |
//! | consumer groups with `group.protocol=consumer` (KIP-848) | yes |
//! | admin `create_topics` | no: no answer; the call ends at its request timeout |
//! | transactions: init/begin/commit/abort calls | succeed |
//! | `read_committed` hides aborted records | no: they are returned |
//! | `send_offsets_to_transaction` stores the group's offsets | no: nothing is committed |

mod common;

use std::error::Error;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, DefaultProducerContext, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaErrorCode;
use streams_test_utils::kafka::{self, ConsumeUntil, ConsumedRecord, ProduceRecord};

use common::clients::{self, poll_n, send, values};

type TestResult = Result<(), Box<dyn Error>>;

/// Bound for every wait against the in-process mock (it answers in milliseconds).
const T: Duration = Duration::from_secs(20);

fn mock() -> Result<(MockCluster<'static, DefaultProducerContext>, String), Box<dyn Error>> {
    let cluster = MockCluster::new(1)?;
    let bootstrap = cluster.bootstrap_servers();
    Ok((cluster, bootstrap))
}

fn transactional_producer(bootstrap: &str) -> Result<BaseProducer, Box<dyn Error>> {
    Ok(kafka::transactional_producer(bootstrap, "mock-txn", &[])?)
}

#[test]
fn mock_produce_and_consume_on_created_topic() -> TestResult {
    let (cluster, bootstrap) = mock()?;
    let topic = kafka::unique_name("mock-roundtrip");
    cluster.create_topic(&topic, 2, 1)?;
    let records = vec![
        ProduceRecord::new("a", "1")
            .with_partition(0)
            .with_header("h", Some(b"x")),
        ProduceRecord::new("b", "2").with_partition(1),
        ProduceRecord::tombstone("a").with_partition(0),
    ];
    let positions = kafka::produce(&bootstrap, &topic, &records, T)?;
    assert_eq!(positions, vec![(0, 0), (1, 0), (0, 1)]);

    let mut read = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Idle(Duration::ZERO), T, false)?;
    read.sort_by_key(|r| (r.partition, r.offset));
    assert_eq!(read.len(), 3);
    assert_eq!(read[0].headers, vec![("h".to_owned(), Some(b"x".to_vec()))]);
    assert_eq!(read[1].value, None);
    assert_eq!(read[2].value_str().as_deref(), Some("2"));
    Ok(())
}

#[test]
fn mock_idempotent_producer_writes_contiguous_offsets() -> TestResult {
    let (cluster, bootstrap) = mock()?;
    let topic = kafka::unique_name("mock-idempotent");
    cluster.create_topic(&topic, 1, 1)?;
    // kafka::producer_config enables idempotence.
    let batch: Vec<_> = (0..200)
        .map(|i| ProduceRecord::keyless(format!("v{i}")))
        .collect();
    let positions = kafka::produce(&bootstrap, &topic, &batch, T)?;
    let offsets: Vec<i64> = positions.iter().map(|&(_, offset)| offset).collect();
    assert_eq!(offsets, (0..200).collect::<Vec<i64>>());
    let read = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Count(200), T, false)?;
    assert_eq!(
        read.last().and_then(ConsumedRecord::value_str).as_deref(),
        Some("v199")
    );
    Ok(())
}

#[test]
fn mock_auto_creates_topics_on_produce() -> TestResult {
    let (_cluster, bootstrap) = mock()?;
    let topic = kafka::unique_name("mock-auto");
    let positions = kafka::produce(&bootstrap, &topic, &[ProduceRecord::new("k", "v")], T)?;
    assert_eq!(positions.len(), 1);
    let read = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Count(1), T, false)?;
    assert_eq!(values(&read), vec!["v"]);
    Ok(())
}

#[test]
fn mock_consumer_group_commits_and_resumes() -> TestResult {
    let (cluster, bootstrap) = mock()?;
    let topic = kafka::unique_name("mock-group");
    let group = kafka::unique_name("mock-group");
    cluster.create_topic(&topic, 1, 1)?;
    let batch: Vec<_> = (0..5).map(|i| ProduceRecord::keyless(format!("v{i}"))).collect();
    kafka::produce(&bootstrap, &topic, &batch, T)?;
    clients::commit_three_then_resume(&bootstrap, &topic, &group, T)
}

#[test]
fn mock_admin_create_topics_gets_no_answer() -> TestResult {
    let (_cluster, bootstrap) = mock()?;
    let topic = kafka::unique_name("mock-admin");
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()?;
    let new_topic = NewTopic::new(&topic, 1, TopicReplication::Fixed(1));
    // Without these the call waits for the default 60 s request timeout (socket.timeout.ms).
    let request_timeout = Duration::from_secs(2);
    let options = AdminOptions::new()
        .request_timeout(Some(request_timeout))
        .operation_timeout(Some(request_timeout));
    let started = Instant::now();
    let outcome = kafka::block_on_timeout(admin.create_topics([&new_topic], &options), T);
    let waited = started.elapsed();
    eprintln!("mock: create_topics after {waited:?}: {outcome:?}");
    match outcome {
        Some(Err(KafkaError::AdminOp(RDKafkaErrorCode::OperationTimedOut))) => {}
        other => panic!("the mock answered CreateTopics ({other:?}); update docs/kafka-for-tests.md"),
    }
    assert!(waited >= request_timeout, "gave up early, after {waited:?}");
    // And no topic was created.
    let created = kafka::wait_for_topic(&bootstrap, &topic, 1, Duration::from_secs(1));
    assert!(
        created.is_err(),
        "the topic exists after all: update docs/kafka-for-tests.md"
    );
    Ok(())
}

#[test]
fn mock_transaction_commit_delivers_but_keeps_no_offsets() -> TestResult {
    let (cluster, bootstrap) = mock()?;
    let input = kafka::unique_name("mock-eos-in");
    let output = kafka::unique_name("mock-eos-out");
    let group = kafka::unique_name("mock-eos-group");
    cluster.create_topic(&input, 1, 1)?;
    cluster.create_topic(&output, 1, 1)?;
    kafka::produce(
        &bootstrap,
        &input,
        &[ProduceRecord::keyless("a"), ProduceRecord::keyless("b")],
        T,
    )?;

    let consumer: BaseConsumer = kafka::consumer_config(&bootstrap, &group).create()?;
    consumer.subscribe(&[&input])?;
    let seen = poll_n(&consumer, 2, T)?;
    let group_metadata = consumer
        .group_metadata()
        .ok_or("consumer has no group metadata")?;

    let producer = transactional_producer(&bootstrap)?;
    producer.begin_transaction()?;
    send(&producer, &output, "k", "A")?;
    send(&producer, &output, "k", "B")?;
    let mut offsets = TopicPartitionList::new();
    offsets.add_partition_offset(&input, 0, Offset::Offset(seen[1].1 + 1))?;
    producer.send_offsets_to_transaction(&offsets, &group_metadata, T)?;
    producer.commit_transaction(T)?;

    let read = kafka::consume_all(&bootstrap, &output, ConsumeUntil::Count(2), T, true)?;
    assert_eq!(values(&read), vec!["A", "B"]);
    let committed = kafka::committed_offsets(&bootstrap, &group, &input, T)?;
    eprintln!("mock: group offsets after the transaction: {committed:?}");
    assert_eq!(
        committed,
        vec![(0, None)],
        "the mock now keeps transactional offsets; update the docs"
    );
    Ok(())
}

#[test]
fn mock_read_committed_returns_aborted_records() -> TestResult {
    let (cluster, bootstrap) = mock()?;
    let topic = kafka::unique_name("mock-abort");
    cluster.create_topic(&topic, 1, 1)?;
    let producer = transactional_producer(&bootstrap)?;
    producer.begin_transaction()?;
    send(&producer, &topic, "k", "aborted")?;
    producer.flush(T)?;
    producer.abort_transaction(T)?;
    producer.begin_transaction()?;
    send(&producer, &topic, "k", "committed")?;
    producer.commit_transaction(T)?;

    let read = kafka::consume_all(&bootstrap, &topic, ConsumeUntil::Idle(Duration::ZERO), T, true)?;
    eprintln!("mock: read_committed after abort + commit: {:?}", values(&read));
    assert_eq!(
        values(&read),
        vec!["aborted", "committed"],
        "the mock's read_committed changed; update docs/kafka-for-tests.md"
    );
    Ok(())
}

#[test]
fn mock_consumer_group_protocol_kip848() -> TestResult {
    let (cluster, bootstrap) = mock()?;
    let topic = kafka::unique_name("mock-kip848");
    let group = kafka::unique_name("mock-kip848");
    cluster.create_topic(&topic, 2, 1)?;
    // The next-generation protocol: no session.timeout.ms / heartbeat.interval.ms on the client.
    clients::kip848_round_trip(&bootstrap, &topic, &group, T)
}
