//! Guarantees under crashes, against the real broker: the keyed count runs in a child
//! process that is killed with SIGKILL at random points (at least 10 times) while 100,000
//! input records flow, and restarted each time.
//!
//! - exactly_once_v2: the output read with `read_committed` holds every count of every key
//!   exactly once: 1, 2, ..., N, no duplicate, no gap.
//! - at_least_once: nothing is lost: every input record's identity (key and sequence
//!   number) reaches the audit topic, which the same tasks write unchanged, so a lost record
//!   is caught even when another one is counted twice; and every key's count reaches N
//!   (replays after a crash may count a record twice; duplicates are reported).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use rand::Rng;
use streams_test_utils::kafka::{self, ProduceRecord};

mod common;

use common::{CountTopics, Position};

const KEYS: usize = 100;
const PER_KEY: usize = 1000;

/// `line` without its ANSI colour sequences.
fn without_colours(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... m
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A running count-app, and the thread that reads its log: it returns, per task created,
/// the records restored (`task created ... restored=N`).
struct App {
    child: Child,
    restored: std::thread::JoinHandle<Vec<u64>>,
}

impl App {
    fn start(bootstrap: &str, app: &str, topics: &CountTopics, state: &str, guarantee: &str) -> Self {
        let mut child = common::count_app(bootstrap, app, topics, state.as_ref())
            .args(["--guarantee", guarantee])
            .env("RUST_LOG", "warn,streams_core::runtime::tasks::creation=info")
            .stderr(Stdio::piped())
            .spawn()
            .expect("start count-app");
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let restored = std::thread::spawn(move || {
            let mut restored = Vec::new();
            for line in stderr.lines().map_while(Result::ok) {
                let line = without_colours(&line);
                if line.contains("task created") {
                    if let Some(n) = line
                        .split("restored=")
                        .nth(1)
                        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                        .and_then(|n| n.parse().ok())
                    {
                        restored.push(n);
                    }
                } else {
                    eprintln!("count-app: {line}");
                }
            }
            restored
        });
        Self { child, restored }
    }

    /// SIGKILL; returns the records restored per task created in this run.
    fn kill(mut self) -> Vec<u64> {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.restored.join().unwrap()
    }
}

/// What a run left: per key, where each count appears in the output, and where each input
/// identity (`key/sequence`) appears in the audit topic.
struct Seen {
    counts: HashMap<String, HashMap<u64, Vec<Position>>>,
    audit: HashMap<String, Vec<Position>>,
    /// Per restart after a SIGKILL, the records its tasks restored in all.
    restored_per_restart: Vec<u64>,
}

fn run(guarantee: &str, test: &str) -> Option<Seen> {
    let bootstrap = kafka::require_kafka(test)?;
    let app = kafka::unique_name(&format!("crash-{guarantee}"));
    let topics = CountTopics::create(&bootstrap, "crash", 4, true);
    let input = topics.input.clone();
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().display().to_string();

    let records: Vec<ProduceRecord> = (0..PER_KEY)
        .flat_map(|i| (0..KEYS).map(move |k| ProduceRecord::new(format!("k{k:03}"), format!("{i}"))))
        .collect();
    let producer_bootstrap = bootstrap.clone();
    let producer_input = input.clone();
    // Input flows while the application is killed and restarted.
    let feeder = std::thread::spawn(move || {
        for chunk in records.chunks(5_000) {
            kafka::produce(
                &producer_bootstrap,
                &producer_input,
                chunk,
                Duration::from_secs(60),
            )
            .unwrap();
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let mut rng = rand::rng();
    let mut restored_per_restart = Vec::new();
    for kill in 0..10 {
        let app = App::start(&bootstrap, &app, &topics, &state_dir, guarantee);
        std::thread::sleep(Duration::from_millis(rng.random_range(4000..9000)));
        let restored = app.kill();
        eprintln!("{test}: killed run {kill}; its tasks restored {restored:?} records");
        if kill > 0 {
            restored_per_restart.push(restored.iter().sum());
        }
    }
    feeder.join().unwrap();
    // A last run finishes the input and closes cleanly.
    let App { mut child, restored } = App::start(&bootstrap, &app, &topics, &state_dir, guarantee);
    let expected_total = KEYS * PER_KEY;
    let read_committed = guarantee == "exactly_once_v2";
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    let result = loop {
        let seen = common::counts(&bootstrap, &topics.output, read_committed);
        // Every input processed at least once: each key's latest count reached PER_KEY.
        let complete = seen.len() == KEYS && seen.values().all(|c| c.keys().max() >= Some(&(PER_KEY as u64)));
        if complete || std::time::Instant::now() > deadline {
            let records: usize = seen.values().flat_map(HashMap::values).map(Vec::len).sum();
            eprintln!("{test}: {records} output records for {expected_total} inputs");
            break seen;
        }
        std::thread::sleep(Duration::from_secs(2));
    };
    drop(child.stdin.take());
    let _ = child.wait();
    restored_per_restart.push(restored.join().unwrap().iter().sum());
    eprintln!("{test}: records restored per restart after a SIGKILL: {restored_per_restart:?}");
    let audit = common::identities(&bootstrap, topics.audit(), read_committed);
    Some(Seen {
        counts: result,
        audit,
        restored_per_restart,
    })
}

#[test]
fn exactly_once_under_repeated_sigkill() {
    let Some(Seen {
        counts: seen,
        audit,
        restored_per_restart,
    }) = run("exactly_once_v2", "exactly_once_under_repeated_sigkill")
    else {
        return;
    };
    // The stores keep their committed state through a crash (their writes wait for the
    // transaction and go through RocksDB's write-ahead log with their checkpoint): a restart
    // restores at most the one transaction that committed after its store last wrote, and a
    // transaction holds at most one change per key (the cache keeps the last), where a
    // store wiped after each crash would restore its whole changelog.
    assert!(
        restored_per_restart.iter().all(|&n| n <= KEYS as u64),
        "a restart after SIGKILL restored more than one transaction's changes: {restored_per_restart:?}"
    );
    assert_eq!(
        audit.len(),
        KEYS * PER_KEY,
        "every input once in the committed audit"
    );
    assert!(
        audit.values().all(|at| at.len() == 1),
        "no input twice in the committed audit"
    );
    assert_eq!(seen.len(), KEYS);
    for (key, counts) in &seen {
        for n in 1..=PER_KEY as u64 {
            assert_eq!(
                counts.get(&n).map(Vec::len),
                Some(1),
                "key {key}: count {n} must appear exactly once"
            );
        }
        assert_eq!(counts.len(), PER_KEY, "key {key}: no count beyond {PER_KEY}");
    }
}

#[test]
fn at_least_once_loses_nothing_under_repeated_sigkill() {
    let Some(Seen {
        counts: seen, audit, ..
    }) = run(
        "at_least_once",
        "at_least_once_loses_nothing_under_repeated_sigkill",
    )
    else {
        return;
    };
    let lost: Vec<String> = (0..PER_KEY)
        .flat_map(|i| (0..KEYS).map(move |k| format!("k{k:03}/{i}")))
        .filter(|id| !audit.contains_key(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} inputs lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    let replayed = audit.values().filter(|at| at.len() > 1).count();
    eprintln!("at-least-once: {replayed} inputs processed more than once after 10 kills");
    assert_eq!(seen.len(), KEYS);
    let mut over = 0;
    for (key, counts) in &seen {
        let max = counts.keys().max().copied().unwrap_or(0);
        assert!(
            max >= PER_KEY as u64,
            "key {key}: count {max} < {PER_KEY}: input lost"
        );
        over += max - PER_KEY as u64;
    }
    eprintln!("at-least-once: {over} records counted twice after 10 kills");
}
