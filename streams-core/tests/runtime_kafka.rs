//! The runtime against the real broker: keyed counts over 4 partitions with 2 threads,
//! restart from local state, rebuild from the changelog after wiping the state directory,
//! two instances sharing the work, and poison pills routed to the dead-letter topic.
//!
//! Every test uses a fresh application id and fresh topics. Without a broker
//! (`STREAMS_TEST_BOOTSTRAP`) the tests say they were skipped; `scripts/test.sh` always
//! provides one.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::testing::{self, ConsumeUntil, ProduceRecord};
use streams_core::{
    KafkaStreams, KvStore, ProcessResult, Processor, ProcessorContext, Record, State, Stores, StreamsConfig,
    Topology,
};

/// Counts records per key in a RocksDB store (cached, logged) and forwards each new count.
#[derive(Default)]
struct Count {
    store: Option<KvStore<StringSerde, U64Serde>>,
}

impl Processor<String, String, String, u64> for Count {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, u64>) -> ProcessResult {
        self.store = Some(ctx.kv_store("counts")?);
        Ok(())
    }
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let store = self.store.as_ref().ok_or("init")?;
        let n = store.get(&r.key)?.unwrap_or(0) + 1;
        store.put(&r.key, &n)?;
        ctx.forward(Record::new(r.key, n, r.timestamp))
    }
}

fn count_topology(input: &str, output: &str) -> Topology {
    let mut b = Topology::builder();
    b.add_source("src", [input], StringSerde, StringSerde)
        .add_processor("count", Count::default, ["src"])
        .add_state_store(
            Stores::persistent_kv("counts", StringSerde, U64Serde).with_caching(),
            ["count"],
        )
        .add_sink("out", output, StringSerde, U64Serde, ["count"]);
    b.build().unwrap()
}

fn config(
    bootstrap: &str,
    app: &str,
    state_dir: &Path,
    threads: usize,
    extra: &[(&str, &str)],
) -> StreamsConfig {
    let threads = threads.to_string();
    let dir = state_dir.display().to_string();
    let mut props: Vec<(&str, &str)> = vec![
        ("application.id", app),
        ("bootstrap.servers", bootstrap),
        ("num.stream.threads", &threads),
        ("state.dir", &dir),
        ("commit.interval.ms", "200"),
        ("consumer.session.timeout.ms", "6000"),
        ("consumer.heartbeat.interval.ms", "500"),
    ];
    props.extend_from_slice(extra);
    StreamsConfig::from_properties(props).unwrap()
}

fn produce_words(bootstrap: &str, topic: &str, keys: usize, per_key: usize, tag: &str) {
    let records: Vec<ProduceRecord> = (0..per_key)
        .flat_map(|i| (0..keys).map(move |k| ProduceRecord::new(format!("key-{k}"), format!("{tag}-{i}"))))
        .collect();
    for chunk in records.chunks(20_000) {
        testing::produce(bootstrap, topic, chunk, Duration::from_secs(60)).unwrap();
    }
}

/// Reads the output until the latest count of every key is `expected`, or fails.
fn wait_for_counts(
    bootstrap: &str,
    topic: &str,
    keys: usize,
    expected: u64,
    timeout: Duration,
) -> HashMap<String, u64> {
    let deadline = Instant::now() + timeout;
    loop {
        let records = testing::consume_all(
            bootstrap,
            topic,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            false,
        )
        .unwrap();
        let mut latest: HashMap<String, u64> = HashMap::new();
        for r in &records {
            let v = u64::from_be_bytes(r.value.as_deref().unwrap().try_into().unwrap());
            let e = latest.entry(r.key_str().unwrap()).or_insert(0);
            *e = (*e).max(v);
        }
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

fn start(topology: Topology, config: StreamsConfig) -> KafkaStreams {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut app = KafkaStreams::new(topology, config).unwrap();
    app.start().unwrap();
    assert!(
        app.wait_for_state(State::Running, Duration::from_secs(60)),
        "state {:?}",
        app.state()
    );
    app
}

#[test]
fn keyed_count_restart_and_rebuild_from_changelog() {
    let Some(bootstrap) = testing::require_kafka("keyed_count_restart_and_rebuild_from_changelog") else {
        return;
    };
    let app_id = testing::unique_name("count-app");
    let input = testing::unique_name("words");
    let output = testing::unique_name("counts");
    testing::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    testing::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    let state = tempfile::tempdir().unwrap();
    const KEYS: usize = 1000;

    // 100,000 records on 4 partitions, 2 threads.
    produce_words(&bootstrap, &input, KEYS, 100, "a");
    let mut app = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, state.path(), 2, &[]),
    );
    wait_for_counts(&bootstrap, &output, KEYS, 100, Duration::from_secs(120));
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(app.state(), State::NotRunning);

    // Restart on the same state: counts continue without re-reading the input.
    produce_words(&bootstrap, &input, KEYS, 10, "b");
    let mut app = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, state.path(), 2, &[]),
    );
    wait_for_counts(&bootstrap, &output, KEYS, 110, Duration::from_secs(120));
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(
        app.processed_records(),
        (KEYS * 10) as u64,
        "only the new records are processed"
    );

    // Wipe the state directory: the stores are rebuilt from the changelog.
    drop(state);
    let fresh = tempfile::tempdir().unwrap();
    produce_words(&bootstrap, &input, KEYS, 5, "c");
    let mut app = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, fresh.path(), 1, &[]),
    );
    wait_for_counts(&bootstrap, &output, KEYS, 115, Duration::from_secs(120));
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(app.processed_records(), (KEYS * 5) as u64);
}

#[test]
fn two_instances_share_the_partitions_and_hand_over_state() {
    let Some(bootstrap) = testing::require_kafka("two_instances_share_the_partitions_and_hand_over_state")
    else {
        return;
    };
    let app_id = testing::unique_name("shared-app");
    let input = testing::unique_name("words");
    let output = testing::unique_name("counts");
    testing::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    testing::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    const KEYS: usize = 200;
    let (d1, d2, d3) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );

    let mut a = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, d1.path(), 1, &[]),
    );
    let mut b = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, d2.path(), 1, &[]),
    );
    produce_words(&bootstrap, &input, KEYS, 20, "a");
    wait_for_counts(&bootstrap, &output, KEYS, 20, Duration::from_secs(120));
    assert!(
        a.processed_records() > 0 && b.processed_records() > 0,
        "both instances worked"
    );

    // One leaves: the other takes its tasks over, with their state (from the changelog).
    assert!(a.close(Duration::from_secs(60)));
    produce_words(&bootstrap, &input, KEYS, 10, "b");
    wait_for_counts(&bootstrap, &output, KEYS, 30, Duration::from_secs(120));

    // A third joins mid-run.
    let mut c = start(
        count_topology(&input, &output),
        config(&bootstrap, &app_id, d3.path(), 1, &[]),
    );
    produce_words(&bootstrap, &input, KEYS, 10, "c");
    wait_for_counts(&bootstrap, &output, KEYS, 40, Duration::from_secs(120));
    assert!(b.close(Duration::from_secs(60)));
    assert!(c.close(Duration::from_secs(60)));
}

#[test]
fn poison_pills_go_to_the_dead_letter_topic() {
    let Some(bootstrap) = testing::require_kafka("poison_pills_go_to_the_dead_letter_topic") else {
        return;
    };
    let app_id = testing::unique_name("dlq-app");
    let input = testing::unique_name("numbers");
    let output = testing::unique_name("numbers-out");
    let dlq = testing::unique_name("dlq");
    for t in [&input, &output, &dlq] {
        testing::create_topic(&bootstrap, t, 2, &[]).unwrap();
    }
    // 1% of the records are not 8-byte numbers.
    let records: Vec<ProduceRecord> = (0..10_000u64)
        .map(|i| {
            if i % 100 == 42 {
                ProduceRecord::new(format!("k{i}"), format!("poison-{i}"))
            } else {
                ProduceRecord::new(format!("k{i}"), i.to_be_bytes())
            }
        })
        .collect();
    testing::produce(&bootstrap, &input, &records, Duration::from_secs(60)).unwrap();
    let mut b = Topology::builder();
    b.add_source("src", [input.as_str()], StringSerde, U64Serde)
        .add_sink("out", &output, StringSerde, U64Serde, ["src"]);
    let state = tempfile::tempdir().unwrap();
    let extra = [
        ("default.deserialization.exception.handler", "dead_letter_queue"),
        ("errors.dead.letter.queue.topic.name", dlq.as_str()),
    ];
    let mut app = start(
        b.build().unwrap(),
        config(&bootstrap, &app_id, state.path(), 1, &extra),
    );
    let out = testing::consume_all(
        &bootstrap,
        &output,
        ConsumeUntil::Count(9_900),
        Duration::from_secs(120),
        false,
    )
    .unwrap();
    let dead = testing::consume_all(
        &bootstrap,
        &dlq,
        ConsumeUntil::Count(100),
        Duration::from_secs(60),
        false,
    )
    .unwrap();
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(out.len(), 9_900);
    assert_eq!(dead.len(), 100);
    for d in &dead {
        let value = d.value_str().unwrap();
        assert!(value.starts_with("poison-"), "original bytes kept: {value}");
        let header = |name: &str| {
            d.headers
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.clone())
                .map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(
            header(streams_core::handlers::headers::EXCEPTION).as_deref(),
            Some("deserialization")
        );
        assert_eq!(
            header(streams_core::handlers::headers::TOPIC).as_deref(),
            Some(input.as_str())
        );
        assert!(header(streams_core::handlers::headers::OFFSET).is_some());
    }
}

#[test]
fn undeliverable_outputs_go_to_the_dead_letter_topic() {
    let Some(bootstrap) = testing::require_kafka("undeliverable_outputs_go_to_the_dead_letter_topic") else {
        return;
    };
    let app_id = testing::unique_name("dlq-production-app");
    let input = testing::unique_name("sizes");
    let output = testing::unique_name("sizes-out");
    let dlq = testing::unique_name("dlq-production");
    testing::create_topic(&bootstrap, &input, 2, &[]).unwrap();
    testing::create_topic(&bootstrap, &dlq, 2, &[]).unwrap();
    // The output topic takes batches of at most 4,000 bytes: every 50th record (5,000
    // bytes) is rejected by the broker, asynchronously, after the sink sent it.
    testing::create_topic(&bootstrap, &output, 2, &[("max.message.bytes", "4000")]).unwrap();
    let records: Vec<ProduceRecord> = (0..2_000u32)
        .map(|i| {
            let size = if i % 50 == 7 { 5_000 } else { 10 };
            ProduceRecord::new(format!("k{i}"), vec![b'x'; size])
        })
        .collect();
    testing::produce(&bootstrap, &input, &records, Duration::from_secs(60)).unwrap();
    let mut b = Topology::builder();
    b.add_source(
        "src",
        [input.as_str()],
        StringSerde,
        streams_core::serdes::BytesSerde,
    )
    .add_sink(
        "out",
        &output,
        StringSerde,
        streams_core::serdes::BytesSerde,
        ["src"],
    );
    let state = tempfile::tempdir().unwrap();
    let extra = [
        ("production.exception.handler", "dead_letter_queue"),
        ("errors.dead.letter.queue.topic.name", dlq.as_str()),
        // Small records batch up to 3,000 bytes, under the topic's limit.
        ("producer.batch.size", "3000"),
    ];
    let mut app = start(
        b.build().unwrap(),
        config(&bootstrap, &app_id, state.path(), 1, &extra),
    );
    let dead = testing::consume_all(
        &bootstrap,
        &dlq,
        ConsumeUntil::Count(40),
        Duration::from_secs(120),
        false,
    )
    .unwrap();
    let out = testing::consume_all(
        &bootstrap,
        &output,
        ConsumeUntil::Count(1_960),
        Duration::from_secs(120),
        false,
    )
    .unwrap();
    assert_eq!(app.state(), State::Running, "the application goes on");
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(out.len(), 1_960);
    assert!(
        out.iter()
            .all(|r| r.value.as_ref().is_some_and(|v| v.len() == 10))
    );
    assert_eq!(dead.len(), 40);
    for d in &dead {
        assert_eq!(
            d.value.as_ref().map(|v| v.len()),
            Some(5_000),
            "original bytes kept"
        );
        let header = |name: &str| {
            d.headers
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.clone())
                .map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(
            header(streams_core::handlers::headers::EXCEPTION).as_deref(),
            Some("production")
        );
        assert_eq!(
            header(streams_core::handlers::headers::TOPIC).as_deref(),
            Some(output.as_str())
        );
        assert!(
            header(streams_core::handlers::headers::MESSAGE).is_some_and(|m| m.contains("too large")),
            "error header"
        );
    }
}
