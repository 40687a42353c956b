//! Avro orders through a Schema Registry (see `streams_examples::orders`): running totals per
//! customer, written and stored as Avro, with unreadable records in a dead-letter topic.
//!
//! Generates `--orders` orders of `--customers` customers (seeded), writes them as Avro in
//! the Confluent wire format together with four records the application cannot read (plain
//! JSON, an unknown schema id, a truncated payload, a too-short record), runs the
//! application, and reads the totals topic until it holds exactly the totals computed from
//! the orders, and the dead-letter topic until it holds the four bad records, byte for
//! byte, each with the reason it was refused. Prints a few totals and `result verified`.
//!
//! With no `--bootstrap-servers` it runs on the local broker of `scripts/kafka.sh`; with no
//! `--schema-registry-url`, on the local registry of `scripts/schema-registry.sh` (each
//! started if it is not running). Every run creates its own topics and application id and
//! deletes them once the result is verified.

use clap::Parser;
use streams_examples::admin::run_id;
use streams_examples::cli::RunArgs;
use streams_examples::local_kafka::bootstrap_or_local;
use streams_examples::local_registry::registry_or_local;
use streams_examples::orders::{OrderPlan, RunOptions, run};
use streams_examples::{ExampleError, MainError};

#[derive(Parser, Debug)]
#[command(about = "Avro orders through a Schema Registry, with a dead-letter topic")]
struct Args {
    /// The schema registry (`schema.registry.url`); without it the local registry of
    /// `scripts/schema-registry.sh` (started if it is not running).
    #[arg(long)]
    schema_registry_url: Option<String>,
    /// Customers the orders are spread over.
    #[arg(long, default_value_t = 500)]
    customers: u32,
    /// Orders generated.
    #[arg(long, default_value_t = 100_000)]
    orders: u64,
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> Result<(), MainError> {
    streams_examples::logging::init_logging();
    let args = Args::parse();
    if args.orders == 0 || args.customers == 0 {
        return Err(ExampleError::Other("--orders and --customers must be at least 1".into()).into());
    }
    let bootstrap = bootstrap_or_local(args.run.bootstrap_servers.clone())?;
    let registry = registry_or_local(args.schema_registry_url.clone())?;
    let run_id = run_id("avro-orders");
    let state = std::env::temp_dir().join(format!("{run_id}-state"));
    std::fs::create_dir_all(&state)?;
    let options = RunOptions {
        bootstrap: bootstrap.clone(),
        registry,
        run_id: run_id.clone(),
        plan: OrderPlan::new(args.customers, args.orders),
        partitions: args.run.partitions,
        threads: args.run.threads,
        state_dir: state.clone(),
        stall_timeout: args.run.stall_timeout(),
    };
    println!(
        "run {run_id}: {} Avro orders of {} customers and 4 unreadable records, topics {run_id}-* ({} partitions)",
        args.orders, args.customers, args.run.partitions
    );
    let outcome = run(&options);
    let _ = std::fs::remove_dir_all(&state);
    match &outcome {
        Ok(done) => {
            let mut biggest: Vec<_> = done.totals.values().collect();
            biggest.sort_by(|a, b| b.cents.cmp(&a.cents).then(a.customer.cmp(&b.customer)));
            println!("biggest customers:");
            for t in biggest.iter().take(3) {
                println!(
                    "  {:<14} {:>5} orders {:>7} items {:>12.2} total",
                    t.customer,
                    t.orders,
                    t.items,
                    t.cents as f64 / 100.0
                );
            }
            println!("dead letters (original bytes kept):");
            for (value, reason) in &done.dead_letters {
                // The reason names the node and the record's place, then the serde's error.
                let why = reason
                    .split_once("cannot deserialize value: ")
                    .map_or(reason.as_str(), |(_, w)| w);
                println!("  {:>3} bytes: {why}", value.len());
            }
            println!(
                "result verified: {} customers' totals match the orders ({} update records), {} dead letters, \
                 {} registry requests, in {:.1} s",
                done.totals.len(),
                done.total_records,
                done.dead_letters.len(),
                done.registry_requests,
                done.elapsed.as_secs_f64()
            );
        }
        Err(e) => eprintln!("avro orders failed: {e}"),
    }
    args.run.clean_up(&bootstrap, &run_id);
    Ok(outcome.map(|_| ())?)
}
