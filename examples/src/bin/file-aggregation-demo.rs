//! Runs the whole file-aggregation pipeline in one process: generates a file of commands,
//! splits it, processes every command in a stand-in command service (random delays, some
//! failures) and aggregates the results back into one result file, in line order.
//!
//! With no `--bootstrap-servers` everything runs on an embedded in-process Kafka.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use streams_core::testing::{ConsumeUntil, consume_all, create_topic};
use streams_core::{EmbeddedKafka, KafkaStreams, StreamsConfig};
use streams_examples::ExampleError;
use streams_examples::file_aggregation::{
    AGGREGATOR_INPUT, FILES_DONE, PENDING, ServiceBehaviour, aggregator_topology, generate, service_topology,
};
use streams_examples::splitter::split;

#[derive(Parser, Debug)]
#[command(about = "File aggregation with ordered range scans over a RocksDB state store")]
struct Args {
    /// Kafka to run on; without it an embedded in-process cluster is used.
    #[arg(long)]
    bootstrap_servers: Option<String>,
    /// Lines in the generated file.
    #[arg(long, default_value_t = 100_000)]
    lines: u64,
    /// Share of commands that fail.
    #[arg(long, default_value_t = 0.01)]
    failure_rate: f64,
    /// Where the input and result files go (a temporary directory by default).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Partitions of the topics the demo creates.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// Serve the aggregator's Prometheus metrics at this address (`/metrics`, `/health`).
    #[arg(long)]
    metrics_address: Option<String>,
}

fn main() -> Result<(), ExampleError> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    let args = Args::parse();
    let started = Instant::now();
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("file-aggregation-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    let input = dir.join("commands.txt");
    generate(&input, args.lines)?;

    let (embedded, bootstrap) = match args.bootstrap_servers.clone() {
        Some(b) => (None, b),
        None => {
            let e = EmbeddedKafka::start()?;
            let b = e.bootstrap_servers().to_owned();
            (Some(e), b)
        }
    };
    for t in [PENDING, AGGREGATOR_INPUT, FILES_DONE] {
        match &embedded {
            Some(e) => e.create_topic(t, args.partitions)?,
            // An existing topic is fine: the demo can run again on the same cluster.
            None => {
                if let Err(e) = create_topic(&bootstrap, t, args.partitions, &[]) {
                    tracing::info!("topic {t}: {e}");
                }
            }
        }
    }
    let app_id = format!("file-aggregation-{}", std::process::id());
    let config = |suffix: &str| {
        let mut props = vec![
            ("application.id", format!("{app_id}-{suffix}")),
            ("bootstrap.servers", bootstrap.clone()),
            ("state.dir", dir.join("state").display().to_string()),
            ("commit.interval.ms", "1000".to_string()),
        ];
        if let (Some(address), "aggregator") = (&args.metrics_address, suffix) {
            props.push(("metrics.address", address.clone()));
        }
        StreamsConfig::from_properties(props)
    };
    let behaviour = ServiceBehaviour {
        max_delay: Duration::ZERO,
        failure_rate: args.failure_rate,
    };
    let app = |topology, config| match &embedded {
        Some(e) => KafkaStreams::on_embedded(topology, config, e),
        None => KafkaStreams::new(topology, config),
    };
    let mut service = app(service_topology(behaviour)?, config("service")?)?;
    let mut aggregator = app(aggregator_topology(&dir)?, config("aggregator")?)?;
    service.start()?;
    aggregator.start()?;

    let lines = split(&bootstrap, "file-1", &input)?;
    let deadline = Instant::now() + Duration::from_secs(900);
    let done = loop {
        match consume_all(
            &bootstrap,
            FILES_DONE,
            ConsumeUntil::Count(1),
            Duration::from_secs(5),
            false,
        ) {
            Ok(done) => break done,
            Err(_) if Instant::now() < deadline => eprintln!(
                "processed: service {} / aggregator {} records",
                service.processed_records(),
                aggregator.processed_records()
            ),
            Err(e) => return Err(ExampleError::Other(format!("no result within 15 minutes: {e}"))),
        }
    };
    let elapsed = started.elapsed();
    service.close(Duration::from_secs(30));
    aggregator.close(Duration::from_secs(30));
    let result = dir.join("file-1.result");
    println!("split {lines} lines; {} file(s) done", done.len());
    println!("result file: {}", result.display());
    println!("took {:.2?}", elapsed);
    Ok(())
}
