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
use streams_core::testing::{block_on_timeout, create_topic};
use streams_core::{
    KafkaStreams, KvStore, ProcessResult, Processor, ProcessorContext, Record, Stores, StreamsConfig,
    Topology,
};

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
        _ => Err("usage: see the module documentation of benches/src/bin/side_by_side.rs".into()),
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

// ---------------------------------------------------------------------------------------
// The applications

struct AppArgs {
    workload: String,
    guarantee: String,
    bootstrap: String,
    app_id: String,
    input: String,
    output: String,
    state_dir: String,
    commit_ms: u64,
    cache_bytes: u64,
}

/// Forwards every record unchanged (a `String` to `String` map through the serdes).
struct PassThrough;

impl Processor<String, String, String, String> for PassThrough {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        ctx.forward(r)
    }
}

/// Keeps the records whose key ends in an even digit (about half) and upper-cases their value.
struct FilterMap;

impl Processor<String, String, String, String> for FilterMap {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        if !keep(r.key.as_bytes()) {
            return Ok(());
        }
        let value = r.value.to_ascii_uppercase();
        ctx.forward(Record::new(r.key, value, r.timestamp))
    }
}

/// The filter of the `filtermap` workload: the key's last byte is an even ASCII digit.
fn keep(key: &[u8]) -> bool {
    key.last()
        .is_some_and(|b| b.is_ascii_digit() && (b - b'0').is_multiple_of(2))
}

/// Counts records per key in the store `counts` and forwards each new count.
#[derive(Default)]
struct Count {
    store: Option<KvStore<StringSerde, U64Serde>>,
}

impl Processor<String, String, String, u64> for Count {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, u64>) -> ProcessResult {
        self.store = Some(ctx.kv_store("counts")?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let store = self.store.as_ref().ok_or("not initialized")?;
        let n = store.get(&r.key)?.unwrap_or(0) + 1;
        store.put(&r.key, &n)?;
        ctx.forward(Record::new(r.key, n, r.timestamp))
    }
}

fn topology(workload: &str, input: &str, output: &str) -> Res<Topology> {
    let mut b = Topology::builder();
    b.add_source("source", [input], StringSerde, StringSerde);
    match workload {
        "map" => {
            b.add_processor("map", || PassThrough, ["source"]).add_sink(
                "sink",
                output,
                StringSerde,
                StringSerde,
                ["map"],
            );
        }
        "filtermap" => {
            b.add_processor("filtermap", || FilterMap, ["source"]).add_sink(
                "sink",
                output,
                StringSerde,
                StringSerde,
                ["filtermap"],
            );
        }
        "count" => {
            b.add_processor("count", Count::default, ["source"])
                .add_state_store(
                    Stores::persistent_kv("counts", StringSerde, U64Serde).with_caching(),
                    ["count"],
                )
                .add_sink("sink", output, StringSerde, U64Serde, ["count"]);
        }
        other => return Err(format!("unknown workload {other}").into()),
    }
    Ok(b.build()?)
}

fn wait_for_stdin_close() {
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}

fn run_ours(a: &AppArgs) -> Res<()> {
    let config = StreamsConfig::from_properties([
        ("application.id", a.app_id.clone()),
        ("bootstrap.servers", a.bootstrap.clone()),
        ("state.dir", a.state_dir.clone()),
        ("processing.guarantee", a.guarantee.clone()),
        ("commit.interval.ms", a.commit_ms.to_string()),
        ("statestore.cache.max.bytes", a.cache_bytes.to_string()),
        ("num.stream.threads", "1".into()),
    ])?;
    let mut app = KafkaStreams::new(topology(&a.workload, &a.input, &a.output)?, config)?;
    app.start()?;
    println!("started");
    wait_for_stdin_close();
    app.close(Duration::from_secs(30));
    Ok(())
}

/// consume -> pass-through -> produce with rdkafka alone: offsets committed every
/// `commit_ms` after a producer flush (at-least-once), or in a transaction with the output
/// (`exactly_once_v2`).
fn run_raw(a: &AppArgs) -> Res<()> {
    let filter = match a.workload.as_str() {
        "map" => false,
        "filtermap" => true,
        _ => return Err("the raw loop implements the map and filtermap workloads only".into()),
    };
    let eos = a.guarantee == "exactly_once_v2";
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &a.bootstrap)
        .set("group.id", &a.app_id)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "range")
        .set(
            "isolation.level",
            if eos { "read_committed" } else { "read_uncommitted" },
        )
        .create()?;
    let mut pc = ClientConfig::new();
    pc.set("bootstrap.servers", &a.bootstrap);
    if eos {
        pc.set("transactional.id", format!("{}-raw", a.app_id));
    }
    let producer: BaseProducer = pc.create()?;
    consumer.subscribe(&[&a.input])?;
    if eos {
        producer.init_transactions(Duration::from_secs(30))?;
        producer.begin_transaction()?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            wait_for_stdin_close();
            stop.store(true, Ordering::Relaxed);
        });
    }
    println!("started");
    let commit_every = Duration::from_millis(a.commit_ms);
    let mut next: HashMap<i32, i64> = HashMap::new();
    let mut last_commit = Instant::now();
    let mut dirty = false;
    while !stop.load(Ordering::Relaxed) {
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            let m = m?;
            next.insert(m.partition(), m.offset() + 1);
            dirty = true;
            let upper;
            let mut payload = m.payload().unwrap_or_default();
            if filter {
                if !keep(m.key().unwrap_or_default()) {
                    continue;
                }
                upper = payload.to_ascii_uppercase();
                payload = &upper;
            }
            let mut rec = BaseRecord::to(&a.output).payload(payload);
            if let Some(k) = m.key() {
                rec = rec.key(k);
            }
            rec = rec.timestamp(m.timestamp().to_millis().unwrap_or(0));
            loop {
                match producer.send(rec) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        rec = r;
                        producer.poll(Duration::from_millis(10));
                    }
                    Err((e, _)) => return Err(e.into()),
                }
            }
            producer.poll(Duration::ZERO);
        }
        if dirty && last_commit.elapsed() >= commit_every {
            let mut tpl = TopicPartitionList::new();
            for (p, o) in &next {
                tpl.add_partition_offset(&a.input, *p, Offset::Offset(*o))?;
            }
            if eos {
                let meta = consumer.group_metadata().ok_or("no group metadata")?;
                producer.send_offsets_to_transaction(&tpl, &meta, Duration::from_secs(30))?;
                producer.commit_transaction(Duration::from_secs(30))?;
                producer.begin_transaction()?;
            } else {
                producer.flush(Duration::from_secs(30))?;
                consumer.commit(&tpl, CommitMode::Sync)?;
            }
            last_commit = Instant::now();
            dirty = false;
        }
    }
    if eos {
        producer.abort_transaction(Duration::from_secs(30))?;
    } else {
        producer.flush(Duration::from_secs(30))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The driver

/// One measured run.
struct RunResult {
    cell: String,
    run: usize,
    records: u64,
    seconds: f64,
    first_output_s: f64,
    cpu_s: f64,
    peak_rss_kib: u64,
    load1: f64,
}

fn admin(bootstrap: &str) -> Res<AdminClient<DefaultClientContext>> {
    Ok(ClientConfig::new().set("bootstrap.servers", bootstrap).create()?)
}

fn delete_topics(bootstrap: &str, topics: &[&str]) -> Res<()> {
    let admin = admin(bootstrap)?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    // Missing topics (a run that failed early) are fine.
    let _ = block_on_timeout(admin.delete_topics(topics, &opts), Duration::from_secs(60));
    Ok(())
}

/// CPU seconds (user + system, all threads) and peak RSS (KiB) of a live process.
fn proc_usage(pid: u32, clk_tck: f64) -> Res<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').ok_or("bad /proc stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    Ok((ticks as f64 / clk_tck, hwm))
}

fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

#[allow(clippy::too_many_arguments)]
fn spawn_app(
    imp: &str,
    workload: &str,
    guarantee: &str,
    bootstrap: &str,
    app_id: &str,
    input: &str,
    output: &str,
    state_dir: &Path,
    commit_ms: u64,
    cache_bytes: u64,
    java_cp: &str,
    log: &Path,
) -> Res<Child> {
    let state = state_dir.to_string_lossy().into_owned();
    let mut cmd = if imp == "java" {
        let mut c = Command::new("java");
        let opts = std::env::var("BENCH_JAVA_OPTS").unwrap_or_else(|_| "-Xmx1g".into());
        c.args(opts.split_whitespace())
            .arg("-cp")
            .arg(java_cp)
            .arg("dev.streams.bench.BenchApp")
            .args([
                bootstrap,
                app_id,
                input,
                output,
                &state,
                workload,
                guarantee,
                &commit_ms.to_string(),
                &cache_bytes.to_string(),
                "1",
            ]);
        c
    } else {
        let mut c = Command::new(std::env::current_exe()?);
        c.args([
            "app",
            imp,
            workload,
            guarantee,
            bootstrap,
            app_id,
            input,
            output,
            &state,
            &commit_ms.to_string(),
            &cache_bytes.to_string(),
        ]);
        c
    };
    let out = std::fs::File::create(log)?;
    Ok(cmd
        .stdin(Stdio::piped())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()?)
}

/// What one application launch measured.
struct Measured {
    seconds: f64,
    first_output_s: f64,
    cpu_s: f64,
    peak_rss_kib: u64,
    load1: f64,
}

/// Identifies one application launch.
#[derive(Clone, Copy)]
struct Launch<'a> {
    imp: &'a str,
    workload: &'a str,
    guarantee: &'a str,
    app_id: &'a str,
    input: &'a str,
    output: &'a str,
    state_dir: &'a Path,
    tag: &'a str,
}

/// Launches one application, waits until its group has committed `ends` on every input
/// partition, reads its CPU time and peak RSS, then closes it.
fn measure(
    bootstrap: &str,
    l: &Launch<'_>,
    ends: &[(i32, i64)],
    out_dir: &Path,
    java_cp: &str,
    clk_tck: f64,
) -> Res<Measured> {
    let commit_ms = if l.guarantee == "exactly_once_v2" {
        100
    } else {
        1000
    };
    let cache_bytes = 10 * 1024 * 1024;
    let offsets_reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", l.app_id)
        .set("enable.auto.commit", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for (p, _) in ends {
        tpl.add_partition(l.input, *p);
    }
    let tag = l.tag;
    let log = out_dir.join(format!("{tag}.log"));
    let t0 = Instant::now();
    let mut child = spawn_app(
        l.imp,
        l.workload,
        l.guarantee,
        bootstrap,
        l.app_id,
        l.input,
        l.output,
        l.state_dir,
        commit_ms,
        cache_bytes,
        java_cp,
        &log,
    )?;
    let pid = child.id();
    let timeout = Duration::from_secs(
        std::env::var("BENCH_RUN_TIMEOUT_S")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(900),
    );
    let mut first_output: Option<f64> = None;
    let mut last = (0.0, 0u64, 0.0);
    let done = loop {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(status) = child.try_wait()? {
            break Err(format!(
                "{tag}: the application exited early ({status}); see {}",
                log.display()
            ));
        }
        if t0.elapsed() > timeout {
            break Err(format!(
                "{tag}: not done within {timeout:?}; see {}",
                log.display()
            ));
        }
        // Usage is sampled before the commit check, so it covers at least the processing.
        if let Ok((cpu, hwm)) = proc_usage(pid, clk_tck) {
            last = (t0.elapsed().as_secs_f64(), hwm, cpu);
        }
        if first_output.is_none() {
            let mut n = 0;
            for (p, _) in ends {
                if let Ok((_, high)) = offsets_reader.fetch_watermarks(l.output, *p, Duration::from_secs(5)) {
                    n += high;
                }
            }
            if n > 0 {
                first_output = Some(t0.elapsed().as_secs_f64());
            }
        }
        let Ok(committed) = offsets_reader.committed_offsets(tpl.clone(), Duration::from_secs(5)) else {
            continue;
        };
        let all = ends.iter().all(|(p, end)| {
            matches!(committed.find_partition(l.input, *p).map(|e| e.offset()), Some(Offset::Offset(o)) if o >= *end)
        });
        if all {
            let seconds = t0.elapsed().as_secs_f64();
            let (cpu, hwm) = proc_usage(pid, clk_tck).map_or((last.2, last.1), |u| u);
            break Ok((seconds, cpu, hwm));
        }
    };
    let load = load1();
    drop(child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (seconds, cpu_s, peak_rss_kib) = done?;
    Ok(Measured {
        seconds,
        first_output_s: first_output.unwrap_or(f64::NAN),
        cpu_s,
        peak_rss_kib,
        load1: load,
    })
}

/// End offsets of every partition of `topic`.
fn end_offsets(bootstrap: &str, topic: &str) -> Res<Vec<(i32, i64)>> {
    let probe: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let meta = probe.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let t = meta.topics().first().ok_or("topic missing")?;
    let mut ends = Vec::new();
    for p in t.partitions() {
        let (_, high) = probe.fetch_watermarks(topic, p.id(), Duration::from_secs(10))?;
        ends.push((p.id(), high));
    }
    Ok(ends)
}

/// Waits until consumer group `group` has no members. Kafka Streams does not leave the group
/// when it closes, so a restarted instance would otherwise wait for its predecessor's session
/// to time out, and the restore measurement would time that instead.
fn wait_for_empty_group(bootstrap: &str, group: &str, timeout: Duration) -> Res<()> {
    let client: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let deadline = Instant::now() + timeout;
    loop {
        let list = client.fetch_group_list(Some(group), Duration::from_secs(10))?;
        if list.groups().iter().all(|g| g.members().is_empty()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("group {group} still has members after {timeout:?}").into());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Appends one record to every partition of `topic`.
fn append_markers(bootstrap: &str, topic: &str, partitions: &[(i32, i64)]) -> Res<()> {
    let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    for (p, _) in partitions {
        producer
            .send(
                BaseRecord::to(topic)
                    .key("marker")
                    .payload("marker")
                    .partition(*p),
            )
            .map_err(|(e, _)| e)?;
    }
    producer.flush(Duration::from_secs(30))?;
    Ok(())
}

/// Runs one cell once and measures it.
///
/// The `restore` workload runs the count on `restore_input` to its end, closes it, appends
/// one record to every input partition and starts the same application again with an empty
/// state directory: the second launch, measured, restores the whole store from the changelog
/// before it can process (and commit) the new records. Its records are the changelog's.
#[allow(clippy::too_many_arguments)]
fn run_once(
    bootstrap: &str,
    input: &str,
    restore_input: &str,
    ends: &[(i32, i64)],
    cell: &str,
    run: usize,
    out_dir: &Path,
    java_cp: &str,
    clk_tck: f64,
) -> Res<RunResult> {
    let parts: Vec<&str> = cell.split(':').collect();
    let [imp, workload, guarantee] = parts[..] else {
        return Err(format!("bad cell {cell}: want impl:workload:guarantee").into());
    };
    let g = if guarantee == "exactly_once_v2" {
        "eos"
    } else {
        "alos"
    };
    let tag = format!("{imp}-{workload}-{g}-{run}");
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let app_id = format!("bench-{tag}-{nonce}");
    let output = format!("{app_id}-out");
    let changelog = format!("{app_id}-counts-changelog");
    let state_dir = tempfile::tempdir()?;
    let restore = workload == "restore";
    let (input, ends) = if restore {
        (restore_input, end_offsets(bootstrap, restore_input)?)
    } else {
        (input, ends.to_vec())
    };
    create_topic(bootstrap, &output, ends.len() as i32, &[])?;
    let launch = Launch {
        imp,
        workload: if restore { "count" } else { workload },
        guarantee,
        app_id: &app_id,
        input,
        output: &output,
        state_dir: state_dir.path(),
        tag: &tag,
    };
    let result = (|| -> Res<(u64, Measured)> {
        if !restore {
            let m = measure(bootstrap, &launch, &ends, out_dir, java_cp, clk_tck)?;
            return Ok((ends.iter().map(|(_, e)| *e as u64).sum(), m));
        }
        let fill_tag = format!("{tag}-fill");
        let fill = Launch {
            tag: &fill_tag,
            ..launch
        };
        measure(bootstrap, &fill, &ends, out_dir, java_cp, clk_tck)?;
        wait_for_empty_group(bootstrap, &app_id, Duration::from_secs(120))?;
        let restored: u64 = end_offsets(bootstrap, &changelog)?
            .iter()
            .map(|(_, e)| *e as u64)
            .sum();
        append_markers(bootstrap, input, &ends)?;
        let new_ends: Vec<(i32, i64)> = ends.iter().map(|(p, e)| (*p, e + 1)).collect();
        let wiped = tempfile::tempdir()?;
        let again = Launch {
            state_dir: wiped.path(),
            ..launch
        };
        let m = measure(bootstrap, &again, &new_ends, out_dir, java_cp, clk_tck)?;
        Ok((restored, m))
    })();
    delete_topics(bootstrap, &[&output, &changelog])?;
    let (records, m) = result?;
    Ok(RunResult {
        cell: cell.to_owned(),
        run,
        records,
        seconds: m.seconds,
        // The output topic already holds the first launch's records.
        first_output_s: if restore { f64::NAN } else { m.first_output_s },
        cpu_s: m.cpu_s,
        peak_rss_kib: m.peak_rss_kib,
        load1: m.load1,
    })
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
