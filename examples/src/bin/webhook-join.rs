//! Runs the web-hook application in one process: the range join (a streams topology) plus
//! the HTTP delivery consumers with their non-blocking retry ladder and dead-letter topic.
//!
//! - With no `--bootstrap-servers`: an embedded in-process Kafka, a tiny local HTTP server
//!   (some of whose endpoints fail), demo hooks and events, a millisecond retry ladder; it
//!   prints every delivery, retry and dead letter, then "recovers" the failing endpoint and
//!   replays the dead-letter topic.
//! - With `--bootstrap-servers`: runs as a service on existing (or created) topics with the
//!   production ladder (5m, 30m, 1h) until Ctrl-C; add `--demo` for the demo on that
//!   cluster.
//! - `--describe` prints the topology and the ladder and exits.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::Rng;
use serde_json::json;
use streams_core::EmbeddedKafka;
use streams_examples::ExampleError;
use streams_examples::retry::dlq::{DlqTool, ReplaySelection};
use streams_examples::retry::{Outcome, OutcomeEvent, RetryLadder, parse_delays};
use streams_examples::webhooks::receiver::{Policy, Receiver, always_ok};
use streams_examples::webhooks::{
    EventLog, PipelineConfig, WebHook, WebHookPipeline, WebHookProducer, WebHookRequest, WebHookTopics,
    create_topics, expected_requests, topology,
};

#[derive(Parser, Debug)]
#[command(
    about = "Web hooks: a range join over a RocksDB store, HTTP delivery with non-blocking retries and a DLQ"
)]
struct Args {
    /// Kafka to run on; without it an embedded in-process cluster runs the demo.
    #[arg(long)]
    bootstrap_servers: Option<String>,
    /// On a real cluster: generate demo hooks and events and deliver them to a local server.
    #[arg(long)]
    demo: bool,
    /// Print the topology and the retry ladder, then exit.
    #[arg(long)]
    describe: bool,
    /// Retry delays, e.g. `5m,30m,1h` (default: that on a cluster, `200ms,500ms,1s` for
    /// the demo).
    #[arg(long)]
    retry_delays: Option<String>,
    /// Appended to every topic name (e.g. to run the demo on a shared cluster).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    topic_suffix: String,
    /// Partitions of the topics it creates.
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    /// The join's application id (the delivery groups are `<id>-delivery.<topic>`).
    #[arg(long, default_value = "webhook-join")]
    application_id: String,
    /// The join's state directory (a temporary directory by default).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Demo: users (each gets four hooks).
    #[arg(long, default_value_t = 12)]
    users: u64,
    /// Demo: events.
    #[arg(long, default_value_t = 30)]
    events: usize,
    /// Serve the join's Prometheus metrics at this address (`/metrics`, `/health`).
    #[arg(long)]
    metrics_address: Option<String>,
}

fn main() -> Result<(), ExampleError> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .init();
    let args = Args::parse();
    let demo = args.demo || args.bootstrap_servers.is_none();
    let delays = parse_delays(args.retry_delays.as_deref().unwrap_or(if demo {
        "200ms,500ms,1s"
    } else {
        "5m,30m,1h"
    }))?;
    let topics = WebHookTopics::with_suffix(&args.topic_suffix);
    let ladder = RetryLadder::new(topics.requests.clone(), &delays);
    if args.describe {
        println!("{}", topology(&topics)?.describe());
        print_ladder(&ladder);
        return Ok(());
    }
    let state_dir = match &args.state_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("webhook-join-{}", std::process::id())),
    };
    let (embedded, bootstrap) = match &args.bootstrap_servers {
        Some(b) => (None, b.clone()),
        None => {
            let e = EmbeddedKafka::start()?;
            let b = e.bootstrap_servers().to_owned();
            (Some(e), b)
        }
    };
    let mut config = PipelineConfig::new(&args.application_id, &state_dir)
        .with_topics(topics)
        .with_delays(&delays);
    if demo {
        config.delivery = config.delivery.clone().with_listener(print_outcome);
    }
    if let Some(address) = &args.metrics_address {
        config
            .streams_properties
            .push(("metrics.address".into(), address.clone()));
    }
    create_topics(
        &bootstrap,
        embedded.as_ref(),
        &config.all_topics(),
        args.partitions,
    )?;
    println!("{}", topology(&config.topics)?.describe());
    print_ladder(&config.ladder);
    if demo {
        run_demo(&args, &bootstrap, embedded.as_ref(), config)
    } else {
        run_service(&bootstrap, config)
    }
}

fn print_ladder(ladder: &RetryLadder) {
    println!("Retry ladder:");
    println!("  {} (attempt 1)", ladder.source());
    for (i, s) in ladder.steps().iter().enumerate() {
        println!("  {} (attempt {}, after {:?})", s.topic, i + 2, s.delay);
    }
    println!("  {} (dead letters)", ladder.dead_letter());
}

/// Prints one attempt of the demo.
fn print_outcome(e: &OutcomeEvent<'_>) {
    let what = e
        .record
        .value
        .as_deref()
        .and_then(|v| serde_json::from_slice::<WebHookRequest>(v).ok())
        .map_or_else(
            || e.record.key_text(),
            |r| {
                let seq = r.payload.get("seq").map_or_else(String::new, |s| format!("#{s}"));
                format!(
                    "hook {:>3} user {:>2} event {} {seq:<4} -> {}",
                    r.webhook_id, r.user_id, r.event_id, r.url
                )
            },
        );
    let attempt = e.record.attempt() + 1;
    match &e.outcome {
        Outcome::Delivered => println!("delivered    attempt {attempt}  {what}"),
        Outcome::Retrying { topic, due_at_ms, .. } => {
            let wait = due_at_ms - streams_examples::retry::now_ms();
            let error = e.error.map(ToString::to_string).unwrap_or_default();
            println!("retry        attempt {attempt}  {what} ({error}) -> {topic} in {wait} ms");
        }
        Outcome::DeadLettered { .. } => {
            let error = e.error.map(ToString::to_string).unwrap_or_default();
            println!("dead letter  attempt {attempt}  {what} ({error})");
        }
    }
}

/// Runs until Ctrl-C, then closes cleanly.
fn run_service(bootstrap: &str, config: PipelineConfig) -> Result<(), ExampleError> {
    let pipeline = WebHookPipeline::start(bootstrap, None, config)?;
    println!("running; Ctrl-C to stop");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(tokio::signal::ctrl_c())?;
    let stats = pipeline.stats();
    pipeline.close(Duration::from_secs(30))?;
    println!(
        "stopped: {} delivered, {} retried, {} dead-lettered",
        stats.delivered(),
        stats.retried(),
        stats.dead_lettered()
    );
    Ok(())
}

/// The demo's receiver: `/crm` always answers 200, `/billing` fails 30% of its requests
/// (those whose sequence number ends in 0, 1 or 2), `/legacy` is down (503).
fn demo_policy() -> Policy {
    Arc::new(|path: &str, seq: u64| match path {
        "/billing" if seq % 10 < 3 => 500,
        "/legacy" => 503,
        _ => 200,
    })
}

fn run_demo(
    args: &Args,
    bootstrap: &str,
    embedded: Option<&EmbeddedKafka>,
    config: PipelineConfig,
) -> Result<(), ExampleError> {
    let started = Instant::now();
    let receiver = Receiver::start(demo_policy())?;
    let mut hooks = Vec::new();
    for user in 1..=args.users {
        for (n, event_id, path) in [
            (1, 100, "/crm"),
            (2, 100, "/billing"),
            (3, 200, "/legacy"),
            (4, 200, "/crm"),
        ] {
            hooks.push(WebHook {
                webhook_id: user * 10 + n,
                user_id: user,
                event_id,
                url: receiver.url(path),
            });
        }
    }
    // User 2 unregisters its billing hook: a tombstone deletes it from the store.
    let deleted = vec![(2, 22)];
    let mut rng = rand::rng();
    let events: Vec<EventLog> = (0..args.events)
        .map(|seq| {
            let user_id = rng.random_range(1..=args.users);
            let event_id = [100, 200, 300][rng.random_range(0..3)];
            EventLog {
                user_id,
                event_id,
                payload: json!({ "seq": seq, "user": user_id, "kind": event_id }),
            }
        })
        .collect();
    let expected = expected_requests(&hooks, &deleted, &events).len() as u64;
    let total_delay: Duration = config.ladder.steps().iter().map(|s| s.delay).sum();
    let dead_letter_topic = config.ladder.dead_letter().to_owned();
    let replay_topic = config.ladder.replay_topic().to_owned();
    let topics = config.topics.clone();

    let pipeline = WebHookPipeline::start(bootstrap, embedded, config)?;
    let producer = WebHookProducer::new(bootstrap, topics)?;
    for h in &hooks {
        producer.upsert(h)?;
    }
    for &(user, id) in &deleted {
        producer.delete(user, id)?;
    }
    producer.flush(Duration::from_secs(30))?;
    // Events are sent once the hooks are in the store, so every event sees them.
    let registered = (hooks.len() + deleted.len()) as u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while pipeline.streams().processed_records() < registered && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "{} hooks registered, {} deleted; sending {} events ({expected} requests)",
        hooks.len(),
        deleted.len(),
        events.len()
    );
    for e in &events {
        producer.event(e)?;
    }
    producer.flush(Duration::from_secs(30))?;

    let wait = total_delay * 2 + Duration::from_secs(60);
    let (stats, done) = pipeline.delivery().wait_for(wait, |s| s.finished() >= expected);
    println!();
    println!(
        "{} of {expected} requests finished: {} delivered, {} retries, {} dead-lettered{}",
        stats.finished(),
        stats.delivered(),
        stats.retried(),
        stats.dead_lettered(),
        if done { "" } else { " (timed out)" }
    );
    for s in &stats.stages {
        println!(
            "  {:<40} delivered {:>3}  retried {:>3}  dead-lettered {:>3}",
            s.topic, s.delivered, s.retried, s.dead_lettered
        );
    }
    let requests = receiver.requests();
    let failed = requests.iter().filter(|r| !r.succeeded()).count();
    println!(
        "the receiver got {} requests, {failed} answered with an error",
        requests.len()
    );

    // The dead-letter tool: list, fix the cause, replay.
    // The tool's default group, as `dlq-tool --topic <dead-letter topic>` uses: the CLI then
    // knows what the demo replayed.
    let tool = DlqTool::new(bootstrap, &dead_letter_topic);
    match tool.list(false) {
        Ok(letters) => {
            println!();
            println!("{} dead letters in {dead_letter_topic}:", letters.len());
            for d in letters.iter().take(5) {
                let r = &d.record;
                println!(
                    "  {}:{} key {} attempts {} last error {:?}",
                    r.partition,
                    r.offset,
                    r.key_text(),
                    r.attempt(),
                    r.last_error().unwrap_or_default()
                );
            }
            if letters.len() > 5 {
                println!("  ...");
            }
        }
        Err(e) => println!("listing the dead letters failed: {e}"),
    }
    println!();
    println!("/legacy recovers; replaying the dead letters into {replay_topic}");
    receiver.set_policy(always_ok());
    let before = pipeline.stats().delivered();
    match tool.replay(&replay_topic, &ReplaySelection::All) {
        Ok(report) => {
            let replayed = report.replayed.len() as u64;
            let (stats, _) = pipeline
                .delivery()
                .wait_for(Duration::from_secs(60), |s| s.delivered() >= before + replayed);
            println!(
                "replayed {replayed}; {} of them delivered",
                stats.delivered() - before
            );
        }
        Err(e) => println!("replay failed: {e}"),
    }
    pipeline.close(Duration::from_secs(30))?;
    println!("took {:.2?}", started.elapsed());
    Ok(())
}
