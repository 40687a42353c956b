//! Restoration runs on the state updater's thread, beside the stream thread.
//!
//! Under the classic and the consumer group protocol, one stream thread owns two tasks: task 0_0, whose changelog holds 2,000,000 records, and
//! task 0_1, whose changelog is empty and whose input is waiting. With
//! `max.poll.interval.ms=10000`:
//! - task 0_1 processes its whole input while task 0_0 is still restoring (every output of
//!   0_1 was appended before the application reached RUNNING, which it does once 0_0 is
//!   restored);
//! - the member is never evicted: no partition is ever revoked from the thread;
//! - task 0_0 then holds all 2,000,000 restored records (a key of the changelog counts on
//!   from its restored value), and the restore counter says exactly that many.
//!
//! Fresh topics and application id; without a broker the test says it was skipped
//! (`scripts/test.sh` always provides one).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use streams_core::serdes::{Serde, U64Serde};
use streams_core::{GroupProtocol, KafkaStreams, State, StreamsConfig};
use streams_test_utils::kafka::{self, ProduceRecord};

mod common;

const RESTORED: u64 = 2_000_000;
const WAITING: u64 = 500;

/// Every record of `topic` as (key, value, append time), once `count` are there.
fn read_all(bootstrap: &str, topic: &str, count: usize) -> Vec<(String, u64, i64)> {
    let consumer: BaseConsumer = kafka::consumer_config(bootstrap, &kafka::unique_name("reader"))
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut out = Vec::new();
    while out.len() < count {
        assert!(
            Instant::now() < deadline,
            "{topic}: {} of {count} records after 120 s",
            out.len()
        );
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            out.push((
                String::from_utf8(m.key().unwrap().to_vec()).unwrap(),
                U64Serde.deserialize(m.payload().unwrap()).unwrap(),
                m.timestamp().to_millis().unwrap(),
            ));
        }
    }
    out
}

#[test]
fn classic_protocol_other_tasks_process_and_the_member_stays_while_a_large_changelog_restores() {
    run("restore_kafka classic", GroupProtocol::Classic);
}

#[test]
fn consumer_protocol_other_tasks_process_and_the_member_stays_while_a_large_changelog_restores() {
    run("restore_kafka consumer", GroupProtocol::Consumer);
}

fn run(test: &str, protocol: GroupProtocol) {
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let app_id = kafka::unique_name("restore");
    let input = kafka::unique_name("restore-in");
    let output = kafka::unique_name("restore-out");
    let changelog = format!("{app_id}-counts-changelog");
    kafka::create_topic(&bootstrap, &input, 2, &[]).unwrap();
    kafka::create_topic(
        &bootstrap,
        &output,
        2,
        &[("message.timestamp.type", "LogAppendTime")],
    )
    .unwrap();
    kafka::create_topic(&bootstrap, &changelog, 2, &[("cleanup.policy", "compact")]).unwrap();

    // Task 0_0's changelog: 2,000,000 keys with count 1.
    let one = U64Serde.serialize(&1).unwrap();
    for chunk in (0..RESTORED).collect::<Vec<_>>().chunks(250_000) {
        let records: Vec<ProduceRecord> = chunk
            .iter()
            .map(|i| ProduceRecord::new(format!("old-{i}"), &one).with_partition(0))
            .collect();
        kafka::produce(&bootstrap, &changelog, &records, Duration::from_secs(120)).unwrap();
    }
    // Task 0_1's input, there before the application starts.
    let waiting: Vec<ProduceRecord> = (0..WAITING)
        .map(|i| ProduceRecord::new(format!("new-{i}"), "v").with_partition(1))
        .collect();
    kafka::produce(&bootstrap, &input, &waiting, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    let mut props = vec![
        ("application.id", app_id.clone()),
        ("bootstrap.servers", bootstrap.clone()),
        ("state.dir", state.path().display().to_string()),
        ("num.stream.threads", "1".into()),
        ("commit.interval.ms", "100".into()),
        ("main.consumer.max.poll.interval.ms", "10000".into()),
    ];
    if protocol == GroupProtocol::Classic {
        props.push(("consumer.session.timeout.ms", "6000".into()));
        props.push(("consumer.heartbeat.interval.ms", "500".into()));
    }
    let config = StreamsConfig::from_properties(props).unwrap();
    common::init_tracing();
    let mut app = KafkaStreams::new(common::count_topology(&input, &output), config).unwrap();
    let running_at: Arc<Mutex<Option<i64>>> = Arc::default();
    {
        let running_at = running_at.clone();
        app.set_state_listener(move |new, _old| {
            if new == State::Running {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as i64;
                running_at.lock().unwrap().get_or_insert(now);
            }
        });
    }
    let started = Instant::now();
    app.start().unwrap();

    // Task 0_1 processes its input meanwhile.
    let outputs = read_all(&bootstrap, &output, WAITING as usize);
    let last_output = outputs.iter().map(|o| o.2).max().unwrap();
    assert!(
        app.wait_for_state(State::Running, Duration::from_secs(300)),
        "not running after 300 s: {:?}",
        app.state()
    );
    let restored_in = started.elapsed();
    assert_eq!(app.group_protocol(), Some(protocol));
    let running_at = running_at.lock().unwrap().expect("running");
    println!(
        "{test}: restored {RESTORED} records in {restored_in:?}; task 0_1's last output {} ms before RUNNING",
        running_at - last_output
    );
    assert!(
        last_output < running_at,
        "task 0_1's outputs were appended by {last_output}, after the restoration ended at {running_at}: \
         it waited for task 0_0"
    );
    assert_eq!(
        common::metric(&app, "streams_task_restore_records_total", "task_id=\"0_0\""),
        RESTORED as f64
    );

    // Task 0_0 counts on from its restored state.
    kafka::produce(
        &bootstrap,
        &input,
        &[ProduceRecord::new("old-7", "v").with_partition(0)],
        Duration::from_secs(60),
    )
    .unwrap();
    let outputs = read_all(&bootstrap, &output, WAITING as usize + 1);
    assert!(
        outputs.iter().any(|(k, n, _)| k == "old-7" && *n == 2),
        "old-7 should count 2 after its restored 1"
    );
    assert_eq!(
        common::metric(&app, "streams_thread_revoked_partitions_total", ""),
        0.0,
        "a partition was revoked: the member left the group while restoring"
    );
    assert_eq!(app.state(), State::Running);
    assert!(app.close(Duration::from_secs(60)));
}
