//! What interactive queries cost a running application, and how long they take.
//!
//! A topology counts records per key into a cached RocksDB store (Processor API). One input
//! topic of 4 partitions is filled once with `RECORDS` records (3,000,000 by default) over
//! `KEYS` keys (`key-000000`.., 100,000 by default); then each phase runs a fresh
//! application (new application id and state directory) over the whole topic:
//!
//! - `none`: no queries: the baseline throughput;
//! - `get`: a client thread issues `get` of a random key back to back while the
//!   application processes;
//! - `range`: a client thread alternates a `range` from a random key and a `prefix_scan`
//!   of a random 4-digit prefix (`key-0123`), reading the first 100 entries of each (one
//!   chunk);
//! - `get idle`: after the input of the `get` phase is processed, `get`s for 2 s against
//!   the idle application (where a stream thread waits for records in short slices and
//!   looks at its query inbox between them).
//!
//! Throughput is records per second from the moment a tenth of the input is processed to
//! the last record (past the group's forming), read from
//! `KafkaStreams::processed_records` every 5 ms; the cost of a phase is its throughput
//! loss against `none`. Query latency counts the queries answered (not those refused with
//! `Rebalancing` while the group forms: "refused"); "entries/answer" is the mean number
//! of entries a range returned, or the share of `get`s that found their key. Prints a
//! markdown table and the load average.
//!
//! Run: `cargo run --release -p streams-benches --bin iq_latency -- [RECORDS] [KEYS]`.
//! Environment: `BOOTSTRAP` (else `STREAMS_TEST_BOOTSTRAP`, else `127.0.0.1:9092`),
//! `THREADS` (stream threads, default 2), `RUNS` (runs of each phase, the median is shown;
//! default 1).

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::producer::{BaseRecord, Producer};
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{
    KafkaStreams, KvStore, ProcessResult, Processor, ProcessorContext, QueryError, ReadOnlyKeyValueStore,
    Record, SourceConfig, State, StoreRef, Stores, StreamsConfig, Topology,
};
use streams_test_utils::kafka::{create_topic, unique_name};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Res<T> = Result<T, BoxError>;
type Counts = ReadOnlyKeyValueStore<StringSerde, U64Serde>;

const PARTITIONS: i32 = 4;

/// Counts records per key.
struct Count {
    counts: KvStore<StringSerde, U64Serde>,
}

impl Processor<String, String> for Count {
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, r: Record<String, String>) -> ProcessResult {
        let n = self.counts.get(&r.key)?.unwrap_or(0) + 1;
        self.counts.put(&r.key, &n)?;
        Ok(())
    }
}

fn topology(input: &str) -> Res<(Topology, StoreRef<StringSerde, U64Serde>)> {
    let mut b = Topology::builder();
    let src = b.source("src", SourceConfig::new([input], StringSerde, StringSerde));
    let counts = b.store(Stores::persistent_kv("counts", StringSerde, U64Serde).with_caching());
    let count = b.processor("count", [&src], {
        let counts = counts.clone();
        move |ctx| {
            Ok(Count {
                counts: ctx.store(&counts)?,
            })
        }
    });
    b.connect(&count, &counts);
    Ok((b.build()?, counts))
}

fn key(n: u64) -> String {
    format!("key-{n:06}")
}

/// Fills `topic` with `records` records over `keys` keys in a fixed pseudo-random order.
fn preload(bootstrap: &str, topic: &str, records: u64, keys: u64) -> Res<()> {
    create_topic(bootstrap, topic, PARTITIONS, &[])?;
    let producer = streams_benches::bulk_producer(bootstrap)?;
    let mut rng = StdRng::seed_from_u64(0x5eed);
    for _ in 0..records {
        let k = key(rng.random_range(0..keys));
        let rec = BaseRecord::to(topic).key(&k).payload("v");
        streams_benches::send_waiting(&producer, rec)?;
    }
    producer.flush(Duration::from_secs(300))?;
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Load {
    None,
    Get,
    Range,
}

/// What a client thread saw.
#[derive(Default)]
struct Latencies {
    answered: Vec<Duration>,
    errors: usize,
    entries: usize,
}

impl Latencies {
    fn percentile(&self, q: f64) -> Duration {
        if self.answered.is_empty() {
            return Duration::ZERO;
        }
        self.answered[((self.answered.len() - 1) as f64 * q).round() as usize]
    }
}

/// Issues queries of `load` back to back until `stop`.
fn client(store: Counts, load: Load, keys: u64, stop: Arc<AtomicBool>) -> Latencies {
    let mut rng = StdRng::seed_from_u64(0xc11e);
    let mut lat = Latencies::default();
    let mut flip = false;
    while !stop.load(Ordering::Relaxed) {
        let k = key(rng.random_range(0..keys));
        let started = Instant::now();
        let answer: Result<usize, QueryError> = match load {
            Load::None => return lat,
            Load::Get => store.get(&k).map(|v| usize::from(v.is_some())),
            Load::Range => {
                flip = !flip;
                let cursor = if flip {
                    store.range(Bound::Included(&k), Bound::Unbounded)
                } else {
                    store.prefix_scan(&k[..8].to_owned(), &StringSerde)
                };
                cursor
                    .and_then(|c| c.chunk_size(100).next_chunk())
                    .map(|c| c.map_or(0, |c| c.len()))
            }
        };
        match answer {
            Ok(n) => {
                lat.answered.push(started.elapsed());
                lat.entries += n;
            }
            Err(_) => {
                lat.errors += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    lat
}

/// One phase's measurements.
struct Phase {
    rate: f64,
    seconds: f64,
    lat: Latencies,
    idle: Option<Latencies>,
}

fn run_phase(
    bootstrap: &str,
    input: &str,
    records: u64,
    keys: u64,
    threads: usize,
    load: Load,
) -> Res<Phase> {
    let state = tempfile::tempdir()?;
    let (topology, counts) = topology(input)?;
    let config = StreamsConfig::from_properties([
        ("application.id", unique_name("iq-latency").as_str()),
        ("bootstrap.servers", bootstrap),
        ("state.dir", &state.path().display().to_string()),
        ("num.stream.threads", &threads.to_string()),
    ])?;
    let mut app = KafkaStreams::new(topology, config)?;
    let store = app.store(&counts)?;
    app.start()?;
    let stop = Arc::new(AtomicBool::new(false));
    let client_thread = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || client(store, load, keys, stop))
    };
    let deadline = Instant::now() + Duration::from_secs(1800);
    // The window opens once a tenth of the input is processed: past the group's forming
    // (the first thread takes every partition, then hands some to the second).
    let mut window: Option<(Instant, u64)> = None;
    loop {
        let done = app.processed_records();
        if window.is_none() && done >= records / 10 {
            window = Some((Instant::now(), done));
        }
        if done >= records {
            break;
        }
        if Instant::now() > deadline || app.state() == State::Error {
            return Err(format!("{done} of {records} records processed, state {:?}", app.state()).into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let (opened, counted) = window.map_or((Instant::now(), 0), |(at, done)| (at, records - done));
    let seconds = opened.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut lat = client_thread.join().map_err(|_| "client thread panicked")?;
    lat.answered.sort();
    let idle = if load == Load::Get {
        let stop = Arc::new(AtomicBool::new(false));
        let t = {
            let stop = stop.clone();
            std::thread::spawn(move || client(store, Load::Get, keys, stop))
        };
        std::thread::sleep(Duration::from_secs(2));
        stop.store(true, Ordering::Relaxed);
        let mut idle = t.join().map_err(|_| "client thread panicked")?;
        idle.answered.sort();
        Some(idle)
    } else {
        None
    };
    app.close(Duration::from_secs(60));
    Ok(Phase {
        rate: counted as f64 / seconds,
        seconds,
        lat,
        idle,
    })
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// A table row: `rate` (records/s, seconds) of the phase, if it processed.
fn row(name: &str, rate: Option<(f64, f64)>, lat: Option<&Latencies>, base: f64) -> String {
    let (r, secs, cost) = match rate {
        Some((r, s)) if name != "none" => (
            format!("{r:.0}"),
            format!("{s:.1}"),
            format!("{:+.1} %", (base - r) / base * 100.0),
        ),
        Some((r, s)) => (format!("{r:.0}"), format!("{s:.1}"), "-".into()),
        None => ("-".into(), "-".into(), "-".into()),
    };
    let q = lat.map_or("- | - | - | - | - | -".into(), |l| {
        format!(
            "{} | {} | {} | {} | {} | {:.2}",
            l.answered.len(),
            l.errors,
            ms(l.percentile(0.5)),
            ms(l.percentile(0.99)),
            ms(l.answered.last().copied().unwrap_or_default()),
            l.entries as f64 / l.answered.len().max(1) as f64
        )
    });
    format!("| {name} | {r} | {secs} | {cost} | {q} |")
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let records: u64 = args
        .first()
        .map_or(Ok(3_000_000), |a| a.replace('_', "").parse())?;
    let keys: u64 = args.get(1).map_or(Ok(100_000), |a| a.replace('_', "").parse())?;
    let bootstrap = std::env::var("BOOTSTRAP")
        .or_else(|_| std::env::var("STREAMS_TEST_BOOTSTRAP"))
        .unwrap_or_else(|_| "127.0.0.1:9092".into());
    let threads: usize = env_or("THREADS", 2);
    let runs: usize = env_or("RUNS", 1).max(1);
    let input = unique_name("iq-latency-in");
    let started = Instant::now();
    preload(&bootstrap, &input, records, keys)?;
    eprintln!(
        "preloaded {records} records over {keys} keys into {input} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let load_before = loadavg();
    let mut table = Vec::new();
    let mut base = 0.0;
    for load in [Load::None, Load::Get, Load::Range] {
        let mut phases = Vec::new();
        for run in 0..runs {
            let p = run_phase(&bootstrap, &input, records, keys, threads, load)?;
            eprintln!(
                "{load:?} run {run}: {:.0} records/s over {:.1} s",
                p.rate, p.seconds
            );
            phases.push(p);
        }
        phases.sort_by(|a, b| a.rate.total_cmp(&b.rate));
        let median = phases.swap_remove(phases.len() / 2);
        let name = match load {
            Load::None => "none",
            Load::Get => "get",
            Load::Range => "range/prefix 100",
        };
        if load == Load::None {
            base = median.rate;
        }
        let lat = (load != Load::None).then_some(&median.lat);
        table.push(row(name, Some((median.rate, median.seconds)), lat, base));
        if let Some(idle) = &median.idle {
            table.push(row("get idle", None, Some(idle), base));
        }
    }
    println!(
        "\n{records} records, {keys} keys, {PARTITIONS} partitions, {threads} stream threads, \
         median of {runs} run(s); load average before {load_before}, after {}\n",
        loadavg()
    );
    println!(
        "| queries | records/s | s (last 90 %) | throughput cost | queries answered | refused | p50 ms | p99 ms | max ms | entries/answer |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in table {
        println!("{r}");
    }
    Ok(())
}
