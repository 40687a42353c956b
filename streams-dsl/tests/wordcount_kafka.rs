//! Word count from the DSL on the Kafka runtime against the real broker: the repartition
//! topic is created at start with the input's partition count and the counts come out
//! right. Skipped without a broker (`STREAMS_TEST_BOOTSTRAP`), failed then if
//! `STREAMS_REQUIRE_KAFKA=1`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_core::testing::{self, ConsumeUntil, ProduceRecord};
use streams_core::{KafkaStreams, State, StreamsConfig};
use streams_dsl::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};

#[test]
fn word_count_on_the_broker_through_a_repartition_topic() {
    let Some(bootstrap) = testing::require_kafka("word_count_on_the_broker_through_a_repartition_topic")
    else {
        return;
    };
    let app_id = testing::unique_name("dsl-wc");
    let input = testing::unique_name("lines");
    let output = testing::unique_name("word-counts");
    testing::create_topic(&bootstrap, &input, 3, &[]).unwrap();
    testing::create_topic(&bootstrap, &output, 3, &[]).unwrap();

    let b = StreamsBuilder::new(app_id.clone());
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
    testing::produce(&bootstrap, &input, &lines, Duration::from_secs(60)).unwrap();

    let state = tempfile::tempdir().unwrap();
    let dir = state.path().display().to_string();
    let config = StreamsConfig::from_properties([
        ("application.id", app_id.as_str()),
        ("bootstrap.servers", bootstrap.as_str()),
        ("state.dir", dir.as_str()),
        ("commit.interval.ms", "200"),
        ("consumer.session.timeout.ms", "6000"),
        ("consumer.heartbeat.interval.ms", "500"),
    ])
    .unwrap();
    let mut app = KafkaStreams::new(topology, config).unwrap();
    app.start().unwrap();
    assert!(
        app.wait_for_state(State::Running, Duration::from_secs(60)),
        "{:?}",
        app.state()
    );
    testing::wait_for_topic(
        &bootstrap,
        &format!("{app_id}-words-repartition"),
        3,
        Duration::from_secs(10),
    )
    .unwrap();

    let deadline = Instant::now() + Duration::from_secs(120);
    let latest = loop {
        let records = testing::consume_all(
            &bootstrap,
            &output,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            false,
        )
        .unwrap();
        let mut latest: HashMap<String, u64> = HashMap::new();
        for r in &records {
            let bytes: [u8; 8] = r.value.as_deref().unwrap().try_into().unwrap();
            let e = latest.entry(r.key_str().unwrap()).or_insert(0);
            *e = (*e).max(u64::from_be_bytes(bytes));
        }
        if latest.len() == 30 && latest.values().all(|&n| n == 30) {
            break latest;
        }
        assert!(Instant::now() < deadline, "counts not reached: {latest:?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(latest["w0"], 30);
    assert!(app.close(Duration::from_secs(60)));
}
