//! Runs the keyed count until killed or until stdin closes (then closes cleanly).
//!
//! `count-app --bootstrap-servers HOST:PORT --application-id ID --input T --output T
//!  --state-dir DIR [--guarantee at_least_once|exactly_once_v2]`

use std::io::Read;
use std::time::Duration;

use clap::Parser;
use streams_core::{KafkaStreams, StreamsConfig};
use streams_examples::ExampleError;
use streams_examples::count::count_topology;

#[derive(Parser, Debug)]
struct Args {
    #[arg(long)]
    bootstrap_servers: String,
    #[arg(long)]
    application_id: String,
    #[arg(long)]
    input: String,
    #[arg(long)]
    output: String,
    #[arg(long)]
    state_dir: String,
    #[arg(long, default_value = "at_least_once")]
    guarantee: String,
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

fn main() -> Result<(), ExampleError> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    let a = Args::parse();
    let config = StreamsConfig::from_properties([
        ("application.id", a.application_id.clone()),
        ("bootstrap.servers", a.bootstrap_servers.clone()),
        ("state.dir", a.state_dir.clone()),
        ("processing.guarantee", a.guarantee.clone()),
        ("num.stream.threads", a.threads.to_string()),
        ("consumer.session.timeout.ms", "6000".into()),
        ("consumer.heartbeat.interval.ms", "500".into()),
    ])?;
    let mut app = KafkaStreams::new(count_topology(&a.input, &a.output)?, config)?;
    app.start()?;
    println!("started");
    // Runs until stdin closes; a crash test kills the process instead.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    app.close(Duration::from_secs(30));
    Ok(())
}
