//! The applications measured: this framework's topologies (Processor API) and the raw
//! rdkafka loop, each run as a child process until its standard input closes.

use super::*;
use streams_core::{SinkConfig, SourceConfig};
use streams_test_utils::processors::Pass;

pub(crate) struct AppArgs {
    pub(crate) workload: String,
    pub(crate) guarantee: String,
    pub(crate) bootstrap: String,
    pub(crate) app_id: String,
    pub(crate) input: String,
    pub(crate) output: String,
    pub(crate) state_dir: String,
    pub(crate) commit_ms: u64,
    pub(crate) cache_bytes: u64,
}

/// Forwards every record unchanged (a `String` to `String` map through the serdes).
type PassThrough = Pass<String, String>;

/// The `avro` workload's map: forwards every record unchanged, so its value is decoded
/// into [`AvroEvent`] by the source and encoded again by the sink.
type AvroPassThrough = Pass<String, AvroEvent>;

/// The `avro` workload's value: a 10-field record, as a `serde` type of [`AVRO_SCHEMA`].
pub(crate) use streams_benches::avro::Event as AvroEvent;
/// The `avro` workload's schema; also `benches/java`'s.
pub(crate) use streams_benches::avro::SCHEMA as AVRO_SCHEMA;

/// The Avro serde of the `avro` workload for `topic`, on the registry at `url`. The subject
/// is the record's name (`bench.Event`), so input and output share one schema id and a
/// pass-through writes the bytes it read.
pub(crate) fn avro_serde(url: &str, topic: &str) -> Res<streams_serde_registry::AvroSerde<AvroEvent>> {
    use streams_serde_registry::{
        AvroSerde, RecordPart, SchemaRegistryClient, SerdeConfig, SubjectNameStrategy,
    };
    let client = SchemaRegistryClient::from_properties([("schema.registry.url", url)])?;
    let config = SerdeConfig {
        subject_name_strategy: SubjectNameStrategy::Record,
        ..SerdeConfig::default()
    };
    Ok(AvroSerde::new(
        client,
        config,
        topic,
        RecordPart::Value,
        AVRO_SCHEMA,
    )?)
}

/// The one value every record of the `avro` workload's input carries (about 110 bytes).
pub(crate) fn avro_value(url: &str) -> Res<Vec<u8>> {
    let event = AvroEvent::sample();
    Ok(streams_state::Serde::serialize(
        &avro_serde(url, "preload")?,
        &event,
    )?)
}

/// Keeps the records whose key ends in an even digit (about half) and upper-cases their value.
pub(crate) struct FilterMap;

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
pub(crate) fn keep(key: &[u8]) -> bool {
    key.last()
        .is_some_and(|b| b.is_ascii_digit() && (b - b'0').is_multiple_of(2))
}

/// The store of the `join10` / `join100` workloads, keyed `%06d(user):%04d(hook)`.
pub(crate) const JOIN_STORE: &str = "hooks";

/// The input's key count and partition count, read from the environment variables `KEYS`
/// and `PARTITIONS` that `run.sh` exports (defaults 10000 and 4).
fn key_space() -> (u64, i32) {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (var("KEYS", 10_000), var("PARTITIONS", 4) as i32)
}

/// The CRC-32 (IEEE, as zlib and librdkafka compute it) of `bytes`.
fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The user ids whose input key (`key-%05d`) the preload (librdkafka's default
/// `consistent_random` partitioner: CRC-32 of the key modulo the partition count) wrote to
/// `partition`.
pub(crate) fn users_of_partition(partition: i32) -> impl Iterator<Item = u64> {
    let (keys, partitions) = key_space();
    (0..keys).filter(move |u| {
        let key = format!("key-{u:05}");
        (crc32(key.as_bytes()) % partitions as u32) as i32 == partition
    })
}

/// The `join10` / `join100` processor: when it is made it fills [`JOIN_STORE`] with `rows`
/// hooks for every user of its partition; each record (key `key-%05d`, the user) then
/// prefix-scans `%06d(user):` and forwards one record, the input key with the number of
/// rows found.
pub(crate) struct PrefixJoin {
    store: KvStore<StringSerde, StringSerde>,
}

impl PrefixJoin {
    /// A join against `rows` hooks per user in `store`, filled for the task's partition.
    pub(crate) fn new(
        ctx: &ProcessorContext<'_, String, String>,
        store: KvStore<StringSerde, StringSerde>,
        rows: u64,
    ) -> Result<Self, streams_core::ProcessorError> {
        let mut all = Vec::new();
        for user in users_of_partition(ctx.task_id().partition) {
            for hook in 0..rows {
                all.push((
                    format!("{user:06}:{hook:04}"),
                    format!("https://hooks.example/{user}/{hook}"),
                ));
            }
        }
        store.put_all(&all)?;
        Ok(Self { store })
    }
}

impl Processor<String, String, String, String> for PrefixJoin {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let store = &self.store;
        let user: u64 = r.key.trim_start_matches("key-").parse()?;
        let mut found = 0u64;
        for entry in store.read()?.prefix_scan(&format!("{user:06}:"), &StringSerde)? {
            entry?;
            found += 1;
        }
        ctx.forward(Record::new(r.key, found.to_string(), r.timestamp))
    }
}

/// The `avro` workload: a map whose serdes decode every value into [`AvroEvent`] and encode
/// it again, through the registry at `SCHEMA_REGISTRY_URL`.
fn avro_topology(input: &str, output: &str) -> Res<Topology> {
    let url =
        std::env::var("SCHEMA_REGISTRY_URL").map_err(|_| "the avro workload needs SCHEMA_REGISTRY_URL")?;
    let values = Arc::new(avro_serde(&url, input)?);
    let mut b = Topology::builder();
    let source = b.source(
        "source",
        SourceConfig::new([input], StringSerde, Arc::clone(&values)),
    );
    let map = b.processor("map", [&source], |_| Ok(AvroPassThrough::default()));
    b.sink("sink", SinkConfig::topic(output, StringSerde, values), [&map]);
    Ok(b.build()?)
}

pub(crate) fn topology(workload: &str, input: &str, output: &str) -> Res<Topology> {
    if workload == "avro" {
        return avro_topology(input, output);
    }
    if streams_benches::nexmark::queries::QUERIES.contains(&workload) {
        return streams_benches::nexmark::queries::topology(workload, input, output);
    }
    let mut b = Topology::builder();
    let source = b.source("source", SourceConfig::new([input], StringSerde, StringSerde));
    match workload {
        "map" => {
            b.add_processor("map", PassThrough::default, ["source"]).add_sink(
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
        "count" => streams_examples::count::add_count(&mut b, &source, output),
        "join10" | "join100" => {
            let rows = if workload == "join10" { 10 } else { 100 };
            let hooks =
                b.store(Stores::persistent_kv(JOIN_STORE, StringSerde, StringSerde).without_logging());
            let join = b.processor("join", [&source], {
                let hooks = hooks.clone();
                move |ctx| PrefixJoin::new(ctx, ctx.store(&hooks)?, rows)
            });
            b.connect(&join, &hooks);
            b.sink(
                "sink",
                SinkConfig::topic(output, StringSerde, StringSerde),
                [&join],
            );
        }
        other => return Err(format!("unknown workload {other}").into()),
    }
    Ok(b.build()?)
}

pub(crate) fn wait_for_stdin_close() {
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}

pub(crate) fn run_ours(a: &AppArgs) -> Res<()> {
    let mut props = vec![
        ("application.id".to_owned(), a.app_id.clone()),
        ("bootstrap.servers".to_owned(), a.bootstrap.clone()),
        ("state.dir".to_owned(), a.state_dir.clone()),
        ("processing.guarantee".to_owned(), a.guarantee.clone()),
        ("commit.interval.ms".to_owned(), a.commit_ms.to_string()),
        ("statestore.cache.max.bytes".to_owned(), a.cache_bytes.to_string()),
        ("num.stream.threads".to_owned(), "1".into()),
    ];
    // Experiments: BENCH_OURS_PROPS="producer.linger.ms=100,..." adds or overrides
    // properties of our application (run.sh passes the environment through).
    if let Ok(extra) = std::env::var("BENCH_OURS_PROPS") {
        for kv in extra.split(',').filter(|kv| !kv.trim().is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("BENCH_OURS_PROPS: `{kv}` is not key=value"))?;
            props.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let mut config = StreamsConfig::from_properties(props)?;
    // Experiments: BENCH_OURS_ROCKSDB="memtable-bloom,filters-for-hits" sets store options.
    if let Ok(options) = std::env::var("BENCH_OURS_ROCKSDB") {
        let memtable_bloom = options.split(',').any(|o| o.trim() == "memtable-bloom");
        let filters_for_hits = options.split(',').any(|o| o.trim() == "filters-for-hits");
        config = config
            .to_builder()
            .rocksdb_config_setter(move |_, opts| {
                if memtable_bloom {
                    opts.set_memtable_whole_key_filtering(true);
                    opts.set_memtable_prefix_bloom_ratio(0.1);
                }
                if filters_for_hits {
                    opts.set_optimize_filters_for_hits(true);
                }
            })
            .build()?;
    }
    let mut app = KafkaStreams::new(topology(&a.workload, &a.input, &a.output)?, config)?;
    app.start()?;
    println!("started");
    wait_for_stdin_close();
    app.close(Duration::from_secs(30));
    Ok(())
}

// The client settings our runtime gives its stream thread's consumer and producer when the
// configuration is silent, mirrored here for the raw loop so that it is tuned as well as our
// application and remains the ceiling. The harness cannot import them (they are private to
// streams-core): keep them in step with `streams-core/src/runtime/client/defaults.rs` (prefetching)
// and `ThreadFactory::parts` in `streams-core/src/runtime/mod.rs` (the rest).

/// The main consumer's settings. The runtime joins with the consumer group protocol of
/// KIP-848 where the broker offers it (Apache Kafka 4.0 and later, so the harness's 4.1.1
/// broker), the broker assigning with `range`. Not mirrored: `statistics.interval.ms` (the
/// runtime's lag metric, which the raw loop does not have: it would only cost it CPU) and
/// `client.id`.
pub(crate) const RUNTIME_CONSUMER: &[(&str, &str)] = &[
    ("group.protocol", "consumer"),
    ("group.remote.assignor", "range"),
    ("enable.auto.commit", "false"),
    ("enable.auto.offset.store", "false"),
    // defaults.rs: QUEUED_MIN_MESSAGES, FETCH_QUEUE_BACKOFF_MS (librdkafka's 100,000 records
    // and 1 s backoff starve a consume-and-produce loop).
    ("queued.min.messages", "20000"),
    ("fetch.queue.backoff.ms", "10"),
];

/// The producer's settings under both guarantees.
pub(crate) const RUNTIME_PRODUCER: &[(&str, &str)] = &[("linger.ms", "5"), ("partitioner", "murmur2_random")];

/// The producer's settings at-least-once.
pub(crate) const RUNTIME_PRODUCER_ALOS: &[(&str, &str)] = &[("enable.idempotence", "true")];

/// The producer's settings under `exactly_once_v2` (with a `transactional.id`).
pub(crate) const RUNTIME_PRODUCER_EOS: &[(&str, &str)] = &[("transaction.timeout.ms", "10000")];

/// consume -> pass-through -> produce with rdkafka alone: offsets committed every
/// `commit_ms` after a producer flush (at-least-once), or in a transaction with the output
/// (`exactly_once_v2`). Its clients have the settings of our runtime's ([`RUNTIME_CONSUMER`],
/// [`RUNTIME_PRODUCER`]).
pub(crate) fn run_raw(a: &AppArgs) -> Res<()> {
    let filter = match a.workload.as_str() {
        "map" => false,
        "filtermap" => true,
        _ => return Err("the raw loop implements the map and filtermap workloads only".into()),
    };
    let eos = a.guarantee == "exactly_once_v2";
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", &a.bootstrap)
        .set("group.id", &a.app_id)
        .set("auto.offset.reset", "earliest");
    for (k, v) in RUNTIME_CONSUMER {
        cc.set(*k, *v);
    }
    cc.set("isolation.level", streams_test_utils::kafka::isolation_level(eos));
    let consumer: BaseConsumer = cc.create()?;
    let mut pc = ClientConfig::new();
    pc.set("bootstrap.servers", &a.bootstrap);
    for (k, v) in RUNTIME_PRODUCER {
        pc.set(*k, *v);
    }
    if eos {
        pc.set("transactional.id", format!("{}-raw", a.app_id));
        for (k, v) in RUNTIME_PRODUCER_EOS {
            pc.set(*k, *v);
        }
    } else {
        for (k, v) in RUNTIME_PRODUCER_ALOS {
            pc.set(*k, *v);
        }
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
            streams_benches::send_waiting(&producer, rec)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_is_the_ieee_one() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn users_follow_librdkafkas_default_partitioner() {
        // zlib.crc32(b"key-%05d" % u) % 4 for u in 0..4 is [0, 2, 0, 2].
        if std::env::var_os("KEYS").is_some() || std::env::var_os("PARTITIONS").is_some() {
            return;
        }
        assert_eq!(users_of_partition(0).take(2).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(users_of_partition(2).take(2).collect::<Vec<_>>(), [1, 3]);
    }

    /// The Java application's `AVRO_SCHEMA`, its string literals joined and unescaped.
    fn java_avro_schema() -> String {
        let java = include_str!("../../../java/src/main/java/dev/streams/bench/BenchApp.java");
        let start = java
            .find("AVRO_SCHEMA = ")
            .expect("BenchApp.java declares AVRO_SCHEMA");
        let declaration = &java[start..start + java[start..].find(';').expect("a ;")];
        let mut text = String::new();
        let mut chars = declaration.chars();
        while let Some(c) = chars.next() {
            if c != '"' {
                continue;
            }
            // One literal: up to the next unescaped quote.
            while let Some(c) = chars.next() {
                match c {
                    '\\' => text.extend(chars.next()),
                    '"' => break,
                    c => text.push(c),
                }
            }
        }
        text
    }

    #[test]
    fn java_registers_the_same_avro_schema_text() {
        assert_eq!(java_avro_schema(), AVRO_SCHEMA);
    }
}
