//! Interactive queries of window and session stores against a real broker.
//!
//! A Processor API topology counts the records of a 4-partition topic per key and minute in
//! a window store (in memory, behind a cache) and writes one session per record into a
//! session store; two stream threads run its tasks. Once every record is processed, every
//! query is compared with a model of what was written: `fetch` of every window, `fetch_range`
//! forward and backward per key, `fetch_all` and `all` in the store's order, read in small
//! chunks; `fetch` and `find_sessions` of every key. Queries of the wrong kind fail with
//! `WrongKind`.
//!
//! Then a second instance joins while the test thread reads the window store of the first
//! back to back: every answer is whole (each input partition's windows all there, with their
//! counts, or none) or fails with a retriable error.
//!
//! Fresh topics and application ids; without a broker the tests say they were skipped.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use common::{MINUTE, count_in_minute};
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{
    KafkaStreams, ProcessResult, Processor, ProcessorContext, QueryError, ReadOnlyWindowStore, Record,
    SessionStore, SourceConfig, State, Stores, StreamsConfig, Topology, WindowStore, Windowed,
    default_partition,
};
use streams_test_utils::kafka::{self, ProduceRecord};
use streams_test_utils::queries::retry;

const PARTITIONS: i32 = 4;
const KEYS: usize = 40;
const PER_KEY: i64 = 12;
/// A minute-aligned base time ten minutes ago (recent: see `kafka::recent_minute`).
static BASE: LazyLock<i64> = LazyLock::new(|| kafka::recent_minute(10));
const DAY: Duration = Duration::from_secs(86_400);

/// Windows: (key, start) -> count. Sessions: (key, end, start) -> value.
type Windows = BTreeMap<(String, i64), u64>;
type Sessions = BTreeMap<(String, i64, i64), u64>;
type Entry = (Windowed<String>, u64);

/// Counts records per key and minute; puts one session per record.
struct Count {
    windows: WindowStore<StringSerde, U64Serde>,
    sessions: SessionStore<StringSerde, U64Serde>,
}

impl Processor<String, String> for Count {
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, r: Record<String, String>) -> ProcessResult {
        count_in_minute(&self.windows, &r.key, r.timestamp)?;
        let (session, value) = session_of(&r.key, r.timestamp, &r.value);
        self.sessions.put(&session, &value)?;
        Ok(())
    }
}

/// The session a record writes: from its time to a few seconds later, with the record's
/// number as the value.
fn session_of(key: &str, ts: i64, value: &str) -> (Windowed<String>, u64) {
    let j: u64 = value.parse().unwrap_or(0);
    let end = ts + 1_000 * (j as i64 % 3);
    let w = Windowed {
        key: key.to_owned(),
        start: ts,
        end,
    };
    (w, j)
}

fn window_builder() -> streams_core::state::WindowStoreBuilder<StringSerde, U64Serde> {
    Stores::in_memory_window_store(
        "per-minute",
        DAY,
        Duration::from_secs(60),
        false,
        StringSerde,
        U64Serde,
    )
    .with_caching()
}

fn topology(input: &str) -> Topology {
    let mut b = Topology::builder();
    let src = b.source("src", SourceConfig::new([input], StringSerde, StringSerde));
    let windows = b.store(window_builder());
    let sessions = b.store(Stores::in_memory_session_store(
        "sessions",
        DAY,
        StringSerde,
        U64Serde,
    ));
    let count = b.processor("count", [&src], {
        let (windows, sessions) = (windows.clone(), sessions.clone());
        move |ctx| {
            Ok(Count {
                windows: ctx.store(&windows)?,
                sessions: ctx.store(&sessions)?,
            })
        }
    });
    b.connect(&count, &windows);
    b.connect(&count, &sessions);
    b.build().unwrap()
}

fn config(bootstrap: &str, app_id: &str, state: &Path) -> StreamsConfig {
    let state = state.display().to_string();
    StreamsConfig::from_properties([
        ("application.id", app_id),
        ("bootstrap.servers", bootstrap),
        ("state.dir", &state),
        ("num.stream.threads", "2"),
        ("commit.interval.ms", "100"),
    ])
    .unwrap()
}

fn partition_of(key: &str) -> i32 {
    default_partition(key.as_bytes(), PARTITIONS)
}

/// Writes `PER_KEY` records per key, 20 s apart, and returns the models.
fn feed(bootstrap: &str, topic: &str) -> (Windows, Sessions) {
    let (mut windows, mut sessions) = (Windows::new(), Sessions::new());
    let mut records = Vec::new();
    for i in 0..KEYS {
        let key = format!("k{i:02}");
        for j in 0..PER_KEY {
            let ts = *BASE + j * 20_000 + i as i64;
            *windows
                .entry((key.clone(), ts - ts.rem_euclid(MINUTE)))
                .or_default() += 1;
            let (s, v) = session_of(&key, ts, &j.to_string());
            sessions.insert((key.clone(), s.end, s.start), v);
            records.push(
                ProduceRecord::new(&key, j.to_string())
                    .with_partition(partition_of(&key))
                    .with_timestamp(ts),
            );
        }
    }
    kafka::produce(bootstrap, topic, &records, Duration::from_secs(60)).unwrap();
    (windows, sessions)
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start(app: &mut KafkaStreams, records: u64) {
    app.start().unwrap();
    // The bound of interactive_queries_kafka's same wait: two threads joining the group and
    // settling on two tasks each took over 30 s on a 2-core machine also building in release.
    wait_until("processing the input", Duration::from_secs(60), || {
        app.processed_records() >= records
            && app.state() == State::Running
            && common::two_threads_share(app, 4.0)
    });
}

fn window(key: &str, start: i64) -> Windowed<String> {
    Windowed {
        key: key.to_owned(),
        start,
        end: start + MINUTE,
    }
}

/// The model's windows in the store's order: by segment of the start, then key, then start.
fn in_store_order(model: &Windows, from: i64, to: i64) -> Vec<Entry> {
    let interval = window_builder().segment_interval_ms();
    let mut e: Vec<_> = model
        .iter()
        .filter(|((_, s), _)| (from..=to).contains(s))
        .map(|((k, s), n)| (window(k, *s), *n))
        .collect();
    e.sort_by_key(|(w, _)| (w.start.div_euclid(interval), w.key.clone(), w.start));
    e
}

fn collect(c: impl Iterator<Item = Result<Entry, QueryError>>) -> Result<Vec<Entry>, QueryError> {
    c.collect()
}

#[test]
fn window_and_session_stores_answer_every_query_as_written() {
    let Some(bootstrap) = kafka::require_kafka("window_queries_kafka reads") else {
        return;
    };
    let (app_id, input) = (kafka::unique_name("wq"), kafka::unique_name("wq-in"));
    kafka::create_topic(&bootstrap, &input, PARTITIONS, &[]).unwrap();
    let (windows, sessions) = feed(&bootstrap, &input);
    let state = tempfile::tempdir().unwrap();
    let mut app = KafkaStreams::new(topology(&input), config(&bootstrap, &app_id, state.path())).unwrap();
    let ws = app
        .window_store_named("per-minute", StringSerde, U64Serde)
        .unwrap();
    let ss = app
        .session_store_named("sessions", StringSerde, U64Serde)
        .unwrap();
    for (r, name, kind, asked) in [
        (
            app.store_named("per-minute", StringSerde, U64Serde).err(),
            "per-minute",
            "window",
            "key-value",
        ),
        (
            app.window_store_named("sessions", StringSerde, U64Serde).err(),
            "sessions",
            "session",
            "window",
        ),
        (
            app.session_store_named("per-minute", StringSerde, U64Serde).err(),
            "per-minute",
            "window",
            "session",
        ),
    ] {
        match r {
            Some(QueryError::WrongKind {
                store,
                kind: k,
                asked: a,
            }) => {
                assert_eq!((store.as_str(), k.as_str(), a.as_str()), (name, kind, asked));
            }
            other => panic!("{name} as {asked}: {other:?}"),
        }
    }
    start(&mut app, KEYS as u64 * PER_KEY as u64);

    for ((k, s), n) in &windows {
        assert_eq!(retry("fetch", || ws.fetch(k, *s)), Some(*n), "fetch({k}, {s})");
    }
    assert_eq!(
        retry("fetch", || ws.fetch(&"k00".to_owned(), *BASE - MINUTE)),
        None
    );
    assert_eq!(retry("fetch", || ws.fetch(&"nope".to_owned(), *BASE)), None);
    let (from, to) = (*BASE + MINUTE, *BASE + 3 * MINUTE);
    for i in 0..KEYS {
        let key = format!("k{i:02}");
        let want: Vec<Entry> = windows
            .range((key.clone(), from)..=(key.clone(), to))
            .map(|((k, s), n)| (window(k, *s), *n))
            .collect();
        let got = retry("fetch_range", || {
            collect(ws.fetch_range(&key, from, to)?.chunk_size(2))
        });
        assert_eq!(got, want, "fetch_range({key})");
        let back = retry("backward", || {
            collect(ws.backward_fetch_range(&key, from, to)?.chunk_size(1))
        });
        assert_eq!(
            back,
            want.into_iter().rev().collect::<Vec<_>>(),
            "backward_fetch_range({key})"
        );
    }
    let all = in_store_order(&windows, i64::MIN, i64::MAX);
    assert_eq!(retry("all", || collect(ws.all().chunk_size(7))), all);
    let back: Vec<Entry> = all.iter().rev().cloned().collect();
    assert_eq!(
        retry("backward_all", || collect(ws.backward_all().chunk_size(5))),
        back
    );
    let some = in_store_order(&windows, from, to);
    assert_eq!(
        retry("fetch_all", || collect(ws.fetch_all(from, to).chunk_size(3))),
        some
    );
    let mut c = ws.fetch_all(from, to).chunk_size(1000);
    let chunk = retry("next_chunk", || c.next_chunk()).unwrap_or_default();
    assert_eq!(chunk, some, "one chunk holds the whole range");

    for i in 0..KEYS {
        let key = format!("k{i:02}");
        let of_key: Vec<Entry> = sessions
            .range((key.clone(), i64::MIN, i64::MIN)..=(key.clone(), i64::MAX, i64::MAX))
            .map(|((k, e, s), v)| {
                (
                    Windowed {
                        key: k.clone(),
                        start: *s,
                        end: *e,
                    },
                    *v,
                )
            })
            .collect();
        assert_eq!(
            retry("fetch", || collect(ss.fetch(&key)?.chunk_size(4))),
            of_key,
            "fetch({key})"
        );
        let (earliest_end, latest_start) = (*BASE + 65_000, *BASE + 150_000);
        let want: Vec<Entry> = of_key
            .iter()
            .filter(|(w, _)| w.end >= earliest_end && w.start <= latest_start)
            .cloned()
            .collect();
        let got = retry("find", || {
            collect(ss.find_sessions(&key, earliest_end, latest_start)?.chunk_size(2))
        });
        assert_eq!(got, want, "find_sessions({key})");
    }
    assert!(retry("fetch", || collect(ss.fetch(&"nope".to_owned())?)).is_empty());
    assert!(app.close(Duration::from_secs(30)));
}

/// Whether `entries` is a whole answer of the window store: each entry as written, and of
/// every input partition either all windows or none. The partitions present.
fn check_whole(entries: &[Entry], model: &Windows) -> Result<BTreeSet<i32>, String> {
    let mut got = [0usize; PARTITIONS as usize];
    for (w, n) in entries {
        if model.get(&(w.key.clone(), w.start)) != Some(n) || w.end != w.start + MINUTE {
            return Err(format!(
                "{w:?} = {n}, written {:?}",
                model.get(&(w.key.clone(), w.start))
            ));
        }
        got[partition_of(&w.key) as usize] += 1;
    }
    let mut size = [0usize; PARTITIONS as usize];
    for (k, _) in model.keys() {
        size[partition_of(k) as usize] += 1;
    }
    let mut present = BTreeSet::new();
    for p in 0..PARTITIONS as usize {
        if got[p] == size[p] {
            present.insert(p as i32);
        } else if got[p] != 0 {
            return Err(format!(
                "partition {p}: {} of its {} windows (a partial answer)",
                got[p], size[p]
            ));
        }
    }
    Ok(present)
}

fn read_whole(
    store: &ReadOnlyWindowStore<StringSerde, U64Serde>,
    model: &Windows,
    errors: &mut usize,
) -> Option<BTreeSet<i32>> {
    match collect(store.all().chunk_size(50)) {
        Ok(e) => Some(check_whole(&e, model).unwrap_or_else(|e| panic!("{e}"))),
        Err(e) if e.is_retriable() => {
            *errors += 1;
            // Back off a little before asking again.
            std::thread::sleep(Duration::from_millis(5));
            None
        }
        Err(e) => panic!("all(): {e}"),
    }
}

#[test]
fn window_queries_while_a_second_instance_joins_are_whole_or_rebalancing() {
    let Some(bootstrap) = kafka::require_kafka("window_queries_kafka rebalance") else {
        return;
    };
    let (app_id, input) = (kafka::unique_name("wq"), kafka::unique_name("wq-in"));
    kafka::create_topic(&bootstrap, &input, PARTITIONS, &[]).unwrap();
    let (windows, _) = feed(&bootstrap, &input);
    let (sa, sb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = KafkaStreams::new(topology(&input), config(&bootstrap, &app_id, sa.path())).unwrap();
    let wa = a.window_store_named("per-minute", StringSerde, U64Serde).unwrap();
    start(&mut a, KEYS as u64 * PER_KEY as u64);
    let mut errors = 0;
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    assert_eq!(read_whole(&wa, &windows, &mut errors), Some(all.clone()));

    let mut b: KafkaStreams =
        KafkaStreams::new(topology(&input), config(&bootstrap, &app_id, sb.path())).unwrap();
    let wb = b.window_store_named("per-minute", StringSerde, U64Serde).unwrap();
    b.start().unwrap();
    let (mut answers, mut settled) = (0, false);
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline && !settled {
        let pa = read_whole(&wa, &windows, &mut errors);
        let pb = read_whole(&wb, &windows, &mut errors);
        answers += usize::from(pa.is_some()) + usize::from(pb.is_some());
        if let (Some(pa), Some(pb)) = (pa, pb) {
            let union: BTreeSet<i32> = pa.union(&pb).copied().collect();
            settled = !pb.is_empty() && pa.is_disjoint(&pb) && union == all;
        }
    }
    println!("{answers} whole answers, {errors} retriable errors while B joined");
    assert!(answers > 0, "no whole answer while B joined");
    assert!(settled, "A and B never split the partitions between them");
    assert!(b.close(Duration::from_secs(30)));
    assert!(a.close(Duration::from_secs(30)));
}
