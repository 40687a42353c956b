//! Interactive queries of the DSL's stores against a real broker: a table and a windowed
//! count, both named by `Materialized`, both storing `ValueAndTimestamp`s.
//!
//! Read with their plain value serdes, the stores answer the plain values; read with
//! `ValueAndTimestampSerde`, the values with their timestamps (a table row's record
//! timestamp; a window's latest record timestamp). Every answer is compared with a model of
//! what was written. A key-value query of the window store fails with `WrongKind`.
//! Skipped without a broker (`STREAMS_TEST_BOOTSTRAP`), failed then if
//! `STREAMS_REQUIRE_KAFKA=1`.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_core::{KafkaStreams, QueryError, State, StreamsConfig, default_partition};
use streams_dsl::{
    Consumed, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows, ValueAndTimestamp,
    ValueAndTimestampSerde, Windowed, WindowedSerde,
};
use streams_test_utils::kafka::{self, ProduceRecord};
use streams_test_utils::queries::retry;

const PARTITIONS: i32 = 3;
const MINUTE: i64 = 60_000;
/// A minute-aligned base time ten minutes ago (recent: see `kafka::recent_minute`).
static BASE: LazyLock<i64> = LazyLock::new(|| kafka::recent_minute(10));
const SIZE: Duration = Duration::from_secs(60);

fn config(bootstrap: &str, app_id: &str, state_dir: &std::path::Path) -> StreamsConfig {
    let dir = state_dir.display().to_string();
    StreamsConfig::from_properties([
        ("application.id", app_id),
        ("bootstrap.servers", bootstrap),
        ("state.dir", dir.as_str()),
        ("commit.interval.ms", "100"),
    ])
    .unwrap()
}

fn partition_of(key: &str) -> i32 {
    default_partition(key.as_bytes(), PARTITIONS)
}

#[test]
fn dsl_table_and_windowed_count_answer_plain_and_timestamped_queries() {
    let Some(bootstrap) = kafka::require_kafka("dsl_queries_kafka") else {
        return;
    };
    let app_id = kafka::unique_name("dsl-iq");
    let (users, clicks, counts) = (
        kafka::unique_name("users"),
        kafka::unique_name("clicks"),
        kafka::unique_name("counts"),
    );
    for topic in [&users, &clicks, &counts] {
        kafka::create_topic(&bootstrap, topic, PARTITIONS, &[]).unwrap();
    }

    let b = StreamsBuilder::new();
    let table_ref = b
        .table(
            &users,
            Materialized::with(StringSerde, StringSerde).named("users-table"),
        )
        .store_ref();
    b.stream([clicks.as_str()], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .windowed_by(TimeWindows::of_size_with_grace(SIZE, Duration::from_secs(3600)))
        .count(Materialized::as_("clicks-per-minute"))
        .to_stream()
        .to(
            &counts,
            Produced::with(WindowedSerde::new(StringSerde, SIZE), NullableSerde(U64Serde)),
        );
    let topology = b.build().unwrap();

    // Table rows: 30 users, 10 of them updated later; each row with its record timestamp.
    let mut rows: BTreeMap<String, (String, i64)> = BTreeMap::new();
    let mut records = Vec::new();
    for (round, n) in [(0, 30), (1, 10)] {
        for i in 0..n {
            let (key, value, ts) = (
                format!("u{i:02}"),
                format!("name-{i}-{round}"),
                *BASE + round * 1000 + i,
            );
            records.push(
                ProduceRecord::new(&key, &value)
                    .with_partition(partition_of(&key))
                    .with_timestamp(ts),
            );
            rows.insert(key, (value, ts));
        }
    }
    kafka::produce(&bootstrap, &users, &records, Duration::from_secs(60)).unwrap();
    // Clicks: 12 pages, clicked 10 times each over 4 minutes, in time order.
    let mut windows: BTreeMap<(String, i64), (u64, i64)> = BTreeMap::new();
    let mut records = Vec::new();
    for j in 0..10i64 {
        for p in 0..12i64 {
            let (key, ts) = (format!("page-{p:02}"), *BASE + j * 25_000 + p);
            records.push(
                ProduceRecord::new(&key, "x")
                    .with_partition(partition_of(&key))
                    .with_timestamp(ts),
            );
            let w = windows.entry((key, ts - ts.rem_euclid(MINUTE))).or_default();
            *w = (w.0 + 1, w.1.max(ts));
        }
    }
    kafka::produce(&bootstrap, &clicks, &records, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    let mut app = KafkaStreams::new(topology, config(&bootstrap, &app_id, state.path())).unwrap();
    app.start().unwrap();
    let plain = app.store_named("users-table", StringSerde, StringSerde).unwrap();
    let counts = app
        .window_store_named("clicks-per-minute", StringSerde, U64Serde)
        .unwrap();
    let want_rows: Vec<(String, String)> = rows.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect();
    // Every record processed: the stores hold what the models do.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let table = plain.all().chunk_size(7).collect::<Result<Vec<_>, _>>();
        let windowed = counts.all().collect::<Result<Vec<_>, _>>();
        let done = match (&table, &windowed) {
            (Ok(t), Ok(w)) => {
                *t == want_rows && w.iter().map(|(_, n)| n).sum::<u64>() == records.len() as u64
            }
            _ => false,
        };
        if done && app.state() == State::Running {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processing: {} processed; table {table:?}",
            app.processed_records()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // The table, plain and timestamped.
    let stamped = app
        .store_named("users-table", StringSerde, ValueAndTimestampSerde(StringSerde))
        .unwrap();
    for (k, (v, ts)) in &rows {
        assert_eq!(retry("get", || plain.get(k)).as_ref(), Some(v), "get({k})");
        let want = ValueAndTimestamp::new(v.clone(), *ts);
        assert_eq!(
            retry("get", || stamped.get(k)),
            Some(want),
            "timestamped get({k})"
        );
    }
    // The table's typed handle (the DSL's serdes, which read past the timestamp themselves).
    let typed = app
        .store(table_ref.as_ref().expect("a table's store handle"))
        .unwrap();
    for (k, (v, _)) in &rows {
        assert_eq!(retry("get", || typed.get(k)).as_ref(), Some(v), "typed get({k})");
    }
    let want = want_rows;
    assert_eq!(
        retry("all", || plain.all().chunk_size(7).collect::<Result<Vec<_>, _>>()),
        want
    );

    // The windowed count, plain and timestamped.
    let counts = app
        .window_store_named("clicks-per-minute", StringSerde, U64Serde)
        .unwrap();
    let stamped = app
        .window_store_named("clicks-per-minute", StringSerde, ValueAndTimestampSerde(U64Serde))
        .unwrap();
    for ((k, start), (n, ts)) in &windows {
        assert_eq!(
            retry("fetch", || counts.fetch(k, *start)),
            Some(*n),
            "fetch({k}, {start})"
        );
        let want = ValueAndTimestamp::new(*n, *ts);
        assert_eq!(
            retry("fetch", || stamped.fetch(k, *start)),
            Some(want),
            "timestamped fetch"
        );
    }
    // A model window as the store answers it: its windowed key and count.
    let counted = |((k, s), (n, _)): (&(String, i64), &(u64, i64))| {
        let w = Windowed {
            key: k.clone(),
            start: *s,
            end: s + MINUTE,
        };
        (w, *n)
    };
    let key = "page-03".to_owned();
    let want: Vec<(Windowed<String>, u64)> = windows
        .iter()
        .filter(|((k, _), _)| *k == key)
        .map(counted)
        .collect();
    let got = retry("fetch_range", || {
        counts
            .fetch_range(&key, *BASE, *BASE + 10 * MINUTE)?
            .chunk_size(2)
            .collect::<Result<Vec<_>, _>>()
    });
    assert_eq!(got, want);
    let mut all = retry("all", || {
        counts.all().chunk_size(5).collect::<Result<Vec<_>, _>>()
    });
    all.sort_by(|a, b| (&a.0.key, a.0.start).cmp(&(&b.0.key, b.0.start)));
    let want: Vec<(Windowed<String>, u64)> = windows.iter().map(counted).collect();
    assert_eq!(all, want);

    match app.store_named("clicks-per-minute", StringSerde, U64Serde) {
        Err(QueryError::WrongKind { kind, asked, .. }) => {
            assert_eq!(
                (kind.as_str(), asked.as_str()),
                ("timestamped window", "key-value")
            );
        }
        other => panic!("a key-value query of a window store: {other:?}"),
    }
    assert!(app.close(Duration::from_secs(30)));
}
