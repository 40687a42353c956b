//! A window store against a real broker: its changelog topic is created with
//! `cleanup.policy=compact,delete` and `retention.ms` = retention + 1 day, and an
//! application restarted with an empty state directory restores the windows from it (the
//! store is in memory, so everything it knows after the restart came from the changelog).
//!
//! Fresh topics and application id; without a broker the test says it was skipped.

mod common;

use std::time::Duration;

use common::{MINUTE, PerMinute};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use streams_core::serdes::{Serde, StringSerde, U64Serde};
use streams_core::{KafkaStreams, SinkConfig, SourceConfig, State, Stores, StreamsConfig, Topology};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

const RETENTION: Duration = Duration::from_secs(600);
const T: Duration = Duration::from_secs(60);

fn topology(input: &str, output: &str) -> Topology {
    let mut b = Topology::builder();
    let src = b.source("src", SourceConfig::new([input], StringSerde, StringSerde));
    let windows = b.store(
        Stores::in_memory_window_store(
            "per-minute",
            RETENTION,
            Duration::from_secs(60),
            false,
            StringSerde,
            U64Serde,
        )
        .with_caching(),
    );
    let count = b.processor("count", [&src], {
        let windows = windows.clone();
        move |ctx| {
            Ok(PerMinute {
                windows: ctx.store(&windows)?,
            })
        }
    });
    b.connect(&count, &windows);
    b.sink("out", SinkConfig::topic(output, StringSerde, U64Serde), [&count]);
    b.build().unwrap()
}

fn start(app_id: &str, bootstrap: &str, input: &str, output: &str) -> (KafkaStreams, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let config = StreamsConfig::from_properties([
        ("application.id", app_id.to_owned()),
        ("bootstrap.servers", bootstrap.to_owned()),
        ("state.dir", state.path().display().to_string()),
        ("commit.interval.ms", "100".into()),
    ])
    .unwrap();
    let mut app = KafkaStreams::new(topology(input, output), config).unwrap();
    app.start().unwrap();
    assert!(
        app.wait_for_state(State::Running, T),
        "not running: {:?}",
        app.state()
    );
    (app, state)
}

/// `(key, count)` of the first `n` output records.
fn outputs(bootstrap: &str, topic: &str, n: usize) -> Vec<(String, u64)> {
    kafka::consume_all(bootstrap, topic, ConsumeUntil::Count(n), T, false)
        .unwrap()
        .into_iter()
        .map(|r| {
            let key = r.key_str().unwrap();
            (key, U64Serde.deserialize(r.value.as_deref().unwrap()).unwrap())
        })
        .collect()
}

#[test]
fn the_window_changelog_is_compact_delete_and_a_restart_restores_the_windows() {
    let Some(bootstrap) = kafka::require_kafka("window_store_kafka") else {
        return;
    };
    let app_id = kafka::unique_name("windows");
    let input = kafka::unique_name("windows-in");
    let output = kafka::unique_name("windows-out");
    kafka::create_topic(&bootstrap, &input, 1, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 1, &[]).unwrap();
    let base = kafka::recent_minute(5);
    let at = |k: &str, t: i64| ProduceRecord::new(k, "v").with_timestamp(base + t);

    let (mut app, _state) = start(&app_id, &bootstrap, &input, &output);
    let first = [at("a", 0), at("a", 1_000), at("b", 2_000), at("a", MINUTE + 5)];
    kafka::produce(&bootstrap, &input, &first, T).unwrap();
    let got = outputs(&bootstrap, &output, 4);
    let (m0, m1) = (base, base + MINUTE);
    let want: Vec<(String, u64)> = vec![
        (format!("a@{m0}"), 1),
        (format!("a@{m0}"), 2),
        (format!("b@{m0}"), 1),
        (format!("a@{m1}"), 1),
    ];
    assert_eq!(got, want);
    assert!(app.close(T));

    let changelog = format!("{app_id}-per-minute-changelog");
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let options = AdminOptions::new().request_timeout(Some(T));
    let described = kafka::block_on_timeout(
        admin.describe_configs([&ResourceSpecifier::Topic(&changelog)], &options),
        T,
    )
    .expect("describe_configs timed out")
    .unwrap();
    let config = described.into_iter().next().unwrap().unwrap();
    let value = |name: &str| config.get(name).and_then(|e| e.value.clone());
    assert_eq!(value("cleanup.policy").as_deref(), Some("compact,delete"));
    assert_eq!(value("retention.ms"), Some((600_000 + 86_400_000).to_string()));

    // A fresh state directory: the in-memory windows come back from the changelog.
    let (mut app, _state) = start(&app_id, &bootstrap, &input, &output);
    let second = [at("a", 30_000), at("b", MINUTE + 10)];
    kafka::produce(&bootstrap, &input, &second, T).unwrap();
    let got = outputs(&bootstrap, &output, 6);
    assert_eq!(
        got[4..],
        [(format!("a@{m0}"), 3), (format!("b@{m1}"), 1)],
        "a's first window counts on from its restored 2"
    );
    assert!(app.close(T));
}
