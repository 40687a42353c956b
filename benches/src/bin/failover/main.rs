//! Failover and exactly-once restart measurements of the keyed count with 1,000,000-entry
//! stores, against a real broker.
//!
//! ```text
//! bash scripts/kafka.sh ensure
//! cargo build --release -p streams-benches --bin failover
//! $CARGO_TARGET_DIR/release/failover kill-one [--standbys 0|1] [--settle-s 40] [--victim 0]
//!     [--guarantee at_least_once|exactly_once_v2]
//! $CARGO_TARGET_DIR/release/failover eos-restarts [--restarts 10] [--seed 1]
//! ```
//!
//! Both start from fresh topics: the input (6 partitions) is preloaded with one record per
//! key for `--keys` keys (1,000,000: the count stores then hold 1,000,000 entries in all,
//! about 167,000 per task) and then fed `--rate` records per second (2,000) with random keys
//! while the measurement runs. Every input record carries its sequence number as its value,
//! and the application (`failover app`, the count of `streams_examples::count`, with every
//! input also written unchanged to an audit topic by the same task) runs as child processes
//! whose stderr the driver parses for the runtime's INFO lines (`task created task=0_p
//! restored=N`, the start offsets of newly assigned partitions).
//!
//! - `kill-one`: `--instances` (3) instances of 1 thread each, `--standbys` standby replicas
//!   (0; `num.standby.replicas`, which needs the streams group protocol). Once the group has
//!   committed the end of the preload and the six tasks are spread over the instances, one
//!   instance is SIGKILLed. Per task that moved it prints, counted from the kill: when a
//!   survivor was assigned its partition (the broker noticed the death after its session
//!   timeout, `group.consumer.session.timeout.ms` or `group.streams.session.timeout.ms`,
//!   printed beside), when the task was created there (its stores restored), the records
//!   restored, and when its first new record reached the audit topic, by the broker's append
//!   time (the audit topic uses `LogAppendTime`; a record counts only if appended after the
//!   survivor's assignment, so nothing the dead instance had in flight); with standbys, also
//!   the changelog records the promoted standby had applied (`standby task stopped ...
//!   applied=N`) beside the changelog's size at the kill. `--settle-s` lets the application
//!   run on before the kill, so that standbys can apply the preload's changelog, which
//!   reaches the broker in one burst at the first commit after the preload (30 s under
//!   at-least-once). The broker's assignor may move a survivor's task to the other survivor
//!   as well: such rows say `a survivor`. Then the feed stops,
//!   the survivors finish, and every input sequence number must be in the audit topic at
//!   least once: a run that lost a record fails.
//! - `eos-restarts`: one instance with 2 threads under `exactly_once_v2`, SIGKILLed at random
//!   points (`--min-ms`..`--max-ms` after its start) and restarted `--restarts` (10) times on
//!   the same state directory; per restart it prints the records the created tasks restored
//!   (the persistent stores keep their committed state through a crash, so only what follows
//!   the last commit, not the store, should be restored). A last run finishes the input; the
//!   committed audit topic must hold every input sequence number exactly once, and the
//!   committed output every count `1..=n` of every key exactly once.
//!
//! Measured runs are in `benches/results/2026-12-01/failover/` and `docs/benchmarks.md`.
//!
//! Both print the load average at the start and the end (the numbers mean little on a busy
//! machine), write each instance's log to `--log-dir` (default `/tmp/<run name>`), and delete
//! their topics at the end unless `--keep-topics`.

mod app;
mod check;
mod child;
mod eos;
mod kafka_io;
mod kill_one;
mod watch;

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::app::AppArgs;
use crate::kafka_io::{Feed, Topics, load_avg};

/// The error type of the harness: any error, with its message.
type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[derive(Parser)]
#[command(about = "Failover and exactly-once restart measurements of the keyed count")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// One application instance (the driver starts these).
    App(app::AppArgs),
    /// Kill one of several instances and time the failover of its tasks.
    KillOne(kill_one::KillOneArgs),
    /// SIGKILL and restart an exactly-once instance repeatedly; check the committed output.
    EosRestarts(eos::EosArgs),
}

/// What both measurements take.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Common {
    /// The broker (`bash scripts/kafka.sh ensure` starts the local one).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub(crate) bootstrap: String,
    /// Distinct keys preloaded, one record each.
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) keys: u32,
    /// Records per second fed after the preload.
    #[arg(long, default_value_t = 2_000)]
    pub(crate) rate: u32,
    /// Partitions of the input, output and audit topics (so tasks).
    #[arg(long, default_value_t = 6)]
    pub(crate) partitions: i32,
    /// Seed of the feed's keys and of the kill points.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Where the instances' logs go (default `/tmp/<run name>`).
    #[arg(long)]
    pub(crate) log_dir: Option<PathBuf>,
    /// Keep the run's topics (deleted by default).
    #[arg(long)]
    pub(crate) keep_topics: bool,
}

impl Common {
    /// A fresh run name (`<what>-<ms since the epoch>`) and its log directory, created.
    pub(crate) fn run_dir(&self, what: &str) -> Res<(String, PathBuf)> {
        let name = format!("{what}-{}", now_ms());
        let dir = self
            .log_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("/tmp").join(&name));
        std::fs::create_dir_all(&dir)?;
        Ok((name, dir))
    }

    /// Runs `measure` with a fresh run name, its log directory, its new topics and the name
    /// of the count's changelog, with the load average printed before and after; deletes the
    /// topics (the changelog too) afterwards unless `--keep-topics`.
    pub(crate) fn on_fresh_topics(
        &self,
        what: &str,
        measure: impl FnOnce(&str, &Path, &Topics, &str) -> Res<()>,
    ) -> Res<()> {
        let (name, dir) = self.run_dir(what)?;
        println!(
            "{name}: logs in {}; load average at start {}",
            dir.display(),
            load_avg()
        );
        let topics = Topics::create(&self.bootstrap, &name, self.partitions)?;
        let changelog = format!("{name}-counts-changelog");
        let result = measure(&name, &dir, &topics, &changelog);
        println!("load average at the end: {}", load_avg());
        if !self.keep_topics {
            topics.delete(&self.bootstrap, &[&changelog]);
        }
        result
    }

    /// Starts the feed that follows the preload: random keys, sequence numbers continuing
    /// the preload's.
    pub(crate) fn start_feed(&self, topics: &Topics) -> Res<Feed> {
        Feed::start(
            &self.bootstrap,
            &topics.input,
            self.keys,
            self.partitions,
            self.rate,
            u64::from(self.keys),
            self.seed,
        )
    }

    /// The arguments of an application instance of run `name` with state in `state_dir`:
    /// no standbys, the runtime's commit interval and group protocol.
    pub(crate) fn app_args(
        &self,
        name: &str,
        topics: &Topics,
        state_dir: &Path,
        threads: usize,
        guarantee: String,
    ) -> AppArgs {
        AppArgs {
            bootstrap: self.bootstrap.clone(),
            application_id: name.to_owned(),
            input: topics.input.clone(),
            output: topics.output.clone(),
            audit: topics.audit.clone(),
            state_dir: state_dir.display().to_string(),
            threads,
            guarantee,
            standbys: 0,
            commit_ms: None,
            group_protocol: None,
        }
    }
}

/// Milliseconds since the epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn main() -> Res<()> {
    match Cli::parse().cmd {
        Cmd::App(a) => app::run(&a),
        Cmd::KillOne(a) => kill_one::run(&a),
        Cmd::EosRestarts(a) => eos::run(&a),
    }
}
