//! The example binaries run as a user runs them: as processes, with their default
//! arguments, on the default broker (`scripts/kafka.sh ensure` finds the test broker running;
//! `KAFKA_PORT` is passed on from `STREAMS_TEST_BOOTSTRAP`). Skipped without a broker (see
//! `streams_test_utils::kafka::require_kafka`).
//!
//! - `file-aggregation-demo` exactly as the README runs it (100,000 lines): exit 0, says
//!   `result verified`, the result file is checked line by line here too, its topics are
//!   gone afterwards, and the console shows no ERROR line; and twice in a row on one broker,
//!   each run on its own topics.
//! - `webhook-join` (its demo), `count-app`, `file-aggregator` and `dlq-tool list` with
//!   defaults: each does its work and finishes with exit 0.
//!
//! Every child runs with `TMPDIR` set to a fresh directory (its default files go there) and
//! is killed if it outlives a generous bound, so a hang fails the test instead of blocking it.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use streams_examples::admin::topics_with_prefix;
use streams_examples::file_aggregation::{AggregatorMessage, expected_result, generate, read_commands};
use streams_test_utils::kafka::{self, ProduceRecord};

/// The demo's defaults, as the README runs it.
const DEMO_LINES: u64 = 100_000;
const DEMO_FAILURE_RATE: f64 = 0.01;
const DEMO_FILE: &str = "file-1";
/// Bounds against hangs, not performance limits.
const DEMO_LIMIT: Duration = Duration::from_secs(20 * 60);
const APP_LIMIT: Duration = Duration::from_secs(5 * 60);
const WAIT: Duration = Duration::from_secs(120);

/// The port of `bootstrap` (`host:port`), for `KAFKA_PORT`.
fn port_of(bootstrap: &str) -> &str {
    bootstrap
        .split(',')
        .next()
        .and_then(|b| b.rsplit_once(':'))
        .map_or("9092", |(_, port)| port)
}

/// `bin` with the default broker of the test run and `tmp` as its temp dir.
fn command(bin: &str, bootstrap: &str, tmp: &Path) -> Command {
    let mut c = Command::new(bin);
    c.env("KAFKA_PORT", port_of(bootstrap))
        .env("TMPDIR", tmp)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Kills `child` (by pid) unless `done` is signalled within `limit`.
fn watchdog(pid: u32, limit: Duration, what: String) -> mpsc::Sender<()> {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
            eprintln!("{what}: still running after {limit:?}: killing pid {pid}");
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    });
    tx
}

/// Runs `cmd` to its end (killed after `limit`).
fn run(mut cmd: Command, limit: Duration) -> Output {
    let what = format!("{cmd:?}");
    let child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
    let done = watchdog(child.id(), limit, what.clone());
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let _ = done.send(());
    out
}

/// Removes ANSI colour sequences (the log's level is coloured).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The lines of `console` logged at `level` (`ERROR`, `WARN`).
fn log_lines(console: &str, level: &str) -> Vec<String> {
    plain(console)
        .lines()
        .filter(|l| l.contains(&format!(" {level} ")) || l.starts_with(&format!("{level} ")))
        .map(str::to_owned)
        .collect()
}

/// stdout and stderr of a finished child, for messages.
fn console(out: &Output) -> String {
    format!(
        "---- stdout ----\n{}\n---- stderr ----\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The rest of the first line of `text` that starts with `prefix`.
fn after<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.strip_prefix(prefix))
}

/// Asserts what every child must do: exit 0, use the test broker, log no ERROR.
fn assert_clean_run(name: &str, bootstrap: &str, out: &Output) {
    let all = console(out);
    assert!(out.status.success(), "{name}: {}\n{all}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("local broker on {bootstrap} (already running)")),
        "{name} must announce the test broker as its default\n{all}"
    );
    let errors = log_lines(&all, "ERROR");
    assert!(errors.is_empty(), "{name} logged ERROR lines: {errors:#?}\n{all}");
}

/// What one demo run reported.
struct DemoRun {
    run_id: String,
    result: PathBuf,
}

/// Runs `file-aggregation-demo` with `args`; checks its exit, its console, its result file
/// (line by line, independently of the demo's own check) and that its topics are gone.
fn demo(bootstrap: &str, tmp: &Path, args: &[&str], lines: u64) -> DemoRun {
    let mut cmd = command(env!("CARGO_BIN_EXE_file-aggregation-demo"), bootstrap, tmp);
    cmd.args(args);
    let started = Instant::now();
    let out = run(cmd, DEMO_LIMIT);
    let took = started.elapsed();
    assert_clean_run("file-aggregation-demo", bootstrap, &out);
    let all = console(&out);
    eprintln!("file-aggregation-demo {args:?} ({lines} lines) took {took:.1?}\n{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("result verified: {lines} lines match")),
        "{all}"
    );
    let warnings = log_lines(&all, "WARN");
    assert!(warnings.is_empty(), "WARN lines in a normal run: {warnings:#?}");

    let run_id = after(&stdout, "run ")
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("no `run <id>:` line\n{all}"))
        .to_owned();
    let result = after(&stdout, "result file: ")
        .and_then(|l| l.rsplit_once(" ("))
        .map(|(path, _)| PathBuf::from(path))
        .unwrap_or_else(|| panic!("no `result file:` line\n{all}"));
    assert!(result.starts_with(tmp), "{} not under TMPDIR", result.display());

    // The result, line by line, against the input the demo generates.
    let input = tmp.join(format!("{run_id}-expected-input"));
    generate(&input, lines).unwrap();
    let mut got = read_commands(&result).unwrap();
    for (i, command) in read_commands(&input).unwrap().enumerate() {
        let expected = expected_result(DEMO_FILE, i as u64, &command.unwrap(), DEMO_FAILURE_RATE);
        let line = got.next().map(Result::unwrap);
        assert_eq!(
            line.as_deref(),
            Some(expected.as_str()),
            "{}: line {}",
            result.display(),
            i + 1
        );
    }
    assert!(
        got.next().is_none(),
        "{}: more lines than the input",
        result.display()
    );

    // Its topics (own and changelogs) were deleted.
    let deadline = Instant::now() + WAIT;
    loop {
        let left = topics_with_prefix(bootstrap, &format!("{run_id}-")).unwrap();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "topics left after the run: {left:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    DemoRun { run_id, result }
}

#[test]
fn file_aggregation_demo_as_the_readme_runs_it() {
    let Some(bootstrap) = kafka::require_kafka("file_aggregation_demo_as_the_readme_runs_it") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    demo(&bootstrap, tmp.path(), &[], DEMO_LINES);
}

#[test]
fn file_aggregation_demo_twice_on_one_broker() {
    let Some(bootstrap) = kafka::require_kafka("file_aggregation_demo_twice_on_one_broker") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let first = demo(&bootstrap, tmp.path(), &["--lines", "20000"], 20_000);
    let second = demo(&bootstrap, tmp.path(), &["--lines", "20000"], 20_000);
    assert_ne!(first.run_id, second.run_id);
    assert_ne!(first.result, second.result);
    assert!(first.result.is_file() && second.result.is_file());
}

#[test]
fn webhook_join_demo_runs_with_defaults() {
    let Some(bootstrap) = kafka::require_kafka("webhook_join_demo_runs_with_defaults") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = run(
        command(env!("CARGO_BIN_EXE_webhook-join"), &bootstrap, tmp.path()),
        APP_LIMIT,
    );
    assert_clean_run("webhook-join", &bootstrap, &out);
    let all = console(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // `<finished> of <expected> requests finished: ...`
    let summary = stdout
        .lines()
        .find(|l| l.contains(" requests finished: "))
        .unwrap_or_else(|| panic!("no summary\n{all}"));
    let words: Vec<&str> = summary.split_whitespace().collect();
    assert_eq!(words[1], "of", "{summary}");
    assert_eq!(words[0], words[2], "every request finished: {summary}");
    assert!(words[0].parse::<u64>().unwrap() > 0, "{summary}");
    // Users 1..12 each have a /legacy hook that is down: some requests are dead-lettered,
    // then replayed and delivered.
    let replay = after(&stdout, "replayed ").unwrap_or_else(|| panic!("no replay\n{all}"));
    let (n, rest) = replay.split_once(';').unwrap();
    assert_eq!(rest.trim(), format!("{n} of them delivered"), "{replay}");
    assert!(
        stdout.contains("deleted this run's"),
        "the demo deletes its topics\n{all}"
    );
}

#[test]
fn dlq_tool_lists_with_defaults() {
    let Some(bootstrap) = kafka::require_kafka("dlq_tool_lists_with_defaults") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_dlq-tool");

    // The default topic, whether it exists on this broker or not.
    let mut cmd = command(bin, &bootstrap, tmp.path());
    cmd.arg("list");
    let out = run(cmd, APP_LIMIT);
    assert_clean_run("dlq-tool list", &bootstrap, &out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("dead letter(s)"),
        "{}",
        console(&out)
    );

    // A new, empty dead-letter topic, and one that does not exist.
    let empty = format!("{}-dlq", kafka::unique_name("readme"));
    kafka::create_topic(&bootstrap, &empty, 2, &[]).unwrap();
    let missing = format!("{}-dlq", kafka::unique_name("readme-missing"));
    for (topic, says) in [
        (&empty, "0 dead letter(s) pending".to_owned()),
        (
            &missing,
            format!("0 dead letter(s): topic {missing} does not exist (yet)"),
        ),
    ] {
        let mut cmd = command(bin, &bootstrap, tmp.path());
        cmd.args(["--topic", topic, "list"]);
        let out = run(cmd, APP_LIMIT);
        assert_clean_run("dlq-tool list", &bootstrap, &out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.trim(), says, "{}", console(&out));
    }
}

/// A long-running example started with defaults: its stdout lines arrive on a channel.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
    stdout_seen: Vec<String>,
    done: mpsc::Sender<()>,
}

impl Running {
    fn start(bin: &str, bootstrap: &str, tmp: &Path) -> Self {
        let mut cmd = command(bin, bootstrap, tmp);
        cmd.stdin(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{bin}: {e}"));
        let done = watchdog(child.id(), APP_LIMIT, bin.to_owned());
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Self {
            child,
            stdin,
            lines,
            stderr,
            stdout_seen: Vec::new(),
            done,
        }
    }

    /// Waits for the stdout line `started`.
    fn wait_started(&mut self) {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let started = line == "started";
                    self.stdout_seen.push(line);
                    if started {
                        return;
                    }
                }
                Err(e) => panic!("no `started` line ({e:?}); stdout so far: {:?}", self.stdout_seen),
            }
        }
    }

    /// Closes stdin and waits for the exit; returns it as an [`Output`].
    fn finish(mut self) -> Output {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        let _ = self.done.send(());
        self.stdout_seen.extend(self.lines.try_iter());
        let stderr = self.stderr.join().unwrap();
        Output {
            status,
            stdout: (self.stdout_seen.join("\n") + "\n").into_bytes(),
            stderr: stderr.into_bytes(),
        }
    }
}

/// Reads `topic` from the beginning until a record keyed `key` comes; returns its value.
fn wait_for_key(bootstrap: &str, topic: &str, key: &str, read_committed: bool) -> Vec<u8> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", kafka::unique_name("readme-reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", kafka::isolation_level(read_committed))
        .create()
        .unwrap();
    let metadata = consumer.fetch_metadata(Some(topic), WAIT).unwrap();
    let partitions = metadata.topics()[0].partitions().len();
    assert!(partitions > 0, "{topic} has no partitions");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p as i32, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(500))
            && m.key() == Some(key.as_bytes())
        {
            return m.payload().unwrap_or_default().to_vec();
        }
    }
    panic!("no record keyed {key} in {topic} within {WAIT:?}");
}

#[test]
fn count_app_counts_with_defaults() {
    let Some(bootstrap) = kafka::require_kafka("count_app_counts_with_defaults") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut app = Running::start(env!("CARGO_BIN_EXE_count-app"), &bootstrap, tmp.path());
    app.wait_started();
    let key = kafka::unique_name("readme-key");
    kafka::produce(
        &bootstrap,
        "count-app-input",
        &[ProduceRecord::new(&key, "a"), ProduceRecord::new(&key, "b")],
        WAIT,
    )
    .unwrap();
    let first = wait_for_key(&bootstrap, "count-app-output", &key, false);
    assert_eq!(first, 1u64.to_be_bytes(), "the first count of a new key");
    let out = app.finish();
    assert_clean_run("count-app", &bootstrap, &out);
    // Its own state directory under TMPDIR is gone after a clean exit.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("count-app-"))
        .collect();
    assert!(left.is_empty(), "state left: {left:?}");
}

#[test]
fn file_aggregator_aggregates_with_defaults() {
    let Some(bootstrap) = kafka::require_kafka("file_aggregator_aggregates_with_defaults") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut app = Running::start(env!("CARGO_BIN_EXE_file-aggregator"), &bootstrap, tmp.path());
    app.wait_started();
    // Three results, out of order, and the total, as the service and the splitter send them.
    let file = kafka::unique_name("readme-file");
    let message = |m: &AggregatorMessage| ProduceRecord::new(&file, serde_json::to_vec(m).unwrap());
    let result = |line: u64, status: &str| AggregatorMessage::Result {
        line,
        status: status.into(),
        output: format!("output {line}"),
    };
    let records = [
        message(&result(2, "ok")),
        message(&result(0, "error")),
        message(&AggregatorMessage::Total { lines: 3 }),
        message(&result(1, "ok")),
    ];
    kafka::produce(&bootstrap, "aggregator-input", &records, WAIT).unwrap();
    let done = wait_for_key(&bootstrap, "files-done", &file, true);
    assert_eq!(done, 3u64.to_be_bytes());
    let out = app.finish();
    assert_clean_run("file-aggregator", &bootstrap, &out);
    let written = tmp
        .path()
        .join("file-aggregator-results")
        .join(format!("{file}.result"));
    assert_eq!(
        std::fs::read_to_string(&written).unwrap(),
        "error\toutput 0\nok\toutput 1\nok\toutput 2\n"
    );
}
