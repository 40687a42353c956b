//! Stream time survives a restart: it is committed with the input offsets (in Kafka
//! Streams' offset metadata), so a task that starts again, on another instance with an
//! empty state directory, goes on from the stream time its input had reached, as Kafka
//! Streams' `currentStreamTimeMs()` does (not from the first record it reads).
//!
//! Skipped without a broker (`STREAMS_TEST_BOOTSTRAP`), failed then if
//! `STREAMS_REQUIRE_KAFKA=1`.

use std::time::{Duration, Instant};

use streams_core::serdes::StringSerde;
use streams_core::{ProcessResult, Processor, ProcessorContext, Record, StreamsConfig};
use streams_dsl::{Consumed, Produced, StreamsBuilder};
use streams_test_utils::kafka::{self, ProduceRecord};

#[path = "common/kafka.rs"]
mod broker;

/// Replaces each value by the task's stream time when the record arrives.
struct StreamTimeOf;

impl Processor<String, String, String, String> for StreamTimeOf {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        record: Record<String, String>,
    ) -> ProcessResult {
        let time = ctx.stream_time();
        ctx.forward(Record::new(record.key, time.to_string(), record.timestamp))
    }
}

fn topology(input: &str, output: &str) -> streams_core::Topology {
    let b = StreamsBuilder::new();
    b.stream([input], Consumed::with(StringSerde, StringSerde))
        .process_values(|| StreamTimeOf, &[])
        .to(output, Produced::with(StringSerde, StringSerde));
    b.build().unwrap()
}

/// (key, stream time - base) of every output record.
fn read(bootstrap: &str, output: &str, base: i64) -> Vec<(String, i64)> {
    broker::read_all(bootstrap, output)
        .iter()
        .map(|r| {
            let time: i64 = r.value_str().unwrap().parse().unwrap();
            (r.key_str().unwrap(), time - base)
        })
        .collect()
}

fn wait_for(bootstrap: &str, output: &str, base: i64, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while read(bootstrap, output, base).len() < n {
        assert!(Instant::now() < deadline, "{:?}", read(bootstrap, output, base));
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The test's configuration: the classic group protocol (`broker::config`), or the
/// streams protocol, whose at-least-once commits go through this project's own client.
fn config(bootstrap: &str, app_id: &str, state: &std::path::Path, streams_protocol: bool) -> StreamsConfig {
    if !streams_protocol {
        return broker::config(bootstrap, app_id, state);
    }
    let dir = state.display().to_string();
    StreamsConfig::from_properties([
        ("application.id", app_id),
        ("bootstrap.servers", bootstrap),
        ("state.dir", dir.as_str()),
        ("commit.interval.ms", "200"),
        ("group.protocol", "streams"),
    ])
    .unwrap()
}

#[test]
fn a_task_resumes_the_stream_time_committed_with_its_offsets() {
    resumes_stream_time("a_task_resumes_the_stream_time_committed_with_its_offsets", false);
}

#[test]
fn a_streams_group_task_resumes_the_stream_time_committed_with_its_offsets() {
    resumes_stream_time(
        "a_streams_group_task_resumes_the_stream_time_committed_with_its_offsets",
        true,
    );
}

fn resumes_stream_time(test: &str, streams_protocol: bool) {
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let app_id = kafka::unique_name("dsl-stream-time");
    let input = kafka::unique_name("clicks");
    let output = kafka::unique_name("stream-times");
    kafka::create_topic(&bootstrap, &input, 1, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 1, &[]).unwrap();
    let base = kafka::recent_minute(10);
    let at = |k: &str, t: i64| ProduceRecord::new(k, "x").with_timestamp(base + t);

    // An instance on an empty state directory processes `records`, until `outputs` in all.
    let instance = |records: &[ProduceRecord], outputs: usize| {
        let state = tempfile::tempdir().unwrap();
        let mut app = broker::start(
            topology(&input, &output),
            config(&bootstrap, &app_id, state.path(), streams_protocol),
        );
        kafka::produce(&bootstrap, &input, records, Duration::from_secs(60)).unwrap();
        wait_for(&bootstrap, &output, base, outputs);
        assert!(app.close(Duration::from_secs(60)));
    };

    // The first instance's stream time reaches 25 s.
    instance(&[at("a", 1_000), at("b", 25_000)], 2);
    let committed = kafka::committed_offsets(&bootstrap, &app_id, &input, Duration::from_secs(30)).unwrap();
    assert_eq!(committed, [(0, Some(2))]);

    // A new instance with nothing on disk: its first record, older, finds the stream time
    // at 25 s; a newer one moves it on.
    instance(&[at("c", 5_000), at("d", 26_000)], 4);
    let expected = [("a", 1_000), ("b", 25_000), ("c", 25_000), ("d", 26_000)];
    let expected: Vec<(String, i64)> = expected.iter().map(|&(k, t)| (k.to_owned(), t)).collect();
    assert_eq!(read(&bootstrap, &output, base), expected);
}
