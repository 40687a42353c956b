//! The broker restarts under a running application: a broker of the test's own (other port,
//! other data dir; `scripts/kafka.sh`) is stopped and started again while a keyed count
//! runs and input keeps arriving. The application must recover by itself, stay up, and
//! lose nothing.
//!
//! Runs only in the full suite (`STREAMS_TEST_BOOTSTRAP` set by `scripts/test.sh`, which
//! has resolved Kafka already).

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use streams_core::{KafkaStreams, State, StreamsConfig};
use streams_test_utils::kafka;

mod common;

/// A broker of this test's own; stopped when dropped.
struct Broker {
    port: u16,
    dir: PathBuf,
}

impl Broker {
    fn script() -> PathBuf {
        PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../scripts/kafka.sh")
    }

    fn run(&self, command: &str) {
        let status = Command::new("bash")
            .arg(Self::script())
            .arg(command)
            .env("KAFKA_PORT", self.port.to_string())
            .env("KAFKA_RUN_DIR", &self.dir)
            .status()
            .expect("run scripts/kafka.sh");
        assert!(status.success(), "kafka.sh {command} failed");
    }

    fn start() -> Self {
        // Two free ports in a row: the client listener and the controller.
        let port = (0..50)
            .find_map(|_| {
                let p = TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
                TcpListener::bind(("127.0.0.1", p + 1)).ok().map(|_| p)
            })
            .expect("free ports");
        let dir = std::env::temp_dir().join(format!("streams-broker-restart-{}", std::process::id()));
        let broker = Self { port, dir };
        broker.run("start");
        broker
    }

    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(Self::script())
            .arg("stop")
            .env("KAFKA_PORT", self.port.to_string())
            .env("KAFKA_RUN_DIR", &self.dir)
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn wait_for(
    bootstrap: &str,
    topic: &str,
    keys: usize,
    at_least: u64,
    timeout: Duration,
) -> HashMap<String, u64> {
    let deadline = Instant::now() + timeout;
    loop {
        let latest = common::latest_counts(bootstrap, topic);
        if latest.len() == keys && latest.values().all(|&v| v >= at_least) {
            return latest;
        }
        assert!(
            Instant::now() < deadline,
            "counts below {at_least}: {} keys, e.g. {:?}",
            latest.len(),
            latest
                .iter()
                .filter(|(_, v)| **v < at_least)
                .take(3)
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn application_survives_a_broker_restart_without_loss() {
    if kafka::require_kafka("application_survives_a_broker_restart_without_loss").is_none() {
        return;
    }
    common::init_tracing();
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let state = tempfile::tempdir().unwrap();
    const KEYS: usize = 500;

    // The same count twice, at-least-once and exactly-once, each on its own topics.
    let mut apps = Vec::new();
    for guarantee in ["at_least_once", "exactly_once_v2"] {
        let (input, output) = (format!("{guarantee}-words"), format!("{guarantee}-counts"));
        kafka::create_topic(&bootstrap, &input, 4, &[]).unwrap();
        kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
        let config = StreamsConfig::from_properties([
            ("application.id", format!("restart-{guarantee}")),
            ("bootstrap.servers", bootstrap.clone()),
            ("state.dir", state.path().join(guarantee).display().to_string()),
            ("processing.guarantee", guarantee.to_owned()),
            ("commit.interval.ms", "200".to_owned()),
            ("consumer.session.timeout.ms", "10000".to_owned()),
            ("consumer.heartbeat.interval.ms", "500".to_owned()),
        ])
        .unwrap();
        let mut app = KafkaStreams::new(common::count_topology(&input, &output), config).unwrap();
        app.start().unwrap();
        assert!(app.wait_for_state(State::Running, Duration::from_secs(60)));
        common::produce_words(&bootstrap, &input, KEYS, 20, "a");
        apps.push((guarantee, input, output, app));
    }
    for (_, _, output, _) in &apps {
        wait_for(&bootstrap, output, KEYS, 20, Duration::from_secs(120));
    }

    // Stop and start the broker (same data) while the applications run.
    broker.run("restart");
    for (_, input, _, _) in &apps {
        common::produce_words(&bootstrap, input, KEYS, 20, "b");
    }
    for (guarantee, _, output, app) in &mut apps {
        let latest = wait_for(&bootstrap, output, KEYS, 40, Duration::from_secs(120));
        assert!(
            matches!(app.state(), State::Running | State::Rebalancing),
            "{guarantee}: state after the restart: {:?}",
            app.state()
        );
        let replayed: u64 = latest.values().map(|v| v - 40).sum();
        eprintln!("{guarantee}: broker restart: {replayed} records counted twice");
        assert!(app.close(Duration::from_secs(60)));
    }

    // Exactly-once: the committed output holds every count of every key once. The broker
    // answers a transaction's commit before it has written the commit markers into the
    // output's partitions, and a `read_committed` reader stops before a transaction whose
    // marker is not there yet: so the output is read again until every key's counts reach
    // 40 (a count lost for good never does, and the comparison below names it).
    let (_, _, output, _) = &apps[1];
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let seen = common::committed_counts(&bootstrap, output);
        let settled = seen.len() == KEYS && seen.values().all(|c| c.contains(&40));
        if settled || Instant::now() >= deadline {
            break seen;
        }
    };
    // On failure, whether a transaction still holds a partition's stable offset back (the
    // records are there, unreadable) or the counts were never committed.
    let stable = || stable_offsets(&bootstrap, output);
    assert_eq!(seen.len(), KEYS, "{}", stable());
    for (key, mut counts) in seen {
        counts.sort_unstable();
        assert_eq!(
            counts,
            (1..=40).collect::<Vec<u64>>(),
            "key {key}: each count exactly once; {}",
            stable()
        );
    }
}

/// Each partition of `topic` (4) with its high watermark and last stable offset.
fn stable_offsets(bootstrap: &str, topic: &str) -> String {
    (0..4)
        .map(|p| {
            let high = kafka::watermarks(bootstrap, topic, p).map(|w| w.1);
            let stable = kafka::last_stable_offset(bootstrap, topic, p);
            format!("{topic}-{p}: high watermark {high:?}, last stable offset {stable:?}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}
