//! SIGTERM and SIGINT close the long-running binaries cleanly: `count-app` is started, counts
//! a few records, gets the signal, and must exit 0 saying it closed cleanly, with its
//! offsets committed by that close (the default at-least-once commit interval is 30 s, so
//! only the close can have committed them). Skipped without a broker.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use streams_test_utils::kafka::{self, ProduceRecord};

mod common;

use common::CountTopics;

fn stops_cleanly_on(signal: &str, test: &str) {
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let app = kafka::unique_name("signal-app");
    let topics = CountTopics::create(&bootstrap, "signal", 2, false);
    let records: Vec<ProduceRecord> = (0..10)
        .map(|i| ProduceRecord::new(format!("k{i}"), "x"))
        .collect();
    kafka::produce(&bootstrap, &topics.input, &records, Duration::from_secs(30)).unwrap();
    let state = tempfile::tempdir().unwrap();

    // Standard input stays open: only the signal can stop it.
    let mut child = common::count_app(&bootstrap, &app, &topics, state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start count-app");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(
        lines.by_ref().map_while(Result::ok).any(|l| l == "started"),
        "count-app did not start"
    );
    // All ten counted (each key once).
    let counted = kafka::consume_all(
        &bootstrap,
        &topics.output,
        kafka::ConsumeUntil::Count(10),
        Duration::from_secs(60),
        false,
    )
    .unwrap();
    assert_eq!(counted.len(), 10);

    common::send_signal(&child, signal);
    let exit = common::wait_exit(&mut child, Duration::from_secs(60))
        .unwrap_or_else(|| panic!("count-app still running 60 s after SIG{signal}"));
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(exit.success(), "exit {exit:?}; output {rest:?}");
    assert!(
        rest.iter().any(|l| l == &format!("SIG{signal}: closed cleanly")),
        "{rest:?}"
    );
    let committed =
        kafka::committed_offsets(&bootstrap, &app, &topics.input, Duration::from_secs(30)).unwrap();
    let total: i64 = committed.iter().filter_map(|(_, o)| *o).sum();
    assert_eq!(
        total, 10,
        "the close committed every processed offset: {committed:?}"
    );
}

#[test]
fn count_app_stops_cleanly_on_sigterm() {
    stops_cleanly_on("TERM", "count_app_stops_cleanly_on_sigterm");
}

#[test]
fn count_app_stops_cleanly_on_sigint() {
    stops_cleanly_on("INT", "count_app_stops_cleanly_on_sigint");
}
