//! What the integration tests of `count-app` share: its topics, the command that starts it as
//! a child process, stopping it with a signal, and reading back what it wrote, by identity.
//! The multi-instance tests (membership churn, broker faults) also share the instances
//! ([`instance`]), the feeder of their input ([`feed`]) and the check of what was committed
//! ([`verify`]).

// Each test crate uses a part of this module.
#![allow(dead_code)]

pub mod cluster;
pub mod feed;
pub mod instance;
pub mod verify;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use streams_test_utils::kafka;

/// Where a record was read: (partition, offset).
pub type Position = (i32, i64);

/// The topics of one `count-app` run: the input, the output (each key's new count), and
/// with `audit` the topic every input record is also written to unchanged.
pub struct CountTopics {
    pub input: String,
    pub output: String,
    pub audit: Option<String>,
}

impl CountTopics {
    /// Creates fresh topics named after `prefix`, with `partitions` partitions each.
    pub fn create(bootstrap: &str, prefix: &str, partitions: i32, audit: bool) -> Self {
        let audit_configs = audit.then_some(&[][..]);
        Self::create_with(bootstrap, prefix, partitions, audit_configs)
    }

    /// [`create`](Self::create), with an audit topic of the topic configs `audit_configs`
    /// where given.
    pub fn create_with(
        bootstrap: &str,
        prefix: &str,
        partitions: i32,
        audit_configs: Option<&[(&str, &str)]>,
    ) -> Self {
        let topics = Self {
            input: kafka::unique_name(&format!("{prefix}-in")),
            output: kafka::unique_name(&format!("{prefix}-out")),
            audit: audit_configs.map(|_| kafka::unique_name(&format!("{prefix}-audit"))),
        };
        kafka::create_topic(bootstrap, &topics.input, partitions, &[]).unwrap();
        kafka::create_topic(bootstrap, &topics.output, partitions, &[]).unwrap();
        if let (Some(audit), Some(configs)) = (&topics.audit, audit_configs) {
            kafka::create_topic(bootstrap, audit, partitions, configs).unwrap();
        }
        topics
    }

    /// The audit topic; panics for topics created without one.
    pub fn audit(&self) -> &str {
        self.audit.as_deref().expect("topics created with an audit topic")
    }
}

/// The `count-app` command for application `app` on `topics`, with its state in `state`.
/// Its standard input is piped, so it runs until it is signalled or killed (or the caller
/// drops the pipe); its standard output is discarded unless the caller pipes it.
pub fn count_app(bootstrap: &str, app: &str, topics: &CountTopics, state: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_count-app"));
    command
        .args(["--bootstrap-servers", bootstrap, "--application-id", app])
        .args(["--input", &topics.input, "--output", &topics.output])
        .arg("--state-dir")
        .arg(state)
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    if let Some(audit) = &topics.audit {
        command.args(["--audit", audit]);
    }
    command
}

/// Sends `signal` (`TERM`, `INT`, ...) to `child` with `kill`.
pub fn send_signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {}: {status}", child.id());
}

/// Waits up to `limit` for `child` to exit: its exit status, or `None` while it still runs.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(exit) = child.try_wait().unwrap() {
            return Some(exit);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `topic` read from the beginning (committed records only with `read_committed`), by
/// identity `key/value`: where each identity was read, in offset order per partition. For an
/// audit topic, that is where each input record went.
pub fn identities(bootstrap: &str, topic: &str, read_committed: bool) -> HashMap<String, Vec<Position>> {
    let mut seen: HashMap<String, Vec<Position>> = HashMap::new();
    for r in read(bootstrap, topic, read_committed) {
        let id = format!("{}/{}", r.key_str().unwrap(), r.value_str().unwrap());
        seen.entry(id).or_default().push((r.partition, r.offset));
    }
    seen
}

/// `count-app`'s output `topic` read from the beginning (committed records only with
/// `read_committed`): per key, where each count appears.
pub fn counts(
    bootstrap: &str,
    topic: &str,
    read_committed: bool,
) -> HashMap<String, HashMap<u64, Vec<Position>>> {
    let mut seen: HashMap<String, HashMap<u64, Vec<Position>>> = HashMap::new();
    for r in read(bootstrap, topic, read_committed) {
        let count = u64::from_be_bytes(r.value.as_deref().unwrap().try_into().unwrap());
        seen.entry(r.key_str().unwrap())
            .or_default()
            .entry(count)
            .or_default()
            .push((r.partition, r.offset));
    }
    seen
}

/// `topic` read from the beginning (committed records only with `read_committed`).
pub fn read(bootstrap: &str, topic: &str, read_committed: bool) -> Vec<kafka::ConsumedRecord> {
    kafka::read_to_end(bootstrap, topic, Duration::from_secs(120), read_committed).unwrap()
}
