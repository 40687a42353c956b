//! The three-broker cluster of `scripts/kafka-cluster.sh`, for the tests that inject faults
//! into it: its address from the environment, and its script's verbs.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The cluster's bootstrap servers, comma-separated.
pub const CLUSTER_ENV: &str = "STREAMS_TEST_CLUSTER_BOOTSTRAP";
/// `1`: a test fails rather than skips without a cluster.
pub const REQUIRE_CLUSTER_ENV: &str = "STREAMS_REQUIRE_CLUSTER";

/// The number in environment variable `name`, or `default` where it is not set.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
    })
}
/// Whether environment variable `name` is set to `1`, `true` or `yes`.
pub fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| {
        let v = v.trim();
        v == "1" || v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("yes")
    })
}

/// `String.hashCode` of the JVM, which the broker uses to place a group on a partition of
/// `__consumer_offsets`.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}
/// The cluster's bootstrap servers; `None` (after saying SKIPPED) without one, unless
/// [`REQUIRE_CLUSTER_ENV`] asks for a failure.
pub fn cluster_bootstrap(test: &str) -> Option<String> {
    let bootstrap = std::env::var(CLUSTER_ENV)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    if bootstrap.is_none() {
        assert!(
            !env_flag(REQUIRE_CLUSTER_ENV),
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
pub struct Cluster {
    test: &'static str,
    script: PathBuf,
    started: Instant,
}

impl Cluster {
    pub fn new(test: &'static str, started: Instant) -> Self {
        let script = PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../scripts/kafka-cluster.sh");
        Self {
            test,
            script,
            started,
        }
    }

    /// Runs `kafka-cluster.sh args` and returns its standard output; panics unless it
    /// succeeded. With `say`, prints what it did and how long it took.
    pub fn run(&self, args: &[&str], say: bool) -> String {
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
    pub fn group_coordinator(&self, group: &str) -> u32 {
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

    /// The transactional ids starting with `prefix` whose transaction is still open
    /// (`Ongoing`, `PrepareCommit`, `PrepareAbort`, `PrepareEpochFence`), with their states.
    pub fn open_transactions(&self, prefix: &str) -> Vec<String> {
        self.run(&["transactions", prefix], false)
            .lines()
            .filter(|l| {
                let state = l.rsplit(' ').next().unwrap_or_default();
                !matches!(state, "Empty" | "CompleteCommit" | "CompleteAbort" | "Dead")
            })
            .map(str::to_owned)
            .collect()
    }

    /// [`open_transactions`](Self::open_transactions) once none is open, or after `wait`
    /// (a killed producer's transaction stays open until the coordinator aborts it, after
    /// `transaction.timeout.ms`).
    pub fn open_transactions_after(&self, prefix: &str, wait: Duration) -> Vec<String> {
        let deadline = Instant::now() + wait;
        loop {
            let open = self.open_transactions(prefix);
            if open.is_empty() || Instant::now() >= deadline {
                return open;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// `verb` on node `node`.
    pub fn on(&self, verb: &str, node: u32) {
        self.run(&[verb, &node.to_string()], true);
    }

    /// The node that leads `topic`-`partition` (waits up to 30 s while it has none).
    pub fn leader(&self, topic: &str, partition: i32) -> u32 {
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
