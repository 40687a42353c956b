//! Finding the test broker: the environment variables `scripts/test.sh` sets, and
//! [`require_kafka`], the first line of every Kafka test.

use std::io::Write as _;

/// Environment variable holding the test broker's bootstrap servers (`host:port[,host:port]`).
pub const BOOTSTRAP_ENV: &str = "STREAMS_TEST_BOOTSTRAP";

/// Environment variable that, when `1` (or `true`/`yes`), makes a Kafka test without a broker
/// fail instead of skipping.
pub const REQUIRE_KAFKA_ENV: &str = "STREAMS_REQUIRE_KAFKA";

/// The test broker's bootstrap servers from [`BOOTSTRAP_ENV`], if set and not blank.
pub fn kafka_bootstrap() -> Option<String> {
    std::env::var(BOOTSTRAP_ENV)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Whether [`REQUIRE_KAFKA_ENV`] asks for Kafka tests to fail rather than skip without a broker.
pub fn kafka_required() -> bool {
    std::env::var(REQUIRE_KAFKA_ENV)
        .map(|v| {
            let v = v.trim();
            v == "1" || v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("yes")
        })
        .unwrap_or(false)
}

/// The first line of every test that needs a real broker.
///
/// Returns the bootstrap servers when [`BOOTSTRAP_ENV`] is set. Otherwise it prints
/// `SKIPPED <test>: no Kafka broker (...)` to stderr (past the test harness's output
/// capture, so it shows in every run) and returns `None`, so the test can
/// `return` early: `let Some(bootstrap) = require_kafka("name") else { return; };`.
///
/// # Panics
///
/// When no broker is configured but [`REQUIRE_KAFKA_ENV`] is `1`: there the test must fail
/// rather than pass silently.
pub fn require_kafka(test: &str) -> Option<String> {
    if let Some(bootstrap) = kafka_bootstrap() {
        return Some(bootstrap);
    }
    if kafka_required() {
        panic!(
            "{test}: {REQUIRE_KAFKA_ENV}=1 but {BOOTSTRAP_ENV} is not set, so there is no Kafka \
             broker to test against (run `bash scripts/test.sh`, or `bash scripts/kafka.sh start` \
             and export {BOOTSTRAP_ENV}=127.0.0.1:9092)"
        );
    }
    // Written to the real stderr rather than with `eprintln!`, which the test harness
    // captures and only shows for failing tests: a skip must be visible in every run.
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(
        stderr,
        "SKIPPED {test}: no Kafka broker (set {BOOTSTRAP_ENV} or run scripts/test.sh)"
    );
    None
}
