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
//!   `CLUSTER_ALL_DOWN_S` seconds (60 by default), then resumed.
//!
//! The instances join with the classic group protocol unless `CLUSTER_GROUP_PROTOCOL` names
//! another (`consumer`, `streams`).
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

mod common;

use common::cluster::{Cluster, cluster_bootstrap, env_number};
use common::feed::{FeedPlan, Feeder, IDLE_LIMIT, committed_reader, read_committed, wait_processed};
use common::instance::{Instance, Run, check_all_alive, logs_dir, logs_of, remove_logs, stalled};
use common::verify::{Guarantee, verify, verify_smoke};
use streams_examples::smoke::SmokeTopics;
use streams_test_utils::kafka;

const PARTITIONS: i32 = 6;
const THREADS: &str = "2";
/// The instances, each of [`THREADS`] stream threads.
const INSTANCES: [&str; 3] = ["A", "B", "C"];
/// How long into a pause instance A is killed, and how long after that it starts again.
const CRASH_AFTER: Duration = Duration::from_secs(5);
/// ~1,000 records/s over 60 keys. Each record is retried by the idempotent producer for up to
/// 5 minutes, longer than any fault here: a failed delivery report then means the record
/// was not written, and it is written again.
const FEED: FeedPlan = FeedPlan::new(60, 100).retrying_for(Duration::from_secs(300));
/// Between a broker's return and the next fault, at least.
const BETWEEN_FAULTS: Duration = Duration::from_secs(10);
/// The input keeps flowing this long after the last fault.
const AFTER_FAULTS: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy)]
enum Faults {
    /// This many rounds of: `bounce` the leader of an input partition (0, 1, ...).
    Bounces(usize),
    /// `pause` the leader of input partition 0 this long, then `resume` it.
    Pause(Duration),
    /// This many rounds of: `bounce` the active KRaft controller.
    ControllerBounces(usize),
    /// `pause` every node this long (the whole cluster unreachable), then `resume` them.
    PauseAll(Duration),
    /// `pause` the node of the application's group coordinator this long, then `resume` it.
    PauseGroupCoordinator(Duration),
    /// `pause` the leader of input partition 0 this long; during it kill instance A
    /// (SIGKILL) and start it again.
    PauseAndKillInstance(Duration),
    /// Instances A and B alone until every input partition is committed; then C starts and
    /// `CLUSTER_REBALANCE_PAUSE_AFTER_MS` (1,500 by default) later, while tasks move to it,
    /// the group coordinator's node is paused this long.
    PauseCoordinatorMidRebalance(Duration),
    /// `restart` (a clean stop and start) each node in turn.
    RollingRestart,
    /// The instances know the cluster through one node only, the group coordinator's:
    /// `pause` it and wait, while it is paused, until the group commits again on every
    /// input partition; then `resume` it.
    PauseOnlyBootstrap,
}

impl Faults {
    /// `CLUSTER_FAULT_ROUNDS` bounces (2 by default).
    fn bounces() -> Self {
        Self::Bounces(env_number("CLUSTER_FAULT_ROUNDS", 2) as usize)
    }

    /// A pause of `CLUSTER_PAUSE_S` seconds (30 by default).
    fn pause() -> Self {
        Self::Pause(Duration::from_secs(env_number("CLUSTER_PAUSE_S", 30)))
    }

    /// `CLUSTER_FAULT_ROUNDS` controller bounces (2 by default).
    fn controller_bounces() -> Self {
        Self::ControllerBounces(env_number("CLUSTER_FAULT_ROUNDS", 2) as usize)
    }

    /// Every node paused for `CLUSTER_ALL_DOWN_S` seconds (60 by default).
    fn pause_all() -> Self {
        Self::PauseAll(Duration::from_secs(env_number("CLUSTER_ALL_DOWN_S", 60)))
    }

    /// The group coordinator's node paused for `CLUSTER_PAUSE_S` seconds (30 by default).
    fn pause_group_coordinator() -> Self {
        Self::PauseGroupCoordinator(Duration::from_secs(env_number("CLUSTER_PAUSE_S", 30)))
    }

    /// A pause of `CLUSTER_PAUSE_S` seconds (30 by default, at least 15) with an instance
    /// killed during it.
    fn pause_and_kill_instance() -> Self {
        let pause = Duration::from_secs(env_number("CLUSTER_PAUSE_S", 30));
        Self::PauseAndKillInstance(pause.max(CRASH_AFTER * 3))
    }
}

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
    let pause = Duration::from_secs(env_number("CLUSTER_PAUSE_S", 30));
    scenario(
        test,
        Guarantee::ExactlyOnce,
        Faults::PauseCoordinatorMidRebalance(pause),
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

/// How long one read of the group's committed offsets may take during a recovery wait.
const READ_LIMIT: Duration = Duration::from_secs(5);

/// How long the group took to commit again after a fault ended: until the committed offset
/// of one input partition moved, and of every one.
struct Recovery {
    first: Duration,
    all: Duration,
}

/// Waits until the group has committed beyond `from` (where it had committed when the
/// wait began when `None`) on every input partition, polling every 200 ms; fails after
/// [`IDLE_LIMIT`] or when an instance dies.
fn recovery(run: &Run, from: Option<BTreeMap<i32, i64>>, instances: &mut [Instance]) -> Recovery {
    let began = Instant::now();
    let mut from = from;
    let mut first = None;
    let mut last_error: Option<Instant> = None;
    let mut reader = committed_reader(run);
    loop {
        check_all_alive(instances);
        // The committed offsets may not be readable for a while after a fault; a failed
        // read is said (at most every 10 s), since it delays what the wait measures. A read
        // waits at most READ_LIMIT, so one stuck read delays the measurement by no more.
        let read = read_committed(&mut reader, READ_LIMIT);
        if let Err(e) = &read
            && last_error.is_none_or(|at| at.elapsed() >= Duration::from_secs(10))
        {
            eprintln!(
                "{}: {:.1} s into the wait: reading the group's committed offsets failed: {e}",
                run.app,
                began.elapsed().as_secs_f64()
            );
            last_error = Some(Instant::now());
        }
        if let Err(e) = &read
            && began.elapsed() >= IDLE_LIMIT
        {
            stalled(
                instances,
                &format!("the group's committed offsets could not be read for {IDLE_LIMIT:?}: {e}"),
            );
        }
        if let Ok(now) = read {
            let from = from.get_or_insert_with(|| now.clone());
            let moved = |p: &i32| now.get(p).copied().unwrap_or(0) > from.get(p).copied().unwrap_or(0);
            if first.is_none() && (0..PARTITIONS).any(|p| moved(&p)) {
                first = Some(began.elapsed());
            }
            let stuck: Vec<i32> = (0..PARTITIONS).filter(|p| !moved(p)).collect();
            if stuck.is_empty() {
                return Recovery {
                    first: first.unwrap_or_default(),
                    all: began.elapsed(),
                };
            }
            if began.elapsed() >= IDLE_LIMIT {
                stalled(
                    instances,
                    &format!(
                        "the group's committed offsets of input partitions {stuck:?} have not \
                         moved in {IDLE_LIMIT:?} (committed {from:?} at the start of the wait, \
                         {now:?} now)"
                    ),
                );
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Sleeps `how_long`, checking every 500 ms that the instances are alive.
fn sleep_alive(how_long: Duration, instances: &mut [Instance]) {
    let until = Instant::now() + how_long;
    while Instant::now() < until {
        check_all_alive(instances);
        std::thread::sleep(Duration::from_millis(500).min(until.saturating_duration_since(Instant::now())));
    }
}

fn scenario(test: &'static str, guarantee: Guarantee, faults: Faults) {
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
    eprintln!(
        "{test}: application {} ({}, {} group protocol, {} topology), faults {faults:?}, logs \
         in {}",
        run.app,
        guarantee.config(),
        protocol.as_deref().unwrap_or("classic"),
        if smoke { "smoke" } else { "count" },
        logs.display()
    );
    if smoke {
        for topic in SmokeTopics::of(&run.topics.output).all() {
            kafka::create_topic(&run.bootstrap, topic, PARTITIONS, &[]).unwrap();
        }
    }
    let input = run.topics.input.clone();
    let feeder = Feeder::start(&run.bootstrap, &input, FEED);
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

    let mut recoveries: Vec<Recovery> = Vec::new();
    let mut fault = |what: String, back: Instant, instances: &mut [Instance]| {
        let r = recovery(&run, None, instances);
        eprintln!(
            "{test}: {:5.1} s: after {what}: committed offsets moved again {:.1} s after the \
             broker was back, on every input partition after {:.1} s",
            started.elapsed().as_secs_f64(),
            r.first.as_secs_f64(),
            r.all.as_secs_f64()
        );
        recoveries.push(r);
        sleep_alive(BETWEEN_FAULTS.saturating_sub(back.elapsed()), instances);
    };
    match faults {
        Faults::Bounces(rounds) => {
            for round in 0..rounds {
                let partition = round as i32 % PARTITIONS;
                let node = cluster.leader(&input, partition);
                cluster.on("bounce", node);
                let what = format!(
                    "bounce {} of {rounds}: node {node} (leader of input partition {partition})",
                    round + 1
                );
                fault(what, Instant::now(), &mut instances);
            }
        }
        Faults::Pause(pause) => {
            let node = cluster.leader(&input, 0);
            cluster.on("pause", node);
            sleep_alive(pause, &mut instances);
            cluster.on("resume", node);
            let what = format!("a pause of {pause:?}: node {node} (leader of input partition 0)");
            fault(what, Instant::now(), &mut instances);
        }
        Faults::ControllerBounces(rounds) => {
            for round in 0..rounds {
                let node: u32 = cluster
                    .run(&["controller"], false)
                    .trim()
                    .parse()
                    .expect("the active controller's node id");
                cluster.on("bounce", node);
                let what = format!("controller bounce {} of {rounds}: node {node}", round + 1);
                fault(what, Instant::now(), &mut instances);
            }
        }
        Faults::PauseGroupCoordinator(pause) => {
            let node = cluster.group_coordinator(&run.app);
            cluster.on("pause", node);
            sleep_alive(pause, &mut instances);
            cluster.on("resume", node);
            let what = format!("a pause of {pause:?}: node {node} (the group coordinator)");
            fault(what, Instant::now(), &mut instances);
        }
        Faults::PauseAndKillInstance(pause) => {
            let node = cluster.leader(&input, 0);
            cluster.on("pause", node);
            let resume_at = Instant::now() + pause;
            sleep_alive(CRASH_AFTER, &mut instances);
            instances[0].crash();
            eprintln!(
                "{test}: {:5.1} s: instance A killed",
                started.elapsed().as_secs_f64()
            );
            sleep_alive(CRASH_AFTER, &mut instances);
            instances[0].start(&run);
            eprintln!(
                "{test}: {:5.1} s: instance A started again",
                started.elapsed().as_secs_f64()
            );
            sleep_alive(
                resume_at.saturating_duration_since(Instant::now()),
                &mut instances,
            );
            cluster.on("resume", node);
            let what = format!(
                "a pause of {pause:?} of node {node} (leader of input partition 0), instance A \
                 killed and started again during it"
            );
            fault(what, Instant::now(), &mut instances);
        }
        Faults::PauseOnlyBootstrap => {
            let node = only_bootstrap.expect("chosen at the start");
            cluster.on("pause", node);
            let paused = Instant::now();
            let r = recovery(&run, None, &mut instances);
            eprintln!(
                "{test}: {:5.1} s: with node {node}, the only bootstrap broker and the group \
                 coordinator, paused: committed offsets moved again {:.1} s after the pause, \
                 on every input partition after {:.1} s",
                started.elapsed().as_secs_f64(),
                r.first.as_secs_f64(),
                r.all.as_secs_f64()
            );
            sleep_alive(BETWEEN_FAULTS.saturating_sub(paused.elapsed()), &mut instances);
            cluster.on("resume", node);
            fault(format!("node {node} resumed"), Instant::now(), &mut instances);
        }
        Faults::PauseCoordinatorMidRebalance(pause) => {
            let node = cluster.group_coordinator(&run.app);
            instances[2].start(&run);
            let after = Duration::from_millis(env_number("CLUSTER_REBALANCE_PAUSE_AFTER_MS", 1500));
            sleep_alive(after, &mut instances);
            cluster.on("pause", node);
            sleep_alive(pause, &mut instances);
            cluster.on("resume", node);
            let what = format!(
                "a pause of {pause:?}: node {node} (the group coordinator), {after:?} after C started"
            );
            fault(what, Instant::now(), &mut instances);
        }
        Faults::RollingRestart => {
            for node in 1..=3 {
                cluster.on("restart", node);
                fault(
                    format!("a clean restart of node {node}"),
                    Instant::now(),
                    &mut instances,
                );
            }
        }
        Faults::PauseAll(pause) => {
            for node in 1..=3 {
                cluster.on("pause", node);
            }
            sleep_alive(pause, &mut instances);
            for node in 1..=3 {
                cluster.on("resume", node);
            }
            let what = format!("every node paused for {pause:?}");
            fault(what, Instant::now(), &mut instances);
        }
    }

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

    let mut report = verify(&run.bootstrap, &run.topics, &fed, guarantee);
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
