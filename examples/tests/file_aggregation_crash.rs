//! The file-aggregation pipeline end to end against the real broker, with the aggregator
//! killed (SIGKILL) and restarted in the middle: ten files of 10,000 lines and one of
//! 100,000 are split in parallel, processed by the command service (5% of commands fail)
//! and aggregated under exactly-once. Every result file must be complete, in line order,
//! equal line for line to the expected output, and no state may be left for them.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use streams_core::{KafkaStreams, State, StreamsConfig};
use streams_examples::file_aggregation::{
    ServiceBehaviour, Topics, expected_result, generate, read_commands, service_topology_on,
};
use streams_examples::splitter::split_to;
use streams_state::{KeyValueStore, RocksDbKeyValueStore, RocksDbResources};
use streams_test_utils::kafka::{self, ConsumeUntil};

const FAILURE_RATE: f64 = 0.05;

fn spawn_aggregator(bootstrap: &str, app: &str, prefix: &str, out: &Path, state: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_file-aggregator"))
        .args(["--bootstrap-servers", bootstrap, "--application-id", app])
        .args(["--topic-prefix", prefix])
        .arg("--out-dir")
        .arg(out)
        .arg("--state-dir")
        .arg(state)
        .args(["--guarantee", "exactly_once_v2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start file-aggregator")
}

/// The distinct files reported done so far (committed output only).
fn files_done(bootstrap: &str, topics: &Topics) -> BTreeSet<String> {
    kafka::consume_all(
        bootstrap,
        &topics.files_done,
        ConsumeUntil::Idle(Duration::ZERO),
        Duration::from_secs(60),
        true,
    )
    .unwrap()
    .iter()
    .filter_map(|r| r.key_str())
    .collect()
}

fn wait_for_files(bootstrap: &str, topics: &Topics, n: usize, timeout: Duration) -> BTreeSet<String> {
    let deadline = Instant::now() + timeout;
    loop {
        let done = files_done(bootstrap, topics);
        if done.len() >= n || Instant::now() > deadline {
            return done;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn files_are_complete_and_ordered_across_an_aggregator_crash() {
    let Some(bootstrap) = kafka::require_kafka("files_are_complete_and_ordered_across_an_aggregator_crash")
    else {
        return;
    };
    let prefix = kafka::unique_name("fa");
    let topics = Topics::prefixed(&prefix);
    for t in topics.all() {
        kafka::create_topic(&bootstrap, t, 4, &[]).unwrap();
    }
    let work = tempfile::tempdir().unwrap();
    let (inputs, out, state) = (
        work.path().join("in"),
        work.path().join("out"),
        work.path().join("state"),
    );
    std::fs::create_dir_all(&inputs).unwrap();
    let mut files: Vec<(String, u64)> = (0..10).map(|i| (format!("file{i:02}"), 10_000)).collect();
    files.push(("big".into(), 100_000));
    for (id, lines) in &files {
        generate(&inputs.join(id), *lines).unwrap();
    }

    // The command service runs in this process; the aggregator in a child we can kill.
    let service_config = StreamsConfig::from_properties([
        ("application.id", format!("{prefix}-service")),
        ("bootstrap.servers", bootstrap.clone()),
        ("state.dir", state.join("service").display().to_string()),
        ("commit.interval.ms", "200".into()),
    ])
    .unwrap();
    let behaviour = ServiceBehaviour {
        max_delay: Duration::ZERO,
        failure_rate: FAILURE_RATE,
    };
    let mut service =
        KafkaStreams::new(service_topology_on(&topics, behaviour).unwrap(), service_config).unwrap();
    service.start().unwrap();
    assert!(service.wait_for_state(State::Running, Duration::from_secs(60)));
    let app = format!("{prefix}-aggregator");
    let agg_state = state.join("aggregator");
    let mut aggregator = spawn_aggregator(&bootstrap, &app, &prefix, &out, &agg_state);

    // Split every file at once, from parallel threads.
    let splitters: Vec<_> = files
        .iter()
        .map(|(id, _)| {
            let (bootstrap, topics, path, id) =
                (bootstrap.clone(), topics.clone(), inputs.join(id), id.clone());
            std::thread::spawn(move || split_to(&bootstrap, &topics, &id, &path).unwrap())
        })
        .collect();

    // Crash the aggregator once some files are done and others are in flight.
    let done = wait_for_files(&bootstrap, &topics, 1, Duration::from_secs(180));
    assert!(!done.is_empty(), "no file finished before the crash");
    aggregator.kill().unwrap();
    aggregator.wait().unwrap();
    eprintln!("killed the aggregator after {} file(s)", done.len());
    std::thread::sleep(Duration::from_secs(1));
    let mut aggregator = spawn_aggregator(&bootstrap, &app, &prefix, &out, &agg_state);

    for s in splitters {
        s.join().unwrap();
    }
    let done = wait_for_files(&bootstrap, &topics, files.len(), Duration::from_secs(300));
    drop(aggregator.stdin.take());
    let status = aggregator.wait().unwrap();
    assert!(service.close(Duration::from_secs(30)));
    assert!(status.success(), "aggregator exit: {status}");
    assert_eq!(done.len(), files.len(), "files done: {done:?}");

    // Every result file: complete, in order, line for line.
    let mut errors = 0;
    for (id, lines) in &files {
        let expected: Vec<String> = read_commands(&inputs.join(id))
            .unwrap()
            .enumerate()
            .map(|(i, c)| expected_result(id, i as u64, &c.unwrap(), FAILURE_RATE))
            .collect();
        errors += expected.iter().filter(|l| l.starts_with("error")).count();
        let got: Vec<String> = read_commands(&out.join(format!("{id}.result")))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(got.len() as u64, *lines, "{id}: line count");
        if let Some(i) = (0..got.len()).find(|&i| got[i] != expected[i]) {
            panic!("{id}: line {i} is {:?}, expected {:?}", got[i], expected[i]);
        }
    }
    assert!(
        errors > 5_000,
        "failed commands are part of the output ({errors})"
    );

    // No state left for finished files, in any task's stores.
    let resources = RocksDbResources::default();
    let mut stores = 0;
    for task in std::fs::read_dir(agg_state.join(&app)).unwrap() {
        let task = task.unwrap().path();
        for store in ["file-parts", "file-progress"] {
            if !task.join("rocksdb").join(store).exists() {
                continue;
            }
            let s = RocksDbKeyValueStore::open(store, &task, &resources).unwrap();
            let left: Vec<_> = s.all().unwrap().take(3).collect::<Result<_, _>>().unwrap();
            assert!(
                left.is_empty(),
                "{}: {store} still holds {left:?}",
                task.display()
            );
            stores += 1;
        }
    }
    assert!(stores > 0, "no store found under {}", agg_state.display());
}
