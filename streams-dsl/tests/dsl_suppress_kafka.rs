//! `suppress` on the Kafka runtime against the real broker: the suppression buffer is
//! restored from its changelog topic by a new instance with an empty state directory, which
//! then emits the final results the first instance had buffered. Skipped without a broker
//! (`STREAMS_TEST_BOOTSTRAP`), failed then if `STREAMS_REQUIRE_KAFKA=1`.

use std::time::{Duration, Instant};
use streams_core::KafkaStreams;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    BufferConfig, Consumed, Grouped, Materialized, Produced, StreamsBuilder, Suppressed, TimeWindows,
};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

#[path = "common/kafka.rs"]
mod broker;

fn start(bootstrap: &str, app_id: &str, input: &str, output: &str, state: &std::path::Path) -> KafkaStreams {
    let b = StreamsBuilder::new();
    b.stream([input], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .windowed_by(TimeWindows::of_size_no_grace(Duration::from_secs(10)))
        .count(Materialized::as_("counts"))
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()).with_name("final"))
        .to_stream()
        .map(|w, n| (format!("{}@{}", w.key, w.start), n))
        .to(output, Produced::with(StringSerde, NullableSerde(U64Serde)));
    broker::start(b.build().unwrap(), broker::config(bootstrap, app_id, state))
}

/// `(key, count)` of every record of `topic`.
fn read(bootstrap: &str, topic: &str) -> Vec<(String, u64)> {
    broker::read_all(bootstrap, topic)
        .iter()
        .map(|r| {
            let bytes: [u8; 8] = r.value.as_deref().unwrap().try_into().unwrap();
            (r.key_str().unwrap(), u64::from_be_bytes(bytes))
        })
        .collect()
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn a_new_instance_restores_the_suppression_buffer_and_emits_what_it_held() {
    let Some(bootstrap) =
        kafka::require_kafka("a_new_instance_restores_the_suppression_buffer_and_emits_what_it_held")
    else {
        return;
    };
    let app_id = kafka::unique_name("dsl-suppress");
    let input = kafka::unique_name("clicks");
    let output = kafka::unique_name("final-counts");
    kafka::create_topic(&bootstrap, &input, 1, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 1, &[]).unwrap();
    let changelog = format!("{app_id}-final-store-changelog");
    let at = |k: &str, t: i64| ProduceRecord::new(k, "x").with_timestamp(t);

    let first_state = tempfile::tempdir().unwrap();
    let mut app = start(&bootstrap, &app_id, &input, &output, first_state.path());
    let buffered = [at("a", 1_000), at("b", 2_000), at("a", 5_000), at("c", 9_000)];
    kafka::produce(&bootstrap, &input, &buffered, Duration::from_secs(60)).unwrap();
    // Three keys buffered: one changelog record each (the count's cache forwards a's two
    // updates as one), and nothing out.
    wait_until("the buffer's changelog", || {
        kafka::consume_all(
            &bootstrap,
            &changelog,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            false,
        )
        .map(|r| r.len() >= 3)
        .unwrap_or(false)
    });
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(read(&bootstrap, &output), []);
    // The input was committed: the next instance does not read it again, so what it emits
    // comes from the restored buffer.
    let committed = kafka::committed_offsets(&bootstrap, &app_id, &input, Duration::from_secs(30)).unwrap();
    assert_eq!(committed, [(0, Some(4))]);

    // A new instance on an empty state directory restores the buffer from its changelog;
    // stream time 10 s closes [0, 10 s) and the buffered final results go out.
    let second_state = tempfile::tempdir().unwrap();
    let mut app = start(&bootstrap, &app_id, &input, &output, second_state.path());
    kafka::produce(&bootstrap, &input, &[at("d", 10_000)], Duration::from_secs(60)).unwrap();
    wait_until("the final results", || read(&bootstrap, &output).len() >= 3);
    assert!(app.close(Duration::from_secs(60)));
    let mut finals = read(&bootstrap, &output);
    finals.sort();
    assert_eq!(
        finals,
        [
            ("a@0".to_owned(), 2),
            ("b@0".to_owned(), 1),
            ("c@0".to_owned(), 1)
        ]
    );
}
