//! Runs the file-aggregation aggregator alone until killed or until stdin closes (then
//! closes cleanly), for crash tests and for running the pipeline's stages as separate
//! processes.
//!
//! `file-aggregator --bootstrap-servers HOST:PORT --application-id ID --topic-prefix P
//!  --out-dir DIR --state-dir DIR [--guarantee at_least_once|exactly_once_v2]`

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use streams_core::{KafkaStreams, StreamsConfig};
use streams_examples::ExampleError;
use streams_examples::file_aggregation::{Topics, aggregator_topology_on};

#[derive(Parser, Debug)]
struct Args {
    #[arg(long)]
    bootstrap_servers: String,
    #[arg(long)]
    application_id: String,
    /// Prefix of the pipeline's topics (`<prefix>-aggregator-input`, ...); none for the defaults.
    #[arg(long)]
    topic_prefix: Option<String>,
    #[arg(long)]
    out_dir: PathBuf,
    #[arg(long)]
    state_dir: String,
    #[arg(long, default_value = "exactly_once_v2")]
    guarantee: String,
    /// Serve Prometheus metrics at this address (`/metrics`, `/health`).
    #[arg(long)]
    metrics_address: Option<String>,
}

fn main() -> Result<(), ExampleError> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    let a = Args::parse();
    let topics = a
        .topic_prefix
        .as_deref()
        .map_or_else(Topics::default, Topics::prefixed);
    let mut props = vec![
        ("application.id", a.application_id.clone()),
        ("bootstrap.servers", a.bootstrap_servers.clone()),
        ("state.dir", a.state_dir.clone()),
        ("processing.guarantee", a.guarantee.clone()),
        ("commit.interval.ms", "200".into()),
        ("consumer.session.timeout.ms", "6000".into()),
        ("consumer.heartbeat.interval.ms", "500".into()),
    ];
    if let Some(address) = &a.metrics_address {
        props.push(("metrics.address", address.clone()));
    }
    let config = StreamsConfig::from_properties(props)?;
    std::fs::create_dir_all(&a.out_dir)?;
    let mut app = KafkaStreams::new(aggregator_topology_on(&topics, &a.out_dir)?, config)?;
    app.start()?;
    println!("started");
    // Runs until stdin closes; a crash test kills the process instead.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    app.close(Duration::from_secs(30));
    Ok(())
}
