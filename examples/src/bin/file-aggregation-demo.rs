//! Runs the whole file-aggregation pipeline in one process: generates a file of commands,
//! splits it, processes every command in a stand-in command service (some fail) and
//! aggregates the results back into one result file, in line order; then checks that file
//! line by line against the expected output.
//!
//! With no `--bootstrap-servers` it runs on the local broker that `scripts/kafka.sh ensure`
//! keeps running (started if needed). Every run creates its own topics and application ids
//! (`file-aggregation-<millis>-<pid>-...`), so runs sharing a broker never see each other's
//! records, and deletes them once the result is verified. The aggregator runs under
//! `exactly_once_v2`; the service at-least-once (a result it repeats is absorbed by the
//! aggregator's `put_if_absent`).
//!
//! Progress (lines split, processed by the service, aggregated) is drawn as bars on a
//! terminal, and printed as a plain line every 5 s otherwise. The run fails only when none
//! of the three moved for `--stall-timeout-secs`, never after a fixed total time.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use streams_core::{KafkaStreams, State, StreamsConfig};
use streams_examples::admin::{create_topics, delete_run, run_id};
use streams_examples::file_aggregation::{
    FilesDoneReader, ServiceBehaviour, Topics, Verification, aggregator_topology_on, check_result, generate,
    service_topology_on,
};
use streams_examples::local_kafka::bootstrap_or_local;
use streams_examples::shutdown::StopSignals;
use streams_examples::splitter::split_counted;
use streams_examples::{ExampleError, MainError};

/// The id of the one file the demo splits (its result is `<dir>/file-1.result`).
const FILE_ID: &str = "file-1";
/// How often the plain progress line is printed when stderr is not a terminal.
const PLAIN_PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// How long each app may take to close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Parser, Debug)]
#[command(about = "File aggregation with ordered range scans over a RocksDB state store")]
struct Args {
    /// Kafka to run on; without it the local broker of `scripts/kafka.sh` (started if it is
    /// not running).
    #[arg(long)]
    bootstrap_servers: Option<String>,
    /// Lines in the generated file.
    #[arg(long, default_value_t = 100_000)]
    lines: u64,
    /// Share of commands that fail (they still produce an `error` result line).
    #[arg(long, default_value_t = 0.01)]
    failure_rate: f64,
    /// Where the input and result files go (default: `<temp dir>/<run id>`).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Partitions of the topics the demo creates.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// Fail when nothing moved (lines split, processed, aggregated) for this long.
    #[arg(long, default_value_t = 120)]
    stall_timeout_secs: u64,
    /// Keep the run's topics and consumer groups instead of deleting them at the end.
    #[arg(long)]
    keep_topics: bool,
    /// Serve the aggregator's Prometheus metrics at this address (`/metrics`, `/health/live`, `/health/ready`).
    #[arg(long)]
    metrics_address: Option<String>,
    /// `metrics.recording.level` of the aggregator: `INFO` (the default) or `DEBUG`, which adds the
    /// per-node and per-store-operation latency histograms.
    #[arg(long)]
    metrics_recording_level: Option<String>,
}

fn main() -> Result<(), MainError> {
    // Before any thread starts: two malloc arenas for the whole process, so the memory one
    // thread frees serves the others instead of staying resident in an arena of its own
    // (the resident memory then stays flat as the input grows; docs/benchmarks.md).
    streams_core::limit_malloc_arenas(2);
    streams_examples::logging::init_logging();
    let args = Args::parse();
    if args.lines == 0 {
        return Err(ExampleError::Other("--lines must be at least 1".into()).into());
    }
    let bootstrap = bootstrap_or_local(args.bootstrap_servers.clone())?;
    let run = run_id("file-aggregation");
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(&run));
    std::fs::create_dir_all(&dir)?;
    let input = dir.join("commands.txt");
    generate(&input, args.lines)?;
    let result = dir.join(format!("{FILE_ID}.result"));
    // A result file of an earlier run in the same --dir must not pass for this run's.
    if result.exists() {
        std::fs::remove_file(&result)?;
    }

    let topics = Topics::prefixed(&run);
    let names: Vec<String> = topics.all().iter().map(|t| t.to_string()).collect();
    create_topics(&bootstrap, &names, args.partitions)?;
    println!(
        "run {run}: {} lines, topics {run}-* ({} partitions), files in {}",
        args.lines,
        args.partitions,
        dir.display()
    );

    let stop = StopSignals::install()?.into_flag();
    let outcome = run_pipeline(&args, &bootstrap, &run, &topics, &dir, &input, &result, &stop);
    let interrupted = stop.load(Ordering::Acquire);
    if (outcome.is_ok() || interrupted) && !args.keep_topics {
        // The stores are empty once the file is done, and their changelogs are deleted below.
        let _ = std::fs::remove_dir_all(dir.join("state"));
        println!("{}", delete_run(&bootstrap, &run));
    } else {
        println!("kept this run's topics and consumer groups ({run}-*)");
    }
    Ok(outcome?)
}

/// The three counters the progress shows and the stall check watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counters {
    split: u64,
    service: u64,
    aggregator: u64,
}

#[allow(clippy::too_many_arguments)] // one call, from main: the run's parts by name
fn run_pipeline(
    args: &Args,
    bootstrap: &str,
    run: &str,
    topics: &Topics,
    dir: &Path,
    input: &Path,
    result: &Path,
    stop: &AtomicBool,
) -> Result<(), ExampleError> {
    let started = Instant::now();
    let config = |app: &str, guarantee: &str, commit_ms: &str| {
        let mut props = vec![
            ("application.id", format!("{run}-{app}")),
            ("bootstrap.servers", bootstrap.to_owned()),
            ("state.dir", dir.join("state").display().to_string()),
            ("processing.guarantee", guarantee.to_owned()),
            ("commit.interval.ms", commit_ms.to_owned()),
        ];
        if let (Some(address), "aggregator") = (&args.metrics_address, app) {
            props.push(("metrics.address", address.clone()));
        }
        if let (Some(level), "aggregator") = (&args.metrics_recording_level, app) {
            props.push(("metrics.recording.level", level.clone()));
        }
        StreamsConfig::from_properties(props)
    };
    let behaviour = ServiceBehaviour {
        max_delay: Duration::ZERO,
        failure_rate: args.failure_rate,
    };
    let mut service = KafkaStreams::new(
        service_topology_on(topics, behaviour)?,
        config("service", "at_least_once", "1000")?,
    )?;
    let mut aggregator = KafkaStreams::new(
        aggregator_topology_on(topics, dir)?,
        config("aggregator", "exactly_once_v2", "500")?,
    )?;
    let done = FilesDoneReader::new(bootstrap, &topics.files_done, Duration::from_secs(30))?;
    service.start()?;
    aggregator.start()?;

    let sent = Arc::new(AtomicU64::new(0));
    let splitter = {
        let (bootstrap, topics, input, sent) = (
            bootstrap.to_owned(),
            topics.clone(),
            input.to_owned(),
            sent.clone(),
        );
        std::thread::Builder::new()
            .name("splitter".into())
            .spawn(move || split_counted(&bootstrap, &topics, FILE_ID, &input, &sent))?
    };
    let mut splitter = Some(splitter);

    let stall_timeout = Duration::from_secs(args.stall_timeout_secs);
    let mut view = ProgressView::new(args.lines);
    let mut last = None;
    let mut last_move = Instant::now();
    // The client retries what fails while reading; a lasting failure shows as a stall.
    let mut read_error = None;
    let reported = loop {
        if stop.load(Ordering::Acquire) {
            view.clear();
            let closed = service.close(CLOSE_TIMEOUT) & aggregator.close(CLOSE_TIMEOUT);
            return Err(ExampleError::Other(format!(
                "stopped by a signal before the result was complete (applications closed {})",
                if closed { "cleanly" } else { "with a timeout" }
            )));
        }
        match done.poll(Duration::from_millis(200)) {
            Ok(Some((file, lines))) if file == FILE_ID => break lines,
            Ok(_) => {}
            Err(e) => read_error = Some(e),
        }
        if splitter.as_ref().is_some_and(|s| s.is_finished())
            && let Some(s) = splitter.take()
            && let Err(e) = joined(s)
        {
            view.clear();
            return Err(e);
        }
        for (name, app) in [("service", &service), ("aggregator", &aggregator)] {
            if app.state() == State::Error {
                view.clear();
                return Err(ExampleError::Other(format!(
                    "the {name} failed (its error is logged above; RUST_LOG=info shows more)"
                )));
            }
        }
        let now = Counters {
            split: sent.load(Ordering::Relaxed),
            service: service.processed_records(),
            aggregator: aggregator.processed_records(),
        };
        if last != Some(now) {
            last = Some(now);
            last_move = Instant::now();
        } else if last_move.elapsed() >= stall_timeout {
            view.clear();
            return Err(ExampleError::Other(format!(
                "no progress for {} s: {} of {} lines split, {} processed by the service, {} records \
                 aggregated (of {} expected), and {} has no record for {FILE_ID} yet{} (broker {bootstrap}; \
                 --stall-timeout-secs sets the limit)",
                stall_timeout.as_secs(),
                now.split,
                args.lines,
                now.service,
                now.aggregator,
                args.lines + 1,
                topics.files_done,
                read_error.map_or_else(String::new, |e| format!(" (last read error: {e})")),
            )));
        }
        view.update(now, started.elapsed());
    };
    let took = started.elapsed();
    view.clear();
    if let Some(s) = splitter.take() {
        joined(s)?;
    }
    drop(done);

    println!(
        "{FILE_ID} done: {reported} lines split, processed out of order and aggregated in {:.1} s",
        took.as_secs_f64()
    );
    let verification = check_result(input, result, FILE_ID, args.failure_rate);
    let service_closed = service.close(CLOSE_TIMEOUT);
    let aggregator_closed = aggregator.close(CLOSE_TIMEOUT);
    match verification? {
        Verification::Matches { lines, errors } => {
            println!(
                "result file: {} ({lines} lines, {errors} of them results of failed commands)",
                result.display()
            );
            println!("result verified: {lines} lines match");
        }
        Verification::Differs(m) => {
            return Err(ExampleError::Other(format!(
                "the result file {} differs from the expected output: {m}",
                result.display()
            )));
        }
    }
    if !(service_closed && aggregator_closed) {
        return Err(ExampleError::Other(format!(
            "the service or the aggregator did not stop within {CLOSE_TIMEOUT:?}"
        )));
    }
    Ok(())
}

/// The splitter's result: the lines it sent, or why it failed.
fn joined(splitter: std::thread::JoinHandle<Result<u64, ExampleError>>) -> Result<u64, ExampleError> {
    splitter
        .join()
        .map_err(|_| ExampleError::Other("the splitter thread panicked".into()))?
        .map_err(|e| ExampleError::Other(format!("splitting the file failed: {e}")))
}

/// Progress bars on a terminal (stderr); a plain line every few seconds otherwise.
struct ProgressView {
    bars: MultiProgress,
    split: ProgressBar,
    service: ProgressBar,
    aggregator: ProgressBar,
    lines: u64,
    last_plain: Option<Instant>,
}

impl ProgressView {
    fn new(lines: u64) -> Self {
        let bars = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{prefix:>10} [{bar:40.cyan/blue}] {pos:>7}/{len:7} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bar = |name: &str, len: u64| {
            bars.add(
                ProgressBar::new(len)
                    .with_style(style.clone())
                    .with_prefix(name.to_owned()),
            )
        };
        let split = bar("split", lines);
        let service = bar("processed", lines);
        // The aggregator also reads the file's total, one record after the lines.
        let aggregator = bar("aggregated", lines + 1);
        Self {
            bars,
            split,
            service,
            aggregator,
            lines,
            last_plain: None,
        }
    }

    fn update(&mut self, c: Counters, elapsed: Duration) {
        if !self.bars.is_hidden() {
            self.split.set_position(c.split);
            self.service.set_position(c.service);
            self.aggregator.set_position(c.aggregator);
            self.split.set_message(format!("{:.0} s", elapsed.as_secs_f64()));
            return;
        }
        let due = self
            .last_plain
            .is_none_or(|t| t.elapsed() >= PLAIN_PROGRESS_EVERY);
        if due && elapsed >= PLAIN_PROGRESS_EVERY {
            self.last_plain = Some(Instant::now());
            eprintln!(
                "progress after {:.0} s: {} of {} lines split, {} processed, {} aggregated",
                elapsed.as_secs_f64(),
                c.split,
                self.lines,
                c.service,
                c.aggregator
            );
        }
    }

    fn clear(&self) {
        let _ = self.bars.clear();
    }
}
