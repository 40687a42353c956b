//! Side-by-side end-to-end benchmark: this framework vs Java Kafka Streams vs a raw rdkafka
//! loop, on the same pre-loaded input topic of a real broker.
//!
//! Subcommands (`benches/side-by-side/run.sh` calls them; see `docs/benchmarks.md`):
//!
//! - `preload BOOTSTRAP TOPIC RECORDS PARTITIONS KEYS VALUE_BYTES`: creates `TOPIC` and fills it.
//! - `app IMPL WORKLOAD GUARANTEE BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR COMMIT_MS CACHE_BYTES`:
//!   one application (`IMPL` = `ours` | `raw`, `WORKLOAD` = `map` | `filtermap` | `count`, `GUARANTEE` =
//!   `at_least_once` | `exactly_once_v2`), running until standard input closes.
//! - `run BOOTSTRAP INPUT OUT_DIR RUNS JAVA_CP CELLS`: the driver. For each cell
//!   (`impl:workload:guarantee`, comma-separated) and each of `RUNS` runs it starts the
//!   application as a child process, waits until the application's consumer group has
//!   committed the end offset of every input partition, then reads the child's CPU time and
//!   peak RSS from `/proc`, closes its standard input and waits for it to exit. One line per
//!   run goes to `OUT_DIR/runs.tsv`, the medians to `OUT_DIR/table.md`. The `restore`
//!   workload (see `run_once`) reads `INPUT-restore` instead of `INPUT`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{
    KafkaStreams, KvStore, ProcessResult, Processor, ProcessorContext, Record, Stores, StreamsConfig,
    Topology,
};
use streams_test_utils::kafka::{block_on_timeout, create_topic};

mod apps;
mod measure;

use apps::*;
use measure::*;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Res<T> = Result<T, BoxError>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("preload") if args.len() == 7 => preload(
            &args[1],
            &args[2],
            args[3].parse()?,
            args[4].parse()?,
            args[5].parse()?,
            args[6].parse()?,
        ),
        Some("app") if args.len() == 11 => {
            let a = AppArgs {
                workload: args[2].clone(),
                guarantee: args[3].clone(),
                bootstrap: args[4].clone(),
                app_id: args[5].clone(),
                input: args[6].clone(),
                output: args[7].clone(),
                state_dir: args[8].clone(),
                commit_ms: args[9].parse()?,
                cache_bytes: args[10].parse()?,
            };
            match args[1].as_str() {
                "ours" => run_ours(&a),
                "raw" => run_raw(&a),
                other => Err(format!("unknown app implementation {other}").into()),
            }
        }
        Some("run") if args.len() == 7 => drive(
            &args[1],
            &args[2],
            Path::new(&args[3]),
            args[4].parse()?,
            &args[5],
            &args[6],
        ),
        _ => Err("usage: see the module documentation of benches/src/bin/side_by_side/main.rs".into()),
    }
}

// ---------------------------------------------------------------------------------------
// Input data

/// Fills `topic` with `records` records: keys `key-00000`..`key-{keys-1}` in a fixed
/// pseudo-random order, values of `value_bytes` ASCII bytes.
fn preload(
    bootstrap: &str,
    topic: &str,
    records: u64,
    partitions: i32,
    keys: u64,
    value_bytes: usize,
) -> Res<()> {
    create_topic(bootstrap, topic, partitions, &[])?;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "500000")
        .set("message.timeout.ms", "120000")
        .create()?;
    let value: String = (0..value_bytes)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let started = Instant::now();
    // A fixed linear congruential sequence: every run of the harness sees the same keys.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..records {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let key = format!("key-{:05}", (state >> 33) % keys);
        let mut rec = BaseRecord::to(topic).key(&key).payload(&value);
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    rec = r;
                    producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => return Err(e.into()),
            }
        }
    }
    producer.flush(Duration::from_secs(300))?;
    println!(
        "preloaded {records} records ({keys} keys, {value_bytes} B values) into {topic} ({partitions} partitions) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Medians of one cell.
struct Medians {
    /// Records / (time from launch to the last input offset committed).
    rps: f64,
    /// Records / (that time less the time to the first output record).
    rps_running: f64,
    cpu_per_m: f64,
    rss_mib: f64,
    runs: usize,
}

fn cell_medians(results: &[RunResult], cell: &str) -> Option<Medians> {
    let rs: Vec<&RunResult> = results.iter().filter(|r| r.cell == cell).collect();
    if rs.is_empty() {
        return None;
    }
    Some(Medians {
        rps: median(rs.iter().map(|r| r.records as f64 / r.seconds).collect()),
        rps_running: median(
            rs.iter()
                .map(|r| r.records as f64 / (r.seconds - r.first_output_s))
                .collect(),
        ),
        cpu_per_m: median(rs.iter().map(|r| r.cpu_s / (r.records as f64 / 1e6)).collect()),
        rss_mib: median(rs.iter().map(|r| r.peak_rss_kib as f64 / 1024.0).collect()),
        runs: rs.len(),
    })
}

fn drive(bootstrap: &str, input: &str, out_dir: &Path, runs: usize, java_cp: &str, cells: &str) -> Res<()> {
    std::fs::create_dir_all(out_dir)?;
    let clk_tck: f64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0);
    let ends = end_offsets(bootstrap, input)?;
    let restore_input = format!("{input}-restore");
    let cells: Vec<&str> = cells.split(',').filter(|c| !c.is_empty()).collect();
    let mut tsv = std::fs::File::create(out_dir.join("runs.tsv"))?;
    writeln!(
        tsv,
        "cell\trun\trecords\tseconds\trecords_per_s\tfirst_output_s\tcpu_s\tcpu_s_per_m\tpeak_rss_mib\tload1"
    )?;
    let mut results = Vec::new();
    // Runs are interleaved (run 1 of every cell, then run 2, ...) so that a change in the
    // machine's background load spreads over all cells rather than hitting one.
    for run in 1..=runs {
        for cell in &cells {
            match run_once(
                bootstrap,
                input,
                &restore_input,
                &ends,
                cell,
                run,
                out_dir,
                java_cp,
                clk_tck,
            ) {
                Ok(r) => {
                    let line = format!(
                        "{}\t{}\t{}\t{:.3}\t{:.0}\t{:.3}\t{:.2}\t{:.3}\t{:.1}\t{:.2}",
                        r.cell,
                        r.run,
                        r.records,
                        r.seconds,
                        r.records as f64 / r.seconds,
                        r.first_output_s,
                        r.cpu_s,
                        r.cpu_s / (r.records as f64 / 1e6),
                        r.peak_rss_kib as f64 / 1024.0,
                        r.load1
                    );
                    println!("{line}");
                    writeln!(tsv, "{line}")?;
                    results.push(r);
                }
                Err(e) => {
                    println!("{cell}\t{run}\tFAILED: {e}");
                    writeln!(tsv, "{cell}\t{run}\tFAILED: {e}")?;
                }
            }
        }
    }
    let table = table(&results, &cells);
    println!("\n{table}");
    std::fs::write(out_dir.join("table.md"), table)?;
    Ok(())
}

fn ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b.is_finite() && b != 0.0 {
        format!("{:.2}", a / b)
    } else {
        "–".into()
    }
}

fn table(results: &[RunResult], cells: &[&str]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| workload | impl | runs | records/s | records/s after first output | CPU s / M records | peak RSS MiB | rec/s ours÷Java | CPU ours÷Java | RSS ours÷Java | rec/s ours÷raw | CPU ours÷raw | RSS ours÷raw |"
    );
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut workloads: Vec<String> = Vec::new();
    for c in cells {
        let w = c.split_once(':').map_or("", |(_, w)| w).to_owned();
        if !workloads.contains(&w) {
            workloads.push(w);
        }
    }
    for w in &workloads {
        for imp in ["ours", "java", "raw"] {
            let Some(m) = cell_medians(results, &format!("{imp}:{w}")) else {
                continue;
            };
            let cols = if imp == "ours" {
                let java = cell_medians(results, &format!("java:{w}"));
                let raw = cell_medians(results, &format!("raw:{w}"));
                let r = |other: &Option<Medians>, f: fn(&Medians) -> f64| {
                    other.as_ref().map_or("–".to_owned(), |o| ratio(f(&m), f(o)))
                };
                [
                    r(&java, |x| x.rps),
                    r(&java, |x| x.cpu_per_m),
                    r(&java, |x| x.rss_mib),
                    r(&raw, |x| x.rps),
                    r(&raw, |x| x.cpu_per_m),
                    r(&raw, |x| x.rss_mib),
                ]
                .join(" | ")
            } else {
                [""; 6].join(" | ")
            };
            let _ = writeln!(
                s,
                "| {w} | {imp} | {} | {:.0} | {} | {:.2} | {:.0} | {cols} |",
                m.runs,
                m.rps,
                if m.rps_running.is_finite() {
                    format!("{:.0}", m.rps_running)
                } else {
                    "–".into()
                },
                m.cpu_per_m,
                m.rss_mib
            );
        }
    }
    s
}
