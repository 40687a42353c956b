//! Processing guarantees through broker faults, on the three-broker KRaft cluster of
//! `scripts/kafka-cluster.sh` (replication factor 3, `min.insync.replicas=2`): three
//! `count-app --smoke` instances (A, B and C) of 2 stream threads each share an input of 6
//! partitions, while a feeder writes ~1,000 records/s with a sequence number per key, and
//! brokers fail. The smoke topology (`streams_examples::smoke`) writes every input to an
//! audit topic, counts per key, joins each input with its key's count, aggregates
//! count/sum/min/max per group of keys through a repartition topic, and counts per key in
//! 10 s windows (`CLUSTER_TOPOLOGY=count` runs the count and the audit alone). `scripts/test.sh` (so CI) runs the short ones; `three_brokers_long_*` are
//! the full run's (docs/kafka-for-tests.md, "The fault suite"):
//!
//! - `three_brokers_eos_survives_partition_leader_kills`: the leader of input partition 0 is
//!   killed (SIGKILL) and started again (`bounce`), then ~10 s later the leader of partition
//!   1, ...: `CLUSTER_FAULT_ROUNDS` bounces (2 by default);
//! - `three_brokers_alos_survives_partition_leader_kills`: the same under `at_least_once`;
//! - `three_brokers_eos_survives_a_paused_group_coordinator`: the node of the group's
//!   coordinator paused (SIGSTOP, a hung broker whose sockets stay open) for
//!   `CLUSTER_PAUSE_S` seconds (30 by default), then resumed;
//! - `three_brokers_long_eos_survives_a_paused_broker`: the leader of input partition 0
//!   paused for `CLUSTER_PAUSE_S` seconds (90 outlasts `transaction.timeout.ms` and the
//!   request timeouts);
//! - `three_brokers_long_eos_survives_an_instance_killed_during_a_pause`: the leader of input
//!   partition 0 paused for `CLUSTER_PAUSE_S` seconds; 5 s into the pause instance A is
//!   killed (SIGKILL) and 5 s later started again, restoring its tasks while the broker is
//!   still paused;
//! - `three_brokers_long_eos_survives_a_coordinator_paused_mid_rebalance`: A and B run
//!   alone until every input partition is committed; C starts, and
//!   `CLUSTER_REBALANCE_PAUSE_AFTER_MS` (1,500 by default) later, while tasks move to it,
//!   the group coordinator's node is paused for `CLUSTER_PAUSE_S` seconds;
//! - `three_brokers_long_eos_survives_a_rolling_restart`: each node in turn stopped cleanly
//!   and started again (`restart`);
//! - `three_brokers_long_eos_goes_on_while_its_only_bootstrap_broker_is_paused`: the
//!   instances are given one node as their bootstrap list, the group coordinator's; it is
//!   paused, and the group must commit again on every input partition while it still is
//!   (under the streams protocol unless `CLUSTER_GROUP_PROTOCOL` names another);
//! - `three_brokers_long_eos_survives_controller_kills`: the active KRaft controller
//!   bounced, `CLUSTER_FAULT_ROUNDS` times;
//! - `three_brokers_long_eos_survives_the_whole_cluster_paused`: every node paused for
//!   `CLUSTER_ALL_DOWN_S` seconds (60 by default), then resumed;
//! - `three_brokers_long_eos_survives_the_whole_cluster_killed`: every node killed
//!   (SIGKILL), the cluster down for `CLUSTER_ALL_DOWN_S` seconds, then started again.
//!
//! The instances join with the classic group protocol unless `CLUSTER_GROUP_PROTOCOL` names
//! another (`consumer`, `streams`). `CLUSTER_GUARANTEE=at_least_once` (or `exactly_once_v2`)
//! runs every scenario under that guarantee, whatever its name says. `CLUSTER_KILL_INSTANCE=1`
//! also kills an instance (SIGKILL) during every fault, A, B, C in turn, and starts it again
//! (`faults.rs`).
//!
//! After the faults the feeder runs 5 s more and stops; once the group has committed every
//! input offset, the instances stop cleanly (SIGTERM, exit 0) and what was committed is read
//! with `read_committed` and checked by identity (`common/verify.rs`): under exactly-once
//! every input in the audit topic exactly once, each key's counts 1..n exactly once, every
//! input joined exactly once with the count it made, each group's stats counts 1..N exactly
//! once with the exact sum, minimum and maximum at N, and each key's windowed counts 1..m
//! exactly once per window summing to its inputs; under at-least-once nothing missing; and
//! no transaction of the application is left open (`ListTransactions`). An instance that exits by itself or loses a stream
//! thread, or a group that commits nothing for 120 s, fails the test. Each fault prints how
//! long after the broker was back (`start-node` or `resume` returned) the group's committed
//! offsets moved again, first on one input partition and then on all of them.
//!
//! The cluster: `bash scripts/kafka-cluster.sh start`, then
//! `STREAMS_TEST_CLUSTER_BOOTSTRAP=<the addresses of its last line> cargo test -p
//! streams-examples --test cluster_faults -- --test-threads=1 --nocapture`. Without
//! `STREAMS_TEST_CLUSTER_BOOTSTRAP` each test says SKIPPED and passes, unless
//! `STREAMS_REQUIRE_CLUSTER=1`. A test that fails leaves the cluster with every node running
//! (`kafka-cluster.sh ensure`). The instances' logs go to
//! `<target>/tmp/cluster-faults/<application id>/{A,B}.log`, named in every failure and
//! removed after a pass (`KEEP_TEST_LOGS=1` keeps them).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[path = "../common/mod.rs"]
mod common;
mod faults;
mod recovery;

use common::cluster::{Cluster, cluster_bootstrap};
use common::feed::{FeedPlan, Feeder, wait_processed};
use common::instance::{Instance, Run, logs_dir, logs_of, remove_logs, sleep_alive};
use common::verify::{Guarantee, verify, verify_smoke};
use faults::{Faults, Injection};
use recovery::{Recovery, recovery};
use streams_examples::smoke::SmokeTopics;
use streams_test_utils::kafka;

const PARTITIONS: i32 = 6;
const THREADS: &str = "2";
/// The instances, each of [`THREADS`] stream threads.
const INSTANCES: [&str; 3] = ["A", "B", "C"];
/// ~1,000 records/s over 60 keys. Each record is retried by the idempotent producer for up to
/// 5 minutes, longer than any fault here: a failed delivery report then means the record
/// was not written, and it is written again.
const FEED: FeedPlan = FeedPlan::new(60, 100).retrying_for(Duration::from_secs(300));
/// The input keeps flowing this long after the last fault.
const AFTER_FAULTS: Duration = Duration::from_secs(5);

#[test]
fn three_brokers_eos_survives_partition_leader_kills() {
    let test = "three_brokers_eos_survives_partition_leader_kills";
    scenario(test, Guarantee::ExactlyOnce, Faults::bounces());
}

/// In the full run only (90 s there).
#[test]
fn three_brokers_long_eos_survives_a_paused_broker() {
    scenario(
        "three_brokers_long_eos_survives_a_paused_broker",
        Guarantee::ExactlyOnce,
        Faults::pause(),
    );
}

/// In the full run only: the killed instance restores its state while a broker is down.
#[test]
fn three_brokers_long_eos_survives_an_instance_killed_during_a_pause() {
    let test = "three_brokers_long_eos_survives_an_instance_killed_during_a_pause";
    scenario(test, Guarantee::ExactlyOnce, Faults::pause_and_kill_instance());
}

/// In the full run only: a task revoked from A or B reaches C only through a coordinator
/// that took the group over from the paused one.
#[test]
fn three_brokers_long_eos_survives_a_coordinator_paused_mid_rebalance() {
    let test = "three_brokers_long_eos_survives_a_coordinator_paused_mid_rebalance";
    scenario(
        test,
        Guarantee::ExactlyOnce,
        Faults::pause_coordinator_mid_rebalance(),
    );
}

/// In the full run only.
#[test]
fn three_brokers_long_eos_survives_a_rolling_restart() {
    let test = "three_brokers_long_eos_survives_a_rolling_restart";
    scenario(test, Guarantee::ExactlyOnce, Faults::RollingRestart);
}

/// In the full run only: with the streams protocol (unless `CLUSTER_GROUP_PROTOCOL` names
/// another) the group's own client must find the new coordinator through the brokers it has
/// learned, not through its bootstrap list.
#[test]
fn three_brokers_long_eos_goes_on_while_its_only_bootstrap_broker_is_paused() {
    let test = "three_brokers_long_eos_goes_on_while_its_only_bootstrap_broker_is_paused";
    scenario(test, Guarantee::ExactlyOnce, Faults::PauseOnlyBootstrap);
}

/// In the full run only (`scripts/test.sh` skips `three_brokers_long_*`).
#[test]
fn three_brokers_long_eos_survives_controller_kills() {
    let test = "three_brokers_long_eos_survives_controller_kills";
    scenario(test, Guarantee::ExactlyOnce, Faults::controller_bounces());
}

/// In the full run only: the whole cluster unreachable for a minute, then back; the
/// application must resume by itself.
#[test]
fn three_brokers_long_eos_survives_the_whole_cluster_paused() {
    let test = "three_brokers_long_eos_survives_the_whole_cluster_paused";
    scenario(test, Guarantee::ExactlyOnce, Faults::pause_all());
}

/// In the full run only: every node killed (SIGKILL), the whole cluster down for a minute,
/// then started again; the application must resume by itself.
#[test]
fn three_brokers_long_eos_survives_the_whole_cluster_killed() {
    let test = "three_brokers_long_eos_survives_the_whole_cluster_killed";
    scenario(test, Guarantee::ExactlyOnce, Faults::kill_all());
}

/// The broker that holds the group's offsets paused: every commit of the application needs
/// it (`TxnOffsetCommit` under exactly-once), and the group coordinator must move.
#[test]
fn three_brokers_eos_survives_a_paused_group_coordinator() {
    let test = "three_brokers_eos_survives_a_paused_group_coordinator";
    scenario(test, Guarantee::ExactlyOnce, Faults::pause_group_coordinator());
}

#[test]
fn three_brokers_alos_survives_partition_leader_kills() {
    let test = "three_brokers_alos_survives_partition_leader_kills";
    scenario(test, Guarantee::AtLeastOnce, Faults::bounces());
}

/// Whether the instances run the smoke topology (`count-app --smoke`: the count, a join, a
/// repartitioned aggregate and a windowed count), as they do unless `CLUSTER_TOPOLOGY=count`
/// asks for the count alone.
fn smoke() -> bool {
    match std::env::var("CLUSTER_TOPOLOGY").as_deref().map(str::trim) {
        Err(_) | Ok("smoke") => true,
        Ok("count") => false,
        Ok(other) => panic!("CLUSTER_TOPOLOGY={other}: not smoke or count"),
    }
}

/// The group protocol `CLUSTER_GROUP_PROTOCOL` names, if any (`classic`, `consumer`,
/// `streams`).
fn group_protocol() -> Option<String> {
    let protocol = std::env::var("CLUSTER_GROUP_PROTOCOL").ok()?.trim().to_owned();
    assert!(
        ["classic", "consumer", "streams"].contains(&protocol.as_str()),
        "CLUSTER_GROUP_PROTOCOL={protocol}: not classic, consumer or streams"
    );
    Some(protocol)
}

/// The guarantee `CLUSTER_GUARANTEE` names (`exactly_once_v2`, `at_least_once`), which runs
/// every scenario under it; `default` otherwise.
fn guarantee_or(default: Guarantee) -> Guarantee {
    match std::env::var("CLUSTER_GUARANTEE").as_deref().map(str::trim) {
        Err(_) => default,
        Ok("exactly_once_v2") => Guarantee::ExactlyOnce,
        Ok("at_least_once") => Guarantee::AtLeastOnce,
        Ok(other) => panic!("CLUSTER_GUARANTEE={other}: not exactly_once_v2 or at_least_once"),
    }
}

fn scenario(test: &'static str, guarantee: Guarantee, faults: Faults) {
    let guarantee = guarantee_or(guarantee);
    let Some(bootstrap) = cluster_bootstrap(test) else {
        return;
    };
    let started = Instant::now();
    let cluster = Cluster::new(test, started);
    let mut run = Run::create(bootstrap, "cluster-faults", PARTITIONS);
    let logs = logs_dir("cluster-faults", &run.app);
    let mut protocol = group_protocol();
    // The node the instances know the cluster by, for `PauseOnlyBootstrap`.
    let mut only_bootstrap = None;
    if matches!(faults, Faults::PauseOnlyBootstrap) {
        let node = cluster.group_coordinator(&run.app);
        let address = run
            .bootstrap
            .split(',')
            .nth(node as usize - 1)
            .expect("node's address");
        run.instance_bootstrap = Some(address.to_owned());
        only_bootstrap = Some(node);
        protocol.get_or_insert_with(|| "streams".to_owned());
    }
    let run = run;
    let smoke = smoke();
    let kill_instances = faults::kill_instances();
    eprintln!(
        "{test}: application {} ({}, {} group protocol, {} topology), faults {faults:?}{}, \
         logs in {}",
        run.app,
        guarantee.config(),
        protocol.as_deref().unwrap_or("classic"),
        if smoke { "smoke" } else { "count" },
        if kill_instances {
            " with an instance killed during each"
        } else {
            ""
        },
        logs.display()
    );
    if smoke {
        for topic in SmokeTopics::of(&run.topics.output).all() {
            kafka::create_topic(&run.bootstrap, topic, PARTITIONS, &[]).unwrap();
        }
    }
    let feeder = Feeder::start(&run.bootstrap, &run.topics.input, FEED);
    // At least once, a commit every second rather than every 30 s: the recovery is measured
    // by the committed offsets.
    let mut args = vec!["--threads", THREADS];
    if smoke {
        args.push("--smoke");
    }
    if guarantee == Guarantee::AtLeastOnce {
        args.extend(["--property", "commit.interval.ms=1000"]);
    }
    if let Some(protocol) = &protocol {
        args.extend(["--group-protocol", protocol]);
    }
    let mut instances = Instance::named(INSTANCES, &logs, guarantee.config(), &args);
    let late = matches!(faults, Faults::PauseCoordinatorMidRebalance(_)) as usize;
    for instance in &mut instances[..INSTANCES.len() - late] {
        instance.start(&run);
    }
    // Every input partition processed and committed before the first fault.
    let warm_up = recovery(&run, Some(BTreeMap::new()), &mut instances);
    eprintln!(
        "{test}: {:5.1} s: the instances started; every input partition committed after {:.1} s",
        started.elapsed().as_secs_f64(),
        warm_up.all.as_secs_f64()
    );

    let mut injection = Injection::new(test, started, &cluster, &run, &mut instances);
    injection.only_bootstrap = only_bootstrap;
    injection.kill_instances = kill_instances;
    injection.inject(faults);
    let recoveries = injection.recoveries;

    sleep_alive(AFTER_FAULTS, &mut instances);
    let fed = feeder.stop();
    eprintln!(
        "{test}: {:5.1} s: the feeder stopped after {} records ({} written again after a failed \
         delivery: {:?})",
        started.elapsed().as_secs_f64(),
        fed.records(),
        fed.rewritten,
        fed.errors
    );
    wait_processed(&run, &fed.ends, &mut instances);
    eprintln!(
        "{test}: {:5.1} s: every input offset committed",
        started.elapsed().as_secs_f64()
    );
    for instance in &mut instances {
        instance.leave();
    }
    // A transaction of a killed instance stays open until the coordinator aborts it
    // (`transaction.timeout.ms`, 10 s); one of a clean stop never does.
    let open = cluster.open_transactions_after(&format!("{}-", run.app), Duration::from_secs(60));

    let killed = kill_instances || matches!(faults, Faults::PauseAndKillInstance(_));
    let mut report = verify(&run.bootstrap, &run.topics, &fed, guarantee.killed(killed));
    let smoke_outputs = if smoke {
        let s = verify_smoke(&run.bootstrap, &run.topics.output, &fed, &mut report);
        format!(
            "; smoke outputs: {} joined, {} stats, {} windowed counts",
            s.joined, s.stats, s.windowed
        )
    } else {
        String::new()
    };
    let dead: usize = instances.iter().map(Instance::threads_failed).sum();
    let seconds = |f: fn(&Recovery) -> Duration| {
        recoveries
            .iter()
            .map(|r| format!("{:.1}", f(r).as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    eprintln!(
        "{test}: {faults:?} under {} with {} instances x {THREADS} threads; {} input records \
         ({} written again), {} committed audit records ({} missing, {} duplicated), {} committed \
         counts ({} duplicated); {dead} stream threads dead; recovery per fault [{}] s (first \
         partition), [{}] s (every partition){smoke_outputs}; {:.1} s",
        guarantee.config(),
        INSTANCES.len(),
        fed.records(),
        fed.rewritten,
        report.audit_records,
        report.missing,
        report.duplicated,
        report.count_records,
        report.counts_duplicated,
        seconds(|r| r.first),
        seconds(|r| r.all),
        started.elapsed().as_secs_f64()
    );
    report.assert_ok(&logs_of(&instances));
    assert_eq!(dead, 0, "stream threads dead; see {}", logs_of(&instances));
    assert!(
        open.is_empty(),
        "transactions of the application still open 60 s after it stopped: {open:?}; see {}",
        logs_of(&instances)
    );
    remove_logs(&logs);
}
