//! Async processors on the real broker: commits never pass an unfinished record.
//!
//! One input partition, 300 records over 10 keys. The async processor holds record 50 (key
//! `k0`) until a gate opens. With the gate shut:
//! - at-least-once: every other key's records come out (completion order), `k0`'s later
//!   records wait behind record 50; exactly-once: only records 0..50 come out (outputs are
//!   forwarded in input order, so a transaction never commits outputs of records past an
//!   offset it does not commit);
//! - the committed offset reaches 50 and stays there through many commits: never past the
//!   unfinished record.
//!
//! The application then closes with record 50 still unfinished. A new instance with the gate
//! open processes from offset 50: every record comes out, at least once under
//! at-least-once (duplicates counted), exactly once in the committed output under
//! exactly-once. Per key, the outputs of the first instance are in input order.
//!
//! Fresh topics and application id; without a broker the test says it was skipped
//! (`scripts/test.sh` always provides one).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use streams_core::processor::{AsyncNode, AsyncOptions, AsyncProcessor};
use streams_core::serdes::{Serde, StringSerde, U64Serde};
use streams_core::{KafkaStreams, ProcessorError, Record, StreamsConfig, Topology};
use streams_test_utils::kafka::{self, ProduceRecord};

const RECORDS: u64 = 300;
const KEYS: u64 = 10;
const HELD: u64 = 50;

/// Echoes records after a short sleep; record [`HELD`] waits for the gate.
struct Gated(Arc<AtomicBool>);

#[async_trait::async_trait]
impl AsyncProcessor<String, u64, String, u64> for Gated {
    async fn process(&self, r: Record<String, u64>) -> Result<Vec<Record<String, u64>>, ProcessorError> {
        if r.value == HELD {
            while !self.0.load(Ordering::Acquire) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(r.value % 4)).await;
        Ok(vec![r])
    }
}

fn topology(input: &str, output: &str, gate: Arc<AtomicBool>) -> Topology {
    let mut b = Topology::builder();
    b.add_source("src", [input], StringSerde, U64Serde)
        .add_processor(
            "gated",
            AsyncNode::supplier(Arc::new(Gated(gate)), AsyncOptions::new(16)),
            ["src"],
        )
        .add_sink("out", output, StringSerde, U64Serde, ["gated"]);
    b.build().unwrap()
}

/// Waits until `topic` holds `n` records.
fn wait_for(bootstrap: &str, topic: &str, eos: bool, n: usize) -> Vec<(String, u64)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = common::read_counts(bootstrap, topic, eos);
        if out.len() >= n {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}: {} of {n} records after 120 s",
            out.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn committed(bootstrap: &str, app_id: &str, input: &str) -> Option<i64> {
    kafka::committed_offsets(bootstrap, app_id, input, Duration::from_secs(30)).unwrap()[0].1
}

fn run(test: &str, eos: bool) {
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let app_id = kafka::unique_name("async");
    let input = kafka::unique_name("async-in");
    let output = kafka::unique_name("async-out");
    kafka::create_topic(&bootstrap, &input, 1, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 1, &[]).unwrap();
    let records: Vec<ProduceRecord> = (0..RECORDS)
        .map(|i| ProduceRecord::new(format!("k{}", i % KEYS), U64Serde.serialize(&i).unwrap()))
        .collect();
    kafka::produce(&bootstrap, &input, &records, Duration::from_secs(60)).unwrap();
    let config = |state: &tempfile::TempDir| {
        StreamsConfig::from_properties([
            ("application.id", app_id.clone()),
            ("bootstrap.servers", bootstrap.clone()),
            ("state.dir", state.path().display().to_string()),
            ("commit.interval.ms", "100".into()),
            (
                "processing.guarantee",
                if eos { "exactly_once_v2" } else { "at_least_once" }.into(),
            ),
        ])
        .unwrap()
    };

    // The gate shut: record 50 stays unfinished.
    let gate = Arc::new(AtomicBool::new(false));
    let state = tempfile::tempdir().unwrap();
    let mut app = KafkaStreams::new(topology(&input, &output, gate.clone()), config(&state)).unwrap();
    app.start().unwrap();
    let behind = (HELD..RECORDS).filter(|i| i % KEYS == HELD % KEYS).count();
    let expected = if eos {
        HELD as usize
    } else {
        (RECORDS as usize) - behind
    };
    let first = wait_for(&bootstrap, &output, eos, expected);
    let deadline = Instant::now() + Duration::from_secs(60);
    while committed(&bootstrap, &app_id, &input) != Some(HELD as i64) {
        let c = committed(&bootstrap, &app_id, &input);
        assert!(
            c.is_none_or(|c| c < HELD as i64),
            "committed {c:?}, past the unfinished record {HELD}"
        );
        assert!(Instant::now() < deadline, "committed offset {c:?}, never {HELD}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Many commits later (one every 100 ms), still not past it.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(committed(&bootstrap, &app_id, &input), Some(HELD as i64));
    let first_now = common::read_counts(&bootstrap, &output, eos);
    assert_eq!(
        first_now.len(),
        expected,
        "nothing else came out while record {HELD} waited"
    );
    let mut per_key: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (k, v) in &first {
        per_key.entry(k).or_default().push(*v);
    }
    for (k, seqs) in &per_key {
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{k} out of order: {seqs:?}");
    }
    assert!(
        !first.iter().any(|(_, v)| *v >= HELD && v % KEYS == HELD % KEYS),
        "a record of k0 after {HELD} came out before it"
    );
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(committed(&bootstrap, &app_id, &input), Some(HELD as i64));

    // A new instance, the gate open: it goes on from record 50.
    gate.store(true, Ordering::Release);
    let state = tempfile::tempdir().unwrap();
    let mut app = KafkaStreams::new(topology(&input, &output, gate), config(&state)).unwrap();
    app.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let all = loop {
        let out = common::read_counts(&bootstrap, &output, eos);
        let mut seen: Vec<u64> = out.iter().map(|(_, v)| *v).collect();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() == RECORDS as usize {
            break out;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {RECORDS} records came out",
            seen.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(app.close(Duration::from_secs(60)));
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for (_, v) in &all {
        *counts.entry(*v).or_default() += 1;
    }
    let duplicates = counts.values().filter(|n| **n > 1).count();
    println!(
        "{test}: first instance {} outputs, committed {HELD}; after restart {} outputs, {duplicates} records twice",
        first.len(),
        all.len()
    );
    assert!((0..RECORDS).all(|i| counts.contains_key(&i)), "a record was lost");
    if eos {
        assert_eq!(duplicates, 0, "exactly-once: a record came out twice");
        assert_eq!(all.len(), RECORDS as usize);
    }
}

#[test]
fn at_least_once_commits_stop_below_an_unfinished_record() {
    run("async_kafka at-least-once", false);
}

#[test]
fn exactly_once_commits_only_outputs_of_records_below_the_committed_offset() {
    run("async_kafka exactly-once", true);
}

/// Counts each record's passage; the first record waits for the gate.
struct FirstGated(Arc<AtomicBool>);

#[async_trait::async_trait]
impl AsyncProcessor<String, u64, String, u64> for FirstGated {
    async fn process(&self, r: Record<String, u64>) -> Result<Vec<Record<String, u64>>, ProcessorError> {
        if r.value == 0 {
            while !self.0.load(Ordering::Acquire) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Ok(vec![r])
    }
}

/// A task whose async node cannot take more has its input paused, and resumed once the node
/// takes records again: with one record in flight and a buffer of one, the first record
/// waiting for a gate backs up the task's queue past 1,000 records and its partition is
/// paused (counted); once the gate opens, all 3,000 records come out.
#[test]
fn a_full_buffer_pauses_the_input_and_resumes_it() {
    let Some(bootstrap) = kafka::require_kafka("async_kafka backpressure") else {
        return;
    };
    const N: u64 = 3_000;
    common::init_tracing();
    let app_id = kafka::unique_name("async-bp");
    let input = kafka::unique_name("async-bp-in");
    let output = kafka::unique_name("async-bp-out");
    kafka::create_topic(&bootstrap, &input, 1, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 1, &[]).unwrap();
    let records: Vec<ProduceRecord> = (0..N)
        .map(|i| ProduceRecord::new(format!("k{}", i % KEYS), U64Serde.serialize(&i).unwrap()))
        .collect();
    kafka::produce(&bootstrap, &input, &records, Duration::from_secs(60)).unwrap();
    let gate = Arc::new(AtomicBool::new(false));
    let mut b = Topology::builder();
    b.add_source("src", [input.as_str()], StringSerde, U64Serde)
        .add_processor(
            "gated",
            AsyncNode::supplier(
                Arc::new(FirstGated(gate.clone())),
                AsyncOptions::new(1).with_max_buffered(1),
            ),
            ["src"],
        )
        .add_sink("out", output.as_str(), StringSerde, U64Serde, ["gated"]);
    let state = tempfile::tempdir().unwrap();
    let config = StreamsConfig::from_properties([
        ("application.id", app_id.clone()),
        ("bootstrap.servers", bootstrap.clone()),
        ("state.dir", state.path().display().to_string()),
    ])
    .unwrap();
    let mut app = KafkaStreams::new(b.build().unwrap(), config).unwrap();
    app.start().unwrap();
    let paused = || {
        app.metrics()
            .encode()
            .lines()
            .filter(|l| l.starts_with("streams_thread_input_paused_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while paused() < 1.0 {
        assert!(Instant::now() < deadline, "the input was never paused");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        common::read_counts(&bootstrap, &output, false).is_empty(),
        "nothing passes the first record"
    );
    gate.store(true, Ordering::Release);
    let out = wait_for(&bootstrap, &output, false, N as usize);
    let mut seen: Vec<u64> = out.iter().map(|(_, v)| *v).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen.len(),
        N as usize,
        "every record came out once the input resumed"
    );
    assert!(app.close(Duration::from_secs(30)));
}
