//! The runtime against the real broker: keyed counts over 4 partitions with 2 threads,
//! restart from local state, rebuild from the changelog after wiping the state directory,
//! two instances sharing the work, and poison pills routed to the dead-letter topic.
//!
//! Every test uses a fresh application id and fresh topics. Without a broker
//! (`STREAMS_TEST_BOOTSTRAP`) the tests say they were skipped; `scripts/test.sh` always
//! provides one.

use std::path::Path;
use std::time::Duration;

use streams_core::handlers::headers::{EXCEPTION, MESSAGE, OFFSET, TOPIC};
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{KafkaStreams, State, StreamsConfig, Topology};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

mod common;

use common::{count_topology, produce_words, wait_for_counts};

fn config(
    bootstrap: &str,
    app: &str,
    state_dir: &Path,
    threads: usize,
    extra: &[(&str, &str)],
) -> StreamsConfig {
    let threads = threads.to_string();
    let dir = state_dir.display().to_string();
    let mut props: Vec<(&str, &str)> = vec![
        ("application.id", app),
        ("bootstrap.servers", bootstrap),
        ("num.stream.threads", &threads),
        ("state.dir", &dir),
        ("commit.interval.ms", "200"),
        ("consumer.session.timeout.ms", "6000"),
        ("consumer.heartbeat.interval.ms", "500"),
    ];
    props.extend_from_slice(extra);
    StreamsConfig::from_properties(props).unwrap()
}

fn start(topology: Topology, config: StreamsConfig) -> KafkaStreams {
    common::init_tracing();
    let mut app = KafkaStreams::new(topology, config).unwrap();
    kafka::start_running(&mut app, Duration::from_secs(60));
    app
}

#[test]
fn keyed_count_restart_and_rebuild_from_changelog() {
    let Some(bootstrap) = kafka::require_kafka("keyed_count_restart_and_rebuild_from_changelog") else {
        return;
    };
    let app_id = kafka::unique_name("count-app");
    let input = kafka::unique_name("words");
    let output = kafka::unique_name("counts");
    kafka::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    let state = tempfile::tempdir().unwrap();
    const KEYS: usize = 1000;

    // 100,000 records on 4 partitions, 2 threads.
    produce_words(&bootstrap, &input, KEYS, 100, "a");
    let mut app = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, state.path(), 2, &[]),
    );
    wait_for_counts(&bootstrap, &output, KEYS, 100, Duration::from_secs(120));
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(app.state(), State::NotRunning);

    // Restart on the same state: counts continue without re-reading the input.
    produce_words(&bootstrap, &input, KEYS, 10, "b");
    let mut app = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, state.path(), 2, &[]),
    );
    wait_for_counts(&bootstrap, &output, KEYS, 110, Duration::from_secs(120));
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(
        app.processed_records(),
        (KEYS * 10) as u64,
        "only the new records are processed"
    );

    // Wipe the state directory: the stores are rebuilt from the changelog.
    drop(state);
    let fresh = tempfile::tempdir().unwrap();
    produce_words(&bootstrap, &input, KEYS, 5, "c");
    let mut app = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, fresh.path(), 1, &[]),
    );
    wait_for_counts(&bootstrap, &output, KEYS, 115, Duration::from_secs(120));
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(app.processed_records(), (KEYS * 5) as u64);
}

#[test]
fn two_instances_share_the_partitions_and_hand_over_state() {
    let Some(bootstrap) = kafka::require_kafka("two_instances_share_the_partitions_and_hand_over_state")
    else {
        return;
    };
    let app_id = kafka::unique_name("shared-app");
    let input = kafka::unique_name("words");
    let output = kafka::unique_name("counts");
    kafka::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    const KEYS: usize = 200;
    let (d1, d2, d3) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );

    let mut a = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, d1.path(), 1, &[]),
    );
    let mut b = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, d2.path(), 1, &[]),
    );
    produce_words(&bootstrap, &input, KEYS, 20, "a");
    wait_for_counts(&bootstrap, &output, KEYS, 20, Duration::from_secs(120));
    assert!(
        a.processed_records() > 0 && b.processed_records() > 0,
        "both instances worked"
    );

    // One leaves: the other takes its tasks over, with their state (from the changelog).
    assert!(a.close(Duration::from_secs(60)));
    produce_words(&bootstrap, &input, KEYS, 10, "b");
    wait_for_counts(&bootstrap, &output, KEYS, 30, Duration::from_secs(120));

    // A third joins mid-run.
    let mut c = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, d3.path(), 1, &[]),
    );
    produce_words(&bootstrap, &input, KEYS, 10, "c");
    wait_for_counts(&bootstrap, &output, KEYS, 40, Duration::from_secs(120));
    assert!(b.close(Duration::from_secs(60)));
    assert!(c.close(Duration::from_secs(60)));
}

#[test]
fn poison_pills_go_to_the_dead_letter_topic() {
    let Some(bootstrap) = kafka::require_kafka("poison_pills_go_to_the_dead_letter_topic") else {
        return;
    };
    let app_id = kafka::unique_name("dlq-app");
    let input = kafka::unique_name("numbers");
    let output = kafka::unique_name("numbers-out");
    let dlq = kafka::unique_name("dlq");
    for t in [&input, &output, &dlq] {
        kafka::create_topic(&bootstrap, t, 2, &[]).unwrap();
    }
    // 1% of the records are not 8-byte numbers.
    let records: Vec<ProduceRecord> = (0..10_000u64)
        .map(|i| {
            if i % 100 == 42 {
                ProduceRecord::new(format!("k{i}"), format!("poison-{i}"))
            } else {
                ProduceRecord::new(format!("k{i}"), i.to_be_bytes())
            }
        })
        .collect();
    kafka::produce(&bootstrap, &input, &records, Duration::from_secs(60)).unwrap();
    let mut b = Topology::builder();
    b.add_source("src", [input.as_str()], StringSerde, U64Serde)
        .add_sink("out", &output, StringSerde, U64Serde, ["src"]);
    let state = tempfile::tempdir().unwrap();
    let extra = [
        ("default.deserialization.exception.handler", "dead_letter_queue"),
        ("errors.dead.letter.queue.topic.name", dlq.as_str()),
    ];
    let mut app = start(
        b.build().unwrap(),
        config(&bootstrap, &app_id, state.path(), 1, &extra),
    );
    let out = read(&bootstrap, &output, 9_900);
    let dead = read(&bootstrap, &dlq, 100);
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(out.len(), 9_900);
    assert_eq!(dead.len(), 100);
    for d in &dead {
        let value = d.value_str().unwrap();
        assert!(value.starts_with("poison-"), "original bytes kept: {value}");
        assert_eq!(d.header_str(EXCEPTION).as_deref(), Some("deserialization"));
        assert_eq!(d.header_str(TOPIC).as_deref(), Some(input.as_str()));
        assert!(d.header_str(OFFSET).is_some());
    }
}

#[test]
fn undeliverable_outputs_go_to_the_dead_letter_topic() {
    let Some(bootstrap) = kafka::require_kafka("undeliverable_outputs_go_to_the_dead_letter_topic") else {
        return;
    };
    let app_id = kafka::unique_name("dlq-production-app");
    let input = kafka::unique_name("sizes");
    // A user topic whose name ends in `-changelog` is still an output topic: its failed
    // deliveries go to the production handler, not the fatal changelog path.
    let output = format!("{}-changelog", kafka::unique_name("sizes-out"));
    let dlq = kafka::unique_name("dlq-production");
    kafka::create_topic(&bootstrap, &input, 2, &[]).unwrap();
    kafka::create_topic(&bootstrap, &dlq, 2, &[]).unwrap();
    // The output topic takes batches of at most 4,000 bytes: every 50th record (5,000
    // bytes) is rejected by the broker, asynchronously, after the sink sent it.
    kafka::create_topic(&bootstrap, &output, 2, &[("max.message.bytes", "4000")]).unwrap();
    let records: Vec<ProduceRecord> = (0..2_000u32)
        .map(|i| {
            let size = if i % 50 == 7 { 5_000 } else { 10 };
            ProduceRecord::new(format!("k{i}"), vec![b'x'; size])
        })
        .collect();
    kafka::produce(&bootstrap, &input, &records, Duration::from_secs(60)).unwrap();
    let mut b = Topology::builder();
    b.add_source(
        "src",
        [input.as_str()],
        StringSerde,
        streams_core::serdes::BytesSerde,
    )
    .add_sink(
        "out",
        &output,
        StringSerde,
        streams_core::serdes::BytesSerde,
        ["src"],
    );
    let state = tempfile::tempdir().unwrap();
    let extra = [
        ("production.exception.handler", "dead_letter_queue"),
        ("errors.dead.letter.queue.topic.name", dlq.as_str()),
        // Small records batch up to 3,000 bytes, under the topic's limit.
        ("producer.batch.size", "3000"),
    ];
    let mut app = start(
        b.build().unwrap(),
        config(&bootstrap, &app_id, state.path(), 1, &extra),
    );
    let dead = read(&bootstrap, &dlq, 40);
    let out = read(&bootstrap, &output, 1_960);
    assert_eq!(app.state(), State::Running, "the application goes on");
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(out.len(), 1_960);
    assert!(
        out.iter()
            .all(|r| r.value.as_ref().is_some_and(|v| v.len() == 10))
    );
    assert_eq!(dead.len(), 40);
    for d in &dead {
        assert_eq!(
            d.value.as_ref().map(|v| v.len()),
            Some(5_000),
            "original bytes kept"
        );
        assert_eq!(d.header_str(EXCEPTION).as_deref(), Some("production"));
        assert_eq!(d.header_str(TOPIC).as_deref(), Some(output.as_str()));
        let message = d.header_str(MESSAGE).unwrap_or_default();
        assert!(message.contains("too large"), "error header: {message}");
    }
}

/// Reads the first `n` records of `topic` (fails if fewer arrive within two minutes).
fn read(bootstrap: &str, topic: &str, n: usize) -> Vec<kafka::ConsumedRecord> {
    kafka::consume_all(
        bootstrap,
        topic,
        ConsumeUntil::Count(n),
        Duration::from_secs(120),
        false,
    )
    .unwrap()
}
