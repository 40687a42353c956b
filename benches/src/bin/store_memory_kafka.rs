//! `store_memory` through the real runtime and a real broker, beside Kafka Streams.
//!
//! `store_memory` measures one stream thread's 100 RocksDB stores without Kafka. This binary
//! runs the same shape as an application: one `KafkaStreams` with one stream thread on a
//! 25-partition input topic, 4 cached, logged RocksDB stores per task (100 stores), each
//! record written into one store (its key's last hex digit modulo 4) and, with `rmw`, read
//! first; each task's processor requests a commit every 10,000 of its records (which comes
//! to about one commit per 10,000 records, as in `store_memory`). Budgets as in
//! `store_memory`: `statestore.cache.max.bytes` 10 MiB, the default RocksDB budgets (64 MiB
//! block cache, 32 MiB of memtables charged to it). Both sides include their Kafka clients
//! (and their changelog producers). The Java twin is
//! `benches/java/src/main/java/dev/streams/bench/StoreMemoryApp.java`.
//!
//! ```sh
//! store_memory_kafka preload BOOTSTRAP TOPIC RECORDS writes|rmw   # 25 partitions
//! store_memory_kafka run BOOTSTRAP APP_ID TOPIC STATE_DIR RECORDS writes|rmw
//! ```
//!
//! `preload` writes `store_memory`'s records: 16-character hex keys (all distinct for
//! `writes`; for `rmw` half of them keys written before, as `READ_BEFORE_WRITE=1` draws them)
//! and random 100-byte values. `run` prints the time to process every record and the peak
//! RSS (`VmHWM`), then closes the application. `STORE_MEMORY_PROPS=key=value,...` adds
//! properties to the application's (experiments: `metrics.address`, client settings).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use streams_benches::store_keys::{KeyIds, key_of};
use streams_core::serdes::{BytesSerde, StringSerde};
use streams_core::{
    KafkaStreams, KvStore, ProcessResult, Processor, ProcessorContext, Record, SourceConfig, State, Stores,
    StreamsConfig, ThreadFailureResponse, Topology,
};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const PARTITIONS: i32 = 25;
const STORES_PER_TASK: usize = 4;
const VALUE_BYTES: usize = 100;
const COMMIT_EVERY: u64 = 10_000;
const CACHE_BYTES: u64 = 10 << 20;

/// The store of a task that `key` lives in: its last hex digit modulo the stores per task
/// (the Java app's `storeOf`).
fn store_of(key: &str) -> usize {
    key.chars().last().and_then(|c| c.to_digit(16)).unwrap_or(0) as usize % STORES_PER_TASK
}

fn preload(bootstrap: &str, topic: &str, records: usize, rmw: bool) -> Res<()> {
    streams_test_utils::kafka::create_topic(bootstrap, topic, PARTITIONS, &[])?;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("queue.buffering.max.messages", "1000000")
        .create()?;
    let mut rng = StdRng::seed_from_u64(11);
    let mut value = [0u8; VALUE_BYTES];
    let mut ids = KeyIds::new(rmw);
    let started = Instant::now();
    for _ in 0..records {
        let id = ids.next(&mut rng);
        let key = key_of(id);
        rng.fill(&mut value[..]);
        let record = BaseRecord::to(topic).key(key.as_bytes()).payload(&value[..]);
        streams_benches::send_waiting(&producer, record)?;
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60))?;
    println!(
        "preloaded {records} records ({} keys) into {topic} ({PARTITIONS} partitions) in {:.1} s",
        ids.distinct(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Writes each record into its key's store (after reading the key when `rmw`).
struct Writer {
    stores: Vec<KvStore<StringSerde, BytesSerde>>,
    rmw: bool,
    since_commit: u64,
    processed: Arc<AtomicU64>,
}

impl Processor<String, Vec<u8>, (), ()> for Writer {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, (), ()>,
        r: Record<String, Vec<u8>>,
    ) -> ProcessResult {
        let store = &self.stores[store_of(&r.key)];
        if self.rmw {
            let _ = store.get(&r.key)?;
        }
        store.put(&r.key, &r.value)?;
        self.processed.fetch_add(1, Ordering::Relaxed);
        self.since_commit += 1;
        if self.since_commit >= COMMIT_EVERY {
            self.since_commit = 0;
            ctx.request_commit();
        }
        Ok(())
    }
}

fn topology(topic: &str, rmw: bool, processed: Arc<AtomicU64>) -> Res<Topology> {
    let mut b = Topology::builder();
    let source = b.source("source", SourceConfig::new([topic], StringSerde, BytesSerde));
    let stores: Vec<_> = (0..STORES_PER_TASK)
        .map(|i| b.store(Stores::persistent_kv(format!("store-{i}"), StringSerde, BytesSerde).with_caching()))
        .collect();
    let writer = b.processor("writer", [&source], {
        let stores = stores.clone();
        move |ctx: &mut ProcessorContext<'_, (), ()>| {
            Ok(Writer {
                stores: stores.iter().map(|s| ctx.store(s)).collect::<Result<_, _>>()?,
                rmw,
                since_commit: 0,
                processed: processed.clone(),
            })
        }
    });
    for s in &stores {
        b.connect(&writer, s);
    }
    Ok(b.build()?)
}

/// A field of `/proc/self/status` in MiB.
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn run(bootstrap: &str, app_id: &str, topic: &str, state_dir: &str, records: u64, rmw: bool) -> Res<()> {
    let processed = Arc::new(AtomicU64::new(0));
    let mut props: Vec<(String, String)> = [
        ("application.id", app_id),
        ("bootstrap.servers", bootstrap),
        ("state.dir", state_dir),
        ("num.stream.threads", "1"),
        ("statestore.cache.max.bytes", &CACHE_BYTES.to_string()),
        // Commits come from the processor's requests, every COMMIT_EVERY records.
        ("commit.interval.ms", "3600000"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    // Experiments: STORE_MEMORY_PROPS="metrics.address=127.0.0.1:19475,..." adds or
    // overrides properties.
    if let Ok(extra) = std::env::var("STORE_MEMORY_PROPS") {
        for kv in extra.split(',').filter(|kv| !kv.trim().is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("STORE_MEMORY_PROPS: `{kv}` is not key=value"))?;
            props.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let config = StreamsConfig::from_properties(props)?;
    let mut app = KafkaStreams::new(topology(topic, rmw, processed.clone())?, config)?;
    app.set_uncaught_error_handler(|e| {
        eprintln!("stream thread failed: {e}");
        ThreadFailureResponse::ShutdownClient
    });
    let started = Instant::now();
    app.start()?;
    let mut first = None;
    // A benchmark's progress watch, not synchronisation: the stream thread runs regardless.
    while processed.load(Ordering::Relaxed) < records {
        if matches!(app.state(), State::Error | State::NotRunning) {
            return Err(format!(
                "the application stopped ({:?}) before processing every record",
                app.state()
            )
            .into());
        }
        if first.is_none() && processed.load(Ordering::Relaxed) > 0 {
            first = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let done = Instant::now();
    let peak = status_mib("VmHWM");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "ours {}: {records} records in {:.1} s from start ({:.1} s from the first record), peak RSS (VmHWM) \
         {peak:.1} MiB, load average {}",
        if rmw { "read-modify-write" } else { "writes" },
        (done - started).as_secs_f64(),
        (done - first.unwrap_or(started)).as_secs_f64(),
        load.trim()
    );
    app.close(Duration::from_secs(30));
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = |s: &str| -> Res<bool> {
        match s {
            "writes" => Ok(false),
            "rmw" => Ok(true),
            other => Err(format!("mode is writes or rmw, not {other}").into()),
        }
    };
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["preload", bootstrap, topic, records, m] => preload(bootstrap, topic, records.parse()?, mode(m)?),
        ["run", bootstrap, app_id, topic, state_dir, records, m] => {
            run(bootstrap, app_id, topic, state_dir, records.parse()?, mode(m)?)
        }
        _ => Err(
            "usage: store_memory_kafka preload BOOTSTRAP TOPIC RECORDS writes|rmw | \
                  run BOOTSTRAP APP_ID TOPIC STATE_DIR RECORDS writes|rmw"
                .into(),
        ),
    }
}
