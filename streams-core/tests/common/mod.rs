//! What the runtime's integration tests share: a keyed count over a cached, logged RocksDB
//! store, forwarding each new count, and helpers to feed it and read its output.

// Each test crate uses a part of this module.
#![allow(dead_code)]

pub mod clients;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::StoreError;
use streams_core::{
    KafkaStreams, KvStore, ProcessResult, Processor, ProcessorContext, Record, Stores, Topology,
    TopologyBuilder, WindowStore,
};
use streams_test_utils::kafka::secure::SecureKafka;
use streams_test_utils::kafka::{self, ProduceRecord};
use streams_test_utils::processors::{Count, Pass};

/// Sends this test binary's tracing output, filtered by `RUST_LOG`, to the test's output
/// (once: later calls change nothing).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// The properties of the exactly-once application `app` on `broker`'s secure listener
/// (before the client's security properties), its state in `state_dir`, committing every
/// 200 ms, then `more`.
pub fn secure_app_props(
    broker: &SecureKafka,
    app: &str,
    state_dir: &Path,
    more: &[(&str, &str)],
) -> Vec<(String, String)> {
    let dir = state_dir.display().to_string();
    [
        ("application.id", app),
        ("bootstrap.servers", broker.bootstrap.as_str()),
        ("state.dir", &dir),
        ("processing.guarantee", "exactly_once_v2"),
        ("commit.interval.ms", "200"),
    ]
    .into_iter()
    .chain(more.iter().copied())
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The small topology of the describe tests: the source `events` (topic `event_logs`) ->
/// `join` (passing records through, with the store `web_hooks_store`) -> the sink `out`
/// (topic `sink_topic`).
pub fn events_join_builder(sink_topic: &str) -> TopologyBuilder {
    let mut b = Topology::builder();
    b.add_source("events", ["event_logs"], StringSerde, StringSerde)
        .add_processor("join", Pass::<String, String>::default, ["events"])
        .add_state_store(
            Stores::in_memory_kv("web_hooks_store", StringSerde, StringSerde),
            ["join"],
        )
        .add_sink("out", sink_topic, StringSerde, StringSerde, ["join"]);
    b
}

/// `input` (`src`) -> `count` -> `output` (`out`).
pub fn count_topology(input: &str, output: &str) -> Topology {
    count_builder(input, output).build().expect("count topology")
}

/// The builder of [`count_topology`], for a test that adds to it.
pub fn count_builder(input: &str, output: &str) -> TopologyBuilder {
    let mut b = Topology::builder();
    b.add_source("src", [input], StringSerde, StringSerde)
        .add_processor("count", Count::default, ["src"])
        .add_state_store(
            Stores::persistent_kv("counts", StringSerde, U64Serde).with_caching(),
            ["count"],
        )
        .add_sink("out", output, StringSerde, U64Serde, ["count"]);
    b
}

/// The counts written to `topic`, as (key, count) in the order read (one partition's
/// order); only committed ones when `read_committed`.
pub fn read_counts(bootstrap: &str, topic: &str, read_committed: bool) -> Vec<(String, u64)> {
    let records = kafka::read_to_end(bootstrap, topic, Duration::from_secs(60), read_committed).unwrap();
    records
        .iter()
        .map(|r| {
            let v = u64::from_be_bytes(r.value.as_deref().unwrap().try_into().unwrap());
            (r.key_str().unwrap(), v)
        })
        .collect()
}

/// The committed (read-committed) counts of `output` per key, in the order written.
pub fn committed_counts(bootstrap: &str, output: &str) -> HashMap<String, Vec<u64>> {
    let mut counts: HashMap<String, Vec<u64>> = HashMap::new();
    for (k, v) in read_counts(bootstrap, output, true) {
        counts.entry(k).or_default().push(v);
    }
    counts
}

/// Produces `per_key` rounds of one record for each of `keys` keys (`key-<k>`), values
/// tagged `<tag>-<round>`.
pub fn produce_words(bootstrap: &str, topic: &str, keys: usize, per_key: usize, tag: &str) {
    let records: Vec<ProduceRecord> = (0..per_key)
        .flat_map(|i| (0..keys).map(move |k| ProduceRecord::new(format!("key-{k}"), format!("{tag}-{i}"))))
        .collect();
    for chunk in records.chunks(20_000) {
        kafka::produce(bootstrap, topic, chunk, Duration::from_secs(120)).unwrap();
    }
}

/// The largest count each key reached in the counts written to `topic`.
pub fn latest_counts(bootstrap: &str, topic: &str) -> HashMap<String, u64> {
    let mut latest = HashMap::new();
    for (k, v) in read_counts(bootstrap, topic, false) {
        let e = latest.entry(k).or_insert(0);
        *e = v.max(*e);
    }
    latest
}

/// Reads the output until the latest count of every key is `expected`, or fails.
pub fn wait_for_counts(
    bootstrap: &str,
    topic: &str,
    keys: usize,
    expected: u64,
    timeout: Duration,
) -> HashMap<String, u64> {
    let deadline = Instant::now() + timeout;
    loop {
        let latest = latest_counts(bootstrap, topic);
        if latest.len() == keys && latest.values().all(|&v| v == expected) {
            return latest;
        }
        assert!(
            Instant::now() < deadline,
            "counts not reached: {} keys, sample {:?}",
            latest.len(),
            latest.iter().take(3).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// One minute in milliseconds: the size of the windows the tests count records in.
pub const MINUTE: i64 = 60_000;

/// Counts one more record of `key` at `timestamp` in `windows`, the store of one-minute
/// tumbling windows; returns the window's start and its new count.
pub fn count_in_minute(
    windows: &WindowStore<StringSerde, U64Serde>,
    key: &String,
    timestamp: i64,
) -> Result<(i64, u64), StoreError> {
    let start = timestamp - timestamp.rem_euclid(MINUTE);
    let n = windows.fetch(key, start)?.unwrap_or(0) + 1;
    windows.put(key, Some(&n), start)?;
    Ok((start, n))
}

/// Counts records per key and minute in `windows` ([`count_in_minute`]); forwards
/// `"key@window start"` with the window's count.
pub struct PerMinute {
    pub windows: WindowStore<StringSerde, U64Serde>,
}

impl Processor<String, String, String, u64> for PerMinute {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let (start, n) = count_in_minute(&self.windows, &r.key, r.timestamp)?;
        ctx.forward(Record::new(format!("{}@{start}", r.key), n, r.timestamp))
    }
}

/// Writes each user record into the global store `users` (a tombstone deletes).
pub struct UserUpdater {
    store: Option<KvStore<StringSerde, StringSerde>>,
}

impl Processor<String, String, (), ()> for UserUpdater {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, (), ()>) -> ProcessResult {
        self.store = Some(ctx.kv_store("users")?);
        Ok(())
    }
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, r: Record<String, String>) -> ProcessResult {
        let store = self.store.as_ref().ok_or("init")?;
        store.put(&r.key, &r.value)?;
        Ok(())
    }
}

/// Enriches each order (key: user id) with the user's name from the global store.
pub struct Enrich {
    users: KvStore<StringSerde, StringSerde>,
}

impl Processor<String, String, String, String> for Enrich {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let name = self.users.get(&r.key)?.unwrap_or_else(|| "unknown".into());
        ctx.forward(Record::new(r.key, format!("{}:{name}", r.value), r.timestamp))
    }
}

/// `orders` enriched from the global store of `users` into `output`.
pub fn enrich_topology(users: &str, orders: &str, output: &str, persistent: bool) -> Topology {
    let store = if persistent {
        Stores::persistent_kv("users", StringSerde, StringSerde)
    } else {
        Stores::in_memory_kv("users", StringSerde, StringSerde)
    };
    let mut b = Topology::builder();
    b.add_global_store(
        store.without_logging(),
        "users-source",
        streams_core::SourceConfig::new([users], StringSerde, StringSerde),
        "users-updater",
        || UserUpdater { store: None },
    )
    .add_source("orders", [orders], StringSerde, StringSerde)
    .add_processor_with(
        "enrich",
        |ctx| {
            Ok(Enrich {
                users: ctx.kv_store("users")?,
            })
        },
        ["orders"],
    )
    .add_sink("out", output, StringSerde, StringSerde, ["enrich"]);
    b.build().expect("enrich topology")
}

/// `input` -> `output`, strings through.
pub fn pass_through(input: &str, output: &str) -> Topology {
    let mut b = Topology::builder();
    b.add_source("src", [input], StringSerde, StringSerde).add_sink(
        "out",
        output,
        StringSerde,
        StringSerde,
        ["src"],
    );
    b.build().unwrap()
}

/// The sum of the series of metric `name` in the application's registry whose line
/// contains `label` (`""`: every series).
pub fn metric(app: &KafkaStreams, name: &str, label: &str) -> f64 {
    app.metrics()
        .encode()
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The tasks each stream thread of `app` hosts now, by thread id: created less closed,
/// from the metrics.
pub fn hosted_tasks(app: &KafkaStreams) -> BTreeMap<String, f64> {
    let mut hosted = BTreeMap::new();
    for line in app.metrics().encode().lines() {
        let sign = match line.split_once('{') {
            Some(("streams_thread_task_created_total", _)) => 1.0,
            Some(("streams_thread_task_closed_total", _)) => -1.0,
            _ => continue,
        };
        let thread = line
            .split("thread_id=\"")
            .nth(1)
            .and_then(|r| r.split('"').next());
        let value = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
        if let (Some(thread), Some(value)) = (thread, value) {
            *hosted.entry(thread.to_owned()).or_default() += sign * value;
        }
    }
    hosted
}

/// Whether the two stream threads of `app` share its `tasks` tasks, each hosting some.
pub fn two_threads_share(app: &KafkaStreams, tasks: f64) -> bool {
    let hosted = hosted_tasks(app);
    hosted.len() == 2 && hosted.values().all(|n| *n >= 1.0) && hosted.values().sum::<f64>() == tasks
}

/// A plain HTTP/1.1 GET: (status, body). Status 0 when the server cannot be reached, with
/// the error as the body.
pub fn http_get(address: SocketAddr, path: &str) -> (u16, String) {
    let mut s = match TcpStream::connect(address) {
        Ok(s) => s,
        Err(e) => return (0, format!("connecting to {address}: {e}")),
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if let Err(e) = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    ) {
        return (0, format!("writing to {address}: {e}"));
    }
    let mut response = String::new();
    if let Err(e) = s.read_to_string(&mut response) {
        return (0, format!("reading from {address}: {e}"));
    }
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The samples of metric `name` in a scrape whose labels contain every one of `labels`
/// (`key="value"`): (the labels text, the value).
pub fn samples<'a>(text: &'a str, name: &str, labels: &[&str]) -> Vec<(&'a str, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && labels.iter().all(|want| rest.contains(want)))
                .then(|| Some((rest, value.parse().ok()?)))
                .flatten()
        })
        .collect()
}

/// The sum of the [`samples`] of `name` with `labels`.
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    samples(text, name, labels).iter().map(|(_, v)| v).sum()
}

/// Records the first error a stream thread of `app` fails with, and stops the application
/// on it (`ThreadFailureResponse::ShutdownClient`): what a test reads once the
/// application is in state `Error`.
pub fn first_failure(app: &mut KafkaStreams) -> std::sync::Arc<std::sync::Mutex<Option<String>>> {
    let failure: std::sync::Arc<std::sync::Mutex<Option<String>>> = Default::default();
    let seen = failure.clone();
    app.set_uncaught_error_handler(move |e| {
        seen.lock().unwrap().get_or_insert(e.to_string());
        streams_core::ThreadFailureResponse::ShutdownClient
    });
    failure
}

/// An unsecured JWT with `claims` (header `{"alg":"none"}`, no signature), which the test
/// broker's default OAUTHBEARER validator accepts until its `exp`.
pub fn unsecured_jwt(claims: &serde_json::Value) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}
