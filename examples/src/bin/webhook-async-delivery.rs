//! Web-hook delivery through an async processor.
//!
//! `webhook-async-delivery bench [--deliveries N] [--users N] [--concurrency 1,16,64,256]
//!  [--sequential-deliveries N] [--delay-ms 50]`: for each concurrency, writes the requests to
//! fresh topics, starts a local receiver that takes `--delay-ms` per request, delivers
//! everything and prints deliveries per second, duplicates and per-user order in a table.
//! Concurrency 1 (sequential) delivers only `--sequential-deliveries` (at 50 ms each, 100,000
//! would take 83 minutes).
//!
//! `webhook-async-delivery run --requests T --dead-letters T [--concurrency N]
//!  [--application-id ID] [--state-dir DIR]`: runs the delivery application until SIGINT or
//! SIGTERM (then closes cleanly) or until killed; prints `started`.
//!
//! Both run on `--bootstrap-servers`, or without it on the local broker of
//! `scripts/kafka.sh` (started if it is not running).

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use streams_core::processor::AsyncOptions;
use streams_core::{KafkaStreams, StreamsConfig};
use streams_examples::MainError;
use streams_examples::admin::{create_topics, run_id};
use streams_examples::local_kafka::bootstrap_or_local;
use streams_examples::shutdown::StopSignals;
use streams_examples::webhooks::receiver::{Receiver, always_ok};
use streams_examples::webhooks::{
    AsyncHttpDelivery, async_delivery_topology, delivery_report, load_requests,
};

#[derive(Parser, Debug)]
#[command(about = "Web-hook delivery through an async processor")]
struct Args {
    /// Kafka to run on; without it the local broker of `scripts/kafka.sh`.
    #[arg(long, global = true)]
    bootstrap_servers: Option<String>,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Measures deliveries per second against a slow local receiver.
    Bench {
        /// Deliveries per run (concurrency above 1).
        #[arg(long, default_value_t = 100_000)]
        deliveries: u64,
        /// Users the deliveries are spread over.
        #[arg(long, default_value_t = 10_000)]
        users: u64,
        /// The concurrencies to measure (futures in flight).
        #[arg(long, value_delimiter = ',', default_values_t = vec![1, 16, 64, 256])]
        concurrency: Vec<usize>,
        /// Deliveries of the sequential run (concurrency 1).
        #[arg(long, default_value_t = 400)]
        sequential_deliveries: u64,
        /// How long the receiver takes per request, in ms.
        #[arg(long, default_value_t = 50)]
        delay_ms: u64,
    },
    /// Runs the delivery application until a signal.
    Run {
        /// The topic of requests to deliver.
        #[arg(long)]
        requests: String,
        /// Where requests that failed every retry go.
        #[arg(long)]
        dead_letters: String,
        /// Deliveries in flight per task.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// The application id.
        #[arg(long, default_value = "webhook-async-delivery")]
        application_id: String,
        /// The state directory.
        #[arg(long)]
        state_dir: Option<std::path::PathBuf>,
    },
}

fn delivery(concurrency: usize) -> (Arc<AsyncHttpDelivery>, AsyncOptions) {
    let retries = [Duration::from_millis(200), Duration::from_secs(1)];
    (
        Arc::new(AsyncHttpDelivery::new(Duration::from_secs(10), &retries)),
        AsyncOptions::new(concurrency),
    )
}

fn config(bootstrap: &str, app_id: &str, state_dir: &std::path::Path) -> Result<StreamsConfig, MainError> {
    Ok(StreamsConfig::from_properties([
        ("application.id", app_id.to_owned()),
        ("bootstrap.servers", bootstrap.to_owned()),
        ("state.dir", state_dir.display().to_string()),
        ("commit.interval.ms", "1000".into()),
    ])?)
}

fn main() -> Result<(), MainError> {
    streams_examples::logging::init_logging();
    let args = Args::parse();
    let bootstrap = bootstrap_or_local(args.bootstrap_servers.clone())?;
    match args.mode {
        Mode::Run {
            requests,
            dead_letters,
            concurrency,
            application_id,
            state_dir,
        } => {
            let state_dir = state_dir.unwrap_or_else(|| std::env::temp_dir().join(&application_id));
            create_topics(&bootstrap, std::slice::from_ref(&dead_letters), 1)?;
            let (processor, options) = delivery(concurrency);
            let topology = async_delivery_topology(&requests, &dead_letters, processor, options)?;
            let signals = StopSignals::install()?;
            let mut app = KafkaStreams::new(topology, config(&bootstrap, &application_id, &state_dir)?)?;
            app.start()?;
            println!("started");
            signals.wait(false);
            app.close(Duration::from_secs(30));
        }
        Mode::Bench {
            deliveries,
            users,
            concurrency,
            sequential_deliveries,
            delay_ms,
        } => {
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            println!("load average before: {}", load.trim());
            println!(
                "| concurrency | deliveries | seconds | deliveries/s | x sequential | duplicates | users out of order |"
            );
            println!("|---|---|---|---|---|---|---|");
            let mut sequential_rate = None;
            for c in concurrency {
                let n = if c == 1 { sequential_deliveries } else { deliveries };
                let (took, report) = bench_one(&bootstrap, c, n, users.min(n), delay_ms)?;
                let rate = report.distinct as f64 / took.as_secs_f64();
                if c == 1 {
                    sequential_rate = Some(rate);
                }
                let ratio = sequential_rate.map_or_else(|| "-".to_owned(), |s| format!("{:.1}x", rate / s));
                println!(
                    "| {c} | {} | {:.1} | {rate:.0} | {ratio} | {} | {} |",
                    report.distinct,
                    took.as_secs_f64(),
                    report.duplicated,
                    report.out_of_order_users
                );
            }
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            println!("load average after: {}", load.trim());
        }
    }
    Ok(())
}

/// Delivers `n` requests over `users` users at concurrency `c` against a receiver taking
/// `delay_ms` per request; the time from the first delivery to the last, and what arrived.
fn bench_one(
    bootstrap: &str,
    c: usize,
    n: u64,
    users: u64,
    delay_ms: u64,
) -> Result<(Duration, streams_examples::webhooks::DeliveryReport), MainError> {
    let id = run_id("webhook-async-bench");
    let requests = format!("{id}-requests");
    let dead = format!("{id}-dead-letters");
    create_topics(bootstrap, &[requests.clone(), dead.clone()], 1)?;
    let receiver = Receiver::start(always_ok())?;
    receiver.set_delay(Duration::from_millis(delay_ms));
    let per_user = n.div_ceil(users.max(1));
    let written = load_requests(bootstrap, &requests, users, per_user, |u| {
        receiver.url(&format!("/users/{u}"))
    })?;
    let state = std::env::temp_dir().join(&id);
    let (processor, options) = delivery(c);
    let topology = async_delivery_topology(&requests, &dead, processor, options)?;
    let mut app = KafkaStreams::new(topology, config(bootstrap, &id, &state)?)?;
    app.start()?;
    // Timed from the first delivery to the last: the group join before it is not delivery.
    let first = receiver.wait_for(Duration::from_secs(120), |r| !r.is_empty());
    let started = Instant::now();
    let done = first && receiver.wait_for(Duration::from_secs(3600), |r| r.len() as u64 >= written);
    let took = started.elapsed();
    app.close(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&state);
    let _ = streams_examples::admin::delete_topics(bootstrap, &[requests, dead]);
    if !done {
        return Err(MainError(streams_examples::ExampleError::Other(format!(
            "{written} deliveries did not arrive within an hour"
        ))));
    }
    Ok((took, delivery_report(&receiver.requests())))
}
