//! What metrics cost on the per-record path: the same topology run through the
//! `TopologyTestDriver` (the task code the runtime runs) with metrics off, at `INFO` and at
//! `DEBUG`, on an in-memory and a RocksDB store.
//!
//! Topology: source -> `upper` (map values) -> `count` (the example keyed count: get + put
//! per record in a cached store; its forwards go nowhere). Cost is the driving thread's CPU time per record (`/proc/thread-self/schedstat`),
//! so other load on the machine disturbs it less than wall time. 200,000 records over 1,000 keys per run; 7 rounds, each running every variant once
//! (interleaved, so load changes hit all alike); medians reported.
//!
//! Run: `cargo bench --workspace --bench metrics_overhead` (a minute or two in release).

use std::time::Instant;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{NodeRef, SourceConfig};
use streams_core::{ProcessResult, Processor, ProcessorContext, Record, RecordingLevel, Stores, Topology};
use streams_examples::count::Count;
use streams_test_utils::{DriverConfig, TopologyTestDriver};

const RECORDS: usize = 200_000;
const KEYS: usize = 1_000;
const RUNS: usize = 7;

struct Upper;

impl Processor<String, String, String, String> for Upper {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let v = r.value.to_uppercase();
        ctx.forward(Record::new(r.key, v, r.timestamp))
    }
}

fn topology(persistent: bool) -> Topology {
    let store = if persistent {
        Stores::persistent_kv("counts", StringSerde, U64Serde)
    } else {
        Stores::in_memory_kv("counts", StringSerde, U64Serde)
    };
    let mut b = Topology::builder();
    let src = b.source("src", SourceConfig::new(["in"], StringSerde, StringSerde));
    let upper = b.processor("upper", [&src], |_| Ok(Upper));
    let counts = b.store(store.with_caching().without_logging());
    let count: NodeRef<String, u64> = b.processor("count", [&upper], {
        let counts = counts.clone();
        move |ctx| Ok(Count::new(ctx.store(&counts)?))
    });
    b.connect(&count, &counts);
    b.build().expect("topology")
}

/// This thread's CPU time so far (`/proc/thread-self/schedstat`, ns): what the run cost,
/// whatever else the machine is busy with.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU nanoseconds per record of one run.
fn run(persistent: bool, level: Option<RecordingLevel>) -> f64 {
    let mut config = DriverConfig::default().commit_every(10_000);
    config.metrics = level;
    let driver = TopologyTestDriver::new(topology(persistent), config).expect("driver");
    let input = driver.input_topic("in", StringSerde, StringSerde);
    let keys: Vec<String> = (0..KEYS).map(|k| format!("key-{k:04}")).collect();
    let started = Instant::now();
    let cpu = thread_cpu_ns();
    for i in 0..RECORDS {
        input
            .pipe(keys[i % KEYS].clone(), "value".to_owned())
            .expect("pipe");
    }
    driver.commit().expect("commit");
    let cpu_per_record = (thread_cpu_ns() - cpu) as f64 / RECORDS as f64;
    let _wall = started.elapsed();
    if let Some(m) = driver.metrics() {
        // The counters saw every record: the numbers above measured real recording.
        let text = m.encode();
        assert!(text.contains(&format!("streams_thread_process_records_total{{application_id=\"test-driver\",thread_id=\"test-driver-driver\"}} {RECORDS}")));
    }
    cpu_per_record
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo test --benches` runs bench targets with `--bench`-less args; do nothing then.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    println!("metrics overhead: {RECORDS} records over {KEYS} keys, median of {RUNS} rounds");
    println!(
        "{:<10} {:<8} {:>14} {:>16} {:>10}",
        "store", "metrics", "CPU ns/record", "records/CPU-s", "cost"
    );
    let levels = [
        ("off", None),
        ("INFO", Some(RecordingLevel::Info)),
        ("DEBUG", Some(RecordingLevel::Debug)),
    ];
    for persistent in [false, true] {
        let store = if persistent { "rocksdb" } else { "in-memory" };
        // Rounds interleave the variants, so load changes on the machine hit all alike.
        let mut rates = vec![Vec::new(); levels.len()];
        for _ in 0..RUNS {
            for (i, (_, level)) in levels.iter().enumerate() {
                rates[i].push(run(persistent, *level));
            }
        }
        let medians: Vec<f64> = rates.into_iter().map(median).collect();
        for ((name, _), ns) in levels.iter().zip(&medians) {
            println!(
                "{store:<10} {name:<8} {ns:>14.0} {:>16.0} {:>+9.1}%",
                1e9 / ns,
                (ns / medians[0] - 1.0) * 100.0
            );
        }
    }
}
