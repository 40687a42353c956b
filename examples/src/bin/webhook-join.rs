//! Runs the web-hook application in one process: the range join (a streams application)
//! plus the HTTP delivery (a second one: the framework's retry ladder of delayed topics
//! with a dead-letter topic, `streams_dsl::retry`).
//!
//! - With no `--bootstrap-servers`: the demo, on the local broker that `scripts/kafka.sh
//!   ensure` keeps running (started if needed): a tiny local HTTP server (some of whose
//!   endpoints fail), demo hooks and events, a millisecond retry ladder; it prints every
//!   delivery, retry and dead letter, then "recovers" the failing endpoint and replays the
//!   dead-letter topic. Each run uses its own topics and application id and deletes them at
//!   the end (unless `--topic-suffix` names the topics).
//! - With `--bootstrap-servers`: runs as a service on existing (or created) topics with the
//!   production ladder (5m, 30m, 1h) until Ctrl-C; add `--demo` for the demo on that
//!   cluster.
//! - `--describe` prints both topologies and the ladder and exits.
//! - `--query-port` serves the web-hook store over HTTP (`GET /users/{id}/hooks`, from
//!   any instance: see `webhooks::query`), announced to the other instances as the join's
//!   `application.server`; the demo prints a user's hooks read through it.
//!
//! The main thread owns both applications; the query server (a thread of its own) uses the
//! join only through its `Queries` handle.
//!
//! The demo exits non-zero when some request did not finish or a replayed dead letter was
//! not delivered.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::Rng;
use serde_json::json;
use streams_examples::admin::{
    create_topics, delete_groups, delete_topics, groups_with_prefix, run_id, topics_with_prefix,
};
use streams_examples::local_kafka::bootstrap_or_local;
use streams_examples::retry::dlq::{DlqTool, ReplaySelection};
use streams_examples::retry::{Outcome, OutcomeEvent, RetryLadder, RetryOptions, parse_delays};
use streams_examples::shutdown::StopSignals;
use streams_examples::webhooks::query::{HooksPage, QueryListener, QueryServer};
use streams_examples::webhooks::receiver::{Policy, Receiver, always_ok};
use streams_examples::webhooks::{
    EventLog, PipelineConfig, WebHook, WebHookPipeline, WebHookProducer, WebHookRequest, WebHookTopics,
    delivery_topology, expected_requests, topology,
};
use streams_examples::{ExampleError, MainError};

#[derive(Parser, Debug)]
#[command(
    about = "Web hooks: a range join over a RocksDB store, HTTP delivery with non-blocking retries and a DLQ"
)]
struct Args {
    /// Kafka to run on; without it the demo runs on the local broker of `scripts/kafka.sh`
    /// (started if it is not running).
    #[arg(long)]
    bootstrap_servers: Option<String>,
    /// With `--bootstrap-servers`: run the demo instead of the service.
    #[arg(long)]
    demo: bool,
    /// Print the join's and the delivery's topologies and the retry ladder, then exit.
    #[arg(long)]
    describe: bool,
    /// Retry delays, e.g. `5m,30m,1h` (default: that for the service, `200ms,500ms,1s` for
    /// the demo).
    #[arg(long)]
    retry_delays: Option<String>,
    /// Appended to every topic name. The demo's default is a suffix of its own per run
    /// (`-demo-<millis>-<pid>`, topics deleted at the end); the service's is none.
    #[arg(long, allow_hyphen_values = true)]
    topic_suffix: Option<String>,
    /// Partitions of the topics it creates.
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    /// The join's application id (the delivery application's is `<id>-delivery`); the
    /// demo's own run gets `<id>-demo-<millis>-<pid>`.
    #[arg(long, default_value = "webhook-join")]
    application_id: String,
    /// The state directory of both applications (a temporary directory by default).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Demo: users (each gets four hooks).
    #[arg(long, default_value_t = 12)]
    users: u64,
    /// Demo: events.
    #[arg(long, default_value_t = 30)]
    events: usize,
    /// Serve the join's Prometheus metrics at this address (`/metrics`, `/health/live`, `/health/ready`).
    #[arg(long)]
    metrics_address: Option<String>,
    /// Serve the delivery's Prometheus metrics at this address (`/metrics`, `/health/live`, `/health/ready`).
    #[arg(long)]
    delivery_metrics_address: Option<String>,
    /// `metrics.recording.level` of both applications: `INFO` (the default) or `DEBUG`, which adds the
    /// per-node and per-store-operation latency histograms.
    #[arg(long)]
    metrics_recording_level: Option<String>,
    /// The delivery's stream threads (`num.stream.threads`): a slow endpoint holds up
    /// only the thread whose task calls it.
    #[arg(long, default_value_t = 1)]
    delivery_threads: u32,
    /// Serve the web-hook store over HTTP on this port (0: a free one):
    /// `GET /users/{id}/hooks[?after=<key>&limit=<n>]`, answered by whichever instance hosts
    /// the user. Sets the join's `application.server` to `<query-host>:<port>`.
    #[arg(long)]
    query_port: Option<u16>,
    /// The host the query server binds and announces to the other instances, which must
    /// reach it there.
    #[arg(long, default_value = "127.0.0.1")]
    query_host: String,
}

fn main() -> Result<(), MainError> {
    streams_examples::logging::init_logging();
    let args = Args::parse();
    let demo = args.demo || args.bootstrap_servers.is_none();
    let delays = parse_delays(args.retry_delays.as_deref().unwrap_or(if demo {
        "200ms,500ms,1s"
    } else {
        "5m,30m,1h"
    }))?;
    // The demo's own run: fresh topics and application id, deleted at the end.
    let run = (demo && args.topic_suffix.is_none()).then(|| run_id("demo"));
    let suffix = match (&args.topic_suffix, &run) {
        (Some(s), _) => s.clone(),
        (None, Some(run)) => format!("-{run}"),
        (None, None) => String::new(),
    };
    let topics = WebHookTopics::with_suffix(&suffix);
    let ladder = RetryLadder::new(topics.requests.clone(), &delays);
    if args.describe {
        print_topologies(&topics, &ladder)?;
        return Ok(());
    }
    let bootstrap = bootstrap_or_local(args.bootstrap_servers.clone())?;
    let application_id = match &run {
        Some(run) => format!("{}-{run}", args.application_id),
        None => args.application_id.clone(),
    };
    let state_dir = match &args.state_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("webhook-join-{}", std::process::id())),
    };
    let mut config = PipelineConfig::new(&application_id, &state_dir)
        .with_topics(topics)
        .with_delays(&delays);
    if demo {
        // The demo's ladder is in milliseconds: look for due retries often.
        config.retry = config.retry.clone().punctuate_every(Duration::from_millis(50));
        config = config.with_listener(print_outcome);
    }
    if let Some(address) = &args.metrics_address {
        config
            .join_properties
            .push(("metrics.address".into(), address.clone()));
    }
    if let Some(level) = &args.metrics_recording_level {
        for props in [&mut config.join_properties, &mut config.delivery_properties] {
            props.push(("metrics.recording.level".into(), level.clone()));
        }
    }
    if let Some(address) = &args.delivery_metrics_address {
        config
            .delivery_properties
            .push(("metrics.address".into(), address.clone()));
    }
    config
        .delivery_properties
        .push(("num.stream.threads".into(), args.delivery_threads.to_string()));
    create_topics(&bootstrap, &config.all_topics(), args.partitions)?;
    print_topologies(&config.topics, &config.ladder)?;
    // Bound before the join starts, so that it announces the bound port.
    let queries = match args.query_port {
        Some(port) => {
            let listener = QueryListener::bind(&format!("{}:{port}", args.query_host))?;
            config
                .join_properties
                .push(("application.server".into(), listener.endpoint().to_owned()));
            Some(listener)
        }
        None => None,
    };
    if !demo {
        return Ok(run_service(&bootstrap, config, queries)?);
    }
    let own_topics = config.all_topics();
    let dead_letter_topic = config.ladder.dead_letter().to_owned();
    let result = run_demo(&args, &bootstrap, config, queries);
    if run.is_some() {
        if args.state_dir.is_none() {
            let _ = std::fs::remove_dir_all(&state_dir);
        }
        println!();
        println!(
            "{}",
            delete_run(&bootstrap, &application_id, &own_topics, &dead_letter_topic)
        );
    }
    Ok(result?)
}

/// Deletes one demo run's topics (its own, both applications' changelogs) and consumer
/// groups (the join's, the delivery's, the dead-letter tool's); says what it did in one
/// line.
fn delete_run(bootstrap: &str, application_id: &str, topics: &[String], dead_letter_topic: &str) -> String {
    let deleted = (|| -> Result<(usize, usize), ExampleError> {
        let mut all = topics.to_vec();
        all.extend(topics_with_prefix(bootstrap, &format!("{application_id}-"))?);
        all.sort();
        all.dedup();
        let mut groups = groups_with_prefix(bootstrap, application_id)?;
        groups.extend(groups_with_prefix(bootstrap, dead_letter_topic)?);
        delete_groups(bootstrap, &groups)?;
        delete_topics(bootstrap, &all)?;
        Ok((all.len(), groups.len()))
    })();
    match deleted {
        Ok((t, g)) => format!("deleted this run's {t} topics and {g} consumer groups ({application_id})"),
        Err(e) => format!("could not delete this run's topics ({application_id}): {e}"),
    }
}

/// Prints the join's topology, the delivery's, and the ladder.
fn print_topologies(topics: &WebHookTopics, ladder: &RetryLadder) -> Result<(), ExampleError> {
    println!("The join:");
    println!("{}", topology(topics)?.describe());
    println!("The delivery:");
    let delivery = delivery_topology(ladder, Duration::from_secs(10), &RetryOptions::new())?;
    println!("{}", delivery.describe());
    print_ladder(ladder);
    Ok(())
}

fn print_ladder(ladder: &RetryLadder) {
    println!("Retry ladder:");
    println!("  {} (attempt 1)", ladder.source());
    for (i, s) in ladder.steps().iter().enumerate() {
        println!("  {} (attempt {}, after {:?})", s.topic, i + 2, s.delay);
    }
    println!("  {} (dead letters)", ladder.dead_letter());
}

/// Prints one attempt of the demo (not the records stored to wait).
fn print_outcome(e: &OutcomeEvent<'_>) {
    let what = e
        .value
        .and_then(|v| serde_json::from_slice::<WebHookRequest>(v).ok())
        .map_or_else(
            || String::from_utf8_lossy(e.key.unwrap_or_default()).into_owned(),
            |r| {
                let seq = r.payload.get("seq").map_or_else(String::new, |s| format!("#{s}"));
                format!(
                    "hook {:>3} user {:>2} event {} {seq:<4} -> {}",
                    r.webhook_id, r.user_id, r.event_id, r.url
                )
            },
        );
    let attempt = e.attempt;
    match &e.outcome {
        Outcome::Succeeded => println!("delivered    attempt {attempt}  {what}"),
        Outcome::Retrying { topic, due_at_ms, .. } => {
            let wait = due_at_ms - streams_examples::retry::now_ms();
            let error = e.error.map(ToString::to_string).unwrap_or_default();
            println!("retry        attempt {attempt}  {what} ({error}) -> {topic} in {wait} ms");
        }
        Outcome::DeadLettered { .. } => {
            let error = e.error.map(ToString::to_string).unwrap_or_default();
            println!("dead letter  attempt {attempt}  {what} ({error})");
        }
        Outcome::Waiting { .. } => {}
    }
}

/// Starts the pipeline, and the query server on `queries` with the join's `Queries`.
fn start(
    bootstrap: &str,
    config: PipelineConfig,
    queries: Option<QueryListener>,
) -> Result<(WebHookPipeline, Option<QueryServer>), ExampleError> {
    let pipeline = WebHookPipeline::start(bootstrap, config)?;
    let server = queries
        .map(|q| q.serve(pipeline.streams().queries()))
        .transpose()?;
    if let Some(server) = &server {
        println!(
            "serving the web-hook store at {} (this instance: {})",
            server.url("/users/{id}/hooks"),
            server.endpoint()
        );
    }
    Ok((pipeline, server))
}

/// Runs until SIGINT (Ctrl-C) or SIGTERM, then closes cleanly.
fn run_service(
    bootstrap: &str,
    config: PipelineConfig,
    queries: Option<QueryListener>,
) -> Result<(), ExampleError> {
    let signals = StopSignals::install()?;
    let (pipeline, server) = start(bootstrap, config, queries)?;
    println!("running; Ctrl-C or SIGTERM to stop");
    let stop = signals.wait(false);
    println!("{stop}: stopping");
    drop(server);
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
    config: PipelineConfig,
    queries: Option<QueryListener>,
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

    let (pipeline, server) = start(bootstrap, config, queries)?;
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
    if let Some(server) = &server {
        show_queries(server, &deleted);
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
    let (stats, done) = pipeline.wait_for(wait, |s| s.finished() >= expected);
    let mut problems = Vec::new();
    if !done {
        problems.push(format!(
            "{} of {expected} requests finished within {wait:?}",
            stats.finished()
        ));
    }
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
        Err(e) => {
            println!("listing the dead letters failed: {e}");
            problems.push(format!("listing the dead letters failed: {e}"));
        }
    }
    println!();
    println!("/legacy recovers; replaying the dead letters into {replay_topic}");
    receiver.set_policy(always_ok());
    let before = pipeline.stats().delivered();
    match tool.replay(&replay_topic, &ReplaySelection::All) {
        Ok(report) => {
            let replayed = report.replayed.len() as u64;
            let (stats, all) =
                pipeline.wait_for(Duration::from_secs(60), |s| s.delivered() >= before + replayed);
            let delivered = stats.delivered() - before;
            println!("replayed {replayed}; {delivered} of them delivered");
            if !all {
                problems.push(format!(
                    "{delivered} of {replayed} replayed dead letters delivered"
                ));
            }
        }
        Err(e) => {
            println!("replay failed: {e}");
            problems.push(format!("replay failed: {e}"));
        }
    }
    drop(server);
    pipeline.close(Duration::from_secs(30))?;
    println!("took {:.2?}", started.elapsed());
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ExampleError::Other(format!(
            "the demo did not finish: {}",
            problems.join("; ")
        )))
    }
}

/// The demo's look at the query server: the hooks of the user who deleted one, two per
/// page, read over HTTP as a client would (retrying while the store is not available).
fn show_queries(server: &QueryServer, deleted: &[(u64, u64)]) {
    let user = deleted.first().map_or(1, |d| d.0);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut path = format!("/users/{user}/hooks?limit=2");
    println!();
    loop {
        let url = server.url(&path);
        let answer = agent
            .get(&url)
            .call()
            .and_then(|mut r| Ok((r.status().as_u16(), r.body_mut().read_to_string()?)));
        match answer {
            Ok((503, _)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            Ok((status, body)) => {
                println!("GET {url} -> {status} {}", body.trim());
                match serde_json::from_str::<HooksPage>(&body).ok().and_then(|p| p.next) {
                    Some(next) => path = format!("/users/{user}/hooks?limit=2&after={next}"),
                    None => break,
                }
            }
            Err(e) => {
                println!("GET {url} failed: {e}");
                break;
            }
        }
    }
    println!();
}
