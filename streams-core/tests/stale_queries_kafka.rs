//! Stale queries (Kafka Streams' `enableStaleStores`) against a real broker: standbys answer.
//!
//! Two instances of one application (one stream thread each, `group.protocol=streams`,
//! `num.standby.replicas=1`) write every record of a 4-partition topic into a key-value
//! store and a window store, both on RocksDB and logged. The broker gives each instance
//! the active tasks of some partitions and the standbys of the others. Once every store
//! copy has caught up with its changelog (`partition_lags`: every partition of both stores
//! on both instances, active ones at 0, standby ones at 0 behind a known end), each instance
//! is read:
//! - without `stale_stores`: exactly the keys and windows of its active partitions, and a
//!   standby partition asked for by number is `NotHosted`;
//! - with `stale_stores`: every key with its last value and every window with its count,
//!   the standby partitions included, read by scans, by key and by partition.
//!
//! Each instance's metadata names, for every partition, the instance running its task and
//! the one keeping its standby (both set `application.server`).
//!
//! A second test reads with `stale_stores` while a second instance joins: every read
//! answers, with the key's last value or a value the input wrote for it (a restoring copy)
//! or nothing (a partition in transit), never `Rebalancing`.
//!
//! Fresh topics and application ids; without a broker the test says it was skipped.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{MINUTE, count_in_minute};
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{
    HostInfo, KafkaStreams, KvStore, LagInfo, ProcessResult, Processor, ProcessorContext, QueryError,
    ReadOnlyKeyValueStore, ReadOnlyWindowStore, Record, Replica, SourceConfig, Stores, StreamsConfig,
    Topology, WindowStore, default_partition,
};
use streams_test_utils::kafka::{self, ProduceRecord};
use streams_test_utils::queries::retry;

const PARTITIONS: i32 = 4;
const KEYS: usize = 400;
const ROUNDS: usize = 3;
const DAY: Duration = Duration::from_secs(86_400);

type Kv = ReadOnlyKeyValueStore<StringSerde, StringSerde>;
type Win = ReadOnlyWindowStore<StringSerde, U64Serde>;

/// Puts each record's value under its key, and counts records per key and minute.
struct Put {
    kv: KvStore<StringSerde, StringSerde>,
    minutes: WindowStore<StringSerde, U64Serde>,
}

impl Processor<String, String> for Put {
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, r: Record<String, String>) -> ProcessResult {
        self.kv.put(&r.key, &r.value)?;
        count_in_minute(&self.minutes, &r.key, r.timestamp)?;
        Ok(())
    }
}

fn topology(input: &str) -> Topology {
    let mut b = Topology::builder();
    let src = b.source("src", SourceConfig::new([input], StringSerde, StringSerde));
    let kv = b.store(Stores::persistent_kv("kv", StringSerde, StringSerde).with_caching());
    let minutes = b.store(Stores::persistent_window_store(
        "minutes",
        DAY,
        Duration::from_secs(60),
        false,
        StringSerde,
        U64Serde,
    ));
    let put = b.processor("put", [&src], {
        let (kv, minutes) = (kv.clone(), minutes.clone());
        move |ctx| {
            Ok(Put {
                kv: ctx.store(&kv)?,
                minutes: ctx.store(&minutes)?,
            })
        }
    });
    b.connect(&put, &kv);
    b.connect(&put, &minutes);
    b.build().unwrap()
}

fn config(bootstrap: &str, app_id: &str, state: &Path, endpoint: &str) -> StreamsConfig {
    let state = state.display().to_string();
    StreamsConfig::from_properties([
        ("application.server", endpoint),
        ("application.id", app_id),
        ("bootstrap.servers", bootstrap),
        ("state.dir", &state),
        ("num.stream.threads", "1"),
        ("commit.interval.ms", "100"),
        ("group.protocol", "streams"),
        ("num.standby.replicas", "1"),
    ])
    .unwrap()
}

fn partition_of(key: &str) -> i32 {
    default_partition(key.as_bytes(), PARTITIONS)
}

/// What the input leaves in the stores: every key's last value, and per (key, minute) the
/// number of records.
struct Model {
    values: BTreeMap<String, String>,
    windows: BTreeMap<(String, i64), u64>,
}

/// Writes `ROUNDS` values of every key, one minute apart per round.
fn feed(bootstrap: &str, topic: &str) -> Model {
    let base = kafka::recent_minute(10);
    let mut model = Model {
        values: BTreeMap::new(),
        windows: BTreeMap::new(),
    };
    let mut records = Vec::new();
    for round in 0..ROUNDS {
        for i in 0..KEYS {
            let key = format!("key-{i:04}");
            let value = format!("r{round}-{i}");
            // Two of the three rounds share a minute: some windows count 2.
            let minute = base + MINUTE * (round as i64 / 2);
            let ts = minute + round as i64;
            records.push(
                ProduceRecord::new(&key, &value)
                    .with_partition(partition_of(&key))
                    .with_timestamp(ts),
            );
            model.values.insert(key.clone(), value);
            *model.windows.entry((key, minute)).or_default() += 1;
        }
    }
    kafka::produce(bootstrap, topic, &records, Duration::from_secs(60)).unwrap();
    model
}

struct Instance {
    app: KafkaStreams,
    kv: Kv,
    minutes: Win,
    _state: tempfile::TempDir,
}

fn instance(bootstrap: &str, app_id: &str, input: &str, endpoint: &str) -> Instance {
    let state = tempfile::tempdir().unwrap();
    let config = config(bootstrap, app_id, state.path(), endpoint);
    let mut app = KafkaStreams::new(topology(input), config).unwrap();
    let kv = app.store_named("kv", StringSerde, StringSerde).unwrap();
    let minutes = app.window_store_named("minutes", StringSerde, U64Serde).unwrap();
    app.start().unwrap();
    Instance {
        app,
        kv,
        minutes,
        _state: state,
    }
}

/// The lags of both stores of `i`, if every partition of both has a copy there that is
/// caught up (an active task, or a standby at the changelog's end).
fn caught_up(i: &Instance) -> Option<(BTreeMap<i32, LagInfo>, BTreeMap<i32, LagInfo>)> {
    let kv = i.kv.partition_lags().ok()?;
    let minutes = i.minutes.partition_lags().ok()?;
    let whole = |lags: &BTreeMap<i32, LagInfo>| {
        lags.len() == PARTITIONS as usize
            && lags.values().all(|l| {
                l.offset_lag == Some(0)
                    && (l.replica == Replica::Active || l.replica == Replica::Standby && l.end.is_some())
            })
    };
    (whole(&kv) && whole(&minutes)).then_some((kv, minutes))
}

/// The key-value entries and windows `i` returns, stale or not.
fn read_all(i: &Instance, stale: bool) -> (BTreeMap<String, String>, BTreeMap<(String, i64), u64>) {
    let (kv, minutes) = match stale {
        true => (i.kv.clone().stale_stores(), i.minutes.clone().stale_stores()),
        false => (i.kv.clone(), i.minutes.clone()),
    };
    let values = retry("all", || kv.all().collect::<Result<BTreeMap<_, _>, _>>());
    let windows = retry("window all", || {
        minutes
            .all()
            .map(|r| r.map(|(w, n)| ((w.key, w.start), n)))
            .collect::<Result<BTreeMap<_, _>, _>>()
    });
    (values, windows)
}

/// Waits until both instances hold every partition (active or standby), each copy caught
/// up, the two splitting the active tasks, and every record is processed; the lags of
/// each instance's two stores.
fn settled(instances: &[Instance]) -> Vec<(BTreeMap<i32, LagInfo>, BTreeMap<i32, LagInfo>)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let lags: Vec<_> = instances.iter().filter_map(caught_up).collect();
        let split = lags.len() == 2
            && (0..PARTITIONS).all(|p| {
                let active: Vec<bool> = lags
                    .iter()
                    .map(|(kv, _)| kv[&p].replica == Replica::Active)
                    .collect();
                active == [true, false] || active == [false, true]
            });
        let processed: u64 = instances.iter().map(|i| i.app.processed_records()).sum();
        if split && processed >= (KEYS * ROUNDS) as u64 {
            break lags;
        }
        assert!(
            Instant::now() < deadline,
            "standbys not caught up within 120 s: {:?}",
            instances
                .iter()
                .map(|i| i.kv.partition_lags())
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn standbys_answer_stale_queries_with_their_lag() {
    let Some(bootstrap) = kafka::require_kafka("standbys_answer_stale_queries_with_their_lag") else {
        return;
    };
    common::init_tracing();
    let app_id = kafka::unique_name("stale");
    let input = kafka::unique_name("stale-in");
    kafka::create_topic(&bootstrap, &input, PARTITIONS, &[]).unwrap();
    let model = feed(&bootstrap, &input);
    let endpoints = ["a.example:8080", "b.example:8080"];
    let instances = endpoints.map(|e| instance(&bootstrap, &app_id, &input, e));

    let lags = settled(&instances);

    // Each instance learns where every partition is active and where its standby is.
    let endpoint = |h: &HostInfo| h.endpoint.clone().unwrap_or_default();
    for (n, i) in instances.iter().enumerate() {
        let wanted: Vec<(String, Vec<String>)> = (0..PARTITIONS)
            .map(|p| {
                let owner = usize::from(lags[1].0[&p].replica == Replica::Active);
                (endpoints[owner].to_owned(), vec![endpoints[1 - owner].to_owned()])
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let known: Vec<(String, Vec<String>)> = (0..PARTITIONS)
                .map(|p| {
                    let m = i.app.query_metadata_for_partition("kv", p).unwrap();
                    let active = m.active.as_ref().map(endpoint).unwrap_or_default();
                    (active, m.standbys.iter().map(endpoint).collect())
                })
                .collect();
            if known == wanted {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "instance {n}: metadata {known:?}, want {wanted:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let all = i.app.all_metadata();
        assert!(
            all.iter()
                .all(|m| m.standby_stores.contains("kv") && m.standby_stores.contains("minutes")),
            "{all:?}"
        );
    }

    for (n, (i, (kv_lags, minute_lags))) in instances.iter().zip(&lags).enumerate() {
        let active: BTreeSet<i32> = kv_lags
            .iter()
            .filter(|(_, l)| l.replica == Replica::Active)
            .map(|(p, _)| *p)
            .collect();
        let standby: BTreeSet<i32> = (0..PARTITIONS).filter(|p| !active.contains(p)).collect();
        assert!(!standby.is_empty(), "instance {n} holds standbys");
        for p in &standby {
            assert_eq!(
                minute_lags[p].replica,
                Replica::Standby,
                "instance {n}, window store, partition {p}"
            );
            let kv = kv_lags[p];
            assert!(
                kv.position.is_some() && kv.position == kv.end,
                "instance {n}, partition {p}: {kv:?}"
            );
        }

        // Without stale stores: only the active partitions.
        let own = |p: i32| active.contains(&p);
        let (values, windows) = read_all(i, false);
        let expected: BTreeMap<_, _> = model
            .values
            .iter()
            .filter(|(k, _)| own(partition_of(k)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(values, expected, "instance {n}: active keys");
        let expected: BTreeMap<_, _> = model
            .windows
            .iter()
            .filter(|((k, _), _)| own(partition_of(k)))
            .map(|(k, c)| (k.clone(), *c))
            .collect();
        assert_eq!(windows, expected, "instance {n}: active windows");
        let p = *standby.first().unwrap();
        match i.kv.clone().for_partition(p).get(&"key-0000".to_owned()) {
            Err(QueryError::NotHosted { partition, .. }) => assert_eq!(partition, p),
            other => panic!("instance {n}: a standby partition without stale stores: {other:?}"),
        }

        // With stale stores: everything, standbys included.
        let (values, windows) = read_all(i, true);
        assert_eq!(values, model.values, "instance {n}: every key, stale");
        assert_eq!(windows, model.windows, "instance {n}: every window, stale");
        let kv = i.kv.clone().stale_stores();
        let minutes = i.minutes.clone().stale_stores();
        // A sample of the keys and of the standbys' windows, one by one.
        for (key, value) in model.values.iter().step_by(7) {
            let p = partition_of(key);
            let got = retry("get", || kv.clone().for_partition(p).get(key));
            assert_eq!(
                got.as_ref(),
                Some(value),
                "instance {n}: key {key} of partition {p}"
            );
        }
        let standby_windows = model
            .windows
            .iter()
            .filter(|((k, _), _)| standby.contains(&partition_of(k)));
        for ((key, start), count) in standby_windows.step_by(7) {
            let got = retry("fetch", || minutes.fetch(key, *start));
            assert_eq!(
                got,
                Some(*count),
                "instance {n}: window {key}@{start} of a standby"
            );
        }
        // RocksDB's count is an estimate: only that every copy answered.
        let entries = retry("count", || kv.approximate_num_entries());
        assert!(
            entries > 0,
            "instance {n}: {entries} entries over every partition"
        );
    }
    for mut i in instances {
        assert!(i.app.close(Duration::from_secs(30)), "close");
    }
}

/// Whether `value` is one the input wrote for key number `i`.
fn written(value: &str, i: usize) -> bool {
    (0..ROUNDS).any(|round| value == format!("r{round}-{i}"))
}

#[test]
fn stale_queries_are_answered_through_a_rebalance() {
    let Some(bootstrap) = kafka::require_kafka("stale_queries_are_answered_through_a_rebalance") else {
        return;
    };
    let app_id = kafka::unique_name("stale-rebalance");
    let input = kafka::unique_name("stale-rebalance-in");
    kafka::create_topic(&bootstrap, &input, PARTITIONS, &[]).unwrap();
    let model = feed(&bootstrap, &input);
    let a = instance(&bootstrap, &app_id, &input, "a.example:8080");
    let deadline = Instant::now() + Duration::from_secs(120);
    while a.app.processed_records() < (KEYS * ROUNDS) as u64 {
        assert!(Instant::now() < deadline, "A alone: not processed within 120 s");
        std::thread::sleep(Duration::from_millis(100));
    }

    // B joins: the group rebalances, B restores the tasks it takes, A keeps standbys of
    // them. Meanwhile every stale read of both instances answers (never `Rebalancing`):
    // A, which processed everything, with each key's last value or nothing (a partition
    // in transit); B with some value the input wrote for the key (its restoration may be
    // part-way) or nothing.
    let b = instance(&bootstrap, &app_id, &input, "b.example:8080");
    let sample: Vec<(usize, &String, &String)> = model
        .values
        .iter()
        .enumerate()
        .step_by(37)
        .map(|(i, (k, v))| (i, k, v))
        .collect();
    let (mut reads, mut found_on_b) = (0, 0);
    let instances = [a, b];
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        for (i, key, last) in &sample {
            let on_a = instances[0].kv.clone().stale_stores().get(key);
            match on_a {
                Ok(Some(v)) => assert_eq!(&v, *last, "A: key {key}"),
                Ok(None) => {}
                Err(e) => panic!("A: a stale get of {key} during the rebalance: {e}"),
            }
            match instances[1].kv.clone().stale_stores().get(key) {
                Ok(Some(v)) => {
                    assert!(written(&v, *i), "B: key {key} reads {v}, never written");
                    found_on_b += 1;
                }
                Ok(None) => {}
                Err(e) => panic!("B: a stale get of {key} during the rebalance: {e}"),
            }
            reads += 2;
        }
        if instances.iter().filter_map(caught_up).count() == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the two instances did not settle within 120 s"
        );
    }
    println!("{reads} stale reads during the rebalance, {found_on_b} found on B");
    // Settled: each instance has every key through its standbys.
    let _ = settled(&instances);
    for (n, i) in instances.iter().enumerate() {
        let (values, _) = read_all(i, true);
        assert_eq!(
            values, model.values,
            "instance {n}: every key, stale, after the rebalance"
        );
    }
    for mut i in instances {
        assert!(i.app.close(Duration::from_secs(30)), "close");
    }
}
