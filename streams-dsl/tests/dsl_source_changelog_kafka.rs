//! On the real broker: a table's source topic as its store's changelog
//! (`Optimizations::ALL`, Kafka Streams' `reuse.ktable.source.topics`), and streams of one
//! application starting each where its own offset reset says (`OffsetReset::Latest` for
//! one, the default earliest for the other). Skipped without a broker
//! (`STREAMS_TEST_BOOTSTRAP`), failed then if `STREAMS_REQUIRE_KAFKA=1`.

use std::time::{Duration, Instant};
use streams_core::OffsetReset;
use streams_core::serdes::StringSerde;
use streams_dsl::{Consumed, Materialized, Optimizations, Produced, StreamsBuilder};
use streams_test_utils::kafka::{self, ProduceRecord};

#[path = "common/kafka.rs"]
mod broker;

/// Polls `topic` until `done` holds for its (key, value) strings, or fails after 2 minutes.
fn wait_for(
    bootstrap: &str,
    topic: &str,
    done: impl Fn(&[(String, String)]) -> bool,
) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let records = broker::read_all(bootstrap, topic);
        let pairs: Vec<(String, String)> = records
            .iter()
            .map(|r| {
                let v = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
                (r.key_str().unwrap_or_default(), v)
            })
            .collect();
        if done(&pairs) {
            return pairs;
        }
        assert!(Instant::now() < deadline, "output not reached: {pairs:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Polls until group `app_id` has committed `total` records' worth of offsets on `topic`.
fn wait_committed(bootstrap: &str, app_id: &str, topic: &str, total: i64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let committed = kafka::committed_offsets(bootstrap, app_id, topic, Duration::from_secs(30)).unwrap();
        let sum: i64 = committed.iter().filter_map(|(_, o)| *o).sum();
        if sum >= total {
            return;
        }
        assert!(Instant::now() < deadline, "committed on {topic}: {committed:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn clicks(from: usize, n: usize) -> Vec<ProduceRecord> {
    (from..from + n)
        .map(|i| ProduceRecord::new(format!("u{}", i % 10), format!("click{i}")))
        .collect()
}

#[test]
fn a_table_restores_from_its_source_topic_without_a_changelog() {
    let Some(bootstrap) = kafka::require_kafka("a_table_restores_from_its_source_topic_without_a_changelog")
    else {
        return;
    };
    let app_id = kafka::unique_name("dsl-reuse-source");
    let users = kafka::unique_name("users");
    let clicks_topic = kafka::unique_name("clicks");
    let output = kafka::unique_name("enriched");
    for t in [&users, &clicks_topic, &output] {
        kafka::create_topic(&bootstrap, t, 2, &[]).unwrap();
    }
    let topology = || {
        let b = StreamsBuilder::new().with_optimization(Optimizations::ALL);
        let table = b.table(
            &users,
            Materialized::as_("users")
                .with_key_serde(StringSerde)
                .with_value_serde(StringSerde),
        );
        b.stream([clicks_topic.as_str()], Consumed::with(StringSerde, StringSerde))
            .join(&table, |_, click, name| format!("{click}@{name}"))
            .to(&output, Produced::with(StringSerde, StringSerde));
        b.build().unwrap()
    };
    let mut names: Vec<ProduceRecord> = (0..10)
        .map(|u| ProduceRecord::new(format!("u{u}"), format!("name{u}")))
        .collect();
    // A keyless record: the table drops it, and so must the restore (not as key "").
    names.push(ProduceRecord {
        value: Some(b"nobody".to_vec()),
        ..ProduceRecord::default()
    });
    kafka::produce(&bootstrap, &users, &names, Duration::from_secs(60)).unwrap();

    let first_state = tempfile::tempdir().unwrap();
    let mut app = broker::start(
        topology(),
        broker::config(&bootstrap, &app_id, first_state.path()),
    );
    // The table is loaded once its records' offsets are committed.
    wait_committed(&bootstrap, &app_id, &users, 11);
    kafka::produce(&bootstrap, &clicks_topic, &clicks(0, 10), Duration::from_secs(60)).unwrap();
    wait_for(&bootstrap, &output, |p| p.len() >= 10);
    // Running means the internal topics were created: the store's changelog is not one.
    let changelog = format!("{app_id}-users-changelog");
    assert!(
        kafka::wait_for_topic(&bootstrap, &changelog, 1, Duration::from_secs(2)).is_err(),
        "{changelog} was created"
    );
    assert!(app.close(Duration::from_secs(60)));

    // A new instance with an empty state directory: the committed offsets of `users` are
    // at its end, so the table's rows come only from restoring the store from `users`.
    let second_state = tempfile::tempdir().unwrap();
    let mut app = broker::start(
        topology(),
        broker::config(&bootstrap, &app_id, second_state.path()),
    );
    // The click keyed "" comes first in its partition: once the later clicks are out, it
    // was processed, and it must have found no row.
    let mut late = vec![ProduceRecord::new("", "click-nobody")];
    late.extend(clicks(10, 10));
    kafka::produce(&bootstrap, &clicks_topic, &late, Duration::from_secs(60)).unwrap();
    let pairs = wait_for(&bootstrap, &output, |p| p.len() >= 20);
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(pairs.len(), 20, "{pairs:?}");
    for (user, joined) in &pairs {
        let (click, name) = joined.split_once('@').unwrap();
        let i: usize = click.trim_start_matches("click").parse().unwrap();
        assert_eq!(user, &format!("u{}", i % 10));
        assert_eq!(name, format!("name{}", i % 10));
    }
}

#[test]
fn each_stream_starts_where_its_own_offset_reset_says() {
    let Some(bootstrap) = kafka::require_kafka("each_stream_starts_where_its_own_offset_reset_says") else {
        return;
    };
    let app_id = kafka::unique_name("dsl-latest");
    let latest = kafka::unique_name("latest-in");
    let earliest = kafka::unique_name("earliest-in");
    let output = kafka::unique_name("reset-out");
    for t in [&latest, &earliest, &output] {
        kafka::create_topic(&bootstrap, t, 1, &[]).unwrap();
    }
    let before = |tag: &str| -> Vec<ProduceRecord> {
        (0..3)
            .map(|i| ProduceRecord::new(tag, format!("before{i}")))
            .collect()
    };
    kafka::produce(&bootstrap, &latest, &before("latest"), Duration::from_secs(60)).unwrap();
    kafka::produce(
        &bootstrap,
        &earliest,
        &before("earliest"),
        Duration::from_secs(60),
    )
    .unwrap();
    let b = StreamsBuilder::new();
    let from_latest = b.stream(
        [latest.as_str()],
        Consumed::with(StringSerde, StringSerde).offset_reset(OffsetReset::Latest),
    );
    b.stream([earliest.as_str()], Consumed::with(StringSerde, StringSerde))
        .merge(&from_latest)
        .to(&output, Produced::with(StringSerde, StringSerde));
    let state = tempfile::tempdir().unwrap();
    // Running: the partitions are assigned, at concrete start offsets.
    let mut app = broker::start(
        b.build().unwrap(),
        broker::config(&bootstrap, &app_id, state.path()),
    );
    let after: Vec<ProduceRecord> = (0..2)
        .map(|i| ProduceRecord::new("latest", format!("after{i}")))
        .collect();
    kafka::produce(&bootstrap, &latest, &after, Duration::from_secs(60)).unwrap();
    let pairs = wait_for(&bootstrap, &output, |p| p.len() >= 5);
    assert!(app.close(Duration::from_secs(60)));
    let of = |tag: &str| -> Vec<&str> {
        pairs
            .iter()
            .filter(|(k, _)| k == tag)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(of("earliest"), ["before0", "before1", "before2"]);
    assert_eq!(of("latest"), ["after0", "after1"]);
    assert_eq!(pairs.len(), 5);
}
