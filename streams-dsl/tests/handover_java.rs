//! Taking over a running Kafka Streams application, and handing it back: the same
//! `application.id`, the same topics, the state carried in the changelogs.
//!
//! Kafka Streams 4.4.0 (`tests/java-diff/`, main class `HandOver`) processes the first third
//! of the input on the real broker, then closes and leaves the group. This crate's runtime
//! starts with the same application id and an empty state directory, restores the store
//! from the changelog Kafka Streams wrote, processes the second third from its committed
//! offsets and closes; Kafka Streams, again on an empty state directory, restores from the
//! changelog this runtime wrote and processes the last third. Each count out must be the
//! count over everything so far, which only holds if each side read the other's changelog
//! (keys, values and timestamps) and offsets; and no internal topic may appear that Kafka
//! Streams does not create. The topologies: a count (a timestamped key-value store), a
//! versioned store read as of each record's time (Processor API; one changelog record per
//! version, at its time), a count of unnamed steps after a key-selecting one and a re-grouped table count of unnamed
//! steps (Kafka Streams' generated names for the stores, their changelogs and the
//! repartition topic, which this runtime generates under `with_kafka_streams_names`), a
//! windowed count (a timestamped window store, time-windowed keys on the output topic), a
//! session count (a session store, session-windowed keys), a re-grouped table count (a
//! repartition topic of table changes), a table-table join (two table stores) and a
//! foreign-key join (its subscription store, subscription and response topics), a
//! stream-table join (the table's store, which each side updates for keys the other's
//! stream records then join), a stream-global-table join (no internal topic: each side
//! reads the table from its topic), a
//! suppressed windowed count (its suppression buffer, whose windows close after each
//! side stopped: only the buffer the other side wrote can emit them), an emit-final
//! windowed count (the close time emitted up to, in the processor metadata committed with
//! the offsets: no final result may go out twice), a stream-stream left
//! join (its shared store of records waiting for a partner, emitted unmatched by the side
//! that sees their windows close), a stream-stream outer join (the same store, with the
//! records of both sides); and the count again under exactly-once, also with this
//! runtime on the streams rebalance protocol (the broker turns Kafka Streams' empty classic
//! group into a streams group and back, keeping the offsets). Before taking over,
//! `KafkaStreams::check_topics` must find every internal topic this runtime needs and no
//! other (and, before Kafka Streams ran, none of them).
//!
//! Needs the broker (`STREAMS_TEST_BOOTSTRAP`) and Java with Maven (see `common/java.rs`).

mod common;
// Only `config` and `start` are used here.
#[path = "common/kafka.rs"]
#[allow(dead_code)]
mod broker;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use common::java::{self, JavaProgram, Outcome};
use streams_core::serdes::StringSerde;
use streams_core::state::Serde as _;
use streams_core::{GroupProtocol, KafkaStreams, State};
use streams_dsl::{SessionWindowedSerde, WindowedSerde};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};
use topo::{PER_THIRD, Topo, WINDOW, input_on, value, values_after};

#[path = "handover/topo.rs"]
mod topo;

#[path = "handover/twin.rs"]
mod twin;

const AT_LEAST_ONCE: &str = "at_least_once";
const EXACTLY_ONCE: &str = "exactly_once_v2";

/// One application and its topics.
struct Run {
    topo: Topo,
    bootstrap: String,
    app_id: String,
    input: String,
    output: String,
    /// The time of the first input (minute-aligned, recent).
    base: i64,
    /// `processing.guarantee` on both sides.
    guarantee: &'static str,
    /// This runtime's `group.protocol` (Kafka Streams runs with the classic protocol);
    /// `None` is the default.
    protocol: Option<GroupProtocol>,
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
            self.topo.java_name(),
            &committed.to_string(),
            self.guarantee,
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        program.build_and_run()
    }

    /// This runtime's application, not started: the same topology and store names.
    fn rust(&self, state: &std::path::Path) -> KafkaStreams {
        let topology = twin::topology(self.topo, &self.input, &self.right(), &self.output);
        let guarantee = self.guarantee.parse().expect("a processing guarantee");
        let mut builder = broker::config(&self.bootstrap, &self.app_id, state)
            .to_builder()
            .processing_guarantee(guarantee);
        if let Some(protocol) = self.protocol {
            builder = builder.set("group.protocol", protocol.name());
        }
        let config = builder.build().unwrap();
        KafkaStreams::new(topology, config).unwrap()
    }

    /// The second input topic (the right table of the join).
    fn right(&self) -> String {
        format!("{}-right", self.input)
    }

    /// The input topics.
    fn inputs(&self) -> Vec<String> {
        let mut topics = vec![self.input.clone()];
        if self.topo.inputs() == 2 {
            topics.push(self.right());
        }
        topics
    }

    /// Produces inputs `range` (see [`input`]): on the input, and on the right table's
    /// topic for the join.
    fn produce(&self, range: std::ops::Range<usize>) {
        for (t, topic) in self.inputs().iter().enumerate() {
            let records: Vec<ProduceRecord> = range
                .clone()
                .filter(|&i| self.topo.has_record(t, i))
                .map(|i| {
                    let (key, at) = input_on(self.topo, self.base, t, i);
                    ProduceRecord::new(key, value(t, i)).with_timestamp(at)
                })
                .collect();
            kafka::produce(&self.bootstrap, topic, &records, Duration::from_secs(60)).unwrap();
        }
    }

    /// The inputs the group has committed, over every partition of every input topic.
    fn committed(&self) -> i64 {
        self.inputs()
            .iter()
            .flat_map(|topic| {
                kafka::committed_offsets(&self.bootstrap, &self.app_id, topic, Duration::from_secs(30))
                    .unwrap()
            })
            .filter_map(|(_, offset)| offset)
            .sum()
    }

    /// The last value out per key (`key@window start` for the windowed counts), counts in
    /// decimal; a key whose last record is a tombstone (a session merged into another) has
    /// none. Under exactly-once, read committed, and no count may be written twice: each
    /// key's counts rise.
    fn last_values(&self) -> BTreeMap<String, String> {
        let exactly_once = self.guarantee != AT_LEAST_ONCE;
        let windowed = WindowedSerde::new(StringSerde, WINDOW);
        let sessions = SessionWindowedSerde::new(StringSerde);
        let mut counts = BTreeMap::new();
        let records = kafka::consume_all(
            &self.bootstrap,
            &self.output,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            exactly_once,
        )
        .unwrap();
        for r in &records {
            let bytes = r.key.as_deref().expect("a key");
            let key = match self.topo {
                Topo::Count
                | Topo::Versioned
                | Topo::UnnamedCount
                | Topo::TableRegroup
                | Topo::UnnamedTableRegroup
                | Topo::TableJoin
                | Topo::StreamJoin
                | Topo::FkJoin
                | Topo::StreamTable
                | Topo::GlobalJoin
                | Topo::LeftJoin
                | Topo::OuterJoin => r.key_str().expect("a String key"),
                Topo::WindowedCount | Topo::SuppressedCount | Topo::EmitFinalCount => {
                    let w = windowed.deserialize(bytes).unwrap();
                    format!("{}@{}", w.key, w.start - self.base)
                }
                Topo::SessionCount => {
                    let w = sessions.deserialize(bytes).unwrap();
                    format!("{}@{}", w.key, w.start - self.base)
                }
            };
            match r.value.as_deref() {
                // Every pair joined (every left record out unmatched) is one record: their
                // number per key.
                Some(_) if matches!(self.topo, Topo::StreamJoin | Topo::LeftJoin | Topo::OuterJoin) => {
                    let n: u64 = counts
                        .get(&key)
                        .map_or(0, |n: &String| n.parse().expect("a number"));
                    counts.insert(key, (n + 1).to_string());
                }
                Some(_)
                    if matches!(
                        self.topo,
                        Topo::TableJoin
                            | Topo::FkJoin
                            | Topo::StreamTable
                            | Topo::GlobalJoin
                            | Topo::Versioned
                    ) =>
                {
                    counts.insert(key, r.value_str().expect("a String value"));
                }
                Some(value) => {
                    let value = u64::from_be_bytes(value.try_into().expect("a Long"));
                    let before = counts.insert(key.clone(), value.to_string());
                    // A final result goes out once: again, it was emitted by a side that
                    // did not know what the other had emitted.
                    assert!(
                        self.topo != Topo::EmitFinalCount || before.is_none(),
                        "{key}: final count {value} after {before:?}"
                    );
                    let before: Option<u64> = before.map(|b| b.parse().expect("a count"));
                    assert!(
                        !exactly_once || before.is_none_or(|b| b < value),
                        "{key}: count {value} after {before:?} under exactly-once"
                    );
                }
                None => {
                    counts.remove(&key);
                }
            }
        }
        counts
    }

    /// The topics whose name starts with the application id.
    fn internal_topics(&self) -> Vec<String> {
        kafka::topics_with_prefix(&self.bootstrap, &format!("{}-", self.app_id)).unwrap()
    }
}

#[test]
fn a_count_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_count_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::Count,
    );
}

#[test]
fn a_versioned_store_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_versioned_store_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::Versioned,
    );
}

#[test]
fn an_unnamed_count_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "an_unnamed_count_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::UnnamedCount,
    );
}

#[test]
fn a_stream_join_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_stream_join_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::StreamJoin,
    );
}

#[test]
fn a_table_join_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_table_join_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::TableJoin,
    );
}

#[test]
fn a_foreign_key_join_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_foreign_key_join_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::FkJoin,
    );
}

#[test]
fn a_stream_table_join_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_stream_table_join_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::StreamTable,
    );
}

#[test]
fn a_global_table_join_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_global_table_join_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::GlobalJoin,
    );
}

#[test]
fn a_regrouped_table_count_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_regrouped_table_count_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::TableRegroup,
    );
}

#[test]
fn an_unnamed_regrouped_table_count_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "an_unnamed_regrouped_table_count_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::UnnamedTableRegroup,
    );
}

#[test]
fn a_session_count_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_session_count_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::SessionCount,
    );
}

#[test]
fn a_windowed_count_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_windowed_count_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::WindowedCount,
    );
}

#[test]
fn a_suppressed_windowed_count_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_suppressed_windowed_count_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::SuppressedCount,
    );
}

#[test]
fn an_emit_final_windowed_count_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "an_emit_final_windowed_count_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::EmitFinalCount,
    );
}

#[test]
fn a_left_stream_join_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "a_left_stream_join_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::LeftJoin,
    );
}

#[test]
fn an_outer_stream_join_moves_from_kafka_streams_to_this_runtime_and_back() {
    hand_over(
        "an_outer_stream_join_moves_from_kafka_streams_to_this_runtime_and_back",
        Topo::OuterJoin,
    );
}

#[test]
fn a_count_moves_under_exactly_once_with_no_count_written_twice() {
    hand_over_with(
        "a_count_moves_under_exactly_once_with_no_count_written_twice",
        Topo::Count,
        EXACTLY_ONCE,
    );
}

/// Kafka Streams' classic group becomes this runtime's streams group (KIP-1071) and back:
/// the broker converts an empty group of one type into the other and keeps its offsets.
#[test]
fn a_count_moves_to_the_streams_protocol_and_back_under_exactly_once() {
    hand_over_as(
        "a_count_moves_to_the_streams_protocol_and_back_under_exactly_once",
        Topo::Count,
        EXACTLY_ONCE,
        Some(GroupProtocol::Streams),
    );
}

fn hand_over(test: &str, topo: Topo) {
    hand_over_with(test, topo, AT_LEAST_ONCE);
}

fn hand_over_with(test: &str, topo: Topo, guarantee: &'static str) {
    hand_over_as(test, topo, guarantee, None);
}

fn hand_over_as(test: &str, topo: Topo, guarantee: &'static str, protocol: Option<GroupProtocol>) {
    // This runtime's log, with RUST_LOG (e.g. `streams_core=info`), in the test's output.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let run = Run {
        topo,
        bootstrap,
        app_id: kafka::unique_name("handover"),
        input: kafka::unique_name("handover-in"),
        output: kafka::unique_name("handover-out"),
        base: kafka::recent_minute(5),
        guarantee,
        protocol,
    };
    for topic in run.inputs().iter().chain([&run.output]) {
        kafka::create_topic(&run.bootstrap, topic, 2, &[]).unwrap();
    }

    // Kafka Streams processes the first third.
    run.produce(0..PER_THIRD);
    // Before Kafka Streams ran, the check before a switch finds none of the topics needed.
    let early = tempfile::tempdir().unwrap();
    let check = run.rust(early.path()).check_topics().unwrap();
    assert_eq!(check.is_ready(), check.needed.is_empty(), "{check}");

    let first = run.java(topo.records(PER_THIRD));
    if java::available(test, &first).is_none() {
        return;
    }
    assert_eq!(run.last_values(), values_after(topo, PER_THIRD));
    let changelog = format!("{}-{}-changelog", run.app_id, topo.store());
    let internal = run.internal_topics();
    // A global table has no changelog: its topic is its log.
    assert_eq!(
        internal.contains(&changelog),
        topo != Topo::GlobalJoin,
        "{internal:?}"
    );

    // This runtime takes over on an empty state directory and processes the second third,
    // once the check before a switch finds every topic it needs and no other.
    let state = tempfile::tempdir().unwrap();
    let mut app = run.rust(state.path());
    let check = app.check_topics().unwrap();
    assert!(check.is_ready(), "before the switch:\n{check}");
    app.start().unwrap();
    assert!(
        app.wait_for_state(State::Running, Duration::from_secs(60)),
        "{:?}",
        app.state()
    );
    if let Some(protocol) = protocol {
        assert_eq!(app.group_protocol(), Some(protocol));
    }
    run.produce(PER_THIRD..2 * PER_THIRD);
    let deadline = Instant::now() + Duration::from_secs(60);
    while run.committed() < topo.records(2 * PER_THIRD) as i64
        || run.last_values() != values_after(topo, 2 * PER_THIRD)
    {
        assert!(
            Instant::now() < deadline,
            "committed {} of {} inputs; last values {:?}, expected {:?}",
            run.committed(),
            topo.records(2 * PER_THIRD),
            run.last_values(),
            values_after(topo, 2 * PER_THIRD)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(app.close(Duration::from_secs(60)));
    assert_eq!(
        run.internal_topics(),
        internal,
        "the internal topics Kafka Streams made, and no other"
    );

    // Kafka Streams takes the application back and processes the last third.
    run.produce(2 * PER_THIRD..3 * PER_THIRD);
    let last = run.java(topo.records(3 * PER_THIRD));
    java::available(test, &last).expect("Java ran the first time");
    assert_eq!(run.last_values(), values_after(topo, 3 * PER_THIRD));
    assert_eq!(run.internal_topics(), internal);
}
