//! Permanent errors on the three-broker cluster of `scripts/kafka-cluster.sh`, where topics
//! are not created on demand (`auto.create.topics.enable=false`, as in production): an
//! output topic deleted while an exactly-once application writes to it.
//!
//! With the default production handler (`log_and_fail`) the stream thread must fail with
//! an error that names the topic, rather than abort and retry its transaction forever or
//! drop records silently: what Kafka Streams does with its default handler. With
//! `log_and_continue` the records for the deleted topic are dropped (and logged) and the
//! application goes on: every input is then in the audit topic exactly once (read with
//! `read_committed`) and no thread fails.
//!
//! Run like `cluster_faults.rs` (see there); `scripts/test.sh` runs it with the short fault
//! suite.

use std::time::{Duration, Instant};

mod common;

use common::cluster::{Cluster, cluster_bootstrap};
use common::feed::{FeedPlan, Feeder, wait_committed, wait_processed};
use common::instance::{Instance, Run, logs_dir, logs_of, remove_logs};
use common::verify::{Guarantee, verify_audit};

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
