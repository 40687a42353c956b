//! The examples' zero-setup broker: a local single-node Apache Kafka (4.4, KRaft) that
//! `scripts/kafka.sh` runs on 127.0.0.1.
//!
//! Every example binary takes `--bootstrap-servers HOST:PORT`. Without it,
//! [`bootstrap_or_local`] runs `bash scripts/kafka.sh ensure` from the checkout the binary
//! was built in (found through `CARGO_MANIFEST_DIR`):
//!
//! - a broker of that run dir already running and answering is used as it is (about a
//!   second);
//! - otherwise it is started, keeping the data of earlier runs. The first start resolves
//!   the broker's jars from Maven Central (Java 17 and Maven, as `scripts/install-deps.sh`
//!   installs), which takes a minute or so; later starts take a few seconds.
//!
//! The script's own progress (the first-time resolve, the start) goes to stderr as it
//! happens; then one line says where the broker is, e.g.
//!
//! ```text
//! Kafka 4.4.0: local broker on 127.0.0.1:9092 (started now); stop it with: bash scripts/kafka.sh stop
//! ```
//!
//! The broker keeps running after the example exits, so the next run starts at once.
//! `KAFKA_PORT`, `KAFKA_RUN_DIR` and the other variables of `scripts/kafka.sh` apply (see
//! `docs/kafka-for-tests.md`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use crate::ExampleError;

/// The line `scripts/kafka.sh` ends a successful `ensure` with, before the address.
pub const LISTENING_PREFIX: &str = "kafka listening on ";

/// `scripts/kafka.sh` of the checkout these examples were built from.
pub fn script_path() -> PathBuf {
    repo_root().join("scripts").join("kafka.sh")
}

/// The workspace root of the checkout these examples were built from.
fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The local broker `scripts/kafka.sh ensure` reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalBroker {
    /// Its bootstrap servers, e.g. `127.0.0.1:9092`.
    pub bootstrap: String,
    /// The Kafka version the script runs, when it said.
    pub version: Option<String>,
    /// Whether this call started it (`false`: it was already running).
    pub started_now: bool,
}

impl LocalBroker {
    /// The one line the examples print about the broker: version, address, whether it was
    /// started now, and how to stop it.
    pub fn describe(&self) -> String {
        let version = self
            .version
            .as_deref()
            .map_or_else(|| "Kafka".to_owned(), |v| format!("Kafka {v}"));
        let how = if self.started_now {
            "started now"
        } else {
            "already running"
        };
        format!(
            "{version}: local broker on {} ({how}); stop it with: {}",
            self.bootstrap,
            stop_command()
        )
    }
}

/// `bash scripts/kafka.sh stop`, with the script's full path when the current directory is
/// not the checkout's root.
fn stop_command() -> String {
    let root = repo_root();
    let here = std::env::current_dir().ok().and_then(|d| d.canonicalize().ok());
    if here.is_some() && here == root.canonicalize().ok() {
        "bash scripts/kafka.sh stop".to_owned()
    } else {
        format!("bash {} stop", script_path().display())
    }
}

/// What one line of `kafka.sh ensure`'s stdout says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnsureLine {
    /// `kafka listening on <bootstrap>`.
    Listening(String),
    /// `kafka.sh: Kafka <version> already running: ...`.
    AlreadyRunning(String),
    /// `kafka.sh: Kafka <version> up: ...` (started by this call).
    StartedNow(String),
    /// Anything else: progress to show the user.
    Progress,
}

/// Classifies one line of `kafka.sh ensure`'s stdout.
pub fn parse_ensure_line(line: &str) -> EnsureLine {
    let line = line.trim();
    if let Some(address) = line.strip_prefix(LISTENING_PREFIX) {
        return EnsureLine::Listening(address.trim().to_owned());
    }
    if let Some(rest) = line.strip_prefix("kafka.sh: Kafka ")
        && let Some((version, what)) = rest.split_once(' ')
    {
        if what.starts_with("already running") {
            return EnsureLine::AlreadyRunning(version.to_owned());
        }
        if what.starts_with("up:") {
            return EnsureLine::StartedNow(version.to_owned());
        }
    }
    EnsureLine::Progress
}

/// Runs `bash scripts/kafka.sh ensure`: returns the broker it reports, after starting it if
/// it was not running. The script's progress lines go to stderr as they come.
pub fn ensure_local_broker() -> Result<LocalBroker, ExampleError> {
    let script = script_path();
    if !script.is_file() {
        return Err(ExampleError::Other(format!(
            "no --bootstrap-servers given, and the local broker's script {} does not exist \
             (the binary was built in a checkout that is gone?): pass --bootstrap-servers HOST:PORT",
            script.display()
        )));
    }
    let (mut child, stdout) = spawn_script(&script, "ensure")?;
    let (mut bootstrap, mut version, mut started_now) = (None, None, false);
    let mut stderr = std::io::stderr();
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        match parse_ensure_line(&line) {
            EnsureLine::Listening(b) => bootstrap = Some(b),
            EnsureLine::AlreadyRunning(v) => {
                version = Some(v);
                started_now = false;
            }
            EnsureLine::StartedNow(v) => {
                version = Some(v);
                started_now = true;
            }
            EnsureLine::Progress => {
                let _ = writeln!(stderr, "{line}");
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(ExampleError::Other(format!(
            "could not start the local Kafka broker: `bash {} ensure` failed ({status}; its messages \
             are above); or pass --bootstrap-servers HOST:PORT",
            script.display()
        )));
    }
    let bootstrap = bootstrap.ok_or_else(|| {
        ExampleError::Other(format!(
            "`bash {} ensure` succeeded but printed no `{LISTENING_PREFIX}HOST:PORT` line",
            script.display()
        ))
    })?;
    Ok(LocalBroker {
        bootstrap,
        version,
        started_now,
    })
}

/// Starts `bash script command` with its stdout piped to the returned reader; its stderr
/// goes to this process's.
pub(crate) fn spawn_script(script: &Path, command: &str) -> Result<(Child, ChildStdout), ExampleError> {
    let mut child = Command::new("bash")
        .arg(script)
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| ExampleError::Other(format!("running `bash {} {command}`: {e}", script.display())))?;
    let stdout = child.stdout.take().ok_or_else(|| {
        let name = script.file_name().unwrap_or_default().to_string_lossy();
        ExampleError::Other(format!("no stdout of {name}"))
    })?;
    Ok((child, stdout))
}

/// The bootstrap servers an example runs on: `arg` (its `--bootstrap-servers`) when given,
/// otherwise the local broker of [`ensure_local_broker`], announced in one line on stderr
/// ([`LocalBroker::describe`]).
pub fn bootstrap_or_local(arg: Option<String>) -> Result<String, ExampleError> {
    if let Some(b) = arg {
        return Ok(b);
    }
    let broker = ensure_local_broker()?;
    eprintln!("{}", broker.describe());
    Ok(broker.bootstrap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ensure_lines_are_classified() {
        assert_eq!(
            parse_ensure_line("kafka listening on 127.0.0.1:9092\n"),
            EnsureLine::Listening("127.0.0.1:9092".into())
        );
        assert_eq!(
            parse_ensure_line("kafka.sh: Kafka 4.1.1 already running: pid 1, cluster id x, run dir /r"),
            EnsureLine::AlreadyRunning("4.1.1".into())
        );
        assert_eq!(
            parse_ensure_line(
                "kafka.sh: Kafka 4.1.1 up: pid 9, cluster id x, run dir /r (keep data), started in 5s"
            ),
            EnsureLine::StartedNow("4.1.1".into())
        );
        assert_eq!(
            parse_ensure_line("kafka.sh: resolving Kafka 4.1.1 jars from Maven Central into /x ..."),
            EnsureLine::Progress
        );
    }

    #[test]
    fn the_script_is_next_to_the_examples() {
        assert!(script_path().is_file(), "{}", script_path().display());
    }

    #[test]
    fn describe_names_version_address_and_how_to_stop() {
        let b = LocalBroker {
            bootstrap: "127.0.0.1:9092".into(),
            version: Some("4.1.1".into()),
            started_now: false,
        };
        let line = b.describe();
        assert!(
            line.starts_with(
                "Kafka 4.1.1: local broker on 127.0.0.1:9092 (already running); stop it with: bash "
            ),
            "{line}"
        );
        assert!(line.ends_with("scripts/kafka.sh stop"), "{line}");
    }
}
