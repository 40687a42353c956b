//! Processing guarantees through broker faults, on the three-broker KRaft cluster of
//! `scripts/kafka-cluster.sh` (replication factor 3, `min.insync.replicas=2`): two
//! `count-app` instances (A and B) of 2 stream threads each share an input of 6 partitions,
//! while a feeder writes ~1,000 records/s with a sequence number per key, and brokers fail:
//!
//! - `three_brokers_long_eos_survives_partition_leader_kills` (full run only): the leader of input partition 0 is killed
//!   (SIGKILL) and started again (`bounce`), then ~10 s later the leader of partition 1, ...:
//!   `CLUSTER_FAULT_ROUNDS` bounces (2 by default);
//! - `three_brokers_long_eos_survives_a_paused_broker` (full run only): the leader of input partition 0 is paused (SIGSTOP, a
//!   hung broker whose sockets stay open) for `CLUSTER_PAUSE_S` seconds (30 by default; 90
//!   outlasts `transaction.timeout.ms` and the request timeouts), then resumed;
//! - `three_brokers_alos_survives_partition_leader_kills`: the bounces under `at_least_once`;
//! - `three_brokers_long_eos_survives_controller_kills` (full run only): the active KRaft
//!   controller bounced, `CLUSTER_FAULT_ROUNDS` times;
//! - `three_brokers_long_eos_survives_the_whole_cluster_paused` (full run only): every node
//!   paused for `CLUSTER_ALL_DOWN_S` seconds (60 by default), then resumed.
//!
//! After the faults the feeder runs 5 s more and stops; once the group has committed every
//! input offset, the instances stop cleanly (SIGTERM, exit 0) and what was committed is read
//! with `read_committed` and checked by identity (`common/verify.rs`): under exactly-once
//! every input in the audit topic exactly once and each key's counts 1..n exactly once;
//! under at-least-once nothing missing. An instance that exits by itself or loses a stream
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
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::feed::{FeedPlan, Feeder, IDLE_LIMIT, committed, wait_processed};
use common::instance::{Instance, Run, check_all_alive, logs_dir, logs_of, remove_logs, stalled};
use common::verify::{Guarantee, verify};

/// The cluster's bootstrap servers, comma-separated.
const CLUSTER_ENV: &str = "STREAMS_TEST_CLUSTER_BOOTSTRAP";
/// `1`: a test fails rather than skips without a cluster.
const REQUIRE_CLUSTER_ENV: &str = "STREAMS_REQUIRE_CLUSTER";

const PARTITIONS: i32 = 6;
const THREADS: &str = "2";
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
}

/// In the full run only, for the same librdkafka stall as the pause (seen after the fourth
/// of five bounces).
#[test]
fn three_brokers_long_eos_survives_partition_leader_kills() {
    let test = "three_brokers_long_eos_survives_partition_leader_kills";
    scenario(test, Guarantee::ExactlyOnce, Faults::bounces());
}

/// In the full run only: a paused transaction coordinator can leave librdkafka 2.12's
/// `send_offsets_to_transaction` blocked for minutes, far past its timeout (see
/// docs/kafka-for-tests.md, "The fault suite"), and the group then stalls.
#[test]
fn three_brokers_long_eos_survives_a_paused_broker() {
    scenario(
        "three_brokers_long_eos_survives_a_paused_broker",
        Guarantee::ExactlyOnce,
        Faults::pause(),
    );
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

/// `String.hashCode` of the JVM, which the broker uses to place a group on a partition of
/// `__consumer_offsets`.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The number in environment variable `name`, or `default` where it is not set.
fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
    })
}

/// The cluster's bootstrap servers; `None` (after saying SKIPPED) without one, unless
/// [`REQUIRE_CLUSTER_ENV`] asks for a failure.
fn cluster_bootstrap(test: &str) -> Option<String> {
    let bootstrap = std::env::var(CLUSTER_ENV)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    if bootstrap.is_none() {
        let required = std::env::var(REQUIRE_CLUSTER_ENV).is_ok_and(|v| {
            let v = v.trim();
            v == "1" || v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("yes")
        });
        assert!(
            !required,
            "{test}: {REQUIRE_CLUSTER_ENV}=1 but {CLUSTER_ENV} is not set (run `bash \
             scripts/kafka-cluster.sh start` and set it to the addresses of its last line)"
        );
        // Past the harness's output capture: a skip shows in every run.
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIPPED {test}: no three-broker cluster ({CLUSTER_ENV})"
        );
    }
    bootstrap
}

/// `scripts/kafka-cluster.sh`, run for one test. If the test fails, its drop leaves every node
/// running again (`ensure`: resumes a paused node, starts a stopped one), for the next test.
struct Cluster {
    test: &'static str,
    script: PathBuf,
    started: Instant,
}

impl Cluster {
    fn new(test: &'static str, started: Instant) -> Self {
        let script = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("scripts/kafka-cluster.sh");
        Self {
            test,
            script,
            started,
        }
    }

    /// Runs `kafka-cluster.sh args` and returns its standard output; panics unless it
    /// succeeded. With `say`, prints what it did and how long it took.
    fn run(&self, args: &[&str], say: bool) -> String {
        let began = Instant::now();
        let out = Command::new("bash")
            .arg(&self.script)
            .args(args)
            .output()
            .expect("run bash");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{}: kafka-cluster.sh {}: {}; stdout {stdout}, stderr {}",
            self.test,
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        if say {
            eprintln!(
                "{}: {:5.1} s: kafka-cluster.sh {} took {:.1} s: {}",
                self.test,
                self.started.elapsed().as_secs_f64(),
                args.join(" "),
                began.elapsed().as_secs_f64(),
                stdout.lines().last().unwrap_or_default()
            );
        }
        stdout
    }

    /// The node of `group`'s coordinator: the leader of the partition of `__consumer_offsets`
    /// that the broker maps the group id to (the absolute Java hash of the id, modulo the topic's
    /// partitions), whatever the group's protocol.
    fn group_coordinator(&self, group: &str) -> u32 {
        let partitions = self
            .run(&["describe", "__consumer_offsets"], false)
            .lines()
            .filter(|l| l.starts_with("__consumer_offsets partition "))
            .count();
        assert!(
            partitions > 0,
            "{}: __consumer_offsets has no partitions",
            self.test
        );
        // Kafka's `Utils.abs`: `Math.abs`, with 0 for `Integer.MIN_VALUE`.
        let hash = java_string_hash(group).checked_abs().unwrap_or(0);
        let partition = hash % partitions as i32;
        self.leader("__consumer_offsets", partition)
    }

    /// `verb` on node `node`.
    fn on(&self, verb: &str, node: u32) {
        self.run(&[verb, &node.to_string()], true);
    }

    /// The node that leads `topic`-`partition` (waits up to 30 s while it has none).
    fn leader(&self, topic: &str, partition: i32) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.run(&["leader", topic, &partition.to_string()], false);
            if let Ok(node) = out.trim().parse() {
                return node;
            }
            assert!(
                Instant::now() < deadline,
                "{}: {topic}-{partition} has no leader for 30 s: {out}",
                self.test
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let out = Command::new("bash").arg(&self.script).arg("ensure").output();
            eprintln!(
                "{}: after the failure, kafka-cluster.sh ensure: {out:?}",
                self.test
            );
        }
    }
}

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
    loop {
        check_all_alive(instances);
        // The committed offsets may not be readable for a while after a fault.
        if let Ok(now) = committed(run) {
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
    let run = Run::create(bootstrap, "cluster-faults", PARTITIONS);
    let logs = logs_dir("cluster-faults", &run.app);
    eprintln!(
        "{test}: application {} ({}), faults {faults:?}, logs in {}",
        run.app,
        guarantee.config(),
        logs.display()
    );
    let input = run.topics.input.clone();
    let feeder = Feeder::start(&run.bootstrap, &input, FEED);
    // At least once, a commit every second rather than every 30 s: the recovery is measured
    // by the committed offsets.
    let mut args = vec!["--threads", THREADS];
    if guarantee == Guarantee::AtLeastOnce {
        args.extend(["--property", "commit.interval.ms=1000"]);
    }
    let mut instances = Instance::pair(&logs, guarantee.config(), &args);
    for instance in &mut instances {
        instance.start(&run);
    }
    // Every input partition processed and committed before the first fault.
    let warm_up = recovery(&run, Some(BTreeMap::new()), &mut instances);
    eprintln!(
        "{test}: {:5.1} s: both instances started; every input partition committed after {:.1} s",
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

    let report = verify(&run.bootstrap, &run.topics, &fed, guarantee);
    let dead: usize = instances.iter().map(Instance::threads_failed).sum();
    let seconds = |f: fn(&Recovery) -> Duration| {
        recoveries
            .iter()
            .map(|r| format!("{:.1}", f(r).as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    eprintln!(
        "{test}: {faults:?} under {} with 2 instances x {THREADS} threads; {} input records \
         ({} written again), {} committed audit records ({} missing, {} duplicated), {} committed \
         counts ({} duplicated); {dead} stream threads dead; recovery per fault [{}] s (first \
         partition), [{}] s (every partition); {:.1} s",
        guarantee.config(),
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
    remove_logs(&logs);
}
