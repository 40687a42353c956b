//! Runs the file-aggregation aggregator alone until SIGINT, SIGTERM or the end of stdin (then
//! closes cleanly), for crash tests and for running the pipeline's stages as separate
//! processes.
//!
//! `file-aggregator [--bootstrap-servers HOST:PORT] [--application-id ID] [--topic-prefix P]
//!  [--out-dir DIR] [--state-dir DIR] [--guarantee at_least_once|exactly_once_v2]`
//!
//! Every flag has a default: the local broker of `scripts/kafka.sh` (started if it is not
//! running), application id `file-aggregator`, the pipeline's default topics (created with
//! `--partitions` partitions where missing), result files in
//! `<temp dir>/file-aggregator-results`, and a state directory of its own under the temp
//! dir, removed at a clean exit. It prints where the results go, then `started`.

use std::path::PathBuf;

use clap::Parser;
use streams_core::{KafkaStreams, StreamsConfig};
use streams_examples::MainError;
use streams_examples::admin::create_topics;
use streams_examples::file_aggregation::{Topics, aggregator_topology_on};
use streams_examples::local_kafka::bootstrap_or_local;
use streams_examples::shutdown::StopSignals;

#[derive(Parser, Debug)]
#[command(about = "The file-aggregation aggregator alone, until SIGINT, SIGTERM or the end of stdin")]
struct Args {
    /// Kafka to run on; without it the local broker of `scripts/kafka.sh` (started if it is
    /// not running).
    #[arg(long)]
    bootstrap_servers: Option<String>,
    /// The application id (consumer group, prefix of its changelog topics).
    #[arg(long, default_value = "file-aggregator")]
    application_id: String,
    /// Prefix of the pipeline's topics (`<prefix>-aggregator-input`, ...); none for the defaults.
    #[arg(long)]
    topic_prefix: Option<String>,
    /// Where result files go (default: `<temp dir>/file-aggregator-results`).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// The state directory (default: `<temp dir>/file-aggregator-<pid>`, removed at a clean
    /// exit; pass one to keep local state across restarts).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// `exactly_once_v2` or `at_least_once`.
    #[arg(long, default_value = "exactly_once_v2")]
    guarantee: String,
    /// Partitions of the pipeline's topics where it creates them.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// Serve Prometheus metrics at this address (`/metrics`, `/health/live`, `/health/ready`).
    #[arg(long)]
    metrics_address: Option<String>,
    /// `metrics.recording.level` of the application: `INFO` (the default) or `DEBUG`, which adds the
    /// per-node and per-store-operation latency histograms.
    #[arg(long)]
    metrics_recording_level: Option<String>,
}

fn main() -> Result<(), MainError> {
    streams_examples::logging::init_logging();
    let a = Args::parse();
    let bootstrap = bootstrap_or_local(a.bootstrap_servers.clone())?;
    let topics = a
        .topic_prefix
        .as_deref()
        .map_or_else(Topics::default, Topics::prefixed);
    let out_dir = a
        .out_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("file-aggregator-results"));
    let own_state_dir = a.state_dir.is_none();
    let state_dir = a
        .state_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("file-aggregator-{}", std::process::id())));
    let names: Vec<String> = topics.all().iter().map(|t| t.to_string()).collect();
    create_topics(&bootstrap, &names, a.partitions)?;
    let mut props = vec![
        ("application.id", a.application_id.clone()),
        ("bootstrap.servers", bootstrap.clone()),
        ("state.dir", state_dir.display().to_string()),
        ("processing.guarantee", a.guarantee.clone()),
        ("commit.interval.ms", "200".into()),
        ("consumer.session.timeout.ms", "6000".into()),
        ("consumer.heartbeat.interval.ms", "500".into()),
    ];
    if let Some(address) = &a.metrics_address {
        props.push(("metrics.address", address.clone()));
    }
    if let Some(level) = &a.metrics_recording_level {
        props.push(("metrics.recording.level", level.clone()));
    }
    let config = StreamsConfig::from_properties(props)?;
    std::fs::create_dir_all(&out_dir)?;
    let signals = StopSignals::install()?;
    let mut app = KafkaStreams::new(aggregator_topology_on(&topics, &out_dir)?, config)?;
    app.start()?;
    println!(
        "aggregating {} into {} as {} ({}); finished files are reported on {}",
        topics.aggregator_input,
        out_dir.display(),
        a.application_id,
        a.guarantee,
        topics.files_done
    );
    println!("started");
    // A crash test kills the process instead.
    Ok(signals.serve(&mut app, own_state_dir.then_some(state_dir.as_path()))?)
}
