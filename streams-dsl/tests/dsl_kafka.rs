//! DSL topologies on the Kafka runtime against the real broker: word count through a
//! repartition topic created at start with the input's partition count, and a stream-table
//! join whose repartition topic takes the table topic's partition count, a stream joined
//! with a global table on two stream threads, and the purge of a repartition topic's
//! committed records. Skipped without a broker (`STREAMS_TEST_BOOTSTRAP`), failed then if `STREAMS_REQUIRE_KAFKA=1`.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use streams_core::StreamsConfig;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};
use streams_test_utils::kafka::{self, ProduceRecord};

#[path = "common/kafka.rs"]
mod broker;

/// Reads `topic` until `done` holds for the string pairs read so far, or fails.
fn wait_for(
    bootstrap: &str,
    topic: &str,
    done: impl Fn(&[(String, Vec<u8>)]) -> bool,
) -> Vec<(String, Vec<u8>)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let records = broker::read_all(bootstrap, topic);
        let pairs: Vec<(String, Vec<u8>)> = records
            .iter()
            .map(|r| (r.key_str().unwrap(), r.value.clone().unwrap_or_default()))
            .collect();
        if done(&pairs) {
            return pairs;
        }
        assert!(
            Instant::now() < deadline,
            "output not reached: {} records",
            pairs.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A fresh application id (prefixed `app`), and fresh input and output topics of 3
/// partitions each.
fn word_topics(bootstrap: &str, app: &str) -> (String, String, String) {
    let app_id = kafka::unique_name(app);
    let input = kafka::unique_name("lines");
    let output = kafka::unique_name("word-counts");
    kafka::create_topic(bootstrap, &input, 3, &[]).unwrap();
    kafka::create_topic(bootstrap, &output, 3, &[]).unwrap();
    (app_id, input, output)
}

#[test]
fn word_count_on_the_broker_through_a_repartition_topic() {
    let Some(bootstrap) = kafka::require_kafka("word_count_on_the_broker_through_a_repartition_topic") else {
        return;
    };
    let (app_id, input, output) = word_topics(&bootstrap, "dsl-wc");

    let b = StreamsBuilder::new();
    b.stream([input.as_str()], Consumed::with(StringSerde, StringSerde))
        .flat_map_values(|_, line| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .group_by(|_, word| word.clone(), Grouped::as_("words"))
        .count(Materialized::as_("counts"))
        .to_stream()
        .to(&output, Produced::with(StringSerde, NullableSerde(U64Serde)));
    let topology = b.build().unwrap();

    // 300 lines of 3 words over 30 distinct words: every word 30 times.
    let lines: Vec<ProduceRecord> = (0..300)
        .map(|i| {
            let words: Vec<String> = (0..3).map(|j| format!("w{}", (i * 3 + j) % 30)).collect();
            ProduceRecord::new(format!("line-{i}"), words.join(" "))
        })
        .collect();
    kafka::produce(&bootstrap, &input, &lines, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    let config = broker::config(&bootstrap, &app_id, state.path());
    let mut app = broker::start(topology, config);
    kafka::wait_for_topic(
        &bootstrap,
        &format!("{app_id}-words-repartition"),
        3,
        Duration::from_secs(10),
    )
    .unwrap();

    let latest = |pairs: &[(String, Vec<u8>)]| {
        let mut latest: HashMap<String, u64> = HashMap::new();
        for (k, v) in pairs {
            let bytes: [u8; 8] = v.as_slice().try_into().unwrap();
            let e = latest.entry(k.clone()).or_insert(0);
            *e = (*e).max(u64::from_be_bytes(bytes));
        }
        latest
    };
    let pairs = wait_for(&bootstrap, &output, |p| {
        let l = latest(p);
        l.len() == 30 && l.values().all(|&n| n == 30)
    });
    let latest = latest(&pairs);
    assert_eq!(latest["w0"], 30);
    assert!(app.close(Duration::from_secs(60)));
}

/// Records of a repartition topic are deleted once their offsets are committed
/// (`repartition.purge.interval.ms`), as Kafka Streams does: once every line is counted and
/// committed, each partition of the repartition topic starts where it ends.
#[test]
fn committed_records_of_repartition_topics_are_purged() {
    let Some(bootstrap) = kafka::require_kafka("committed_records_of_repartition_topics_are_purged") else {
        return;
    };
    let (app_id, input, output) = word_topics(&bootstrap, "dsl-purge");

    let b = StreamsBuilder::new();
    b.stream([input.as_str()], Consumed::with(StringSerde, StringSerde))
        .group_by(|_, word| word.clone(), Grouped::as_("words"))
        .count(Materialized::as_("counts"))
        .to_stream()
        .to(&output, Produced::with(StringSerde, NullableSerde(U64Serde)));
    let topology = b.build().unwrap();
    let words: Vec<ProduceRecord> = (0..200)
        .map(|i| ProduceRecord::new(format!("line-{i}"), format!("w{}", i % 20)))
        .collect();
    kafka::produce(&bootstrap, &input, &words, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    let config = broker::config(&bootstrap, &app_id, state.path())
        .to_builder()
        .repartition_purge_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let mut app = broker::start(topology, config);
    wait_for(&bootstrap, &output, |p| {
        p.iter()
            .filter(|(_, v)| v.as_slice() == 10u64.to_be_bytes())
            .count()
            == 20
    });
    let repartition = format!("{app_id}-words-repartition");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let marks: Vec<(i64, i64)> = (0..3)
            .map(|p| kafka::watermarks(&bootstrap, &repartition, p).unwrap())
            .collect();
        let written: i64 = marks.iter().map(|(_, high)| high).sum();
        assert_eq!(written, 200, "every line went through the repartition topic once");
        if marks.iter().all(|(low, high)| low == high) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the repartition topic was not purged: (low, high) per partition {marks:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(app.close(Duration::from_secs(60)));
}

#[test]
fn stream_table_join_on_the_broker_repartitions_to_the_table_partition_count() {
    let Some(bootstrap) =
        kafka::require_kafka("stream_table_join_on_the_broker_repartitions_to_the_table_partition_count")
    else {
        return;
    };
    let app_id = kafka::unique_name("dsl-join");
    let users = kafka::unique_name("users");
    let clicks = kafka::unique_name("clicks");
    let output = kafka::unique_name("enriched");
    kafka::create_topic(&bootstrap, &users, 2, &[]).unwrap();
    kafka::create_topic(&bootstrap, &clicks, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 2, &[]).unwrap();

    let b = StreamsBuilder::new();
    let table = b.table(
        &users,
        Materialized::as_("users")
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde),
    );
    // Clicks are keyed by session and carry the user id as value: re-keyed, repartitioned.
    b.stream([clicks.as_str()], Consumed::with(StringSerde, StringSerde))
        .select_key(|_, user| user.clone())
        .named("by-user")
        .join(&table, |_, user, name| format!("{user}={name}"))
        .to(&output, Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();

    // Keyed by user: `kafka::produce` places keys by murmur2, as the runtime's sinks do,
    // so the table is co-partitioned with the repartition topic.
    let names: Vec<ProduceRecord> = (0..10)
        .map(|u| ProduceRecord::new(format!("u{u}"), format!("name{u}")))
        .collect();
    kafka::produce(&bootstrap, &users, &names, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    // Starting checks co-partitioning: the repartition topic must get the table's 2
    // partitions, not the 4 of the clicks topic.
    let mut app = broker::start(topology, broker::config(&bootstrap, &app_id, state.path()));
    kafka::wait_for_topic(
        &bootstrap,
        &format!("{app_id}-by-user-repartition"),
        2,
        Duration::from_secs(10),
    )
    .unwrap();
    // Let the table load before the clicks arrive.
    std::thread::sleep(Duration::from_secs(3));
    let clicks_in: Vec<ProduceRecord> = (0..40)
        .map(|i| ProduceRecord::new(format!("session{i}"), format!("u{}", i % 10)))
        .collect();
    kafka::produce(&bootstrap, &clicks, &clicks_in, Duration::from_secs(60)).unwrap();

    let pairs = wait_for(&bootstrap, &output, |p| p.len() >= 40);
    assert_eq!(pairs.len(), 40);
    for (k, v) in &pairs {
        let n = k.trim_start_matches('u');
        assert_eq!(String::from_utf8_lossy(v), format!("{k}=name{n}"));
    }
    assert!(app.close(Duration::from_secs(60)));
}

#[test]
fn join_global_on_the_broker_enriches_every_partition_on_two_threads() {
    let Some(bootstrap) =
        kafka::require_kafka("join_global_on_the_broker_enriches_every_partition_on_two_threads")
    else {
        return;
    };
    let app_id = kafka::unique_name("dsl-global");
    let users = kafka::unique_name("users");
    let orders = kafka::unique_name("orders");
    let output = kafka::unique_name("enriched");
    kafka::create_topic(&bootstrap, &users, 3, &[]).unwrap();
    kafka::create_topic(&bootstrap, &orders, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();

    let b = StreamsBuilder::new();
    let table = b.global_table(
        &users,
        Materialized::as_("users")
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde),
    );
    // Orders are keyed by order id and carry the user id: no repartitioning, the global
    // table is read by user id from every task.
    b.stream([orders.as_str()], Consumed::with(StringSerde, StringSerde))
        .join_global(
            &table,
            |_, user| user.clone(),
            |_, user, name| format!("{user}={name}"),
        )
        .to(&output, Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();

    // Placed round-robin, not by key: a global table needs no co-partitioning.
    let names: Vec<ProduceRecord> = (0..10)
        .map(|u| ProduceRecord::new(format!("u{u}"), format!("name{u}")).with_partition(u % 3))
        .collect();
    kafka::produce(&bootstrap, &users, &names, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    let dir = state.path().display().to_string();
    let config = StreamsConfig::from_properties([
        ("application.id", app_id.as_str()),
        ("bootstrap.servers", bootstrap.as_str()),
        ("state.dir", dir.as_str()),
        ("num.stream.threads", "2"),
        ("commit.interval.ms", "200"),
    ])
    .unwrap();
    let mut app = broker::start(topology, config);
    // Users 10..14 are unknown: their orders are dropped.
    let orders_in: Vec<ProduceRecord> = (0..40)
        .map(|i| ProduceRecord::new(format!("order{i}"), format!("u{}", i % 15)))
        .collect();
    kafka::produce(&bootstrap, &orders, &orders_in, Duration::from_secs(60)).unwrap();
    let known = orders_in.len() / 15 * 10 + (orders_in.len() % 15).min(10);

    let pairs = wait_for(&bootstrap, &output, |p| p.len() >= known);
    assert_eq!(pairs.len(), known);
    for (k, v) in &pairs {
        let i: usize = k.trim_start_matches("order").parse().unwrap();
        let u = i % 15;
        assert!(u < 10, "order {k} of an unknown user joined");
        assert_eq!(String::from_utf8_lossy(v), format!("u{u}=name{u}"));
    }
    assert!(app.close(Duration::from_secs(60)));
}
