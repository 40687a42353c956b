//! The input topic of a running count deleted, under the streams group protocol
//! (`group.protocol=streams`): the group coordinator reports `MISSING_SOURCE_TOPICS` in the
//! group's status on every heartbeat, and the stream thread must fail naming the cause
//! once the status has held past its grace, as Kafka Streams does, rather than keep its
//! tasks and wait forever.

use std::time::{Duration, Instant};

mod common;

use common::feed::{FeedPlan, Feeder, wait_committed};
use common::instance::{Instance, Run, logs_dir, remove_logs};
use streams_examples::admin::delete_topics;
use streams_test_utils::kafka;

/// ~200 records/s over 20 keys.
const FEED: FeedPlan = FeedPlan::new(20, 20);

#[test]
fn a_deleted_source_topic_fails_the_thread_naming_the_cause_under_the_streams_protocol() {
    let test = "a_deleted_source_topic_fails_the_thread_naming_the_cause_under_the_streams_protocol";
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let run = Run::create(bootstrap, "source-deleted", 2);
    let logs = logs_dir("source-deleted", &run.app);
    let feeder = Feeder::start(&run.bootstrap, &run.topics.input, FEED);
    let args = ["--threads", "1", "--group-protocol", "streams"];
    let mut instances = Instance::named(["A"], &logs, "at_least_once", &args);
    let a = &mut instances[0];
    a.start(&run);
    wait_committed(test, &run, 200, a);
    // The feeder stops first: a producer could create the topic again where the broker
    // creates topics on demand.
    drop(feeder.stop());
    delete_topics(&run.bootstrap, std::slice::from_ref(&run.topics.input)).unwrap();
    let deleted = Instant::now();
    let failure = a.wait_thread_failure(
        test,
        deleted,
        Duration::from_secs(120),
        "the input topic was deleted",
    );
    eprintln!(
        "{test}: the thread failed {:.1} s after the deletion: {failure}",
        deleted.elapsed().as_secs_f64()
    );
    assert!(
        failure.contains("source topics missing") && failure.contains(&run.topics.input),
        "{test}: the failure does not name the cause and the topic: {failure}"
    );
    a.crash();
    remove_logs(&logs);
}
