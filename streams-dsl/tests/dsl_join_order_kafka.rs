//! A stream-stream join of two topics written before the application starts, one of large
//! records and one of small ones, on the real broker: the consumer fetches them at very
//! different rates in event time (a fetch of the large topic covers minutes of it, one of
//! the small topic hours), so a task that took records as they came would move its stream
//! time far past the other topic's records and drop them as late. The task waits for the
//! records of an empty input partition that are on the broker (`max.task.idle.ms`,
//! KIP-695) and processes both topics in timestamp order: every record joins exactly once.
//! Skipped without a broker (`STREAMS_TEST_BOOTSTRAP`), failed then if
//! `STREAMS_REQUIRE_KAFKA=1`.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use streams_core::serdes::StringSerde;
use streams_dsl::{Consumed, JoinWindows, Produced, StreamJoined, StreamsBuilder};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

#[path = "common/kafka.rs"]
mod broker;

/// Records per topic: one a second of event time, keys repeating every 100.
const RECORDS: i64 = 5_000;

#[test]
fn a_join_of_preloaded_topics_takes_their_records_in_timestamp_order() {
    let Some(bootstrap) =
        kafka::require_kafka("a_join_of_preloaded_topics_takes_their_records_in_timestamp_order")
    else {
        return;
    };
    let app_id = kafka::unique_name("dsl-join-order");
    let (large, small, out) = (
        kafka::unique_name("join-large"),
        kafka::unique_name("join-small"),
        kafka::unique_name("join-order-out"),
    );
    for topic in [&large, &small, &out] {
        kafka::create_topic(&bootstrap, topic, 1, &[]).unwrap();
    }
    // Long past: every record's window closes within the input, so a record read after
    // the task's stream time passed it by more than the window is dropped.
    let t0 = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64 - 30 * 86_400_000;
    let padding = "x".repeat(2_000);
    let (mut larges, mut smalls) = (Vec::new(), Vec::new());
    let mut expected = BTreeSet::new();
    for i in 0..RECORDS {
        let (key, t) = (format!("k{}", i % 100), t0 + i * 1_000);
        larges.push(ProduceRecord::new(&key, format!("{i}:{padding}")).with_timestamp(t));
        smalls.push(ProduceRecord::new(&key, i.to_string()).with_timestamp(t + 1));
        expected.insert(format!("{i}={i}"));
    }
    kafka::produce(&bootstrap, &large, &larges, Duration::from_secs(120)).unwrap();
    kafka::produce(&bootstrap, &small, &smalls, Duration::from_secs(120)).unwrap();

    let b = StreamsBuilder::new();
    let smalls = b.stream([small.as_str()], Consumed::with(StringSerde, StringSerde));
    b.stream([large.as_str()], Consumed::with(StringSerde, StringSerde))
        .join_stream(
            &smalls,
            |_, l: &String, s: &String| format!("{}={s}", l.split(':').next().unwrap_or_default()),
            JoinWindows::of_time_difference_no_grace(Duration::from_millis(100)),
            StreamJoined::new(),
        )
        .to(&out, Produced::with(StringSerde, StringSerde));
    let state = tempfile::tempdir().unwrap();
    let mut app = broker::start(
        b.build().unwrap(),
        broker::config(&bootstrap, &app_id, state.path()),
    );

    // The last pair joins only after every earlier record was taken: then all are out.
    let results = kafka::consume_all(
        &bootstrap,
        &out,
        ConsumeUntil::Count(RECORDS as usize),
        Duration::from_secs(180),
        false,
    );
    assert!(app.close(Duration::from_secs(60)));
    let results = match results {
        Ok(r) => r,
        Err(e) => {
            let got = broker::read_all(&bootstrap, &out).len();
            panic!("{got} of {RECORDS} joined: {e}");
        }
    };
    let joined: Vec<String> = results
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap_or_default()).unwrap())
        .collect();
    let distinct: BTreeSet<String> = joined.iter().cloned().collect();
    assert_eq!(joined.len(), distinct.len(), "a result came twice");
    assert_eq!(distinct, expected);
    // Nothing more than one result per pair.
    assert_eq!(broker::read_all(&bootstrap, &out).len(), RECORDS as usize);
}
