//! Switching group protocols under one `application.id`. An exactly-once count runs with
//! the consumer protocol (KIP-848) and stops. Started again with `group.protocol=streams`
//! (KIP-1071) it is refused at once with a typed error that says what to do: Apache Kafka
//! 4.4 does not turn the (empty) consumer group, which holds the committed offsets, into a
//! streams group. Nothing is processed meanwhile, and the application then continues with
//! the consumer protocol from its committed offsets and state, also with its state
//! directory gone: every key's count ends at exactly five per round fed, so a run that
//! started over would count too much. Against the real broker.

use std::time::Duration;

use streams_core::error::StreamsGroupFailure;
use streams_core::{GroupProtocol, KafkaStreams, State, StreamsConfig, StreamsError};
use streams_test_utils::kafka;

mod common;

use common::{count_topology, latest_counts, produce_words, wait_for_counts};

const KEYS: usize = 50;

fn config(bootstrap: &str, app: &str, state: &std::path::Path, protocol: Option<&str>) -> StreamsConfig {
    let mut props = vec![
        ("application.id", app.to_owned()),
        ("bootstrap.servers", bootstrap.to_owned()),
        ("state.dir", state.display().to_string()),
        ("processing.guarantee", "exactly_once_v2".to_owned()),
        ("commit.interval.ms", "100".to_owned()),
    ];
    if let Some(p) = protocol {
        props.push(("group.protocol", p.to_owned()));
    }
    StreamsConfig::from_properties(props).unwrap()
}

fn run_once(
    bootstrap: &str,
    app: &str,
    (input, output): (&str, &str),
    state: &std::path::Path,
    protocol: Option<&str>,
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
    let expected = match protocol {
        Some("streams") => GroupProtocol::Streams,
        Some("classic") => GroupProtocol::Classic,
        _ => GroupProtocol::Consumer,
    };
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
fn switching_to_the_streams_protocol_is_refused_and_the_application_goes_on_without_it() {
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
    run_once(&bootstrap, &app, topics, state.path(), Some("consumer"), 1);

    let mut s = KafkaStreams::new(
        count_topology(&input, &output),
        config(&bootstrap, &app, state.path(), Some("streams")),
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

    run_once(&bootstrap, &app, topics, state.path(), Some("consumer"), 2);
    // And with the state directory gone: the stores restore from their changelogs.
    let fresh = tempfile::tempdir().unwrap();
    run_once(&bootstrap, &app, topics, fresh.path(), None, 3);
}

/// Kafka 4.2+ converts an empty classic group into a streams group when a streams member
/// joins, and an empty streams group into a classic group when a classic member joins,
/// keeping the committed offsets (Kafka's "offline migration"). A Kafka Streams
/// application runs with the classic protocol, so this is the path from one to this
/// project's streams protocol too. Every round must end at exactly five per key: a run that
/// lost the offsets would count its input again.
#[test]
fn an_empty_classic_group_becomes_a_streams_group_and_back_with_its_offsets() {
    let Some(bootstrap) = kafka::require_kafka("protocol_switch_classic") else {
        return;
    };
    let app = kafka::unique_name("protocol-switch-classic");
    let input = kafka::unique_name("protocol-switch-classic-in");
    let output = kafka::unique_name("protocol-switch-classic-out");
    kafka::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    let topics = (input.as_str(), output.as_str());
    let state = tempfile::tempdir().unwrap();
    run_once(&bootstrap, &app, topics, state.path(), Some("classic"), 1);
    // The same state directory: the stores' checkpoints carry over with the offsets.
    run_once(&bootstrap, &app, topics, state.path(), Some("streams"), 2);
    // Back, with the state directory gone: the stores restore from their changelogs.
    let fresh = tempfile::tempdir().unwrap();
    run_once(&bootstrap, &app, topics, fresh.path(), Some("classic"), 3);
    // And to the streams protocol once more, also from changelogs alone.
    let empty = tempfile::tempdir().unwrap();
    run_once(&bootstrap, &app, topics, empty.path(), Some("streams"), 4);
}
