//! How a configuration shows itself: the effective values, with secrets masked.

use super::with_app;

#[test]
fn display_lists_effective_values_and_masks_secrets() {
    let c = with_app(&[
        ("processing.guarantee", "exactly_once_v2"),
        ("sasl.password", "hunter2"),
        ("producer.ssl.key.password", "hunter3"),
        ("consumer.fetch.wait.max.ms", "5"),
        ("max.warmup.replicas", "1"),
        ("num.standby.replicas", "1"),
    ])
    .unwrap();
    let shown = c.to_string();
    for line in [
        "application.id = app",
        "bootstrap.servers = <unset>",
        "num.stream.threads = 1",
        "processing.guarantee = exactly_once_v2",
        "commit.interval.ms = 100",
        "statestore.cache.max.bytes = 10485760",
        "deserialization.exception.handler = log_and_fail",
        "poll.ms = 100",
        "replication.factor = -1",
        "consumer.fetch.wait.max.ms = 5",
        "sasl.password = ********",
        "producer.ssl.key.password = ********",
        "num.standby.replicas = 1",
        "# ignored (not supported): max.warmup.replicas",
    ] {
        assert!(shown.lines().any(|l| l == line), "missing `{line}` in\n{shown}");
    }
    let debug = format!("{c:?}");
    assert!(
        debug.contains("commit.interval.ms") && debug.contains("fetch.wait.max.ms"),
        "{debug}"
    );
    for shown in [shown, debug, format!("{:?}", c.to_builder())] {
        assert!(!shown.contains("hunter"), "{shown}");
    }
}
