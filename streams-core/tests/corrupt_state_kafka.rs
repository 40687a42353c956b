//! A task whose local state cannot be read (unreadable RocksDB files after a crash or a
//! disk fault) starts over from its changelog instead of failing, on the real broker: the
//! counts carry on from where the changelog has them. Both when the store cannot be opened
//! and when a corrupt block is found while the task runs (a `get` fails its checksum).

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
    run_until_then(bootstrap, app, input, output, dir, each, |_| {});
}

/// [`run_until`], calling `then` with the running application before it is closed.
fn run_until_then(
    bootstrap: &str,
    app: &str,
    input: &str,
    output: &str,
    dir: &Path,
    each: u64,
    then: impl FnOnce(&KafkaStreams),
) {
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
    then(&streams);
    assert!(streams.close(Duration::from_secs(30)));
}

/// Fresh topics and application id (`prefix`-…) whose count reached 50 for every key and
/// was closed: (application id, input, output, state directory).
fn counted_once(bootstrap: &str, prefix: &str) -> (String, String, String, tempfile::TempDir) {
    let app = kafka::unique_name(&format!("{prefix}-app"));
    let input = kafka::unique_name(&format!("{prefix}-words"));
    let output = kafka::unique_name(&format!("{prefix}-counts"));
    kafka::create_topic(bootstrap, &input, 2, &[]).unwrap();
    kafka::create_topic(bootstrap, &output, 2, &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    common::produce_words(bootstrap, &input, KEYS, 50, "first");
    run_until(bootstrap, &app, &input, &output, dir.path(), 50);
    (app, input, output, dir)
}

#[test]
fn unreadable_local_state_is_rebuilt_from_the_changelog() {
    let Some(bootstrap) = kafka::require_kafka("unreadable_local_state_is_rebuilt_from_the_changelog") else {
        return;
    };
    let (app, input, output, dir) = counted_once(&bootstrap, "corrupt");

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

#[test]
fn a_corrupt_block_found_while_running_is_rebuilt_from_the_changelog() {
    let Some(bootstrap) =
        kafka::require_kafka("a_corrupt_block_found_while_running_is_rebuilt_from_the_changelog")
    else {
        return;
    };
    common::init_tracing();
    let (app, input, output, dir) = counted_once(&bootstrap, "corrupt-run");

    // The start of every table file's first data block is overwritten: the store opens
    // (RocksDB reads a table's footer, index, filter and properties blocks then, which
    // follow the data blocks), and the first `get` of a key in that block fails its
    // checksum.
    let mut corrupted = 0;
    for task in std::fs::read_dir(dir.path().join(&app)).unwrap() {
        let store = task.unwrap().path().join("rocksdb").join("counts");
        let Ok(files) = std::fs::read_dir(&store) else {
            continue;
        };
        for f in files {
            let path = f.unwrap().path();
            if path.extension().is_some_and(|e| e == "sst") {
                let mut bytes = std::fs::read(&path).unwrap();
                // The checkpoint's table (its column family named in the table's
                // properties) stays readable: the store opens and restores.
                if bytes.windows(16).any(|w| w == b"streams-metadata") {
                    continue;
                }
                bytes[..32].fill(0xAA);
                std::fs::write(&path, bytes).unwrap();
                corrupted += 1;
            }
        }
    }
    assert!(corrupted >= 2, "table files of both tasks' stores: {corrupted}");

    // The counts go on from the changelog: 50 more per key make 100, and the tasks were
    // rebuilt while running, not failed.
    common::produce_words(&bootstrap, &input, KEYS, 50, "second");
    run_until_then(&bootstrap, &app, &input, &output, dir.path(), 100, |streams| {
        let rebuilt = common::metric(streams, "streams_thread_task_corrupted_total", "");
        assert!(
            rebuilt >= 1.0,
            "no task was found corrupt while running ({rebuilt})"
        );
        assert_eq!(streams.state(), State::Running);
    });
}
