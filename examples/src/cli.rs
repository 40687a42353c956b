//! Command-line flags that the run-and-verify binaries (`click-analytics`, `avro-orders`)
//! share: where to run, how wide, when to give up, and whether to keep the run's topics.

use std::time::Duration;

use crate::admin::delete_run;

/// The shared flags; a binary embeds them with `#[command(flatten)]`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Kafka to run on; without it the local broker of `scripts/kafka.sh` (started if it is
    /// not running).
    #[arg(long)]
    pub bootstrap_servers: Option<String>,
    /// Partitions of the topics the run creates.
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    /// Stream threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Fail when no output came for this long.
    #[arg(long, default_value_t = 120)]
    pub stall_timeout_secs: u64,
    /// Keep the run's topics and consumer groups instead of deleting them at the end.
    #[arg(long)]
    pub keep_topics: bool,
}

impl RunArgs {
    /// `--stall-timeout-secs` as a duration.
    pub fn stall_timeout(&self) -> Duration {
        Duration::from_secs(self.stall_timeout_secs)
    }

    /// Deletes the run's topics and groups unless `--keep-topics`; prints what was done.
    pub fn clean_up(&self, bootstrap: &str, run_id: &str) {
        if self.keep_topics {
            println!("kept this run's topics and consumer groups ({run_id}-*)");
        } else {
            println!("{}", delete_run(bootstrap, run_id));
        }
    }
}
