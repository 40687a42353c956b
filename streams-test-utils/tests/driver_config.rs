//! `DriverConfig::from(&StreamsConfig)`: the driver runs with an application's own settings.

use streams_core::{ErrorHandling, StreamsConfig};
use streams_test_utils::DriverConfig;

#[test]
fn driver_config_follows_the_application_config() {
    let c = StreamsConfig::builder()
        .application_id("orders")
        .bootstrap_servers("localhost:9092")
        .cache_max_bytes(1 << 20)
        .processing_exception_handler(ErrorHandling::DeadLetterQueue)
        .dead_letter_queue_topic("orders-dlq")
        .build()
        .unwrap();
    let driver = DriverConfig::from(&c);
    assert_eq!(driver.application_id, "orders");
    assert_eq!(driver.cache_max_bytes, 1 << 20);
    assert_eq!(driver.errors.processing, ErrorHandling::DeadLetterQueue);
    assert_eq!(driver.errors.dead_letter_topic.as_deref(), Some("orders-dlq"));
    // What the application's config does not say keeps the driver's defaults.
    let defaults = DriverConfig::default();
    assert_eq!(driver.commit_every, defaults.commit_every);
    assert_eq!(driver.start_wall_clock, defaults.start_wall_clock);
    assert!(driver.partitions.is_empty());
    assert!(driver.metrics.is_none());
}
