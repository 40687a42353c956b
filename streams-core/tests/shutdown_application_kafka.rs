//! `ThreadFailureResponse::ShutdownApplication` under the streams rebalance protocol: a
//! thread of one instance fails on a poison record, its handler answers
//! `ShutdownApplication`, and the other instance stops too (state `Error`, its thread
//! failing with `ShutdownRequested`) although its own handler would replace the thread.
//! With `ShutdownClient` the other instance goes on and processes the failed one's tasks.
//! Against the real broker; skipped without it unless `STREAMS_REQUIRE_KAFKA=1`.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use streams_core::serdes::StringSerde;
use streams_core::{
    KafkaStreams, ProcessResult, Processor, ProcessorContext, Record, State, StreamsConfig,
    ThreadFailureResponse, Topology,
};
use streams_test_utils::kafka::{self, ProduceRecord};

/// Forwards every record, and fails on the value `poison` when `armed` (one instance only).
struct Fuse {
    armed: bool,
}

impl Processor<String, String, String, String> for Fuse {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        if self.armed && r.value == "poison" {
            return Err("poison record".into());
        }
        ctx.forward(r)
    }
}

fn topology(input: &str, output: &str, armed: bool) -> Topology {
    let mut b = Topology::builder();
    b.add_source("src", [input], StringSerde, StringSerde)
        .add_processor("fuse", move || Fuse { armed }, ["src"])
        .add_sink("out", output, StringSerde, StringSerde, ["fuse"]);
    b.build().unwrap()
}

fn config(bootstrap: &str, app: &str, state: &Path) -> StreamsConfig {
    StreamsConfig::from_properties([
        ("application.id", app.to_owned()),
        ("bootstrap.servers", bootstrap.to_owned()),
        ("state.dir", state.display().to_string()),
        ("commit.interval.ms", "100".to_owned()),
        ("group.protocol", "streams".to_owned()),
    ])
    .unwrap()
}

/// Starts an instance whose handler records each error and answers `response`.
fn start(
    bootstrap: &str,
    app: &str,
    topology: Topology,
    state: &Path,
    response: ThreadFailureResponse,
) -> (KafkaStreams, Arc<Mutex<Vec<String>>>) {
    let mut s = KafkaStreams::new(topology, config(bootstrap, app, state)).unwrap();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = errors.clone();
    s.set_uncaught_error_handler(move |e| {
        seen.lock().unwrap().push(e.to_string());
        response
    });
    kafka::start_running(&mut s, Duration::from_secs(60));
    (s, errors)
}

/// Two instances, A armed with `a_response`; a poison record for every partition.
/// Returns B's state 20 s after A failed, and B's records.
fn run(test: &str, a_response: ThreadFailureResponse) -> Option<(State, usize)> {
    let bootstrap = kafka::require_kafka(test)?;
    common::init_tracing();
    let app = kafka::unique_name("shutdown-app");
    let input = kafka::unique_name("shutdown-in");
    let output = kafka::unique_name("shutdown-out");
    kafka::create_topic(&bootstrap, &input, 2, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 2, &[]).unwrap();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut a, _) = start(
        &bootstrap,
        &app,
        topology(&input, &output, true),
        dir_a.path(),
        a_response,
    );
    // B's own handler would replace its thread: a shutdown request overrides it.
    let (mut b, b_errors) = start(
        &bootstrap,
        &app,
        topology(&input, &output, false),
        dir_b.path(),
        ThreadFailureResponse::ReplaceThread,
    );
    let wait_split = Instant::now();
    while a.processed_records() == 0 || b.processed_records() == 0 {
        let records: Vec<ProduceRecord> = (0..20)
            .map(|i| ProduceRecord::new(format!("k{i}"), "ok"))
            .collect();
        kafka::produce(&bootstrap, &input, &records, Duration::from_secs(30)).unwrap();
        assert!(
            wait_split.elapsed() < Duration::from_secs(60),
            "both instances process"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // A poison record on every partition: A's thread fails on the one of its partition.
    let poison: Vec<ProduceRecord> = (0..20)
        .map(|i| ProduceRecord::new(format!("k{i}"), "poison"))
        .collect();
    kafka::produce(&bootstrap, &input, &poison, Duration::from_secs(30)).unwrap();
    assert!(
        a.wait_for_state(State::Error, Duration::from_secs(60)),
        "A fails: {:?}",
        a.state()
    );
    let b_processed = b.processed_records();
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.state() != State::Error && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let b_state = b.state();
    if b_state == State::Error {
        let errors = b_errors.lock().unwrap().clone();
        assert!(errors.is_empty(), "B's handler is not asked: {errors:?}");
    } else {
        // B took A's tasks over: it passes the poison records on.
        while b.processed_records() < b_processed + 20 && Instant::now() < deadline + Duration::from_secs(30)
        {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let processed = b.processed_records() as usize;
    a.close(Duration::from_secs(30));
    b.close(Duration::from_secs(30));
    // The application starts again at once (the stopped members left the group): an
    // instance without the fuse passes the poison records on.
    let dir_c = tempfile::tempdir().unwrap();
    let (mut c, c_errors) = start(
        &bootstrap,
        &app,
        topology(&input, &output, false),
        dir_c.path(),
        ThreadFailureResponse::ShutdownClient,
    );
    let more: Vec<ProduceRecord> = (0..20)
        .map(|i| ProduceRecord::new(format!("k{i}"), "again"))
        .collect();
    kafka::produce(&bootstrap, &input, &more, Duration::from_secs(30)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.processed_records() < 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        c.state(),
        State::Running,
        "the restarted application runs: {:?}",
        c_errors.lock().unwrap()
    );
    assert!(c.processed_records() >= 20, "the restarted application processes");
    c.close(Duration::from_secs(30));
    Some((b_state, processed))
}

#[test]
fn shutdown_application_stops_every_instance() {
    let Some((b_state, _)) = run(
        "shutdown_application_stops_every_instance",
        ThreadFailureResponse::ShutdownApplication,
    ) else {
        return;
    };
    assert_eq!(b_state, State::Error, "B stopped on A's request");
}

#[test]
fn shutdown_client_stops_only_the_failed_instance() {
    let Some((b_state, _)) = run(
        "shutdown_client_stops_only_the_failed_instance",
        ThreadFailureResponse::ShutdownClient,
    ) else {
        return;
    };
    assert_eq!(b_state, State::Running, "B goes on");
}
