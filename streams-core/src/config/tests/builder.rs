//! The typed builder: its setters, `to_builder` and its checks.

use std::path::PathBuf;
use std::time::Duration;

use super::fails_on;
use crate::config::StreamsConfig;
use crate::model::handlers::ErrorHandling;

#[test]
fn builder_sets_typed_values_and_client_properties() {
    let c = StreamsConfig::builder()
        .application_id("orders")
        .bootstrap_servers("localhost:9092")
        .num_stream_threads(2)
        .state_dir("/data/streams")
        .cache_max_bytes(1 << 20)
        .deserialization_exception_handler(ErrorHandling::LogAndContinue)
        .production_exception_handler(ErrorHandling::LogAndContinue)
        .processing_exception_handler(ErrorHandling::DeadLetterQueue)
        .dead_letter_queue_topic("orders-dlq")
        .metrics_address("0.0.0.0:9464".parse().unwrap())
        .poll_interval(Duration::from_millis(20))
        .repartition_purge_interval(Duration::from_millis(250))
        .replication_factor(3)
        .set("session.timeout.ms", "6000")
        .consumer_property("fetch.wait.max.ms", "10")
        .producer_property("linger.ms", "1")
        .admin_property("request.timeout.ms", "500")
        .build()
        .unwrap();
    assert_eq!(c.num_stream_threads(), 2);
    assert_eq!(c.state_dir(), PathBuf::from("/data/streams"));
    assert_eq!(c.cache_max_bytes(), 1 << 20);
    assert_eq!(c.production_exception_handler(), ErrorHandling::LogAndContinue);
    assert_eq!(c.processing_exception_handler(), ErrorHandling::DeadLetterQueue);
    assert_eq!(c.poll_interval(), Duration::from_millis(20));
    assert_eq!(c.repartition_purge_interval(), Duration::from_millis(250));
    assert_eq!(c.consumer_properties()["fetch.wait.max.ms"], "10");
    assert_eq!(c.consumer_properties()["session.timeout.ms"], "6000");
    assert_eq!(c.producer_properties()["linger.ms"], "1");
    assert_eq!(c.admin_properties()["request.timeout.ms"], "500");
    assert!(!c.consumer_properties().contains_key("linger.ms"));

    // to_builder round-trips and allows changes.
    assert_eq!(c.to_builder().build().unwrap(), c);
    let more = c.to_builder().num_stream_threads(8).build().unwrap();
    assert_eq!(more.num_stream_threads(), 8);
    assert_eq!(more.state_dir(), c.state_dir());

    // The builder's policy setter.
    let policy = c.error_policy();
    let again = StreamsConfig::builder()
        .application_id("x")
        .error_policy(&policy)
        .build()
        .unwrap();
    assert_eq!(again.error_policy().processing, ErrorHandling::DeadLetterQueue);
    assert_eq!(again.error_policy().production, ErrorHandling::LogAndContinue);
    assert_eq!(again.dead_letter_queue_topic(), Some("orders-dlq"));

    fails_on(StreamsConfig::builder().build(), "application.id");
    fails_on(
        StreamsConfig::builder()
            .application_id("a")
            .num_stream_threads(0)
            .build(),
        "num.stream.threads",
    );
    fails_on(
        StreamsConfig::builder()
            .application_id("a")
            .set("aplication.id", "b")
            .build(),
        "aplication.id",
    );
}
