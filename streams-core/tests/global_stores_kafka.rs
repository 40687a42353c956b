//! Global stores on the real broker: orders on four partitions, processed by two threads,
//! enriched from a global store of users fed from all three partitions of its topic; an
//! update of a user reaches every thread's replica while the application runs.

mod common;

use std::time::{Duration, Instant};

use streams_core::{KafkaStreams, State, StreamsConfig};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

#[test]
fn global_store_enriches_every_partition_and_follows_updates() {
    let Some(bootstrap) = kafka::require_kafka("global_store_enriches_every_partition_and_follows_updates")
    else {
        return;
    };
    let app_id = kafka::unique_name("global-app");
    let (users, orders, output) = (
        kafka::unique_name("users"),
        kafka::unique_name("orders"),
        kafka::unique_name("enriched"),
    );
    kafka::create_topic(&bootstrap, &users, 3, &[]).unwrap();
    kafka::create_topic(&bootstrap, &orders, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    let named: Vec<ProduceRecord> = (0..20)
        .map(|u| ProduceRecord::new(format!("u{u}"), format!("name{u}")))
        .collect();
    kafka::produce(&bootstrap, &users, &named, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    let config = StreamsConfig::from_properties([
        ("application.id", app_id.as_str()),
        ("bootstrap.servers", bootstrap.as_str()),
        ("state.dir", &state.path().display().to_string()),
        ("num.stream.threads", "2"),
        ("commit.interval.ms", "200"),
    ])
    .unwrap();
    let topology = common::enrich_topology(&users, &orders, &output, true);
    let mut app = KafkaStreams::new(topology, config).unwrap();
    app.start().unwrap();
    assert!(app.wait_for_state(State::Running, Duration::from_secs(60)));

    let order_records: Vec<ProduceRecord> = (0..24)
        .map(|u| ProduceRecord::new(format!("u{u}"), format!("order{u}")))
        .collect();
    kafka::produce(&bootstrap, &orders, &order_records, Duration::from_secs(60)).unwrap();
    let out = kafka::consume_all(
        &bootstrap,
        &output,
        ConsumeUntil::Count(24),
        Duration::from_secs(60),
        false,
    )
    .unwrap();
    let partitions: std::collections::BTreeSet<i32> = out.iter().map(|r| r.partition).collect();
    assert_eq!(partitions.len(), 4, "orders of every partition enriched");
    for r in &out {
        let key = r.key_str().unwrap();
        let u: usize = key[1..].parse().unwrap();
        let want = if u < 20 {
            format!("order{u}:name{u}")
        } else {
            format!("order{u}:unknown")
        };
        assert_eq!(r.value_str().unwrap(), want);
    }

    // An update of the global topic reaches the replicas while the application runs.
    kafka::produce(
        &bootstrap,
        &users,
        &[ProduceRecord::new("u3", "renamed")],
        Duration::from_secs(30),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut attempt = 0;
    loop {
        attempt += 1;
        kafka::produce(
            &bootstrap,
            &orders,
            &[ProduceRecord::new("u3", format!("again{attempt}"))],
            Duration::from_secs(30),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let all = kafka::consume_all(
            &bootstrap,
            &output,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(30),
            false,
        )
        .unwrap();
        if all
            .iter()
            .any(|r| r.value_str().is_some_and(|v| v.ends_with(":renamed")))
        {
            break;
        }
        assert!(Instant::now() < deadline, "the update never reached the replicas");
    }
    assert!(app.close(Duration::from_secs(60)));
}
