//! `failover eos-restarts`: one exactly-once instance SIGKILLed at random points and
//! restarted on the same state directory; per restart the records its tasks restored, then
//! the committed output checked by identity.
//!
//! The restored records of a run are those of the tasks it created: a task still restoring
//! when the run was killed logs nothing, so a short run may report fewer tasks than exist.
//! For comparison the report gives the changelog's size, which a store wiped at each
//! restart would read again.
//!
//! A restarted instance joins as new members while the killed one's members still hold its
//! partitions until the broker's session timeout (10 s on the test broker) expires, so a
//! run killed sooner creates no task; the default kill points (12–30 s after `started`)
//! leave every run time to get its tasks.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::check::{Counts, Identities};
use crate::child::{Event, EventKind, Instance};
use crate::kafka_io::{Feed, Topics, end_offsets, key_index, preload, read_topic, wait_committed};
use crate::{Common, Res};

/// `eos-restarts`' settings.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct EosArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Stream threads of the instance.
    #[arg(long, default_value_t = 2)]
    pub(crate) threads: usize,
    /// SIGKILLs (each followed by a restart).
    #[arg(long, default_value_t = 10)]
    pub(crate) restarts: usize,
    /// Earliest kill, in ms after the instance reported `started`.
    #[arg(long, default_value_t = 12_000)]
    pub(crate) min_ms: u64,
    /// Latest kill, in ms after the instance reported `started`.
    #[arg(long, default_value_t = 30_000)]
    pub(crate) max_ms: u64,
}

/// Per task created: (partition, records restored, seconds after `started`).
fn created(events: &[Event], started: Instant) -> Vec<(i32, u64, f64)> {
    events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Created { partition, restored } => Some((
                partition,
                restored,
                e.at.saturating_duration_since(started).as_secs_f64(),
            )),
            _ => None,
        })
        .collect()
}

/// One line of the table: run, seconds it ran, tasks created (when, and the records their
/// stores restored).
fn line(run: usize, ran: Option<f64>, tasks: &[(i32, u64, f64)]) -> String {
    let total: u64 = tasks.iter().map(|(_, r, _)| r).sum();
    let per: Vec<String> = tasks.iter().map(|(p, r, _)| format!("0_{p}:{r}")).collect();
    let first = tasks.iter().map(|(_, _, s)| *s).fold(f64::INFINITY, f64::min);
    let last = tasks.iter().map(|(_, _, s)| *s).fold(0.0, f64::max);
    let when = if tasks.is_empty() {
        "–".to_owned()
    } else {
        format!("{first:.1}–{last:.1}")
    };
    format!(
        "| {run} | {} | {} | {when} | {total} | {} |",
        ran.map_or("until done".into(), |s| format!("{s:.1}")),
        tasks.len(),
        per.join(" ")
    )
}

/// Runs the measurement.
pub(crate) fn run(a: &EosArgs) -> Res<()> {
    let c = &a.common;
    if a.min_ms >= a.max_ms {
        return Err("--min-ms must be below --max-ms".into());
    }
    c.on_fresh_topics("eos-restarts", |name, dir, topics, changelog| {
        measure(a, name, dir, topics, changelog)
    })
}

fn measure(a: &EosArgs, name: &str, dir: &std::path::Path, topics: &Topics, changelog: &str) -> Res<()> {
    let c = &a.common;
    let t = Instant::now();
    preload(&c.bootstrap, &topics.input, c.keys, c.partitions)?;
    println!("preloaded {} keys in {:.1} s", c.keys, t.elapsed().as_secs_f64());
    let feed = c.start_feed(topics)?;
    let state = tempfile::tempdir()?;
    let args = c.app_args(name, topics, state.path(), a.threads, "exactly_once_v2".into());
    let mut rng = StdRng::seed_from_u64(c.seed);
    let mut lines = Vec::new();
    for run in 0..=a.restarts {
        let log = dir.join(format!("run{run}.log"));
        let mut i = Instance::spawn(&format!("run {run}"), &args, &log)?;
        i.wait_started(Duration::from_secs(60))?;
        let started = Instant::now();
        let changelog_size: i64 = end_offsets(&c.bootstrap, changelog, c.partitions)
            .map(|e| e.iter().sum())
            .unwrap_or(-1);
        let (ran, tasks) = if run < a.restarts {
            // The random kill point: how long this run is left to work.
            std::thread::sleep(Duration::from_millis(rng.random_range(a.min_ms..a.max_ms)));
            i.check_alive()?;
            let (killed, events) = i.kill()?;
            (Some((killed - started).as_secs_f64()), created(&events, started))
        } else {
            let fed = feed_stop_and_finish(a, name, topics, &mut i, feed)?;
            let events = i.close(Duration::from_secs(60))?;
            lines.push(line(run, None, &created(&events, started)));
            print_table(&lines);
            return check(a, topics, &fed);
        };
        let l = line(run, ran, &tasks);
        println!("{l} (changelog at its start: {changelog_size} records)");
        lines.push(l);
    }
    Err("no final run".into())
}

/// Stops the feed and waits until the final run `i` has committed the end of the input;
/// returns the feed's keys.
fn feed_stop_and_finish(
    a: &EosArgs,
    name: &str,
    topics: &Topics,
    i: &mut Instance,
    feed: Feed,
) -> Res<Vec<u32>> {
    let c = &a.common;
    let fed = feed.stop()?;
    let ends = end_offsets(&c.bootstrap, &topics.input, c.partitions)?;
    let took = wait_committed(
        &c.bootstrap,
        name,
        &topics.input,
        &ends,
        Duration::from_secs(1200),
    )?;
    i.check_alive()?;
    println!(
        "fed {} records; the last run committed the end of the input after {:.1} s more",
        fed.len(),
        took.as_secs_f64()
    );
    Ok(fed)
}

fn print_table(lines: &[String]) {
    println!(
        "\n| run | ran (s) before SIGKILL | tasks created | created (s after start) | records restored | per task |"
    );
    println!("|---:|---:|---:|---:|---:|---|");
    for l in lines {
        println!("{l}");
    }
    println!("(run 0 starts on an empty state directory; runs 1.. are restarts after a SIGKILL)");
}

/// The committed audit topic holds every input once; the committed output every count
/// `1..=n` of every key once.
fn check(a: &EosArgs, topics: &Topics, fed: &[u32]) -> Res<()> {
    let c = &a.common;
    let inputs = u64::from(c.keys) + fed.len() as u64;
    let mut ids = Identities::new(inputs);
    let n = read_topic(&c.bootstrap, &topics.audit, c.partitions, true, |_, _, v, _| {
        ids.add(v)
    })?;
    let r = ids.report();
    println!(
        "committed audit: {n} records for {inputs} inputs; missing {}, more than once {}, unknown {}",
        r.missing, r.duplicated, r.unexpected
    );
    let mut expected = vec![1u32; c.keys as usize];
    for k in fed {
        expected[*k as usize] += 1;
    }
    let mut counts = Counts::new(c.keys);
    let m = read_topic(&c.bootstrap, &topics.output, c.partitions, true, |_, k, v, _| {
        counts.add(key_index(k), v)
    })?;
    let (wrong, examples) = counts.wrong(&expected);
    println!("committed output: {m} records; keys whose counts are not exactly 1..=n once each: {wrong}");
    if r.missing > 0 || r.duplicated > 0 || r.unexpected > 0 || wrong > 0 {
        return Err(format!(
            "EXACTLY-ONCE VIOLATED: audit missing {} (e.g. {:?}), duplicated {}, unknown {}; \
             counts wrong for {wrong} keys:{examples}",
            r.missing, r.missing_examples, r.duplicated, r.unexpected
        )
        .into());
    }
    println!("exactly once: ok");
    Ok(())
}
