//! Click analytics with the DSL: clicks per user and per region in one-minute event-time
//! windows, enriched from a users table (see `streams_examples::clicks`).
//!
//! Generates a users table and `--clicks` clicks (seeded, up to 5 s out of order), writes
//! them, runs the application, and reads its two output topics until each holds exactly
//! the results computed from the generated clicks; prints the busiest region windows and
//! `result verified`. With no `--bootstrap-servers` it runs on the local broker that
//! `scripts/kafka.sh ensure` keeps running (started if needed). Every run creates its own
//! topics and application id (`click-analytics-<millis>-<pid>-...`) and deletes them once
//! the result is verified.

use std::time::Duration;

use clap::Parser;
use streams_examples::admin::run_id;
use streams_examples::cli::RunArgs;
use streams_examples::clicks::{ClickPlan, RunOptions, run};
use streams_examples::local_kafka::bootstrap_or_local;
use streams_examples::{ExampleError, MainError};

#[derive(Parser, Debug)]
#[command(about = "Windowed clicks per user and region, written with the DSL")]
struct Args {
    /// Users in the users table (every 20th has no region: its clicks count as `unknown`).
    #[arg(long, default_value_t = 1_000)]
    users: u32,
    /// Clicks generated, 20 ms of event time apart.
    #[arg(long, default_value_t = 200_000)]
    clicks: u64,
    /// The window size in seconds.
    #[arg(long, default_value_t = 60)]
    window_secs: u64,
    /// How long after its end a window still takes clicks, in seconds.
    #[arg(long, default_value_t = 60)]
    grace_secs: u64,
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> Result<(), MainError> {
    streams_examples::logging::init_logging();
    let args = Args::parse();
    if args.clicks == 0 || args.users == 0 || args.window_secs == 0 {
        return Err(
            ExampleError::Other("--clicks, --users and --window-secs must be at least 1".into()).into(),
        );
    }
    let bootstrap = bootstrap_or_local(args.run.bootstrap_servers.clone())?;
    let run_id = run_id("click-analytics");
    let state = tempfile_dir(&run_id)?;
    let options = RunOptions {
        bootstrap: bootstrap.clone(),
        run_id: run_id.clone(),
        plan: ClickPlan::new(args.users, args.clicks, Duration::from_secs(args.window_secs)),
        grace: Duration::from_secs(args.grace_secs),
        partitions: args.run.partitions,
        threads: args.run.threads,
        state_dir: state.clone(),
        stall_timeout: args.run.stall_timeout(),
    };
    println!(
        "run {run_id}: {} clicks of {} users in {} s windows (grace {} s), topics {run_id}-* ({} partitions)",
        args.clicks, args.users, args.window_secs, args.grace_secs, args.run.partitions
    );
    let outcome = run(&options);
    let _ = std::fs::remove_dir_all(&state);
    match &outcome {
        Ok(done) => {
            let mut busiest: Vec<_> = done.per_region.iter().collect();
            busiest.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            println!("busiest region windows:");
            let window_ms = options.plan.window.as_millis() as i64;
            for ((region, start), clicks) in busiest.iter().take(5) {
                println!(
                    "  {region:<9} {} to {} UTC: {clicks} clicks",
                    time_of_day(*start),
                    time_of_day(start + window_ms)
                );
            }
            println!(
                "result verified: {} per-user windows and {} per-region windows match the clicks \
                 ({} and {} update records) in {:.1} s",
                done.per_user_windows,
                done.per_region.len(),
                done.per_user_records,
                done.per_region_records,
                done.elapsed.as_secs_f64()
            );
        }
        Err(e) => eprintln!("click analytics failed: {e}"),
    }
    args.run.clean_up(&bootstrap, &run_id);
    Ok(outcome.map(|_| ())?)
}

/// `HH:MM:SS` of a UTC timestamp in milliseconds.
fn time_of_day(ms: i64) -> String {
    let secs = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60)
}

/// A fresh state directory under the temp dir.
fn tempfile_dir(run_id: &str) -> Result<std::path::PathBuf, ExampleError> {
    let dir = std::env::temp_dir().join(format!("{run_id}-state"));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
