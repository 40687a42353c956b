//! The web-hook example against the real broker (skipped without one, see
//! `streams_test_utils::kafka::require_kafka`): the range join end to end, HTTP delivery
//! through the framework's retry ladder (`streams_dsl::retry`, a second streams
//! application) with a millisecond ladder to a local server that fails on purpose, the
//! dead-letter topic and its tool, a retry waiting for its delay while live traffic flows,
//! and a waiting retry surviving a restart through its store's changelog.
//!
//! Every test uses fresh topics, groups and application ids, and every wait is bounded.
//!
//! The settings and helpers the tests share are here; the tests are in the modules: `join`,
//! `pipeline` (delivery, dead letters, replay), `ladder` (retry timing), `dlq_tool`, `docs`.

#[path = "webhook_delivery/dlq_tool.rs"]
mod dlq_tool;
#[path = "webhook_delivery/docs.rs"]
mod docs;
#[path = "webhook_delivery/join.rs"]
mod join;
#[path = "webhook_delivery/ladder.rs"]
mod ladder;
#[path = "webhook_delivery/pipeline.rs"]
mod pipeline;

use std::time::{Duration, Instant};

use streams_core::KafkaStreams;
use streams_examples::webhooks::WebHookTopics;
use streams_test_utils::kafka;

const PARTITIONS: i32 = 3;
const WAIT: Duration = Duration::from_secs(90);

/// Fresh topic names for one test.
fn fresh_topics(test: &str) -> WebHookTopics {
    WebHookTopics::with_suffix(&format!("-{}", kafka::unique_name(test)))
}

/// The runtime's `poll.ms` in these tests: the task's wall clock, which due times count
/// from, is read once per pass of the stream thread's loop, so it can lag the real time by
/// about this (plus a commit).
const POLL_MS: u64 = 50;

/// Settings so groups form quickly on the test broker, and commits come often.
fn streams_properties() -> Vec<(String, String)> {
    [
        ("consumer.session.timeout.ms", "6000"),
        ("consumer.heartbeat.interval.ms", "500"),
        ("commit.interval.ms", "500"),
        ("poll.ms", &POLL_MS.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Waits until the join processed `n` records.
fn wait_processed(streams: &KafkaStreams, n: u64) {
    let deadline = Instant::now() + WAIT;
    while streams.processed_records() < n {
        assert!(
            Instant::now() < deadline,
            "the join processed {} of {n} records",
            streams.processed_records()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
