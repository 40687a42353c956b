//! The typed streams values: their defaults, how each parses, and the checks on each.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{config, fails_on, map, with_app};
use crate::config::{ProcessingGuarantee, StreamsConfig};
use crate::model::handlers::ErrorHandling;

#[test]
fn defaults() {
    let c = with_app(&[]).unwrap();
    assert_eq!(c.application_id(), "app");
    assert_eq!(c.bootstrap_servers(), None);
    assert_eq!(c.num_stream_threads(), 1);
    assert_eq!(c.processing_guarantee(), ProcessingGuarantee::AtLeastOnce);
    assert!(!c.is_exactly_once());
    assert_eq!(c.commit_interval(), Duration::from_millis(30_000));
    assert_eq!(c.state_dir(), std::env::temp_dir().join("streams-rs"));
    assert_eq!(
        c.application_state_dir(),
        std::env::temp_dir().join("streams-rs").join("app")
    );
    assert_eq!(c.cache_max_bytes(), 10_485_760);
    assert_eq!(
        c.cache_max_bytes(),
        streams_state::StoreBuildContext::DEFAULT_CACHE_MAX_BYTES
    );
    assert_eq!(c.deserialization_exception_handler(), ErrorHandling::LogAndFail);
    assert_eq!(c.processing_exception_handler(), ErrorHandling::LogAndFail);
    assert_eq!(c.production_exception_handler(), ErrorHandling::LogAndFail);
    assert_eq!(c.dead_letter_queue_topic(), None);
    assert_eq!(c.metrics_address(), None);
    assert_eq!(c.poll_interval(), Duration::from_millis(100));
    assert_eq!(c.repartition_purge_interval(), Duration::from_secs(30));
    assert_eq!(c.replication_factor(), -1);
    assert_eq!(c.ignored_properties().count(), 0);
    assert!(c.consumer_properties().is_empty());
    assert!(c.producer_properties().is_empty());
    assert!(c.admin_properties().is_empty());
    let policy = c.error_policy();
    assert_eq!(policy.deserialization, ErrorHandling::LogAndFail);
    assert_eq!(policy.dead_letter_topic, None);
}

#[test]
fn every_typed_value_parses() {
    let c = with_app(&[
        ("bootstrap.servers", "broker-1:9092,broker-2:9092"),
        ("num.stream.threads", "4"),
        ("processing.guarantee", "exactly_once_v2"),
        ("commit.interval.ms", "250"),
        ("state.dir", "/var/lib/streams"),
        ("statestore.cache.max.bytes", "0"),
        ("deserialization.exception.handler", "log_and_continue"),
        ("processing.exception.handler", "dead_letter_queue"),
        (
            "production.exception.handler",
            "org.apache.kafka.streams.errors.DefaultProductionExceptionHandler",
        ),
        ("errors.dead.letter.queue.topic.name", "app-dlq"),
        ("metrics.address", "127.0.0.1:9464"),
        ("poll.ms", "0"),
        ("replication.factor", "3"),
    ])
    .unwrap();
    assert_eq!(c.bootstrap_servers(), Some("broker-1:9092,broker-2:9092"));
    assert_eq!(c.num_stream_threads(), 4);
    assert!(c.is_exactly_once());
    assert_eq!(c.commit_interval(), Duration::from_millis(250));
    assert_eq!(c.state_dir(), PathBuf::from("/var/lib/streams"));
    assert_eq!(c.cache_max_bytes(), 0);
    let policy = c.error_policy();
    assert_eq!(policy.deserialization, ErrorHandling::LogAndContinue);
    assert_eq!(policy.processing, ErrorHandling::DeadLetterQueue);
    assert_eq!(policy.production, ErrorHandling::LogAndFail);
    assert_eq!(policy.dead_letter_topic.as_deref(), Some("app-dlq"));
    assert_eq!(
        c.metrics_address(),
        Some("127.0.0.1:9464".parse::<SocketAddr>().unwrap())
    );
    assert_eq!(c.poll_interval(), Duration::ZERO);
    assert_eq!(c.replication_factor(), 3);
    // bootstrap.servers reaches every client; no other streams property does.
    let expected = map(&[("bootstrap.servers", "broker-1:9092,broker-2:9092")]);
    assert_eq!(c.consumer_properties(), expected);
    assert_eq!(c.producer_properties(), expected);
    assert_eq!(c.admin_properties(), expected);
}

#[test]
fn application_id_is_required_and_checked() {
    let m = fails_on(config(&[("num.stream.threads", "2")]), "application.id");
    assert!(m.contains("required"), "{m}");
    fails_on(config(&[("application.id", "")]), "application.id");
    fails_on(config(&[("application.id", "   ")]), "application.id");
    let m = fails_on(config(&[("application.id", "my app")]), "application.id");
    assert!(m.contains("` `"), "{m}");
    fails_on(config(&[("application.id", "app/1")]), "application.id");
    fails_on(config(&[("application.id", "appé")]), "application.id");
    assert_eq!(
        config(&[("application.id", "My_app-1.0")])
            .unwrap()
            .application_id(),
        "My_app-1.0"
    );
}

#[test]
fn num_stream_threads_is_checked() {
    let m = fails_on(with_app(&[("num.stream.threads", "0")]), "num.stream.threads");
    assert!(m.contains("at least 1"), "{m}");
    let m = fails_on(with_app(&[("num.stream.threads", "abc")]), "num.stream.threads");
    assert!(m.contains("`abc` is not an integer"), "{m}");
    fails_on(with_app(&[("num.stream.threads", "-2")]), "num.stream.threads");
    fails_on(with_app(&[("num.stream.threads", "")]), "num.stream.threads");
    fails_on(
        with_app(&[("num.stream.threads", "99999999999999999999999")]),
        "num.stream.threads",
    );
}

#[test]
fn processing_guarantee_is_checked() {
    let m = fails_on(
        with_app(&[("processing.guarantee", "bogus")]),
        "processing.guarantee",
    );
    assert!(m.contains("bogus") && m.contains("exactly_once_v2"), "{m}");
    for retired in ["exactly_once", "exactly_once_beta"] {
        let m = fails_on(
            with_app(&[("processing.guarantee", retired)]),
            "processing.guarantee",
        );
        assert!(m.contains("use `exactly_once_v2`"), "{m}");
    }
    assert_eq!(
        "at_least_once".parse::<ProcessingGuarantee>().unwrap(),
        ProcessingGuarantee::AtLeastOnce
    );
    assert_eq!(ProcessingGuarantee::ExactlyOnceV2.to_string(), "exactly_once_v2");
}

#[test]
fn commit_interval_defaults_with_the_guarantee_unless_set() {
    let eos = [("processing.guarantee", "exactly_once_v2")];
    assert_eq!(
        with_app(&eos).unwrap().commit_interval(),
        Duration::from_millis(100)
    );
    let explicit = [
        ("processing.guarantee", "exactly_once_v2"),
        ("commit.interval.ms", "30000"),
    ];
    assert_eq!(
        with_app(&explicit).unwrap().commit_interval(),
        Duration::from_millis(30_000)
    );
    let alo = [
        ("processing.guarantee", "at_least_once"),
        ("commit.interval.ms", "0"),
    ];
    assert_eq!(with_app(&alo).unwrap().commit_interval(), Duration::ZERO);
    // Through the builder too: an explicit interval survives switching to exactly-once.
    let c = StreamsConfig::builder()
        .application_id("app")
        .commit_interval(Duration::from_secs(5))
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .build()
        .unwrap();
    assert_eq!(c.commit_interval(), Duration::from_secs(5));
    let c = StreamsConfig::builder()
        .application_id("app")
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .build()
        .unwrap();
    assert_eq!(c.commit_interval(), Duration::from_millis(100));
}

#[test]
fn durations_are_non_negative_integers() {
    let m = fails_on(with_app(&[("commit.interval.ms", "-1")]), "commit.interval.ms");
    assert!(m.contains("at least 0"), "{m}");
    fails_on(with_app(&[("commit.interval.ms", "1.5")]), "commit.interval.ms");
    fails_on(with_app(&[("poll.ms", "-5")]), "poll.ms");
    fails_on(with_app(&[("poll.ms", "soon")]), "poll.ms");
}

#[test]
fn cache_size_accepts_the_deprecated_name() {
    let c = with_app(&[("cache.max.bytes.buffering", "1024")]).unwrap();
    assert_eq!(c.cache_max_bytes(), 1024);
    let both = [
        ("cache.max.bytes.buffering", "1024"),
        ("statestore.cache.max.bytes", "2048"),
    ];
    assert_eq!(with_app(&both).unwrap().cache_max_bytes(), 2048);
    fails_on(
        with_app(&[("cache.max.bytes.buffering", "-1")]),
        "cache.max.bytes.buffering",
    );
    fails_on(
        with_app(&[("statestore.cache.max.bytes", "lots")]),
        "statestore.cache.max.bytes",
    );
    // Neither reaches a client.
    assert!(with_app(&both).unwrap().consumer_properties().is_empty());
}

#[test]
fn metrics_address_must_be_a_socket_address() {
    for bad in ["localhost", "127.0.0.1", "127.0.0.1:99999", "9464", ""] {
        let m = fails_on(with_app(&[("metrics.address", bad)]), "metrics.address");
        assert!(m.contains("socket address"), "{m}");
    }
    let c = with_app(&[("metrics.address", "[::1]:9464")]).unwrap();
    assert_eq!(c.metrics_address().unwrap().port(), 9464);
}

#[test]
fn max_task_idle_is_minus_one_or_a_duration() {
    let idle = |v: &str| with_app(&[("max.task.idle.ms", v)]).unwrap().max_task_idle();
    assert_eq!(with_app(&[]).unwrap().max_task_idle(), Some(Duration::ZERO));
    assert_eq!(idle("-1"), None);
    assert_eq!(idle("250"), Some(Duration::from_millis(250)));
    let built = StreamsConfig::builder()
        .application_id("app")
        .max_task_idle(None)
        .build()
        .unwrap();
    assert_eq!(built.max_task_idle(), None);
    assert!(built.to_string().contains("max.task.idle.ms = -1"), "{built}");
    for bad in ["-2", "x", ""] {
        fails_on(with_app(&[("max.task.idle.ms", bad)]), "max.task.idle.ms");
    }
}

#[test]
fn replication_factor_is_minus_one_or_positive() {
    assert_eq!(
        with_app(&[("replication.factor", "-1")])
            .unwrap()
            .replication_factor(),
        -1
    );
    assert_eq!(
        with_app(&[("replication.factor", "1")])
            .unwrap()
            .replication_factor(),
        1
    );
    for bad in ["0", "-2", "x", "3000000000"] {
        fails_on(with_app(&[("replication.factor", bad)]), "replication.factor");
    }
}

#[test]
fn other_empty_values_fail() {
    fails_on(with_app(&[("bootstrap.servers", "")]), "bootstrap.servers");
    fails_on(with_app(&[("state.dir", " ")]), "state.dir");
    let empty = StreamsConfig::builder()
        .application_id("app")
        .state_dir("")
        .build();
    fails_on(empty, "state.dir");
}

#[test]
fn later_pairs_override_earlier_ones_and_values_are_trimmed() {
    let c = config(&[
        (" application.id ", " a "),
        ("num.stream.threads", "1"),
        ("num.stream.threads", " 3 "),
    ])
    .unwrap();
    assert_eq!(c.application_id(), "a");
    assert_eq!(c.num_stream_threads(), 3);
}

#[test]
fn application_server_is_an_endpoint_host_colon_port() {
    let c = with_app(&[("application.server", "orders-1.internal:8080")]).unwrap();
    assert_eq!(c.application_server(), Some("orders-1.internal:8080"));
    assert_eq!(with_app(&[]).unwrap().application_server(), None);
    for bad in ["orders-1", ":8080", "host:0", "host:http", "a b:1"] {
        let m = fails_on(with_app(&[("application.server", bad)]), "application.server");
        assert!(m.contains("host:port"), "{bad}: {m}");
    }
}
