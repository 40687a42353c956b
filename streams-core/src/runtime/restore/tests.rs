//! Helpers and tests of restorations against the broker.

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use streams_state::{InMemoryKeyValueStore, KeyValueStore};
use streams_test_utils::kafka;

use super::{AssignedConsumer, Restoration, RestoreConsumers, Step};
use crate::engine::TaskStore;
use crate::runtime::topics::resets::assigned_consumer;

pub(in crate::runtime::restore) fn assigned(bootstrap: &str, isolation: &str) -> AssignedConsumer {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("group.id", kafka::unique_name("restore-test"))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "error")
        .set("isolation.level", isolation);
    assigned_consumer(&c, "restore-test", "", None).unwrap()
}

/// Sends keys `<prefix><n>` for `keys` to partition 0 of `topic` and flushes.
pub(in crate::runtime::restore) fn send(
    producer: &BaseProducer,
    topic: &str,
    keys: std::ops::Range<u32>,
    prefix: &str,
) {
    for i in keys {
        let key = format!("{prefix}{i}");
        producer
            .send(BaseRecord::to(topic).partition(0).key(&key).payload("v"))
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// Steps `restoration` until it is done (a minute at most); the records restored.
pub(in crate::runtime::restore) fn restore_all(
    restoration: &mut Restoration,
    consumers: &RestoreConsumers,
    stores: &mut [TaskStore],
) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match restoration
            .step(consumers, stores, Duration::from_secs(1))
            .unwrap()
        {
            Step::Done(n) => return n,
            Step::Pending => assert!(Instant::now() < deadline, "restoration did not end"),
            other => panic!("{other:?}"),
        }
    }
}

/// Under exactly-once a restoration ends at the changelog's high watermark: a
/// transaction still open below it (the previous owner's last one, whose commit marker
/// has not reached the changelog yet) is waited for and then restored, never cut off at
/// the last stable offset.
#[test]
fn an_open_transaction_below_the_end_is_waited_for_and_restored() {
    let Some(bootstrap) = kafka::require_kafka("restore") else {
        return;
    };
    let topic = kafka::unique_name("restore-open-txn");
    kafka::create_topic(&bootstrap, &topic, 1, &[]).unwrap();
    let producer = kafka::transactional_producer(&bootstrap, "restore-txn", &[]).unwrap();
    producer.begin_transaction().unwrap();
    send(&producer, &topic, 0..100, "a");
    producer.commit_transaction(Duration::from_secs(30)).unwrap();
    producer.begin_transaction().unwrap();
    send(&producer, &topic, 0..50, "b");

    let consumers = RestoreConsumers {
        reader: assigned(&bootstrap, "read_committed"),
        ends: Some(assigned(&bootstrap, "read_uncommitted")),
        log_ends: None,
        standby: crate::runtime::restore::StandbyReader::unused(),
    };
    let mut stores = vec![TaskStore {
        name: "counts".into(),
        changelog: Some(topic.clone()),
        from_source: None,
        values: crate::topology::SourceValues::Plain,
        restore_until: None,
        store: Box::new(InMemoryKeyValueStore::new("counts")),
    }];
    let mut restoration = Restoration::new(0, &stores);
    let first = restoration
        .step(&consumers, &mut stores, Duration::from_secs(3))
        .unwrap();
    assert_eq!(first, Step::Pending, "the open transaction is waited for");

    producer.commit_transaction(Duration::from_secs(30)).unwrap();
    let restored = restore_all(&mut restoration, &consumers, &mut stores);
    assert_eq!(restored, 150);
    let store = &stores[0].store;
    assert!(store.get(b"a99").unwrap().is_some());
    assert!(store.get(b"b49").unwrap().is_some());
    assert_eq!(store.approximate_num_entries().unwrap(), 150);
}
