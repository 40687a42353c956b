//! A foreign-key join on the Kafka runtime against the real broker: orders on a topic of
//! two partitions join customers on a topic of three (the tables are not co-partitioned),
//! through a subscription topic of three partitions and a response topic of two. Orders
//! and customers are created, then orders move between customers (to absent ones too),
//! customers are renamed and deleted, and orders are deleted; after each phase the joined
//! table read from the output topic must equal the join of the final tables. Skipped
//! without a broker (`STREAMS_TEST_BOOTSTRAP`), failed then if `STREAMS_REQUIRE_KAFKA=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use streams_core::serdes::StringSerde;
use streams_core::state::serde::NullableSerde;
use streams_dsl::{Materialized, Produced, StreamsBuilder};
use streams_test_utils::kafka::{self, ConsumedRecord, ProduceRecord};

#[path = "common/kafka.rs"]
mod broker;

/// The joined table the output topic describes: the last value per key, a tombstone
/// deleting it (each key is written by one task, in order).
fn table_of(records: &[ConsumedRecord]) -> BTreeMap<String, String> {
    let mut table = BTreeMap::new();
    for r in records {
        let key = r.key_str().unwrap();
        match r.value_str() {
            Some(v) => table.insert(key, v),
            None => table.remove(&key),
        };
    }
    table
}

/// The rows of both tables, and the join they should give.
#[derive(Default)]
struct Model {
    orders: BTreeMap<String, String>,
    customers: BTreeMap<String, String>,
}

impl Model {
    fn order(&mut self, out: &mut Vec<ProduceRecord>, key: String, customer: Option<String>) {
        match customer {
            Some(c) => {
                out.push(ProduceRecord::new(&key, &c));
                self.orders.insert(key, c);
            }
            None => {
                out.push(ProduceRecord::tombstone(&key));
                self.orders.remove(&key);
            }
        }
    }

    fn customer(&mut self, out: &mut Vec<ProduceRecord>, key: String, name: Option<String>) {
        match name {
            Some(n) => {
                out.push(ProduceRecord::new(&key, &n));
                self.customers.insert(key, n);
            }
            None => {
                out.push(ProduceRecord::tombstone(&key));
                self.customers.remove(&key);
            }
        }
    }

    fn joined(&self) -> BTreeMap<String, String> {
        self.orders
            .iter()
            .filter_map(|(k, c)| Some((k.clone(), format!("{c}={}", self.customers.get(c)?))))
            .collect()
    }
}

#[test]
fn foreign_key_join_on_the_broker_across_two_and_three_partitions() {
    let Some(bootstrap) =
        kafka::require_kafka("foreign_key_join_on_the_broker_across_two_and_three_partitions")
    else {
        return;
    };
    let app_id = kafka::unique_name("dsl-fk-join");
    let (orders, customers, joined) = (
        kafka::unique_name("orders"),
        kafka::unique_name("customers"),
        kafka::unique_name("joined"),
    );
    kafka::create_topic(&bootstrap, &orders, 2, &[]).unwrap();
    kafka::create_topic(&bootstrap, &customers, 3, &[]).unwrap();
    kafka::create_topic(&bootstrap, &joined, 2, &[]).unwrap();

    let b = StreamsBuilder::new().require_names();
    let left = b.table(
        &orders,
        Materialized::as_("orders")
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde),
    );
    let right = b.table(
        &customers,
        Materialized::as_("customers")
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde),
    );
    left.join_foreign(&right, |c: &String| c.clone(), |c, name| format!("{c}={name}"), {
        Materialized::as_("enriched").with_value_serde(StringSerde)
    })
    .to_stream()
    .to(&joined, Produced::with(StringSerde, NullableSerde(StringSerde)));
    let topology = b.build().unwrap();

    // Phase 1: 30 customers, 60 orders of them (and 5 of customers that do not exist).
    let mut model = Model::default();
    let (mut o, mut c) = (Vec::new(), Vec::new());
    for i in 0..30 {
        model.customer(&mut c, format!("c{i}"), Some(format!("name{i}")));
    }
    for i in 0..65 {
        let customer = if i < 60 {
            format!("c{}", i % 30)
        } else {
            format!("c{}", 100 + i)
        };
        model.order(&mut o, format!("o{i}"), Some(customer));
    }
    kafka::produce(&bootstrap, &customers, &c, Duration::from_secs(60)).unwrap();
    kafka::produce(&bootstrap, &orders, &o, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    let mut app = broker::start(topology, broker::config(&bootstrap, &app_id, state.path()));
    let registration = format!("{app_id}-enriched-subscription-registration-topic");
    let response = format!("{app_id}-enriched-subscription-response-topic");
    kafka::wait_for_topic(&bootstrap, &registration, 3, Duration::from_secs(10)).unwrap();
    kafka::wait_for_topic(&bootstrap, &response, 2, Duration::from_secs(10)).unwrap();

    let converge = |expected: BTreeMap<String, String>, phase: &str| {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let actual = table_of(&broker::read_all(&bootstrap, &joined));
            if actual == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{phase}: joined {actual:?}\nexpected {expected:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    converge(model.joined(), "created");

    // Phase 2, interleaved: 20 orders move (5 of them to absent customers, 5 twice),
    // 10 customers are renamed, 5 deleted (their orders lose the join), 10 orders deleted,
    // and one order of an absent customer gets one.
    let (mut o, mut c) = (Vec::new(), Vec::new());
    for i in 0..20 {
        let to = if i < 5 {
            format!("c{}", 200 + i)
        } else {
            format!("c{}", (i + 7) % 30)
        };
        model.order(&mut o, format!("o{i}"), Some(to));
    }
    for i in 5..10 {
        model.order(&mut o, format!("o{i}"), Some(format!("c{}", (i + 11) % 30)));
    }
    for i in 10..20 {
        model.customer(&mut c, format!("c{i}"), Some(format!("renamed{i}")));
    }
    for i in 20..25 {
        model.customer(&mut c, format!("c{i}"), None);
    }
    for i in 40..50 {
        model.order(&mut o, format!("o{i}"), None);
    }
    model.customer(&mut c, "c160".to_owned(), Some("late".to_owned()));
    kafka::produce(&bootstrap, &orders, &o, Duration::from_secs(60)).unwrap();
    kafka::produce(&bootstrap, &customers, &c, Duration::from_secs(60)).unwrap();
    converge(model.joined(), "updated");
    assert!(
        model.joined().contains_key("o60"),
        "the late customer joins its waiting order"
    );

    // The subscriptions went to all three partitions of the registration topic, and the
    // responses came back to both partitions of the response topic.
    let partitions = |topic: &str| {
        broker::read_all(&bootstrap, topic)
            .iter()
            .map(|r| r.partition)
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(partitions(&registration), BTreeSet::from([0, 1, 2]));
    assert_eq!(partitions(&response), BTreeSet::from([0, 1]));
    // Every response went back to the partition its order is read from.
    let order_partition: BTreeMap<String, i32> = broker::read_all(&bootstrap, &orders)
        .iter()
        .map(|r| (r.key_str().unwrap(), r.partition))
        .collect();
    for r in broker::read_all(&bootstrap, &response) {
        assert_eq!(
            Some(&r.partition),
            order_partition.get(&r.key_str().unwrap()),
            "{:?}",
            r.key_str()
        );
    }
    app.close(Duration::from_secs(30));
}
