//! Global stores: every task reads the whole store, fed from every partition of its topic.
//! In the test driver here; `global_stores_kafka.rs` runs the same topology on the broker.

mod common;

use streams_core::serdes::StringSerde;
use streams_test_utils::{DriverConfig, TopologyTestDriver};

#[test]
fn every_task_reads_the_global_store() {
    let topology = common::enrich_topology("users", "orders", "enriched", false);
    assert!(
        topology.describe().to_string().contains("for global store"),
        "{}",
        topology.describe()
    );
    let config = DriverConfig::default()
        .partitions("users", 3)
        .partitions("orders", 4)
        .partitions("enriched", 4);
    let driver = TopologyTestDriver::new(topology, config).unwrap();
    let users = driver.input_topic("users", StringSerde, StringSerde);
    let orders = driver.input_topic("orders", StringSerde, StringSerde);
    let out = driver.output_topic("enriched", StringSerde, StringSerde);
    for u in 0..20 {
        users.pipe(format!("u{u}"), format!("name{u}")).unwrap();
    }
    // Orders land on all four partitions (tasks 0_0 .. 0_3); each sees every user.
    for u in 0..24 {
        orders.pipe(format!("u{u}"), format!("order{u}")).unwrap();
    }
    let got = out.read_key_values().unwrap();
    assert_eq!(got.len(), 24);
    for (k, v) in &got {
        let u: usize = k[1..].parse().unwrap();
        let want = if u < 20 {
            format!("order{u}:name{u}")
        } else {
            format!("order{u}:unknown")
        };
        assert_eq!(v, &want);
    }
    // Updates reach the readers.
    users.pipe("u3".into(), "renamed".into()).unwrap();
    orders.pipe("u3".into(), "again".into()).unwrap();
    assert_eq!(out.read_value().unwrap().as_deref(), Some("again:renamed"));
}
