//! `count-app` instances driven as child processes by the multi-instance tests (membership
//! churn, broker faults): each keeps its state directory across its restarts and appends its
//! output and log to one file; the test starts, stops (SIGTERM) and kills (SIGKILL) them, and
//! checks that none has died by itself.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::CountTopics;

/// The log line of a stream thread that failed: under `count-app`'s default handler the
/// application then stops processing (state `Error`) while its process keeps running.
const THREAD_FAILED: &str = "stream thread failed";

/// What the instances run on.
pub struct Run {
    pub bootstrap: String,
    /// The bootstrap servers the instances are given, where not [`bootstrap`](Self::bootstrap).
    pub instance_bootstrap: Option<String>,
    pub app: String,
    pub topics: CountTopics,
}

impl Run {
    /// A fresh application id and fresh topics (with an audit topic) of `partitions`
    /// partitions, all named after `prefix`.
    pub fn create(bootstrap: String, prefix: &str, partitions: i32) -> Self {
        Self::create_with_audit(bootstrap, prefix, partitions, &[])
    }

    /// [`create`](Self::create) with an audit topic of the topic configs `audit_configs`.
    pub fn create_with_audit(
        bootstrap: String,
        prefix: &str,
        partitions: i32,
        audit_configs: &[(&str, &str)],
    ) -> Self {
        let topics = CountTopics::create_with(&bootstrap, prefix, partitions, Some(audit_configs));
        Self {
            bootstrap,
            instance_bootstrap: None,
            app: streams_test_utils::kafka::unique_name(prefix),
            topics,
        }
    }
}

/// `<target>/tmp/<test>/<app>`, created: where the instances of application `app` write
/// their logs.
pub fn logs_dir(test: &str, app: &str) -> PathBuf {
    let logs = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test).join(app);
    std::fs::create_dir_all(&logs).unwrap();
    logs
}

/// Removes the logs of a passed test, unless `KEEP_TEST_LOGS` is set (to keep them for
/// study).
pub fn remove_logs(logs: &Path) {
    if std::env::var_os("KEEP_TEST_LOGS").is_none() {
        let _ = std::fs::remove_dir_all(logs);
    }
}

/// One `count-app` instance: its state directory (kept across its restarts), its log, its
/// command-line arguments beyond the run's, and its process while it runs (killed if the
/// test ends early).
pub struct Instance {
    pub name: &'static str,
    state: tempfile::TempDir,
    pub log: PathBuf,
    args: Vec<String>,
    running: Option<Running>,
    starts: usize,
    /// Stream threads that failed, over all its starts.
    threads_failed: Arc<AtomicUsize>,
}

/// A running instance's process, and the threads that copy its standard output (the
/// application's own lines, returned at their end) and its standard error (the log) to the
/// log file.
struct Running {
    child: Child,
    output: JoinHandle<Vec<String>>,
    log: JoinHandle<Vec<String>>,
}

impl Running {
    /// Waits for the copying threads (the process has exited): its output lines.
    fn join(self) -> Vec<String> {
        self.log.join().expect("log thread");
        self.output.join().expect("output thread")
    }
}

impl Instance {
    /// An instance with the guarantee `guarantee` (`exactly_once_v2`, `at_least_once`) and
    /// further `count-app` arguments `args` (`--threads N`, `--property K=V`, ...).
    pub fn new(name: &'static str, logs: &Path, guarantee: &str, args: &[&str]) -> Self {
        Self {
            name,
            state: tempfile::tempdir().unwrap(),
            log: logs.join(format!("{name}.log")),
            args: ["--guarantee", guarantee]
                .iter()
                .chain(args)
                .map(|a| a.to_string())
                .collect(),
            running: None,
            starts: 0,
            threads_failed: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Instances A and B, alike.
    pub fn pair(logs: &Path, guarantee: &str, args: &[&str]) -> [Self; 2] {
        Self::named(["A", "B"], logs, guarantee, args)
    }

    /// One instance per name of `names`, alike.
    pub fn named<const N: usize>(
        names: [&'static str; N],
        logs: &Path,
        guarantee: &str,
        args: &[&str],
    ) -> [Self; N] {
        names.map(|name| Self::new(name, logs, guarantee, args))
    }

    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Stream threads that failed (`stream thread failed` in its log) over all its starts.
    pub fn threads_failed(&self) -> usize {
        self.threads_failed.load(Ordering::Acquire)
    }

    /// How many lines of its log (all its starts) contain `pattern`.
    pub fn log_matches(&self, pattern: &str) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .matches(pattern)
            .count()
    }

    /// Starts it, and returns once it says `started` (signal handlers installed, stream
    /// threads started).
    pub fn start(&mut self, run: &Run) {
        assert!(self.running.is_none(), "{} is already running", self.name);
        self.starts += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        writeln!(log, "==== {} start {}", self.name, self.starts).unwrap();
        let bootstrap = run.instance_bootstrap.as_deref().unwrap_or(&run.bootstrap);
        let mut child = super::count_app(bootstrap, &run.app, &run.topics, self.state.path())
            .args(&self.args)
            // Rebalances, start offsets and commits in the log: a failure is diagnosable.
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info,streams_core::runtime=debug".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start count-app");
        // Both drained all along: a full pipe would block the application's logging.
        let (started_tx, started) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let output = copy_lines(stdout, log.try_clone().unwrap(), true, move |line| {
            if line == "started" {
                let _ = started_tx.send(());
            }
        });
        let failed = self.threads_failed.clone();
        let log = copy_lines(child.stderr.take().unwrap(), log, false, move |line| {
            if line.contains(THREAD_FAILED) {
                failed.fetch_add(1, Ordering::AcqRel);
            }
        });
        let running = Running { child, output, log };
        if started.recv().is_err() {
            let Running {
                mut child, output, ..
            } = running;
            panic!(
                "{} did not start: {:?}, output {:?}; see {}",
                self.name,
                child.wait(),
                output.join(),
                self.log.display()
            );
        }
        self.running = Some(running);
    }

    /// SIGTERM; it must close cleanly and exit 0.
    pub fn leave(&mut self) {
        let mut running = self.running.take().expect("running");
        super::send_signal(&running.child, "TERM");
        // A close that takes this long is stuck: its stacks, taken while it still runs
        // (the application gives up after its 30 s close timeout), name the call.
        let mut exit = super::wait_exit(&mut running.child, Duration::from_secs(20));
        if exit.is_none() {
            self.append_stacks(&running.child);
            exit = super::wait_exit(&mut running.child, Duration::from_secs(40));
        }
        let exit = exit.unwrap_or_else(|| {
            let _ = running.child.kill();
            self.fail(format_args!("still running 60 s after SIGTERM"))
        });
        let lines = running.join();
        if !(exit.success() && lines.iter().any(|l| l == "SIGTERM: closed cleanly")) {
            self.fail(format_args!("after SIGTERM: {exit}, output {lines:?}"));
        }
    }

    /// Appends the thread stacks of its running process to its log (`gdb`, where
    /// installed: they name the call a stream thread is blocked in).
    fn append_stacks(&self, child: &Child) {
        let pid = child.id().to_string();
        let stacks = Command::new("timeout")
            .args(["120", "gdb", "-batch", "-p", &pid, "-ex", "thread apply all bt"])
            .stdin(Stdio::null())
            .output();
        let text = match stacks {
            Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
            Err(e) => format!("gdb: {e}"),
        };
        if let Ok(mut log) = OpenOptions::new().append(true).open(&self.log) {
            let _ = write!(log, "==== {} (pid {pid}): thread stacks\n{text}", self.name);
        }
    }

    /// Waits until one of its stream threads logs its failure, and returns that log line;
    /// panics when none has `limit` after `since`, when `what` happened.
    pub fn wait_thread_failure(&self, test: &str, since: Instant, limit: Duration, what: &str) -> String {
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(line) = log.lines().find(|l| l.contains(THREAD_FAILED)) {
                return line.to_owned();
            }
            assert!(
                since.elapsed() < limit,
                "{test}: no stream thread failed {limit:?} after {what}; see {}",
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// SIGKILL.
    pub fn crash(&mut self) {
        let mut running = self.running.take().expect("running");
        running.child.kill().unwrap();
        running.child.wait().unwrap();
        running.join();
    }

    /// Panics if its process has exited by itself, or one of its stream threads has failed.
    pub fn check_alive(&mut self) {
        if let Some(running) = &mut self.running
            && let Some(exit) = running.child.try_wait().unwrap()
        {
            self.running = None;
            self.fail(format_args!("exited by itself: {exit}"));
        }
        let failed = self.threads_failed();
        if failed > 0 {
            self.fail(format_args!(
                "has {failed} stream threads dead (`{THREAD_FAILED}`)"
            ));
        }
    }

    /// Panics: `<name> <what>; see <its log>`.
    fn fail(&self, what: std::fmt::Arguments<'_>) -> ! {
        panic!("{} {what}; see {}", self.name, self.log.display())
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(Running { mut child, .. }) = self.running.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Copies `from` to `log` on a thread of its own until its end, calling `each` on each line
/// (as UTF-8, lossy: a line that is not must not stop the copy, or the child would block on a
/// full pipe); the thread returns the lines with `keep` (none without).
fn copy_lines(
    from: impl Read + Send + 'static,
    mut log: File,
    keep: bool,
    mut each: impl FnMut(&str) + Send + 'static,
) -> JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut from = BufReader::new(from);
        let mut buf = Vec::new();
        while matches!(from.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
            if !buf.ends_with(b"\n") {
                buf.push(b'\n');
            }
            // One write per line: the two copying threads append to the same file.
            let _ = log.write_all(&buf);
            let line = String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned();
            each(&line);
            if keep {
                lines.push(line);
            }
            buf.clear();
        }
        lines
    })
}

/// The log files of `instances`, for failure messages.
pub fn logs_of(instances: &[Instance]) -> String {
    instances
        .iter()
        .map(|i| i.log.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Fails a test whose instances have stopped making progress: first appends each running
/// instance's thread stacks to its log (`gdb`, where installed: they name the call a stream
/// thread is blocked in), then panics with `what` and the logs.
pub fn stalled(instances: &[Instance], what: &str) -> ! {
    for instance in instances {
        if let Some(running) = &instance.running {
            instance.append_stacks(&running.child);
        }
    }
    panic!(
        "{what}; thread stacks at the end of the logs: {}",
        logs_of(instances)
    )
}

/// Sleeps `how_long`, checking every 500 ms that the instances are alive.
pub fn sleep_alive(how_long: Duration, instances: &mut [Instance]) {
    let until = Instant::now() + how_long;
    while Instant::now() < until {
        check_all_alive(instances);
        std::thread::sleep(Duration::from_millis(500).min(until.saturating_duration_since(Instant::now())));
    }
}

/// Checks every instance with [`Instance::check_alive`].
pub fn check_all_alive(instances: &mut [Instance]) {
    for instance in instances {
        instance.check_alive();
    }
}
