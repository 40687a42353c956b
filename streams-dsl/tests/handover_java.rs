//! Taking over a running Kafka Streams application, and handing it back: the same
//! `application.id`, the same topics, the state carried in the changelogs.
//!
//! Kafka Streams 4.1.1 (`tests/java-diff/`, main class `HandOver`) processes the first third
//! of the input on the real broker, then closes and leaves the group. This crate's runtime
//! starts with the same application id and an empty state directory, restores the store
//! from the changelog Kafka Streams wrote, processes the second third from its committed
//! offsets and closes; Kafka Streams, again on an empty state directory, restores from the
//! changelog this runtime wrote and processes the last third. Each count out must be the
//! count over everything so far, which only holds if each side read the other's changelog
//! (values and timestamps) and offsets; and no internal topic may appear that Kafka Streams
//! does not create.
//!
//! Needs the broker (`STREAMS_TEST_BOOTSTRAP`) and Java with Maven (see `common/java.rs`).

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use common::java::{self, JavaProgram, Outcome};
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_core::{KafkaStreams, State, StreamsConfig};
use streams_dsl::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

const KEYS: usize = 8;
const PER_THIRD: usize = 80;

/// One application and its topics.
struct Run {
    bootstrap: String,
    app_id: String,
    input: String,
    output: String,
}

impl Run {
    /// Kafka Streams' count application, run until its group committed `committed` inputs.
    fn java(&self, committed: usize) -> Result<String, Outcome> {
        let state = tempfile::tempdir().expect("a state directory");
        let mut program = JavaProgram::in_tests("java-diff", "dev.streams.diff.HandOver", "handover_java");
        program.args = [
            self.bootstrap.as_str(),
            &self.app_id,
            &self.input,
            &self.output,
            &state.path().display().to_string(),
            "count",
            &committed.to_string(),
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        program.build_and_run()
    }

    /// This runtime's count application: the same DSL topology and store name.
    fn rust(&self, state: &std::path::Path) -> KafkaStreams {
        let b = StreamsBuilder::new();
        b.stream([self.input.as_str()], Consumed::with(StringSerde, StringSerde))
            .group_by_key(Grouped::new())
            .count(Materialized::as_("counts"))
            .to_stream()
            .to(&self.output, Produced::with(StringSerde, NullableSerde(U64Serde)));
        let dir = state.display().to_string();
        let config = StreamsConfig::from_properties([
            ("application.id", self.app_id.as_str()),
            ("bootstrap.servers", self.bootstrap.as_str()),
            ("state.dir", dir.as_str()),
            ("commit.interval.ms", "200"),
            ("consumer.session.timeout.ms", "6000"),
            ("consumer.heartbeat.interval.ms", "500"),
        ])
        .unwrap();
        let mut app = KafkaStreams::new(b.build().unwrap(), config).unwrap();
        app.start().unwrap();
        assert!(
            app.wait_for_state(State::Running, Duration::from_secs(60)),
            "{:?}",
            app.state()
        );
        app
    }

    /// Produces inputs `range` (key `k<i % KEYS>`), at recent times.
    fn produce(&self, range: std::ops::Range<usize>) {
        let base = kafka::recent_minute(5);
        let records: Vec<ProduceRecord> = range
            .map(|i| ProduceRecord::new(format!("k{}", i % KEYS), "x").with_timestamp(base + i as i64))
            .collect();
        kafka::produce(&self.bootstrap, &self.input, &records, Duration::from_secs(60)).unwrap();
    }

    /// The inputs the group has committed, over every partition.
    fn committed(&self) -> i64 {
        kafka::committed_offsets(
            &self.bootstrap,
            &self.app_id,
            &self.input,
            Duration::from_secs(30),
        )
        .unwrap()
        .iter()
        .filter_map(|(_, offset)| *offset)
        .sum()
    }

    /// The last count out per key.
    fn last_counts(&self) -> BTreeMap<String, u64> {
        kafka::consume_all(
            &self.bootstrap,
            &self.output,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            false,
        )
        .unwrap()
        .iter()
        .map(|r| {
            let key = r.key_str().expect("a String key");
            let value: [u8; 8] = r.value.as_deref().expect("a count").try_into().expect("a Long");
            (key, u64::from_be_bytes(value))
        })
        .collect()
    }

    /// The topics whose name starts with the application id.
    fn internal_topics(&self) -> Vec<String> {
        kafka::topics_with_prefix(&self.bootstrap, &format!("{}-", self.app_id)).unwrap()
    }
}

/// Every key's count after `n` inputs.
fn counts_after(n: usize) -> BTreeMap<String, u64> {
    (0..KEYS)
        .map(|k| (format!("k{k}"), (n / KEYS + usize::from(k < n % KEYS)) as u64))
        .collect()
}

#[test]
fn a_count_moves_from_kafka_streams_to_this_runtime_and_back() {
    let test = "a_count_moves_from_kafka_streams_to_this_runtime_and_back";
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let run = Run {
        bootstrap,
        app_id: kafka::unique_name("handover-count"),
        input: kafka::unique_name("handover-in"),
        output: kafka::unique_name("handover-out"),
    };
    kafka::create_topic(&run.bootstrap, &run.input, 2, &[]).unwrap();
    kafka::create_topic(&run.bootstrap, &run.output, 2, &[]).unwrap();

    // Kafka Streams processes the first third.
    run.produce(0..PER_THIRD);
    let first = run.java(PER_THIRD);
    if java::available(test, &first).is_none() {
        return;
    }
    assert_eq!(run.last_counts(), counts_after(PER_THIRD));
    let changelog = format!("{}-counts-changelog", run.app_id);
    assert_eq!(run.internal_topics(), [changelog.clone()]);

    // This runtime takes over on an empty state directory and processes the second third.
    let state = tempfile::tempdir().unwrap();
    let mut app = run.rust(state.path());
    run.produce(PER_THIRD..2 * PER_THIRD);
    let deadline = Instant::now() + Duration::from_secs(60);
    while run.committed() < (2 * PER_THIRD) as i64 || run.last_counts() != counts_after(2 * PER_THIRD) {
        assert!(
            Instant::now() < deadline,
            "committed {} of {} inputs; last counts {:?}, expected {:?}",
            run.committed(),
            2 * PER_THIRD,
            run.last_counts(),
            counts_after(2 * PER_THIRD)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(run.internal_topics(), [changelog.clone()]);

    // Kafka Streams takes the application back and processes the last third.
    run.produce(2 * PER_THIRD..3 * PER_THIRD);
    let last = run.java(3 * PER_THIRD);
    java::available(test, &last).expect("Java ran the first time");
    assert_eq!(run.last_counts(), counts_after(3 * PER_THIRD));
    assert_eq!(run.internal_topics(), [changelog]);
}
