//! Partitions added to the input topic of a running stateful application.
//!
//! The count's store is partitioned like its input: the changelog has as many partitions as
//! the input had when the application created it, and a key's count lives in the task of
//! the partition the key hashed to. Once partitions are added, keys move to other
//! partitions (the count of a key would restart from 0 there) and the new partitions' tasks
//! have no changelog partition. Kafka Streams stops with an error; so must this runtime,
//! naming the cause, rather than retry for minutes or count wrongly.

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions};
use rdkafka::client::DefaultClientContext;

mod common;

use common::feed::{FeedPlan, Feeder, wait_committed};
use common::instance::{Instance, Run, logs_dir, remove_logs};
use streams_test_utils::kafka;

/// ~200 records/s over 20 keys.
const FEED: FeedPlan = FeedPlan::new(20, 20);

/// Adds partitions to `topic` until it has `total`.
fn add_partitions(bootstrap: &str, topic: &str, total: usize) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let results = rt
        .block_on(admin.create_partitions(&[NewPartitions::new(topic, total)], &opts))
        .expect("create partitions");
    for r in results {
        r.expect("partitions added");
    }
}

#[test]
fn partitions_added_to_the_input_of_a_count_stop_it_with_an_error_naming_the_cause() {
    partitions_added(
        "partitions_added_to_the_input_of_a_count_stop_it_with_an_error_naming_the_cause",
        None,
    );
}

#[test]
fn partitions_added_stop_a_count_with_an_error_naming_the_cause_under_the_consumer_protocol() {
    partitions_added(
        "partitions_added_stop_a_count_with_an_error_naming_the_cause_under_the_consumer_protocol",
        Some("consumer"),
    );
}

/// Under the streams protocol the group coordinator sees the partition counts apart first
/// and says so in the group's status (`INCORRECTLY_PARTITIONED_TOPICS`), or the
/// restoration finds the changelog partition missing, whichever comes first.
#[test]
fn partitions_added_stop_a_count_with_an_error_naming_the_cause_under_the_streams_protocol() {
    partitions_added(
        "partitions_added_stop_a_count_with_an_error_naming_the_cause_under_the_streams_protocol",
        Some("streams"),
    );
}

/// A one-thread exactly-once count (group protocol `protocol`, classic by default) that
/// has committed; partitions added to its input; its thread must fail naming the cause
/// within 120 s.
fn partitions_added(test: &str, protocol: Option<&str>) {
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let run = Run::create(bootstrap, "partitions-added", 2);
    let logs = logs_dir("partitions-added", &run.app);
    let feeder = Feeder::start(&run.bootstrap, &run.topics.input, FEED);
    // A metadata refresh every 2 s instead of 5 minutes: the consumer sees the new
    // partitions soon.
    let mut args = vec![
        "--threads",
        "1",
        "--property",
        "consumer.topic.metadata.refresh.interval.ms=2000",
    ];
    if let Some(protocol) = protocol {
        args.extend(["--group-protocol", protocol]);
    }
    let mut instances = Instance::named(["A"], &logs, "exactly_once_v2", &args);
    let a = &mut instances[0];
    a.start(&run);
    wait_committed(test, &run, 200, a);
    add_partitions(&run.bootstrap, &run.topics.input, 4);
    let added = Instant::now();
    let failure = a.wait_thread_failure(test, added, Duration::from_secs(120), "partitions were added");
    eprintln!(
        "{test}: the thread failed {:.1} s after partitions were added: {failure}",
        added.elapsed().as_secs_f64()
    );
    assert!(
        failure.contains("partitions were added to a source topic")
            || (protocol == Some("streams") && failure.contains("topics incorrectly partitioned")),
        "{test}: the failure does not name the cause: {failure}"
    );
    drop(feeder.stop());
    a.crash();
    remove_logs(&logs);
}
