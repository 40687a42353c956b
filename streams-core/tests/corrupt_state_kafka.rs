//! A task whose local state cannot be read (unreadable RocksDB files after a crash or a
//! disk fault) starts over from its changelog instead of failing, on the real broker: the
//! counts carry on from where the changelog has them.

use std::path::Path;
use std::time::{Duration, Instant};

use streams_core::{KafkaStreams, State, StreamsConfig};
use streams_test_utils::kafka;

mod common;

const KEYS: usize = 20;

fn config(bootstrap: &str, app: &str, dir: &Path) -> StreamsConfig {
    StreamsConfig::from_properties([
        ("application.id", app),
        ("bootstrap.servers", bootstrap),
        ("state.dir", &dir.display().to_string()),
        ("commit.interval.ms", "200"),
        ("consumer.session.timeout.ms", "6000"),
        ("consumer.heartbeat.interval.ms", "500"),
    ])
    .unwrap()
}

/// Runs the count until every key's latest count is `each`, then closes it cleanly.
fn run_until(bootstrap: &str, app: &str, input: &str, output: &str, dir: &Path, each: u64) {
    let mut streams =
        KafkaStreams::new(common::count_topology(input, output), config(bootstrap, app, dir)).unwrap();
    streams.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let counts = common::latest_counts(bootstrap, output);
        if counts.len() == KEYS && counts.values().all(|&c| c == each) {
            break;
        }
        assert_ne!(streams.state(), State::Error, "the application failed");
        assert!(
            Instant::now() < deadline,
            "counts never reached {each} for every key: {counts:?} (state {:?})",
            streams.state()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(streams.close(Duration::from_secs(30)));
}

#[test]
fn unreadable_local_state_is_rebuilt_from_the_changelog() {
    let Some(bootstrap) = kafka::require_kafka("unreadable_local_state_is_rebuilt_from_the_changelog") else {
        return;
    };
    let app = kafka::unique_name("corrupt-app");
    let input = kafka::unique_name("corrupt-words");
    let output = kafka::unique_name("corrupt-counts");
    kafka::create_topic(&bootstrap, &input, 2, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 2, &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();

    common::produce_words(&bootstrap, &input, KEYS, 50, "first");
    run_until(&bootstrap, &app, &input, &output, dir.path(), 50);

    // Every task's store becomes unreadable: its CURRENT file points nowhere.
    let mut corrupted = 0;
    for task in std::fs::read_dir(dir.path().join(&app)).unwrap() {
        let current = task
            .unwrap()
            .path()
            .join("rocksdb")
            .join("counts")
            .join("CURRENT");
        if current.exists() {
            std::fs::write(&current, "MANIFEST-999999\n").unwrap();
            corrupted += 1;
        }
    }
    assert_eq!(corrupted, 2, "both tasks' stores were found");

    // The counts go on from the changelog: 50 more per key make 100.
    common::produce_words(&bootstrap, &input, KEYS, 50, "second");
    run_until(&bootstrap, &app, &input, &output, dir.path(), 100);
}
