//! Switching group protocols under one `application.id`, against the real broker. An
//! exactly-once count runs with the consumer protocol (KIP-848) and stops. Started again
//! with `group.protocol=streams` (KIP-1071) it is refused at once with a typed error that
//! says what to do: Apache Kafka 4.4 does not turn the (empty) consumer group, which holds
//! the committed offsets, into a streams group. Nothing is processed meanwhile. It does
//! turn an empty consumer group into a classic group, an empty classic group into a
//! streams group and back, and an empty classic group into a consumer group, each time
//! keeping the committed offsets (Kafka's "offline migration"); the application goes
//! that way round, its state directory kept or gone. Every key's count ends at exactly
//! five per round fed, so a run that started over would count too much.

use std::time::Duration;

use streams_core::error::StreamsGroupFailure;
use streams_core::{GroupProtocol, KafkaStreams, State, StreamsConfig, StreamsError};
use streams_test_utils::kafka;

mod common;

use common::{count_topology, latest_counts, produce_words, wait_for_counts};

const KEYS: usize = 50;

fn config(
    bootstrap: &str,
    app: &str,
    state: &std::path::Path,
    protocol: Option<GroupProtocol>,
) -> StreamsConfig {
    let mut props = vec![
        ("application.id", app.to_owned()),
        ("bootstrap.servers", bootstrap.to_owned()),
        ("state.dir", state.display().to_string()),
        ("processing.guarantee", "exactly_once_v2".to_owned()),
        ("commit.interval.ms", "100".to_owned()),
    ];
    if let Some(p) = protocol {
        props.push(("group.protocol", p.name().to_owned()));
    }
    StreamsConfig::from_properties(props).unwrap()
}

fn run_once(
    bootstrap: &str,
    app: &str,
    (input, output): (&str, &str),
    state: &std::path::Path,
    protocol: Option<GroupProtocol>,
    rounds: u64,
) {
    let mut s = KafkaStreams::new(
        count_topology(input, output),
        config(bootstrap, app, state, protocol),
    )
    .unwrap();
    s.start().unwrap();
    assert!(
        s.wait_for_state(State::Running, Duration::from_secs(90)),
        "{protocol:?}: state {:?}",
        s.state()
    );
    // Without `group.protocol` the runtime takes the consumer protocol from a broker that
    // offers it.
    let expected = protocol.unwrap_or(GroupProtocol::Consumer);
    assert_eq!(s.group_protocol(), Some(expected));
    produce_words(bootstrap, input, KEYS, 5, &format!("{protocol:?}"));
    wait_for_counts(bootstrap, output, KEYS, rounds * 5, Duration::from_secs(120));
    assert!(s.close(Duration::from_secs(60)), "{protocol:?}: closes cleanly");
    let latest = latest_counts(bootstrap, output);
    assert!(
        latest.values().all(|&c| c == rounds * 5),
        "{protocol:?}: a count went past {}: {:?}",
        rounds * 5,
        latest.iter().find(|(_, c)| **c != rounds * 5)
    );
}

#[test]
fn from_the_consumer_protocol_to_streams_by_way_of_classic_and_back_with_the_offsets() {
    let Some(bootstrap) = kafka::require_kafka("protocol_switch") else {
        return;
    };
    let app = kafka::unique_name("protocol-switch");
    let input = kafka::unique_name("protocol-switch-in");
    let output = kafka::unique_name("protocol-switch-out");
    kafka::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    let state = tempfile::tempdir().unwrap();
    let topics = (input.as_str(), output.as_str());
    run_once(
        &bootstrap,
        &app,
        topics,
        state.path(),
        Some(GroupProtocol::Consumer),
        1,
    );

    let mut s = KafkaStreams::new(
        count_topology(&input, &output),
        config(&bootstrap, &app, state.path(), Some(GroupProtocol::Streams)),
    )
    .unwrap();
    match s.start() {
        Err(StreamsError::StreamsGroup {
            kind: StreamsGroupFailure::OtherGroupType,
            message,
            ..
        }) => assert!(
            message.contains("group.protocol") && message.contains("application.id"),
            "{message}"
        ),
        other => panic!("expected the group of another type to be refused, got {other:?}"),
    }
    assert_eq!(s.processed_records(), 0);
    drop(s);

    // The way over: a classic member turns the empty consumer group into a classic group,
    // and a streams member turns that into a streams group, each keeping the offsets.
    run_once(
        &bootstrap,
        &app,
        topics,
        state.path(),
        Some(GroupProtocol::Classic),
        2,
    );
    run_once(
        &bootstrap,
        &app,
        topics,
        state.path(),
        Some(GroupProtocol::Streams),
        3,
    );
    // And back, with the state directory gone each time: the stores restore from their
    // changelogs.
    let fresh = tempfile::tempdir().unwrap();
    run_once(
        &bootstrap,
        &app,
        topics,
        fresh.path(),
        Some(GroupProtocol::Classic),
        4,
    );
    let fresh = tempfile::tempdir().unwrap();
    run_once(&bootstrap, &app, topics, fresh.path(), None, 5);
}
