//! Runs the keyed count until SIGINT, SIGTERM or the end of stdin (then closes cleanly:
//! last commit, leaves the group), or until killed.
//!
//! `count-app [--bootstrap-servers HOST:PORT] [--application-id ID] [--input T] [--output T]
//!  [--state-dir DIR] [--guarantee at_least_once|exactly_once_v2] [--threads N] [--partitions N]
//!  [--metrics-address HOST:PORT] [--metrics-recording-level INFO|DEBUG] [--standbys N] [--smoke]`
//!
//! Every flag has a default: the local broker of `scripts/kafka.sh` (started if it is not
//! running), application id `count-app`, topics `count-app-input` and `count-app-output`
//! (created with `--partitions` partitions where missing), and a state directory of its own
//! under the temp dir, removed at a clean exit (the stores restore from their changelogs at
//! the next start). It prints `started` once the application is started.

use std::path::PathBuf;

use clap::Parser;
use streams_core::{KafkaStreams, StreamsConfig};
use streams_examples::MainError;
use streams_examples::admin::create_topics;
use streams_examples::count::count_topology_with_audit;
use streams_examples::local_kafka::bootstrap_or_local;
use streams_examples::shutdown::StopSignals;
use streams_examples::smoke::{SmokeTopics, smoke_topology};

#[derive(Parser, Debug)]
#[command(about = "A keyed count over a RocksDB store, until stdin closes")]
struct Args {
    /// Kafka to run on; without it the local broker of `scripts/kafka.sh` (started if it is
    /// not running).
    #[arg(long)]
    bootstrap_servers: Option<String>,
    /// The application id (consumer group, prefix of its changelog topic).
    #[arg(long, default_value = "count-app")]
    application_id: String,
    /// The input topic (string keys and values).
    #[arg(long, default_value = "count-app-input")]
    input: String,
    /// The output topic: each key's new count (8-byte big-endian).
    #[arg(long, default_value = "count-app-output")]
    output: String,
    /// The state directory (default: `<temp dir>/count-app-<pid>`, removed at a clean exit).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// `at_least_once` or `exactly_once_v2`.
    #[arg(long, default_value = "at_least_once")]
    guarantee: String,
    /// Stream threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Partitions of the input and output topics where it creates them.
    #[arg(long, default_value_t = 2)]
    partitions: i32,
    /// Also write every input record unchanged to this topic, from the same task (the crash
    /// tests check every input's identity there).
    #[arg(long)]
    audit: Option<String>,
    /// Run the fault suite's smoke topology (`streams_examples::smoke`): the same count and
    /// audit written with the DSL, and a join, a repartitioned aggregate and a windowed
    /// count writing to `<output>-joined`, `<output>-stats` and `<output>-windowed`.
    #[arg(long)]
    smoke: bool,
    /// Serve Prometheus metrics at this address (`/metrics`, `/health/live`, `/health/ready`).
    #[arg(long)]
    metrics_address: Option<String>,
    /// `metrics.recording.level`: `INFO` (the default) or `DEBUG`, which adds the per-node and
    /// per-store-operation latency histograms.
    #[arg(long)]
    metrics_recording_level: Option<String>,
    /// `num.standby.replicas`: warm copies of each task's store on other instances; above 0
    /// the instances join a streams group (KIP-1071), where the broker places them.
    #[arg(long, default_value_t = 0)]
    standbys: usize,
    /// `group.protocol`: `classic` (the default here: its session of 6 s notices a
    /// killed instance quickly), `consumer` (KIP-848, the broker's session settings) or
    /// `streams` (KIP-1071).
    #[arg(long, default_value = "classic")]
    group_protocol: String,
    /// Any further property, `KEY=VALUE` (repeatable), e.g. a client setting.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    properties: Vec<String>,
}

fn main() -> Result<(), MainError> {
    // The log goes to stderr; stdout carries the program's own lines (`started`, ...).
    streams_examples::logging::init_logging();
    let a = Args::parse();
    let bootstrap = bootstrap_or_local(a.bootstrap_servers.clone())?;
    let own_state_dir = a.state_dir.is_none();
    let state_dir = a
        .state_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("count-app-{}", std::process::id())));
    let mut topics = vec![a.input.clone(), a.output.clone()];
    topics.extend(a.audit.clone());
    if a.smoke {
        topics.extend(SmokeTopics::of(&a.output).all().map(str::to_owned));
    }
    create_topics(&bootstrap, &topics, a.partitions)?;
    let mut props = vec![
        ("application.id", a.application_id.clone()),
        ("bootstrap.servers", bootstrap.clone()),
        ("state.dir", state_dir.display().to_string()),
        ("processing.guarantee", a.guarantee.clone()),
        ("num.stream.threads", a.threads.to_string()),
    ];
    if a.group_protocol == "classic" {
        props.push(("consumer.session.timeout.ms", "6000".into()));
        props.push(("consumer.heartbeat.interval.ms", "500".into()));
    } else {
        props.push(("group.protocol", a.group_protocol.clone()));
    }
    if let Some(address) = &a.metrics_address {
        props.push(("metrics.address", address.clone()));
    }
    if let Some(level) = &a.metrics_recording_level {
        props.push(("metrics.recording.level", level.clone()));
    }
    if a.standbys > 0 {
        props.push(("num.standby.replicas", a.standbys.to_string()));
    }
    let mut extra = Vec::new();
    for p in &a.properties {
        let (k, v) = p.split_once('=').ok_or_else(|| {
            streams_examples::ExampleError::Other(format!("--property `{p}` is not KEY=VALUE"))
        })?;
        extra.push((k.to_owned(), v.to_owned()));
    }
    let config =
        StreamsConfig::from_properties(props.into_iter().map(|(k, v)| (k.to_owned(), v)).chain(extra))?;
    let signals = StopSignals::install()?;
    let topology = if a.smoke {
        smoke_topology(&a.input, &a.output, a.audit.as_deref())
            .map_err(|e| streams_examples::ExampleError::Other(format!("the smoke topology: {e}")))?
    } else {
        count_topology_with_audit(&a.input, &a.output, a.audit.as_deref())?
    };
    let mut app = KafkaStreams::new(topology, config)?;
    app.start()?;
    println!(
        "counting {} -> {} as {} ({}, state in {}); Ctrl-C, SIGTERM or closing stdin stops it",
        a.input,
        a.output,
        a.application_id,
        a.guarantee,
        state_dir.display()
    );
    println!("started");
    // A crash test kills the process instead.
    Ok(signals.serve(&mut app, own_state_dir.then_some(state_dir.as_path()))?)
}
