//! The dead-letter topic's command-line tool.
//!
//! ```text
//! dlq-tool [--bootstrap-servers HOST:PORT] [--topic web_hook_requests-dlq] [--group G] list [--all]
//! dlq-tool [--bootstrap-servers HOST:PORT] purge
//! dlq-tool [--bootstrap-servers HOST:PORT] replay --all | --offsets 0:5,1:7 [--retry-topic T]
//! ```
//!
//! Without `--bootstrap-servers` it uses the local broker of `scripts/kafka.sh` (started if
//! it is not running). `list` of a topic that does not exist says so and lists nothing.
//!
//! It tracks what it handled in its own consumer group (default `<topic>.dlq-tool`), so a
//! replay is never repeated and `list` shows only what is still pending.

use std::time::Duration;

use clap::{Parser, Subcommand};
use streams_examples::local_kafka::bootstrap_or_local;
use streams_examples::retry::dlq::{DlqTool, ReplaySelection, default_replay_topic, parse_offsets};
use streams_examples::{ExampleError, MainError};

#[derive(Parser, Debug)]
#[command(about = "List, purge or replay the dead-letter topic of a retry ladder")]
struct Args {
    /// Kafka's bootstrap servers; without it the local broker of `scripts/kafka.sh`
    /// (started if it is not running).
    #[arg(long)]
    bootstrap_servers: Option<String>,
    /// The dead-letter topic.
    #[arg(long, default_value = "web_hook_requests-dlq")]
    topic: String,
    /// The tool's consumer group (default `<topic>.dlq-tool`).
    #[arg(long)]
    group: Option<String>,
    /// Bound of each read and write, in seconds.
    #[arg(long, default_value_t = 30)]
    timeout_secs: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Prints the pending dead letters: key, value, headers.
    List {
        /// Also the ones already replayed or purged.
        #[arg(long)]
        all: bool,
    },
    /// Skips every dead letter stored now (commits the end of each partition).
    Purge,
    /// Re-publishes dead letters into the first retry topic with the attempt count reset.
    Replay {
        /// Every pending dead letter.
        #[arg(long, conflicts_with = "offsets", required_unless_present = "offsets")]
        all: bool,
        /// These dead letters: `PARTITION:OFFSET,...`.
        #[arg(long)]
        offsets: Option<String>,
        /// Where to (default: `<main>-retry-1` for a topic named `<main>-dlq`).
        #[arg(long)]
        retry_topic: Option<String>,
    },
}

fn main() -> Result<(), MainError> {
    streams_examples::logging::init_logging();
    let args = Args::parse();
    let bootstrap = bootstrap_or_local(args.bootstrap_servers.clone())?;
    let mut tool = DlqTool::new(&bootstrap, &args.topic).with_timeout(Duration::from_secs(args.timeout_secs));
    if let Some(g) = &args.group {
        tool = tool.with_group(g);
    }
    match args.command {
        Command::List { .. } if !tool.topic_exists()? => {
            println!("0 dead letter(s): topic {} does not exist (yet)", args.topic);
        }
        Command::List { all } => {
            let letters = tool.list(all)?;
            for d in &letters {
                let r = &d.record;
                let state = if d.handled { "handled" } else { "pending" };
                println!("{}:{} [{state}]", r.partition, r.offset);
                println!("  key:   {}", r.key_text());
                println!("  value: {}", r.value_text());
                for (k, v) in &r.headers {
                    let v = v
                        .as_deref()
                        .map_or_else(|| "<null>".into(), String::from_utf8_lossy);
                    println!("  header {k} = {v}");
                }
            }
            println!(
                "{} dead letter(s){}",
                letters.len(),
                if all { "" } else { " pending" }
            );
        }
        Command::Purge => {
            let skipped = tool.purge()?;
            println!("purged {skipped} pending dead letter(s) of {}", args.topic);
        }
        Command::Replay {
            all,
            offsets,
            retry_topic,
        } => {
            let target = match retry_topic.or_else(|| default_replay_topic(&args.topic)) {
                Some(t) => t,
                None => {
                    return Err(ExampleError::Other(format!(
                        "{} does not end in -dlq: pass --retry-topic",
                        args.topic
                    ))
                    .into());
                }
            };
            let selection = match (all, offsets) {
                (_, Some(o)) => ReplaySelection::Offsets(parse_offsets(&o)?),
                (true, None) => ReplaySelection::All,
                (false, None) => {
                    return Err(ExampleError::Other("replay needs --all or --offsets".into()).into());
                }
            };
            let report = tool.replay(&target, &selection)?;
            println!("replayed {} dead letter(s) into {target}", report.replayed.len());
            if !report.already_handled.is_empty() {
                println!(
                    "already replayed or purged (skipped): {:?}",
                    report.already_handled
                );
            }
            if !report.not_found.is_empty() {
                println!("not found: {:?}", report.not_found);
            }
        }
    }
    Ok(())
}
