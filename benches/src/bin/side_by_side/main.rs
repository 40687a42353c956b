//! Side-by-side end-to-end benchmark: this framework vs Java Kafka Streams vs a raw rdkafka
//! loop, on the same pre-loaded input topic of a real broker.
//!
//! Subcommands (`benches/side-by-side/run.sh` calls them; see `docs/benchmarks.md`):
//!
//! - `preload BOOTSTRAP TOPIC RECORDS PARTITIONS KEYS VALUE_BYTES`: creates `TOPIC` and fills it.
//! - `preload-avro BOOTSTRAP TOPIC RECORDS PARTITIONS KEYS REGISTRY_URL`: the same with one
//!   Avro record of a 10-field schema ([`apps::AvroEvent`]) in the Confluent wire format as
//!   every value, its schema registered in the registry at `REGISTRY_URL`.
//! - `preload-nexmark BOOTSTRAP TOPIC EVENTS PARTITIONS RATE`: creates `TOPIC` and fills it
//!   with `EVENTS` Nexmark events, `RATE` per second of event time (`nexmark.rs`).
//! - `app IMPL WORKLOAD GUARANTEE BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR COMMIT_MS CACHE_BYTES`:
//!   one application (`IMPL` = `ours` | `raw`, `WORKLOAD` = `map` | `filtermap` | `count` | `avro`
//!   (a map through Avro serdes; the registry's URL in `SCHEMA_REGISTRY_URL`) | a Nexmark
//!   query (`q0`–`q8`, `q11`, `q12`: `streams_benches::nexmark::queries::QUERIES`), `GUARANTEE` =
//!   `at_least_once` | `exactly_once_v2`), running until standard input closes.
//! - `run BOOTSTRAP INPUT OUT_DIR RUNS JAVA_CP CELLS`: the driver. For each cell
//!   (`impl:workload:guarantee`, comma-separated) and each of `RUNS` runs it starts the
//!   application as a child process, waits until the application's consumer group has
//!   committed the end offset of every input partition, then reads the child's CPU time and
//!   peak RSS and the broker's CPU time from `/proc`, closes its standard input, waits for it
//!   to exit and checks the output topic against the input (`check.rs`). One line per run
//!   goes to `OUT_DIR/runs.tsv`, the medians of the runs whose check passed to
//!   `OUT_DIR/table.md`. The `restore` workload (see `run_once`) reads `INPUT-restore`
//!   instead of `INPUT`; an aggregation over a grown store (`agg100k`, `agg1m`, `agg10m`,
//!   `agg50m`: `agg.rs`) reads `INPUT-<workload>`, which the driver fills itself. The
//!   broker's process is `BENCH_BROKER_PID`, else the one in `$KAFKA_RUN_DIR/kafka.pid`; `PIN=1` says (in `table.md`) that run.sh pinned the broker
//!   and the applications to their own CPUs.

use std::collections::{BTreeMap, HashMap};
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
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use streams_core::serdes::StringSerde;
use streams_core::{
    KafkaStreams, KvStore, ProcessResult, Processor, ProcessorContext, Record, Stores, StreamsConfig,
    Topology,
};
use streams_test_utils::kafka::{block_on_timeout, create_topic};

mod agg;
mod apps;
mod check;
mod measure;
mod nexmark;

use agg::AggInput;
use apps::*;
use check::*;
use measure::*;
use nexmark::*;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Res<T> = Result<T, BoxError>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(kind @ ("preload" | "preload-avro")) if args.len() == 7 => {
            let (value, what) = if kind == "preload" {
                let value_bytes: usize = args[6].parse()?;
                let value = filler_value(value_bytes);
                (value, format!("{value_bytes} B values"))
            } else {
                let value = avro_value(&args[6])?;
                let what = format!("{} B Avro values", value.len());
                (value, what)
            };
            preload(
                &args[1],
                &args[2],
                args[3].parse()?,
                args[4].parse()?,
                args[5].parse()?,
                &value,
                &what,
            )
        }
        Some("preload-nexmark") if args.len() == 6 => preload_nexmark(
            &args[1],
            &args[2],
            args[3].parse()?,
            args[4].parse()?,
            args[5].parse()?,
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
            // `RUST_LOG` set: the runtime's log lines on stderr (the run's `.log` file), e.g.
            // `streams_core=info` for a restoration's timeline. Off by default.
            if let Ok(filter) = std::env::var("RUST_LOG") {
                tracing_subscriber::fmt()
                    .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                    .with_writer(std::io::stderr)
                    .init();
            }
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
/// pseudo-random order, each with `value` (described as `what`).
fn preload(
    bootstrap: &str,
    topic: &str,
    records: u64,
    partitions: i32,
    keys: u64,
    value: &[u8],
    what: &str,
) -> Res<()> {
    create_topic(bootstrap, topic, partitions, &[])?;
    let producer = streams_benches::bulk_producer(bootstrap)?;
    let started = Instant::now();
    for draw in draws().take(records as usize) {
        let key = format!("key-{:05}", (draw >> 33) % keys);
        let rec = BaseRecord::to(topic).key(&key).payload(value);
        streams_benches::send_waiting(&producer, rec)?;
    }
    producer.flush(Duration::from_secs(300))?;
    println!(
        "preloaded {records} records ({keys} keys, {what}) into {topic} ({partitions} partitions) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A fixed linear congruential sequence: every run of the harness draws the same keys.
fn draws() -> impl Iterator<Item = u64> {
    std::iter::successors(Some(0x2545_f491_4f6c_dd1d_u64), |state| {
        Some(
            state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407),
        )
    })
    .skip(1)
}

/// The value every preloaded record carries: `bytes` letters `abc...zab...`.
fn filler_value(bytes: usize) -> Vec<u8> {
    (0..bytes).map(|i| b'a' + (i % 26) as u8).collect()
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
    broker_cpu_per_m: f64,
    rss_mib: f64,
    runs: usize,
}

/// The medians of the runs of `cell` whose check passed.
fn cell_medians(results: &[RunResult], cell: &str) -> Option<Medians> {
    let rs: Vec<&RunResult> = results
        .iter()
        .filter(|r| r.cell == cell && r.check == "ok")
        .collect();
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
        broker_cpu_per_m: median(
            rs.iter()
                .map(|r| r.broker_cpu_s / (r.records as f64 / 1e6))
                .collect(),
        ),
        rss_mib: median(rs.iter().map(|r| r.peak_rss_kib as f64 / 1024.0).collect()),
        runs: rs.len(),
    })
}

/// The columns of `runs.tsv`.
const TSV_HEADER: &str = "cell\trun\trecords\tseconds\trecords_per_s\tfirst_output_s\tcpu_s\tcpu_s_per_m\tbroker_cpu_s\tbroker_cpu_s_per_m\tpeak_rss_mib\tload1\tcheck_s\tcheck";

fn tsv_line(r: &RunResult) -> String {
    let m = r.records as f64 / 1e6;
    format!(
        "{}\t{}\t{}\t{:.3}\t{:.0}\t{:.3}\t{:.2}\t{:.3}\t{:.2}\t{:.3}\t{:.1}\t{:.2}\t{:.1}\t{}",
        r.cell,
        r.run,
        r.records,
        r.seconds,
        r.records as f64 / r.seconds,
        r.first_output_s,
        r.cpu_s,
        r.cpu_s / m,
        r.broker_cpu_s,
        r.broker_cpu_s / m,
        r.peak_rss_kib as f64 / 1024.0,
        r.load1,
        r.check_s,
        one_line(&r.check)
    )
}

/// `s` fit for one TSV field.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A run that did not complete: what is known of it.
struct Failed {
    cell: String,
    run: usize,
    load1: f64,
    reason: String,
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
    let broker_pid = broker_pid();
    match broker_pid {
        Some(pid) => println!("broker pid {pid}"),
        None => println!(
            "warning: broker process not found (BENCH_BROKER_PID, $KAFKA_RUN_DIR/kafka.pid): no broker CPU"
        ),
    }
    let h = Harness {
        bootstrap,
        out_dir,
        java_cp,
        clk_tck,
        broker_pid,
    };
    let ends = end_offsets(bootstrap, input)?;
    let restore_input = format!("{input}-restore");
    let cells: Vec<&str> = cells.split(',').filter(|c| !c.is_empty()).collect();
    // What the input holds, for the output checks (the restore reads its own input per run).
    let checked_against_input = |c: &&str| {
        let workload = c.split(':').nth(1).unwrap_or("");
        workload != "restore"
            && agg::entries(workload).is_none()
            && !streams_benches::nexmark::queries::QUERIES.contains(&workload)
    };
    // Every aggregation workload's own input, filled once for all its runs.
    let mut aggs: HashMap<String, AggInput> = HashMap::new();
    for cell in &cells {
        let workload = cell.split(':').nth(1).unwrap_or("");
        if agg::entries(workload).is_some() && !aggs.contains_key(workload) {
            let a = agg::preload(bootstrap, input, workload, ends.len() as i32)?;
            aggs.insert(workload.to_owned(), a);
        }
    }
    let summary = if cells.iter().any(checked_against_input) {
        let t = Instant::now();
        let s = InputSummary::read(bootstrap, input)?;
        let want: u64 = ends.iter().map(|(_, e)| *e as u64).sum();
        if s.records != want {
            return Err(format!(
                "read {} records of {input}, its end offsets sum to {want}",
                s.records
            )
            .into());
        }
        println!(
            "input: {} records, {} keys, read in {:.1} s",
            s.records,
            s.per_key.len(),
            t.elapsed().as_secs_f64()
        );
        Some(s)
    } else {
        None
    };
    let inputs = Inputs {
        input,
        summary: summary.as_ref(),
        ends: &ends,
        restore_input: &restore_input,
        aggs: &aggs,
    };
    let mut tsv = std::fs::File::create(out_dir.join("runs.tsv"))?;
    writeln!(tsv, "{TSV_HEADER}")?;
    let mut results = Vec::new();
    let mut failed = Vec::new();
    // Runs are interleaved (run 1 of every cell, then run 2, ...) so that a change in the
    // machine's background load spreads over all cells rather than hitting one.
    for run in 1..=runs {
        for cell in &cells {
            let load = load1();
            match run_once(&h, &inputs, cell, run) {
                Ok(r) => {
                    let line = tsv_line(&r);
                    println!("{line}");
                    writeln!(tsv, "{line}")?;
                    results.push(r);
                }
                Err(e) => {
                    let reason = format!("failed: {}", one_line(&e.to_string()));
                    // The measurements are unknown: empty fields up to load1 and check.
                    let line = format!("{cell}\t{run}{}\t{load:.2}\t\t{reason}", "\t".repeat(9));
                    println!("{line}");
                    writeln!(tsv, "{line}")?;
                    failed.push(Failed {
                        cell: cell.to_string(),
                        run,
                        load1: load,
                        reason,
                    });
                }
            }
        }
    }
    let mut table = table(&results, &failed, &cells);
    table.push_str(&equality(&results));
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

/// A run whose 1-minute load average before it was above this had a busy machine.
const BUSY_LOAD: f64 = 1.5;

/// The placement of broker and applications, from `PIN` (run.sh's setting).
fn mode() -> &'static str {
    if std::env::var("PIN").is_ok_and(|v| v == "1") {
        "pinned (taskset: the broker on CPU 0, the driver and the applications on CPU 1)"
    } else {
        "shared (the broker and the applications share every core)"
    }
}

fn table(results: &[RunResult], failed: &[Failed], cells: &[&str]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Mode: {}.", mode());
    let loads: Vec<f64> = results
        .iter()
        .map(|r| r.load1)
        .chain(failed.iter().map(|f| f.load1))
        .filter(|l| l.is_finite())
        .collect();
    let total = results.len() + failed.len();
    if !loads.is_empty() {
        let lo = loads.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let _ = writeln!(s, "\nLoad average (1 min) before the runs: {lo:.2}–{hi:.2}.");
        let busy = loads.iter().filter(|l| **l > BUSY_LOAD).count();
        if busy > 0 {
            let _ = writeln!(
                s,
                "\n**{busy} of {total} runs started with a 1-minute load average above {BUSY_LOAD}**: \
                 the machine was busy (the broker and the previous run count too)."
            );
        }
    }
    let bad: Vec<String> = results
        .iter()
        .filter(|r| r.check != "ok")
        .map(|r| format!("- {} run {}: {}", r.cell, r.run, one_line(&r.check)))
        .chain(
            failed
                .iter()
                .map(|f| format!("- {} run {}: {}", f.cell, f.run, f.reason)),
        )
        .collect();
    let _ = writeln!(
        s,
        "\nRuns: {total}; excluded from the medians (output check failed, or the run failed): {}.",
        bad.len()
    );
    for b in &bad {
        let _ = writeln!(s, "{b}");
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| workload | impl | runs | records/s | records/s after first output | CPU s / M records | broker CPU s / M records | peak RSS MiB | rec/s ours÷Java | CPU ours÷Java | RSS ours÷Java | rec/s ours÷raw | CPU ours÷raw | RSS ours÷raw |"
    );
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
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
            let or_dash = |v: f64, digits: usize| {
                if v.is_finite() {
                    format!("{v:.digits$}")
                } else {
                    "–".into()
                }
            };
            let _ = writeln!(
                s,
                "| {w} | {imp} | {} | {:.0} | {} | {:.2} | {} | {:.0} | {cols} |",
                m.runs,
                m.rps,
                or_dash(m.rps_running, 0),
                m.cpu_per_m,
                or_dash(m.broker_cpu_per_m, 2),
                m.rss_mib
            );
        }
    }
    s
}
