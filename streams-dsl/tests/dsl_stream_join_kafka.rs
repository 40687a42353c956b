//! A stream-stream left join on the Kafka runtime against the real broker: orders re-keyed
//! by customer (through `<join>-left-repartition`, two partitions) joined with payments (a
//! topic of two partitions) within 10 s, every input record within 10 s of the others. Paid orders are joined; unpaid ones are emitted
//! with `None` only after a later payment moved each task's stream time past their window,
//! and never both. Skipped without a broker (`STREAMS_TEST_BOOTSTRAP`), failed then if
//! `STREAMS_REQUIRE_KAFKA=1`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use streams_core::serdes::StringSerde;
use streams_dsl::{Consumed, JoinWindows, Produced, StreamJoined, StreamsBuilder};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

#[path = "common/kafka.rs"]
mod broker;

/// Every result so far, `value -> (key, timestamp, how many times)`.
fn results(bootstrap: &str, topic: &str) -> BTreeMap<String, (String, i64, usize)> {
    let records = broker::read_all(bootstrap, topic);
    let mut out: BTreeMap<String, (String, i64, usize)> = BTreeMap::new();
    for r in records {
        let value = String::from_utf8(r.value.clone().unwrap_or_default()).unwrap();
        let entry = out
            .entry(value)
            .or_insert((r.key_str().unwrap(), r.timestamp.unwrap_or(-1), 0));
        entry.2 += 1;
    }
    out
}

/// Polls `topic` until its results are `expected`.
fn wait_for(bootstrap: &str, topic: &str, expected: &BTreeMap<String, (String, i64, usize)>) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = results(bootstrap, topic);
        if &got == expected {
            return;
        }
        assert!(Instant::now() < deadline, "got {got:?}, expected {expected:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn left_join_on_the_broker_through_two_partitions() {
    let Some(bootstrap) = kafka::require_kafka("left_join_on_the_broker_through_two_partitions") else {
        return;
    };
    let app_id = kafka::unique_name("dsl-stream-join");
    let orders = kafka::unique_name("orders");
    let payments = kafka::unique_name("payments");
    let out = kafka::unique_name("paid-orders");
    for topic in [&orders, &payments, &out] {
        kafka::create_topic(&bootstrap, topic, 2, &[]).unwrap();
    }

    let b = StreamsBuilder::new();
    // Orders `order-id -> customer:item`, re-keyed by customer.
    let by_customer = b
        .stream([orders.as_str()], Consumed::with(StringSerde, StringSerde))
        .select_key(|_, v: &String| v.split(':').next().unwrap_or_default().to_owned());
    let paid = b.stream([payments.as_str()], Consumed::with(StringSerde, StringSerde));
    by_customer
        .named("paid")
        .left_join_stream(
            &paid,
            |_, order, payment| format!("{order}|{}", payment.map_or("unpaid", String::as_str)),
            JoinWindows::of_time_difference_no_grace(Duration::from_secs(10)),
            StreamJoined::new().with_store_name("paid-orders"),
        )
        .to(&out, Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    assert!(topology.describe().to_string().contains("paid-left-repartition"));

    let t0 = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64 - 600_000;
    let mut order_records = Vec::new();
    let mut payment_records = Vec::new();
    let mut expected = BTreeMap::new();
    for i in 0..20i64 {
        let (customer, t) = (format!("c{i}"), t0 + i * 400);
        order_records
            .push(ProduceRecord::new(format!("o{i}"), format!("{customer}:item{i}")).with_timestamp(t));
        if i % 2 == 0 {
            payment_records.push(ProduceRecord::new(&customer, format!("pay{i}")).with_timestamp(t + 500));
            expected.insert(format!("{customer}:item{i}|pay{i}"), (customer, t + 500, 1));
        }
    }
    kafka::produce(&bootstrap, &orders, &order_records, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    let mut app = broker::start(
        topology,
        broker::config_unpurged(&bootstrap, &app_id, state.path()),
    );
    let repartition = format!("{app_id}-paid-left-repartition");
    kafka::wait_for_topic(&bootstrap, &repartition, 2, Duration::from_secs(10)).unwrap();
    let repartitioned = kafka::consume_all(
        &bootstrap,
        &repartition,
        ConsumeUntil::Count(20),
        Duration::from_secs(60),
        false,
    )
    .unwrap();
    assert_eq!(repartitioned.len(), 20);
    kafka::produce(&bootstrap, &payments, &payment_records, Duration::from_secs(60)).unwrap();
    // The paid orders join; the unpaid ones wait while their windows are open.
    wait_for(&bootstrap, &out, &expected);
    // Every order was processed (committed) before a later record closes the windows:
    // records all within 10 s of each other are never late, the closing ones would be.
    let mut per_partition = [0i64; 2];
    for r in &repartitioned {
        per_partition[usize::try_from(r.partition).unwrap()] += 1;
    }
    assert!(per_partition.iter().all(|&n| n > 0), "{per_partition:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let committed =
            kafka::committed_offsets(&bootstrap, &app_id, &repartition, Duration::from_secs(10)).unwrap();
        if committed
            .iter()
            .all(|(p, o)| *o == Some(per_partition[usize::try_from(*p).unwrap()]))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "committed {committed:?}, records {per_partition:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // A payment far later on each partition closes every window of both tasks.
    let late = t0 + 60_000;
    let ticks: Vec<ProduceRecord> = (0..2)
        .map(|p| {
            ProduceRecord::new("nobody", "tick")
                .with_partition(p)
                .with_timestamp(late)
        })
        .collect();
    kafka::produce(&bootstrap, &payments, &ticks, Duration::from_secs(60)).unwrap();
    for i in (1..20i64).step_by(2) {
        expected.insert(format!("c{i}:item{i}|unpaid"), (format!("c{i}"), t0 + i * 400, 1));
    }
    wait_for(&bootstrap, &out, &expected);
    assert!(app.close(Duration::from_secs(60)));
    // Nothing more came after the app closed cleanly.
    assert_eq!(results(&bootstrap, &out), expected);
}
