//! Exactly-once against the real broker when the broker refuses an output record for good
//! (larger than the output topic's `max.message.bytes`): the production handler decides,
//! the transaction that held the record is aborted and processed again, and every other
//! record is committed exactly once.
//!
//! - `dead_letter_queue`: the refused records are in the dead-letter topic (original bytes,
//!   the broker's reason), once each; every other input once in the output;
//! - `log_and_continue`: the refused records are skipped, every other input once;
//! - `log_and_fail`: the thread fails with an error naming the output topic and the
//!   broker's reason (not the changelog's "Erroneous state" that followed it).
//!
//! The topology keeps a logged store written for every record, so the transaction also
//! carries changelog writes: they are refused too once it has failed, and must not be
//! taken for the cause.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use streams_core::handlers::headers::{EXCEPTION, MESSAGE, TOPIC};
use streams_core::serdes::{BytesSerde, StringSerde, U64Serde};
use streams_core::{
    KafkaStreams, KvStore, ProcessResult, Processor, ProcessorContext, Record, State, Stores, StreamsConfig,
    Topology,
};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

mod common;

const RECORDS: u32 = 2_000;
/// Every 200th record (from the 8th) is 5,000 bytes: too large for the output topic.
/// Each one fails the transaction it is in (the records after it in that transaction are
/// refused with it), so the thread learns of one per abort.
fn large(i: u32) -> bool {
    i % 200 == 7
}

/// Counts each key in the logged store `seen` and forwards the record unchanged.
#[derive(Default)]
struct Pass {
    store: Option<KvStore<StringSerde, U64Serde>>,
}

impl Processor<String, Vec<u8>, String, Vec<u8>> for Pass {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, Vec<u8>>) -> ProcessResult {
        self.store = Some(ctx.kv_store("seen")?);
        Ok(())
    }
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, Vec<u8>>,
        r: Record<String, Vec<u8>>,
    ) -> ProcessResult {
        let store = self.store.as_ref().ok_or("init")?;
        let n = store.get(&r.key)?.unwrap_or(0) + 1;
        store.put(&r.key, &n)?;
        ctx.forward(r)
    }
}

fn topology(input: &str, output: &str) -> Topology {
    let mut b = Topology::builder();
    b.add_source("src", [input], StringSerde, BytesSerde)
        .add_processor("pass", Pass::default, ["src"])
        .add_state_store(Stores::persistent_kv("seen", StringSerde, U64Serde), ["pass"])
        .add_sink("out", output, StringSerde, BytesSerde, ["pass"]);
    b.build().unwrap()
}

/// The topics and application of one run, with the input written.
struct Run {
    bootstrap: String,
    app: String,
    input: String,
    output: String,
    dlq: String,
}

impl Run {
    fn new(bootstrap: String, name: &str) -> Self {
        let run = Self {
            app: kafka::unique_name(&format!("{name}-app")),
            input: kafka::unique_name(&format!("{name}-in")),
            output: kafka::unique_name(&format!("{name}-out")),
            dlq: kafka::unique_name(&format!("{name}-dlq")),
            bootstrap,
        };
        kafka::create_topic(&run.bootstrap, &run.input, 2, &[]).unwrap();
        kafka::create_topic(&run.bootstrap, &run.dlq, 2, &[]).unwrap();
        kafka::create_topic(&run.bootstrap, &run.output, 2, &[("max.message.bytes", "4000")]).unwrap();
        let records: Vec<ProduceRecord> = (0..RECORDS)
            .map(|i| {
                let size = if large(i) { 5_000 } else { 10 };
                ProduceRecord::new(format!("k{i}"), vec![b'x'; size])
            })
            .collect();
        kafka::produce(&run.bootstrap, &run.input, &records, Duration::from_secs(60)).unwrap();
        run
    }

    fn config(&self, state: &Path, extra: &[(&str, &str)]) -> StreamsConfig {
        let dir = state.display().to_string();
        let mut props: Vec<(&str, &str)> = vec![
            ("application.id", &self.app),
            ("bootstrap.servers", &self.bootstrap),
            ("processing.guarantee", "exactly_once_v2"),
            ("num.stream.threads", "1"),
            ("state.dir", &dir),
            ("commit.interval.ms", "200"),
            ("errors.dead.letter.queue.topic.name", &self.dlq),
            // Small records batch up to 3,000 bytes, under the topic's limit.
            ("producer.batch.size", "3000"),
        ];
        props.extend_from_slice(extra);
        StreamsConfig::from_properties(props).unwrap()
    }

    /// Waits until the group has committed every input offset (or the application fails).
    fn wait_committed(&self, app: &KafkaStreams) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            // A lookup may time out while a transaction's offsets are unstable: asked again.
            let committed: i64 =
                kafka::committed_offsets(&self.bootstrap, &self.app, &self.input, Duration::from_secs(10))
                    .map(|o| o.into_iter().map(|(_, o)| o.unwrap_or(0)).sum())
                    .unwrap_or(-1);
            if committed == i64::from(RECORDS) {
                return;
            }
            assert_ne!(app.state(), State::Error, "the application failed");
            assert!(
                Instant::now() < deadline,
                "{committed} of {RECORDS} input offsets committed"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Every committed record of `topic` by key: how often, and the value's length.
    fn committed(&self, topic: &str) -> HashMap<String, (usize, usize, Option<String>)> {
        let mut seen: HashMap<String, (usize, usize, Option<String>)> = HashMap::new();
        for r in kafka::consume_all(
            &self.bootstrap,
            topic,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            true,
        )
        .unwrap()
        {
            let e = seen.entry(r.key_str().unwrap()).or_default();
            e.0 += 1;
            e.1 = r.value.as_ref().map_or(0, |v| v.len());
            if r.header_str(EXCEPTION).is_some() {
                assert_eq!(r.header_str(EXCEPTION).as_deref(), Some("production"));
                assert_eq!(r.header_str(TOPIC).as_deref(), Some(self.output.as_str()));
                e.2 = r.header_str(MESSAGE);
            }
        }
        seen
    }
}

fn start(config: StreamsConfig, run: &Run) -> (KafkaStreams, Arc<Mutex<Option<String>>>) {
    common::init_tracing();
    let mut app = KafkaStreams::new(topology(&run.input, &run.output), config).unwrap();
    let failure = common::first_failure(&mut app);
    app.start().unwrap();
    (app, failure)
}

/// Runs the handler `handler` to the end and checks the output: each small record once;
/// each large one once in the dead-letter topic when `dead_lettered`, nowhere otherwise.
fn skips_or_dead_letters(test: &str, handler: &str, dead_lettered: bool) {
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let run = Run::new(bootstrap, handler.replace('_', "-").as_str());
    let state = tempfile::tempdir().unwrap();
    let (mut app, failure) = start(
        run.config(state.path(), &[("production.exception.handler", handler)]),
        &run,
    );
    run.wait_committed(&app);
    assert_eq!(
        app.state(),
        State::Running,
        "failure: {:?}",
        failure.lock().unwrap()
    );
    assert!(app.close(Duration::from_secs(60)));
    let out = run.committed(&run.output);
    let dead = run.committed(&run.dlq);
    let mut problems = Vec::new();
    for i in 0..RECORDS {
        let key = format!("k{i}");
        let (want_out, want_dead) = match (large(i), dead_lettered) {
            (false, _) => (1, 0),
            (true, true) => (0, 1),
            (true, false) => (0, 0),
        };
        let got_out = out.get(&key).map_or(0, |e| e.0);
        let got_dead = dead.get(&key).map_or(0, |e| e.0);
        if (got_out, got_dead) != (want_out, want_dead) {
            problems.push(format!(
                "{key}: {got_out} in the output (want {want_out}), {got_dead} dead-lettered (want {want_dead})"
            ));
        }
        if let Some((_, len, message)) = dead.get(&key) {
            assert_eq!(*len, 5_000, "{key}: original bytes kept");
            let message = message.clone().unwrap_or_default();
            assert!(message.contains("too large"), "{key}: reason {message}");
        }
    }
    assert!(
        out.len() + dead.len() <= RECORDS as usize,
        "unknown keys in the output"
    );
    assert!(
        problems.is_empty(),
        "{} problems: {:#?}",
        problems.len(),
        &problems[..problems.len().min(20)]
    );
}

#[test]
fn eos_dead_letters_a_record_the_broker_refuses_and_commits_the_rest_once() {
    skips_or_dead_letters(
        "eos_dead_letters_a_record_the_broker_refuses_and_commits_the_rest_once",
        "dead_letter_queue",
        true,
    );
}

#[test]
fn eos_skips_a_record_the_broker_refuses_and_commits_the_rest_once() {
    skips_or_dead_letters(
        "eos_skips_a_record_the_broker_refuses_and_commits_the_rest_once",
        "log_and_continue",
        false,
    );
}

#[test]
fn eos_fails_naming_the_output_topic_and_the_brokers_reason() {
    let test = "eos_fails_naming_the_output_topic_and_the_brokers_reason";
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let run = Run::new(bootstrap, "log-and-fail");
    let state = tempfile::tempdir().unwrap();
    let (mut app, failure) = start(
        run.config(state.path(), &[("production.exception.handler", "log_and_fail")]),
        &run,
    );
    assert!(
        app.wait_for_state(State::Error, Duration::from_secs(120)),
        "state {:?}",
        app.state()
    );
    let message = failure.lock().unwrap().clone().unwrap_or_default();
    assert!(
        message.contains(&format!("`{}`", run.output)) && message.contains("too large"),
        "the error names the output topic and the broker's reason: {message}"
    );
    assert!(!message.contains("Erroneous state"), "{message}");
    app.close(Duration::from_secs(10));
    // Nothing of the failed transaction was committed: the output holds no record after the
    // first large one's transaction began, and certainly no large one.
    let out = run.committed(&run.output);
    assert!(
        out.values().all(|e| e.1 == 10),
        "no refused record is in the output"
    );
}
