//! Static membership (`group.instance.id`) with two stream threads, against the real broker.
//!
//! Each stream thread is its own group member, so each gets its own instance id,
//! `<group.instance.id>-<n>` as in Kafka Streams: with the configured id given to both
//! threads unchanged, two members would claim one instance id (under the streams protocol
//! the second thread is refused, `UNRELEASED_INSTANCE_ID`, and never joins: tried, this
//! test then fails after 300 s). The application runs, closes and starts
//! again with the same ids (the restarted members replace the ones that left, which under
//! the streams protocol left with epoch -2 and kept their tasks); every input record must
//! reach the output, with both threads alive throughout.
//!
//! Under `group.protocol=streams` static membership needs Apache Kafka 4.4 or later; an
//! older broker refuses it, and the test then checks that the refusal is the typed,
//! explanatory error and says `SKIPPED`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use streams_core::error::StreamsGroupFailure;
use streams_core::{GroupProtocol, KafkaStreams, State, StreamsConfig, StreamsError, Topology};
use streams_test_utils::kafka::{self, ConsumeUntil};

mod common;

fn config(bootstrap: &str, app: &str, state: &std::path::Path, protocol: GroupProtocol) -> StreamsConfig {
    let mut props = vec![
        ("application.id", app.to_owned()),
        ("bootstrap.servers", bootstrap.to_owned()),
        ("state.dir", state.display().to_string()),
        ("commit.interval.ms", "100".to_owned()),
        ("num.stream.threads", "2".to_owned()),
        ("group.instance.id", format!("{app}-instance")),
    ];
    match protocol {
        GroupProtocol::Classic => props.push(("consumer.session.timeout.ms", "6000".to_owned())),
        GroupProtocol::Streams => props.push(("group.protocol", "streams".to_owned())),
        _ => props.push(("group.protocol", "consumer".to_owned())),
    }
    StreamsConfig::from_properties(props).unwrap()
}

/// Writes records `from..to` (value = sequence number) over 40 keys.
fn feed(bootstrap: &str, input: &str, from: u64, to: u64) {
    let producer: BaseProducer = kafka::producer_config(bootstrap).create().unwrap();
    for seq in from..to {
        let (key, value) = (format!("k{}", seq % 40), seq.to_string());
        producer
            .send(BaseRecord::to(input).key(&key).payload(&value))
            .map_err(|(e, _)| e)
            .unwrap();
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60)).unwrap();
}

/// Waits until the output holds every sequence number below `n`.
fn wait_output(bootstrap: &str, output: &str, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let records = kafka::consume_all(
            bootstrap,
            output,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            false,
        )
        .unwrap();
        let seen: BTreeSet<u64> = records
            .iter()
            .filter_map(|r| r.value_str().and_then(|v| v.parse().ok()))
            .collect();
        if (0..n).all(|s| seen.contains(&s)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} records in the output after 120 s",
            seen.len()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn start(topology: Topology, config: StreamsConfig) -> Result<KafkaStreams, StreamsError> {
    let mut app = KafkaStreams::new(topology, config)?;
    app.start()?;
    Ok(app)
}

fn run(test: &str, protocol: GroupProtocol) {
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let app_id = kafka::unique_name(test);
    let (input, output) = (format!("{app_id}-in"), format!("{app_id}-out"));
    kafka::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    let state = tempfile::tempdir().unwrap();
    feed(&bootstrap, &input, 0, 200);

    for (round, total) in [(1, 200), (2, 400)] {
        let app = start(
            common::pass_through(&input, &output),
            config(&bootstrap, &app_id, state.path(), protocol),
        );
        let mut app = match app {
            Ok(app) => app,
            Err(StreamsError::StreamsGroup {
                kind: StreamsGroupFailure::Unsupported,
                message,
                ..
            }) if protocol == GroupProtocol::Streams && message.contains("4.4 or later") => {
                eprintln!("SKIPPED {test}: the broker refuses static members of streams groups: {message}");
                return;
            }
            Err(e) => panic!("round {round}: start: {e}"),
        };
        assert!(
            app.wait_for_state(State::Running, Duration::from_secs(90)),
            "round {round}: state {:?}",
            app.state()
        );
        if round == 2 {
            feed(&bootstrap, &input, 200, 400);
        }
        wait_output(&bootstrap, &output, total);
        // Assignments may still settle (the second thread joined later): RUNNING again.
        assert!(
            app.wait_for_state(State::Running, Duration::from_secs(60)),
            "round {round}: state {:?}",
            app.state()
        );
        assert_eq!(
            common::metric(&app, "streams_client_alive_stream_threads", ""),
            2.0,
            "round {round}: a stream thread died"
        );
        assert!(app.close(Duration::from_secs(60)), "round {round}: close");
    }
}

#[test]
fn static_members_under_the_classic_protocol() {
    run("static_classic", GroupProtocol::Classic);
}

#[test]
fn static_members_under_the_consumer_protocol() {
    run("static_consumer", GroupProtocol::Consumer);
}

#[test]
fn static_members_under_the_streams_protocol() {
    run("static_streams", GroupProtocol::Streams);
}
