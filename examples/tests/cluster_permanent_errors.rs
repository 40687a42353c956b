//! Permanent errors on the three-broker cluster of `scripts/kafka-cluster.sh`, where topics
//! are not created on demand (`auto.create.topics.enable=false`, as in production): an
//! output topic deleted while an exactly-once application writes to it, and records larger
//! than an output topic takes.
//!
//! With the default production handler (`log_and_fail`) the stream thread must fail with
//! an error that names the topic, rather than abort and retry its transaction forever or
//! drop records silently: what Kafka Streams does with its default handler. With
//! `log_and_continue` the records for the deleted topic are dropped (and logged) and the
//! application goes on: every input is then in the audit topic exactly once (read with
//! `read_committed`) and no thread fails.
//!
//! With the `dead_letter_queue` handler, inputs of 5,000 bytes among the small ones, whose
//! copies the audit topic (`max.message.bytes=4000`) refuses, go to the dead-letter topic
//! with their original bytes and the broker's reason, exactly once under exactly-once (at
//! least once under at-least-once), and every small input is in the audit topic exactly once
//! (at least once).
//!
//! Run like `cluster_faults` (see `cluster_faults/main.rs`); `scripts/test.sh` runs it with the short fault
//! suite.

use std::time::{Duration, Instant};

mod common;

use common::cluster::{Cluster, cluster_bootstrap};
use common::feed::{FeedPlan, Feeder, wait_committed, wait_processed};
use common::instance::{Instance, Run, logs_dir, logs_of, remove_logs, sleep_alive};
use common::verify::{Guarantee, verify_audit};
use streams_core::handlers::headers::{EXCEPTION, MESSAGE, TOPIC};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

/// ~200 records/s over 20 keys.
const FEED: FeedPlan = FeedPlan::new(20, 20);
/// How long the thread may take to fail after the deletion: librdkafka gives up on the
/// topic after `topic.metadata.propagation.max.ms` (30 s), and a transaction waits for
/// its records at most `transaction.timeout.ms` (10 s).
const FAIL_WITHIN: Duration = Duration::from_secs(120);

/// An exactly-once count app (one instance, one thread) under production handler
/// `handler`, running until its output topic has been deleted.
struct Deleted {
    cluster: Cluster,
    run: Run,
    logs: std::path::PathBuf,
    feeder: Feeder,
    instances: [Instance; 1],
    output: String,
    deleted: Instant,
}

fn delete_output_while_running(test: &'static str, handler: &str) -> Option<Deleted> {
    let bootstrap = cluster_bootstrap(test)?;
    let cluster = Cluster::new(test, Instant::now());
    let run = Run::create(bootstrap, "cluster-errors", 2);
    let logs = logs_dir("cluster-errors", &run.app);
    let feeder = Feeder::start(&run.bootstrap, &run.topics.input, FEED);
    let handler = format!("production.exception.handler={handler}");
    let args = ["--threads", "1", "--property", &handler];
    let mut instances = Instance::named(["A"], &logs, "exactly_once_v2", &args);
    let a = &mut instances[0];
    a.start(&run);
    // Processing and committing before the deletion.
    wait_committed(test, &run, 500, a);
    let output = run.topics.output.clone();
    cluster.run(&["delete-topic", &output], true);
    Some(Deleted {
        cluster,
        run,
        logs,
        feeder,
        instances,
        output,
        deleted: Instant::now(),
    })
}

#[test]
fn three_brokers_eos_fails_naming_an_output_topic_deleted_while_it_runs() {
    let test = "three_brokers_eos_fails_naming_an_output_topic_deleted_while_it_runs";
    let Some(mut d) = delete_output_while_running(test, "log_and_fail") else {
        return;
    };
    let (deleted, output) = (d.deleted, d.output.clone());
    let a = &mut d.instances[0];

    let failure = loop {
        let log = std::fs::read_to_string(&a.log).unwrap_or_default();
        if let Some(line) = log.lines().find(|l| l.contains("stream thread failed")) {
            break line.to_owned();
        }
        assert!(
            deleted.elapsed() < FAIL_WITHIN,
            "{test}: no stream thread failed {FAIL_WITHIN:?} after the output topic was deleted \
             ({} transactions aborted meanwhile); see {}",
            a.log_matches("aborting the transaction"),
            a.log.display()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let aborts = a.log_matches("aborting the transaction");
    eprintln!(
        "{test}: the thread failed {:.1} s after the deletion, after {aborts} aborted \
         transactions: {failure}",
        deleted.elapsed().as_secs_f64()
    );
    assert!(
        failure.contains(&output),
        "{test}: the failure does not name the deleted topic {output}: {failure}"
    );
    a.crash();
    drop(d.feeder.stop());
    assert!(
        aborts <= 5,
        "{test}: {aborts} transactions aborted before the thread failed (a retry loop); see {}",
        logs_of(&d.instances)
    );
    // The failed thread's transaction is aborted by the coordinator after
    // `transaction.timeout.ms` at the latest.
    let open = d
        .cluster
        .open_transactions_after(&format!("{}-", d.run.app), Duration::from_secs(60));
    assert!(
        open.is_empty(),
        "{test}: transactions still open 60 s later: {open:?}"
    );
    remove_logs(&d.logs);
}

#[test]
fn three_brokers_eos_skips_records_for_an_output_topic_deleted_while_it_runs() {
    let test = "three_brokers_eos_skips_records_for_an_output_topic_deleted_while_it_runs";
    let Some(d) = delete_output_while_running(test, "log_and_continue") else {
        return;
    };
    let Deleted {
        cluster,
        run,
        logs,
        feeder,
        mut instances,
        deleted,
        ..
    } = d;
    // Past librdkafka's `topic.metadata.propagation.max.ms`: the topic is known gone.
    while deleted.elapsed() < Duration::from_secs(45) {
        instances[0].check_alive();
        std::thread::sleep(Duration::from_millis(500));
    }
    let fed = feeder.stop();
    wait_processed(&run, &fed.ends, &mut instances);
    instances[0].leave();
    let aborts = instances[0].log_matches("aborting the transaction");
    let report = verify_audit(&run.bootstrap, run.topics.audit(), &fed, Guarantee::ExactlyOnce);
    eprintln!(
        "{test}: {} inputs, {} committed audit records ({} missing, {} duplicated); {aborts} \
         transactions aborted after the deletion",
        fed.records(),
        report.audit_records,
        report.missing,
        report.duplicated,
    );
    report.assert_ok(&logs_of(&instances));
    assert!(
        cluster.open_transactions(&format!("{}-", run.app)).is_empty(),
        "{test}: transactions left open after a clean stop"
    );
    remove_logs(&logs);
}

/// Inputs too large for the audit topic, written among the feeder's.
const LARGE: usize = 6;

/// Two instances of one stream thread each under `guarantee` with the `dead_letter_queue`
/// production handler; [`LARGE`] inputs of 5,000 bytes written one every 2 s among ~200
/// small ones a second. Every small input in the audit topic, every large one in the
/// dead-letter topic with its bytes and the broker's reason (once each under exactly-once).
fn dead_letters_records_too_large(test: &'static str, guarantee: Guarantee) {
    let Some(bootstrap) = cluster_bootstrap(test) else {
        return;
    };
    let cluster = Cluster::new(test, Instant::now());
    let run = Run::create_with_audit(bootstrap, "cluster-large", 2, &[("max.message.bytes", "4000")]);
    let dlq = kafka::unique_name("cluster-large-dlq");
    kafka::create_topic(&run.bootstrap, &dlq, 2, &[]).unwrap();
    let logs = logs_dir("cluster-errors", &run.app);
    let feeder = Feeder::start(&run.bootstrap, &run.topics.input, FEED);
    let dead_letters = format!("errors.dead.letter.queue.topic.name={dlq}");
    // Small records batch up to 3,000 bytes, under the audit topic's limit.
    let args = [
        "--threads",
        "1",
        "--property",
        "production.exception.handler=dead_letter_queue",
        "--property",
        &dead_letters,
        "--property",
        "producer.batch.size=3000",
    ];
    let mut instances = Instance::named(["A", "B"], &logs, guarantee.config(), &args);
    for instance in &mut instances {
        instance.start(&run);
    }
    wait_committed(test, &run, 500, &mut instances[0]);
    for i in 0..LARGE {
        let record = ProduceRecord::new(format!("large-{i}"), vec![b'x'; 5_000]);
        kafka::produce(
            &run.bootstrap,
            &run.topics.input,
            &[record],
            Duration::from_secs(60),
        )
        .unwrap();
        sleep_alive(Duration::from_secs(2), &mut instances);
    }
    let fed = feeder.stop();
    wait_processed(&run, &fed.ends, &mut instances);
    for instance in &mut instances {
        instance.leave();
    }
    let aborts: usize = instances
        .iter()
        .map(|i| i.log_matches("aborting the transaction"))
        .sum();
    let report = verify_audit(&run.bootstrap, run.topics.audit(), &fed, guarantee);
    let mut per_key: std::collections::BTreeMap<String, usize> = Default::default();
    let mut problems = Vec::new();
    let dead = kafka::consume_all(
        &run.bootstrap,
        &dlq,
        ConsumeUntil::Idle(Duration::ZERO),
        Duration::from_secs(60),
        true,
    )
    .unwrap();
    for r in &dead {
        let key = r.key_str().unwrap_or_default();
        *per_key.entry(key.clone()).or_default() += 1;
        let len = r.value.as_ref().map_or(0, Vec::len);
        let message = r.header_str(MESSAGE).unwrap_or_default();
        if !key.starts_with("large-")
            || len != 5_000
            || r.header_str(EXCEPTION).as_deref() != Some("production")
            || r.header_str(TOPIC).as_deref() != Some(run.topics.audit())
            || !message.contains("too large")
        {
            problems.push(format!("dead letter {key}: {len} bytes, reason {message:?}"));
        }
    }
    for i in 0..LARGE {
        let key = format!("large-{i}");
        let n = per_key.get(&key).copied().unwrap_or(0);
        if n == 0 || (n > 1 && guarantee == Guarantee::ExactlyOnce) {
            problems.push(format!("{key} is {n} times in the dead-letter topic"));
        }
    }
    eprintln!(
        "{test}: {} small inputs, {} committed audit records ({} missing, {} duplicated); {} dead \
         letters of {LARGE} large inputs; {aborts} transactions aborted",
        fed.records(),
        report.audit_records,
        report.missing,
        report.duplicated,
        dead.len(),
    );
    report.assert_ok(&logs_of(&instances));
    assert!(
        problems.is_empty(),
        "{test}: {problems:#?}; see {}",
        logs_of(&instances)
    );
    let dead_threads: usize = instances.iter().map(Instance::threads_failed).sum();
    assert_eq!(
        dead_threads,
        0,
        "stream threads dead; see {}",
        logs_of(&instances)
    );
    assert!(
        cluster.open_transactions(&format!("{}-", run.app)).is_empty(),
        "{test}: transactions left open after a clean stop"
    );
    remove_logs(&logs);
}

#[test]
fn three_brokers_eos_dead_letters_records_larger_than_the_topic_takes() {
    dead_letters_records_too_large(
        "three_brokers_eos_dead_letters_records_larger_than_the_topic_takes",
        Guarantee::ExactlyOnce,
    );
}

#[test]
fn three_brokers_alos_dead_letters_records_larger_than_the_topic_takes() {
    dead_letters_records_too_large(
        "three_brokers_alos_dead_letters_records_larger_than_the_topic_takes",
        Guarantee::AtLeastOnce,
    );
}
