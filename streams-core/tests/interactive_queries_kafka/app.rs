//! The application under test: its topology and configuration, its input fed over fresh
//! topics, and starting it until both stream threads host tasks.

use std::path::Path;
use std::time::Duration;

use streams_core::serdes::StringSerde;
use streams_core::{
    KafkaStreams, KvStore, ProcessResult, Processor, ProcessorContext, Record, SourceConfig, State, Stores,
    StreamsConfig, Topology, default_partition,
};
use streams_test_utils::kafka::{self, ProduceRecord};
use tempfile::TempDir;

use crate::common::two_threads_share;
use crate::{Model, N, PARTITIONS, Ref, SPECIAL, Store, USERS, wait_until};

/// Writes each record into its store.
struct Put {
    store: KvStore<StringSerde, StringSerde>,
}

impl Processor<String, String> for Put {
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, r: Record<String, String>) -> ProcessResult {
        self.store.put(&r.key, &r.value)?;
        Ok(())
    }
}

/// `input` -> `put` into `kv` (RocksDB with a cache when `persistent`, else in memory);
/// with `users`, also a global store `users` fed from that topic (of the other kind).
fn topology(input: &str, persistent: bool, users: Option<&str>) -> (Topology, Ref, Option<Ref>) {
    let mut b = Topology::builder();
    let src = b.source("src", SourceConfig::new([input], StringSerde, StringSerde));
    let kv = b.store(if persistent {
        Stores::persistent_kv("kv", StringSerde, StringSerde).with_caching()
    } else {
        Stores::in_memory_kv("kv", StringSerde, StringSerde)
    });
    let put = b.processor("put", [&src], {
        let kv = kv.clone();
        move |ctx| {
            Ok(Put {
                store: ctx.store(&kv)?,
            })
        }
    });
    b.connect(&put, &kv);
    let users = users.map(|topic| {
        let store = if persistent {
            Stores::in_memory_kv("users", StringSerde, StringSerde)
        } else {
            Stores::persistent_kv("users", StringSerde, StringSerde)
        };
        b.global_store(
            store.without_logging(),
            "users-src",
            SourceConfig::new([topic], StringSerde, StringSerde),
            "users-put",
            |_, store| Ok(Put { store }),
        )
    });
    (b.build().unwrap(), kv, users)
}

/// Two stream threads; `commit_ms` (with a small cache under a long interval, so that
/// reads merge cached and flushed entries).
fn config(bootstrap: &str, app_id: &str, state: &Path, commit_ms: u32) -> StreamsConfig {
    let state = state.display().to_string();
    let commit = commit_ms.to_string();
    let mut props = vec![
        ("application.id", app_id),
        ("bootstrap.servers", bootstrap),
        ("state.dir", &state),
        ("num.stream.threads", "2"),
        ("commit.interval.ms", &commit),
    ];
    if commit_ms > 1000 {
        props.push(("statestore.cache.max.bytes", "65536"));
    }
    StreamsConfig::from_properties(props).unwrap()
}

pub(crate) fn partition_of(key: &str) -> i32 {
    default_partition(key.as_bytes(), PARTITIONS)
}

/// The `N` keys: 20 groups `user-GG-IIIII`, and the special ones.
fn keys() -> Vec<String> {
    let mut keys: Vec<String> = (0..N - SPECIAL.len())
        .map(|i| format!("user-{:02}-{i:05}", i % 20))
        .collect();
    keys.extend(SPECIAL.iter().map(|s| (*s).to_owned()));
    keys
}

/// Writes `rounds` values for every key (each to its partition), and returns the model:
/// every key with its last value.
fn feed(bootstrap: &str, topic: &str, rounds: usize) -> Model {
    let keys = keys();
    let value = |round: usize, i: usize| format!("r{round}-{i}");
    let records: Vec<ProduceRecord> = (0..rounds)
        .flat_map(|round| {
            keys.iter()
                .enumerate()
                .map(move |(i, k)| ProduceRecord::new(k, value(round, i)).with_partition(partition_of(k)))
        })
        .collect();
    kafka::produce(bootstrap, topic, &records, Duration::from_secs(60)).unwrap();
    let model: Model = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), value(rounds - 1, i)))
        .collect();
    assert_eq!(model.len(), N);
    model
}

/// An application over fresh topics, fed and not started yet.
pub(crate) struct Fixture {
    bootstrap: String,
    app_id: String,
    input: String,
    pub(crate) model: Model,
    pub(crate) users: Model,
    pub(crate) app: KafkaStreams,
    pub(crate) kv: Ref,
    pub(crate) users_store: Option<Ref>,
    _state: TempDir,
}

pub(crate) fn fixture(bootstrap: String, persistent: bool, global: bool, rounds: usize) -> Fixture {
    let app_id = kafka::unique_name("iq");
    let input = kafka::unique_name("iq-in");
    kafka::create_topic(&bootstrap, &input, PARTITIONS, &[]).unwrap();
    let model = feed(&bootstrap, &input, rounds);
    let mut users = Model::new();
    let users_topic = global.then(|| {
        let topic = kafka::unique_name("iq-users");
        kafka::create_topic(&bootstrap, &topic, 2, &[]).unwrap();
        users = (0..USERS)
            .map(|i| (format!("u{i:03}"), format!("name-{i}")))
            .collect();
        let records: Vec<ProduceRecord> = users.iter().map(|(k, v)| ProduceRecord::new(k, v)).collect();
        kafka::produce(&bootstrap, &topic, &records, Duration::from_secs(60)).unwrap();
        topic
    });
    let (topology, kv, users_store) = topology(&input, persistent, users_topic.as_deref());
    let state = tempfile::tempdir().unwrap();
    let commit_ms = if persistent { 60_000 } else { 100 };
    let app = KafkaStreams::new(topology, config(&bootstrap, &app_id, state.path(), commit_ms)).unwrap();
    Fixture {
        bootstrap,
        app_id,
        input,
        model,
        users,
        app,
        kv,
        users_store,
        _state: state,
    }
}

/// Starts `app` and waits until it has processed `records` records and its two threads
/// share the partitions. (RUNNING and the records processed are not enough: the first
/// thread to join takes every partition, and under the consumer protocol a partition it
/// hands over to the second thread is hosted by neither for up to a heartbeat, while the
/// application is RUNNING and queries answer without it.)
pub(crate) fn start_and_process(app: &mut KafkaStreams, records: u64) {
    crate::common::init_tracing();
    app.start().unwrap();
    wait_until("processing the input", Duration::from_secs(60), || {
        app.processed_records() >= records
            && app.state() == State::Running
            && two_threads_share(app, f64::from(PARTITIONS))
    });
}

/// Instance B of `f`'s application (same id, its own state directory), not started, and
/// its handle on the store.
pub(crate) fn second_instance(f: &Fixture) -> (KafkaStreams, Store, TempDir) {
    let (topology, kv, _) = topology(&f.input, false, None);
    let state = tempfile::tempdir().unwrap();
    let app = KafkaStreams::new(topology, config(&f.bootstrap, &f.app_id, state.path(), 100)).unwrap();
    let store = app.store(&kv).unwrap();
    (app, store, state)
}
