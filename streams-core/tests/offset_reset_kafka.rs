//! Offsets out of range are never skipped silently.
//!
//! - A source partition whose committed offset was deleted (`DeleteRecords`) is reset as
//!   `auto.offset.reset` says, logged at WARN and counted: exactly the deleted offsets show
//!   up in `streams_thread_skipped_offsets_total`, and exactly the remaining records are
//!   processed.
//! - A changelog with a gap after the store's checkpoint is corrupted state: the task's
//!   state is wiped and restored from the earliest offset; a key whose changelog records
//!   were deleted is gone, a key written after the gap is restored.
//! - On the embedded mock cluster, whose retention deletes records silently, a source
//!   offset out of range stops the application with an error saying so.
//!
//! Fresh topics and application ids per test; without a broker the Kafka tests say they
//! were skipped (`scripts/test.sh` always provides one). The mock test needs no broker.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DefaultProducerContext, Producer};
use rdkafka::{Offset, TopicPartitionList};
use streams_core::runtime::changelog_topic;
use streams_core::{EmbeddedKafka, KafkaStreams, State, StreamsConfig};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

mod common;

fn config(bootstrap: &str, app: &str, state_dir: &Path) -> StreamsConfig {
    let dir = state_dir.display().to_string();
    StreamsConfig::from_properties([
        ("application.id", app),
        ("bootstrap.servers", bootstrap),
        ("num.stream.threads", "1"),
        ("state.dir", &dir),
        ("commit.interval.ms", "200"),
        ("consumer.session.timeout.ms", "6000"),
        ("consumer.heartbeat.interval.ms", "500"),
    ])
    .unwrap()
}

fn init_logs() {
    common::init_tracing();
}

/// Commits `offset` for `group` on partition 0 of `topic`, outside any group membership.
fn commit_offset(bootstrap: &str, group: &str, topic: &str, offset: i64) {
    let consumer: BaseConsumer = kafka::consumer_config(bootstrap, group).create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(offset))
        .unwrap();
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
}

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap()
}

/// Sets `cleanup.policy` of `topic` (a compacted topic refuses `DeleteRecords`).
fn set_cleanup_policy(bootstrap: &str, topic: &str, policy: &str) {
    let config = AlterConfig::new(ResourceSpecifier::Topic(topic)).set("cleanup.policy", policy);
    let result = kafka::block_on_timeout(
        admin(bootstrap).alter_configs(&[config], &AdminOptions::new()),
        Duration::from_secs(30),
    )
    .expect("alter_configs timed out")
    .unwrap();
    for r in result {
        assert!(r.is_ok(), "alter_configs {topic}: {r:?}");
    }
}

/// Deletes the records of partition 0 of `topic` before `before`.
fn delete_records(bootstrap: &str, topic: &str, before: i64) {
    kafka::delete_records(bootstrap, topic, 0, before).unwrap();
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn source_offset_out_of_range_is_reset_logged_and_counted() {
    let Some(bootstrap) = kafka::require_kafka("source_offset_out_of_range_is_reset_logged_and_counted")
    else {
        return;
    };
    init_logs();
    let app_id = kafka::unique_name("reset-source");
    let input = kafka::unique_name("reset-in");
    let output = kafka::unique_name("reset-out");
    kafka::create_topic(&bootstrap, &input, 1, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 1, &[]).unwrap();
    let records: Vec<ProduceRecord> = (0..10)
        .map(|i| ProduceRecord::new(format!("k{i}"), format!("v{i}")).with_partition(0))
        .collect();
    kafka::produce(&bootstrap, &input, &records, Duration::from_secs(30)).unwrap();
    // The group stands at offset 2; offsets 0..6 are then deleted: 2, 3, 4, 5 were never read.
    commit_offset(&bootstrap, &app_id, &input, 2);
    delete_records(&bootstrap, &input, 6);

    let state = tempfile::tempdir().unwrap();
    let mut app = KafkaStreams::new(
        common::pass_through(&input, &output),
        config(&bootstrap, &app_id, state.path()),
    )
    .unwrap();
    app.start().unwrap();
    let out = kafka::consume_all(
        &bootstrap,
        &output,
        ConsumeUntil::Count(4),
        Duration::from_secs(60),
        false,
    )
    .unwrap();
    let values: Vec<String> = out.iter().filter_map(|r| r.value_str()).collect();
    assert_eq!(
        values,
        ["v6", "v7", "v8", "v9"],
        "exactly the records left in the log"
    );
    wait_until("the reset to be counted", Duration::from_secs(30), || {
        common::metric(&app, "streams_thread_offset_resets_total", "") >= 1.0
    });
    assert_eq!(
        common::metric(&app, "streams_thread_offset_resets_total", ""),
        1.0
    );
    assert_eq!(
        common::metric(&app, "streams_thread_skipped_offsets_total", ""),
        4.0,
        "offsets 2..6 skipped"
    );
    assert!(app.close(Duration::from_secs(30)));
    assert_eq!(app.state(), State::NotRunning);
}

/// The records of `topic` in order (one partition), as key -> last count.
fn last_counts(bootstrap: &str, topic: &str) -> (HashMap<String, u64>, usize) {
    let counts = common::read_counts(bootstrap, topic, false);
    let n = counts.len();
    (counts.into_iter().collect(), n)
}

fn count_record(key: &str, count: u64) -> ProduceRecord {
    ProduceRecord {
        key: Some(key.as_bytes().to_vec()),
        value: Some(count.to_be_bytes().to_vec()),
        partition: Some(0),
        timestamp: None,
        headers: Vec::new(),
    }
}

#[test]
fn changelog_gap_after_checkpoint_wipes_and_restores_from_earliest() {
    let Some(bootstrap) =
        kafka::require_kafka("changelog_gap_after_checkpoint_wipes_and_restores_from_earliest")
    else {
        return;
    };
    init_logs();
    let app_id = kafka::unique_name("reset-changelog");
    let input = kafka::unique_name("reset-words");
    let output = kafka::unique_name("reset-counts");
    kafka::create_topic(&bootstrap, &input, 1, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 1, &[]).unwrap();
    let state = tempfile::tempdir().unwrap();
    let word = |k: &str| ProduceRecord::new(k, "x").with_partition(0);

    // j counted 5 times, k 3 times; a clean close checkpoints the store.
    let first: Vec<ProduceRecord> = ["j", "j", "k", "j", "k", "j", "k", "j"]
        .iter()
        .map(|k| word(k))
        .collect();
    kafka::produce(&bootstrap, &input, &first, Duration::from_secs(30)).unwrap();
    let mut app = KafkaStreams::new(
        common::count_topology(&input, &output),
        config(&bootstrap, &app_id, state.path()),
    )
    .unwrap();
    app.start().unwrap();
    wait_until("j=5 and k=3", Duration::from_secs(60), || {
        let (last, _) = last_counts(&bootstrap, &output);
        last.get("j") == Some(&5) && last.get("k") == Some(&3)
    });
    assert!(app.close(Duration::from_secs(30)));

    // The changelog goes on past the checkpoint (k=100, then m=7), and everything up to
    // m is deleted: the store's checkpoint now lies before the log start. (Retention does
    // that to a `compact,delete` changelog; `DeleteRecords` needs `delete` in the policy.)
    let changelog = changelog_topic(&app_id, "counts");
    set_cleanup_policy(&bootstrap, &changelog, "compact,delete");
    let written = kafka::produce(
        &bootstrap,
        &changelog,
        &[count_record("k", 100), count_record("m", 7)],
        Duration::from_secs(30),
    )
    .unwrap();
    let m_offset = written[1].1;
    delete_records(&bootstrap, &changelog, m_offset);

    // After the restart the store holds exactly what the changelog still has: m=7.
    let (_, before) = last_counts(&bootstrap, &output);
    let second: Vec<ProduceRecord> = ["j", "k", "m"].iter().map(|k| word(k)).collect();
    kafka::produce(&bootstrap, &input, &second, Duration::from_secs(30)).unwrap();
    let mut app = KafkaStreams::new(
        common::count_topology(&input, &output),
        config(&bootstrap, &app_id, state.path()),
    )
    .unwrap();
    app.start().unwrap();
    wait_until("three new counts", Duration::from_secs(60), || {
        last_counts(&bootstrap, &output).1 >= before + 3
    });
    let (last, total) = last_counts(&bootstrap, &output);
    assert_eq!(total, before + 3);
    assert_eq!(
        (last["j"], last["k"], last["m"]),
        (1, 1, 8),
        "the wiped store restarts j and k; m comes from the changelog"
    );
    assert!(app.close(Duration::from_secs(30)));
}

#[test]
fn mock_cluster_retention_stops_the_application() {
    init_logs();
    let cluster = EmbeddedKafka::start().unwrap();
    let bootstrap = cluster.bootstrap_servers().to_owned();
    let input = "mock-reset-in";
    cluster.create_topic(input, 1).unwrap();
    cluster.create_topic("mock-reset-out", 1).unwrap();
    // 8 MiB into one partition: the mock keeps 5 MiB and deletes the oldest message sets.
    let producer: BaseProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let value = vec![b'x'; 16 * 1024];
    for i in 0..512 {
        let key = format!("k{i}");
        let mut record = BaseRecord::to(input).key(&key).payload(&value).partition(0);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let app_id = kafka::unique_name("mock-reset");
    commit_offset(&bootstrap, &app_id, input, 0);

    let state = tempfile::tempdir().unwrap();
    let mut app = KafkaStreams::on_embedded(
        common::pass_through(input, "mock-reset-out"),
        config(&bootstrap, &app_id, state.path()),
        &cluster,
    )
    .unwrap();
    let failure = common::first_failure(&mut app);
    app.start().unwrap();
    assert!(
        app.wait_for_state(State::Error, Duration::from_secs(60)),
        "state {:?}",
        app.state()
    );
    let message = failure.lock().unwrap().clone().unwrap_or_default();
    assert!(
        message.contains("mock cluster's retention was exceeded") && message.contains(input),
        "{message}"
    );
    app.close(Duration::from_secs(10));
}
