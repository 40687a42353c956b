//! `failover app`: one instance of the measured application, the keyed count of
//! `streams_examples::count` (a RocksDB store with caching and logging) with every input
//! record also written unchanged to an audit topic from the same task.
//!
//! It logs to stderr without colours, by default `warn` plus the INFO lines of task creation
//! (`task created task=0_3 restored=N`, `closing task taken by another member`), of the
//! start offsets of newly assigned partitions and of the state updater (`standby task stopped
//! task=0_3 applied=N`), which the driver parses (`child.rs`). Its own
//! line `started protocol=...` goes to stderr too, so the driver reads one stream. It runs
//! until standard input closes (then closes cleanly) or it is killed.

use std::io::Read;
use std::time::Duration;

use streams_core::{KafkaStreams, StreamsConfig};
use streams_examples::count::count_topology_with_audit;

use crate::Res;

/// The log filter the driver relies on (the `RUST_LOG` environment variable overrides it).
pub(crate) const LOG_FILTER: &str = "warn,streams_core::runtime::tasks::creation=info,\
     streams_core::runtime::topics::start_offsets=info,streams_core::runtime::restore::updater=info";

/// One instance's settings.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct AppArgs {
    /// The broker.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub(crate) bootstrap: String,
    /// `application.id`.
    #[arg(long)]
    pub(crate) application_id: String,
    /// The input topic (string keys and values).
    #[arg(long)]
    pub(crate) input: String,
    /// The count output topic.
    #[arg(long)]
    pub(crate) output: String,
    /// The audit topic: every input record unchanged, written by the task that processed it.
    #[arg(long)]
    pub(crate) audit: String,
    /// `state.dir`.
    #[arg(long)]
    pub(crate) state_dir: String,
    /// `num.stream.threads`.
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// `processing.guarantee`: `at_least_once` or `exactly_once_v2`.
    #[arg(long, default_value = "at_least_once")]
    pub(crate) guarantee: String,
    /// `num.standby.replicas` (set only when above 0).
    #[arg(long, default_value_t = 0)]
    pub(crate) standbys: usize,
    /// `commit.interval.ms` (default: the runtime's, 30 s at-least-once, 100 ms exactly-once).
    #[arg(long)]
    pub(crate) commit_ms: Option<u64>,
    /// `group.protocol` (default: the runtime's choice; `streams` with standbys).
    #[arg(long)]
    pub(crate) group_protocol: Option<String>,
}

impl AppArgs {
    /// The command-line arguments that give these settings to `failover app`.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut v: Vec<String> = [
            "app",
            "--bootstrap",
            &self.bootstrap,
            "--application-id",
            &self.application_id,
            "--input",
            &self.input,
            "--output",
            &self.output,
            "--audit",
            &self.audit,
            "--state-dir",
            &self.state_dir,
            "--guarantee",
            &self.guarantee,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(["--threads".into(), self.threads.to_string()]);
        v.extend(["--standbys".into(), self.standbys.to_string()]);
        if let Some(ms) = self.commit_ms {
            v.extend(["--commit-ms".into(), ms.to_string()]);
        }
        if let Some(p) = &self.group_protocol {
            v.extend(["--group-protocol".into(), p.clone()]);
        }
        v
    }
}

/// Runs one instance until standard input closes.
pub(crate) fn run(a: &AppArgs) -> Res<()> {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| LOG_FILTER.into());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let mut props = vec![
        ("application.id".to_owned(), a.application_id.clone()),
        ("bootstrap.servers".to_owned(), a.bootstrap.clone()),
        ("state.dir".to_owned(), a.state_dir.clone()),
        ("processing.guarantee".to_owned(), a.guarantee.clone()),
        ("num.stream.threads".to_owned(), a.threads.to_string()),
    ];
    if a.standbys > 0 {
        props.push(("num.standby.replicas".to_owned(), a.standbys.to_string()));
    }
    if let Some(ms) = a.commit_ms {
        props.push(("commit.interval.ms".to_owned(), ms.to_string()));
    }
    if let Some(p) = &a.group_protocol {
        props.push(("group.protocol".to_owned(), p.clone()));
    }
    let config = StreamsConfig::from_properties(props)?;
    let topology = count_topology_with_audit(&a.input, &a.output, Some(&a.audit))?;
    let mut app = KafkaStreams::new(topology, config)?;
    app.start()?;
    eprintln!("started protocol={:?}", app.group_protocol());
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    app.close(Duration::from_secs(30));
    Ok(())
}
