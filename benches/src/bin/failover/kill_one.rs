//! `failover kill-one`: SIGKILL one of several instances once they have caught up with the
//! preload, and time the failover of its tasks (see the crate-level documentation of the
//! binary for what is measured and how).
//!
//! Times are counted from the instant the driver sent SIGKILL: "assigned" and "created" by
//! when the driver read the survivor's log line, "first output" by the broker's append time
//! of the task's first audit record written after the survivor's assignment (the kill's wall
//! clock time and the broker's clock are the same machine's).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::app::AppArgs;
use crate::check::Identities;
use crate::child::{Event, EventKind, Instance};
use crate::kafka_io::{Topics, broker_setting, end_offsets, preload, read_topic, wait_committed};
use crate::watch::Watcher;
use crate::{Common, Res, now_ms};

/// `kill-one`'s settings.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct KillOneArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Instances (separate processes).
    #[arg(long, default_value_t = 3)]
    pub(crate) instances: usize,
    /// Stream threads per instance.
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// `num.standby.replicas` of every instance.
    #[arg(long, default_value_t = 0)]
    pub(crate) standbys: usize,
    /// `processing.guarantee`.
    #[arg(long, default_value = "at_least_once")]
    pub(crate) guarantee: String,
    /// `commit.interval.ms` (default: the runtime's).
    #[arg(long)]
    pub(crate) commit_ms: Option<u64>,
    /// `group.protocol` of every instance (default: the runtime's choice, `streams` with
    /// standbys).
    #[arg(long)]
    pub(crate) group_protocol: Option<String>,
    /// Seconds to let the application run on with the feed after it has caught up with the
    /// preload, before the kill: standbys then have time to apply the preload's changelog,
    /// which reaches the broker in one burst at the first commit after it.
    #[arg(long, default_value_t = 0)]
    pub(crate) settle_s: u64,
    /// Which instance (0-based) to kill.
    #[arg(long, default_value_t = 0)]
    pub(crate) victim: usize,
}

/// Seconds from `from` to `to` (negative when `to` is earlier).
fn secs(from: Instant, to: Instant) -> f64 {
    if to >= from {
        (to - from).as_secs_f64()
    } else {
        -(from - to).as_secs_f64()
    }
}

/// Waits until the instances' current tasks cover every partition, each partition once, and
/// every instance has one; returns them.
fn wait_spread(instances: &mut [Instance], partitions: i32, timeout: Duration) -> Res<Vec<BTreeSet<i32>>> {
    let deadline = Instant::now() + timeout;
    loop {
        for i in instances.iter_mut() {
            i.check_alive()?;
        }
        let tasks: Vec<BTreeSet<i32>> = instances.iter().map(Instance::tasks).collect();
        let all: usize = tasks.iter().map(BTreeSet::len).sum();
        let union: BTreeSet<i32> = tasks.iter().flatten().copied().collect();
        if all == partitions as usize && union.len() == all && tasks.iter().all(|t| !t.is_empty()) {
            return Ok(tasks);
        }
        if Instant::now() > deadline {
            return Err(format!("tasks not spread over the instances within {timeout:?}: {tasks:?}").into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What happened to one partition after the kill, on the survivor that took it.
struct Moved {
    partition: i32,
    to: String,
    assigned: Option<Instant>,
    created: Option<(Instant, u64)>,
    /// The records its standby on that survivor had applied, when it had one.
    standby_applied: Option<u64>,
    /// Broker append time (ms since the epoch) and the driver's reading instant.
    first_output: Option<(i64, Instant)>,
}

/// The first event after `after` for `partition` in `events` that `pick` selects.
fn first_after<T>(
    events: &[Event],
    after: Instant,
    pick: impl Fn(&EventKind) -> Option<T>,
) -> Option<(Instant, T)> {
    events
        .iter()
        .filter(|e| e.at >= after)
        .find_map(|e| pick(&e.kind).map(|t| (e.at, t)))
}

/// Runs the measurement.
pub(crate) fn run(a: &KillOneArgs) -> Res<()> {
    let c = &a.common;
    if a.victim >= a.instances || a.instances < 2 {
        return Err("need at least 2 instances and a victim among them".into());
    }
    c.on_fresh_topics("failover", |name, dir, topics, changelog| {
        measure(a, name, dir, topics, changelog)
    })
}

fn measure(a: &KillOneArgs, name: &str, dir: &std::path::Path, topics: &Topics, changelog: &str) -> Res<()> {
    let c = &a.common;
    let mut states = Vec::new();
    let mut instances = Vec::new();
    for i in 0..a.instances {
        let state = tempfile::tempdir()?;
        let args = AppArgs {
            standbys: a.standbys,
            commit_ms: a.commit_ms,
            group_protocol: a.group_protocol.clone(),
            ..c.app_args(name, topics, state.path(), a.threads, a.guarantee.clone())
        };
        instances.push(Instance::spawn(
            &format!("i{i}"),
            &args,
            &dir.join(format!("i{i}.log")),
        )?);
        states.push(state);
    }
    let mut protocols = BTreeSet::new();
    for i in &mut instances {
        protocols.insert(i.wait_started(Duration::from_secs(60))?);
    }
    println!(
        "{} instances ({} thread(s) each, {}, standbys {}) started; group protocol {protocols:?}",
        a.instances, a.threads, a.guarantee, a.standbys
    );
    // A runtime that does not take `num.standby.replicas` ignores it (with a log line): the
    // run would measure no standby at all.
    if a.standbys > 0 && !protocols.iter().all(|p| p.contains("Streams")) {
        return Err(format!(
            "--standbys {} asks for the streams group protocol, but the instances run {protocols:?}: \
             num.standby.replicas was not taken",
            a.standbys
        )
        .into());
    }
    // The tasks are spread before the preload, so that each task's state is on its owner
    // alone: a survivor that owned a task for a while at the start would hold part of its
    // state and restore less.
    let spread = wait_spread(&mut instances, c.partitions, Duration::from_secs(120))?;
    println!("tasks (partitions) per instance: {spread:?}");
    let t = Instant::now();
    preload(&c.bootstrap, &topics.input, c.keys, c.partitions)?;
    println!("preloaded {} keys in {:.1} s", c.keys, t.elapsed().as_secs_f64());
    let preload_ends = end_offsets(&c.bootstrap, &topics.input, c.partitions)?;
    let feed = c.start_feed(topics)?;
    wait_committed(
        &c.bootstrap,
        name,
        &topics.input,
        &preload_ends,
        Duration::from_secs(1200),
    )?;
    println!(
        "the group committed the end of the preload {:.1} s after the start of the preload",
        t.elapsed().as_secs_f64()
    );
    let now_spread: Vec<BTreeSet<i32>> = instances.iter().map(Instance::tasks).collect();
    if now_spread != spread {
        return Err(format!("the tasks moved during the preload: {spread:?} -> {now_spread:?}").into());
    }
    if a.settle_s > 0 {
        println!("running on for {} s before the kill (--settle-s)", a.settle_s);
        std::thread::sleep(Duration::from_secs(a.settle_s));
        let settled: Vec<BTreeSet<i32>> = instances.iter().map(Instance::tasks).collect();
        if settled != spread {
            return Err(format!("the tasks moved while settling: {spread:?} -> {settled:?}").into());
        }
    }
    let watcher = Watcher::start(&c.bootstrap, &topics.audit, c.partitions)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !watcher.seen().iter().all(|s| s.any) {
        if Instant::now() > deadline {
            return Err("the audit topic shows no new records of some partitions".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let victim = instances.remove(a.victim);
    let victim_name = victim.name.clone();
    let victim_tasks = spread[a.victim].clone();
    let kill_ms = now_ms();
    watcher.count_from(kill_ms);
    let (killed, _) = victim.kill()?;
    println!("SIGKILLed {victim_name} (tasks {victim_tasks:?})");
    // What a survivor has to restore at most: the dead instance writes no more, and the
    // survivors are assigned nothing before the session timeout.
    let changelog_ends = end_offsets(&c.bootstrap, changelog, c.partitions)?;
    // The survivors' view of a partition after the kill.
    let moved = |instances: &[Instance], seen: &[crate::watch::PartitionSeen], p: i32| -> Moved {
        let mut m = Moved {
            partition: p,
            to: "?".into(),
            assigned: None,
            created: None,
            standby_applied: None,
            first_output: None,
        };
        for i in instances {
            let events = i.events();
            let assigned = first_after(&events, killed, |k| match k {
                EventKind::Assigned(ps) if ps.contains(&p) => Some(()),
                _ => None,
            });
            let created = first_after(&events, killed, |k| match k {
                EventKind::Created { partition, restored } if *partition == p => Some(*restored),
                _ => None,
            });
            let standby = first_after(&events, killed, |k| match k {
                EventKind::StandbyStopped { partition, applied } if *partition == p => Some(*applied),
                _ => None,
            });
            if assigned.is_some() || created.is_some() {
                m.to = i.name.clone();
                m.assigned = assigned.map(|(at, ())| at);
                m.created = created;
                m.standby_applied = standby.map(|(_, n)| n);
            }
        }
        // Only what a survivor wrote: appended after it was assigned the partition.
        let from = m
            .assigned
            .map_or(kill_ms, |at| kill_ms + (secs(killed, at) * 1000.0) as i64);
        m.first_output = seen[p as usize].first_from(from);
        m
    };
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        for i in &mut instances {
            i.check_alive()?;
        }
        let seen = watcher.seen();
        if victim_tasks
            .iter()
            .all(|p| moved(&instances, &seen, *p).first_output.is_some())
        {
            break;
        }
        if Instant::now() > deadline {
            return Err("the killed instance's tasks produced no output within 600 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let fed = feed.stop()?;
    let ends = end_offsets(&c.bootstrap, &topics.input, c.partitions)?;
    wait_committed(&c.bootstrap, name, &topics.input, &ends, Duration::from_secs(600))?;
    // Every partition a survivor was assigned after the kill, and the victim's.
    let mut rows: BTreeSet<i32> = victim_tasks.clone();
    for i in &instances {
        for e in i.events().iter().filter(|e| e.at >= killed) {
            if let EventKind::Assigned(ps) = &e.kind {
                rows.extend(ps);
            }
        }
    }
    let seen = watcher.seen();
    let table: Vec<Moved> = rows.iter().map(|p| moved(&instances, &seen, *p)).collect();
    for m in table.iter().filter(|m| m.first_output.is_none()) {
        let after = &seen[m.partition as usize].after;
        println!(
            "task 0_{}: no output after its assignment; {} audit records appended after the kill, \
             from {:?} to {:?} ms after it",
            m.partition,
            after.len(),
            after.first().map(|(ts, _)| ts - kill_ms),
            after.last().map(|(ts, _)| ts - kill_ms)
        );
    }
    drop(watcher);
    for i in instances {
        i.close(Duration::from_secs(60))?;
    }
    drop(states);
    print!(
        "{}",
        report(
            a,
            &victim_name,
            &victim_tasks,
            &table,
            &changelog_ends,
            (killed, kill_ms)
        )
    );
    let mut ids = Identities::new(u64::from(c.keys) + fed.len() as u64);
    let read_committed = a.guarantee == "exactly_once_v2";
    let n = read_topic(
        &c.bootstrap,
        &topics.audit,
        c.partitions,
        read_committed,
        |_, _, v, _| ids.add(v),
    )?;
    let r = ids.report();
    println!(
        "audit: {n} records for {} inputs; missing {}, seen more than once {}, unknown {}",
        u64::from(c.keys) + fed.len() as u64,
        r.missing,
        r.duplicated,
        r.unexpected
    );
    if r.missing > 0 || r.unexpected > 0 {
        return Err(format!(
            "RECORDS LOST: {} input sequence numbers never reached the audit topic (e.g. {:?})",
            r.missing, r.missing_examples
        )
        .into());
    }
    Ok(())
}

/// The table of the moved tasks, with the session timeouts beside.
fn report(
    a: &KillOneArgs,
    victim: &str,
    victim_tasks: &BTreeSet<i32>,
    table: &[Moved],
    changelog_ends: &[i64],
    (kill, kill_ms): (Instant, i64),
) -> String {
    let b = &a.common.bootstrap;
    let setting = |n: &str| broker_setting(b, n).unwrap_or_else(|| "unknown".into());
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nbroker: group.consumer.session.timeout.ms = {}, group.streams.session.timeout.ms = {}",
        setting("group.consumer.session.timeout.ms"),
        setting("group.streams.session.timeout.ms")
    );
    let _ = writeln!(
        s,
        "killed {victim} (tasks {victim_tasks:?}); seconds after the SIGKILL:\n"
    );
    let _ = writeln!(
        s,
        "| task | from | to | assigned | task created (restored) | first new output (broker time) | records restored | its standby had applied | changelog at the kill |"
    );
    let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---:|---:|");
    let opt = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.2}"));
    let mut total = 0;
    for m in table {
        let from = if victim_tasks.contains(&m.partition) {
            victim
        } else {
            "a survivor"
        };
        let restored = m.created.map(|(_, r)| r);
        total += restored.unwrap_or(0);
        let _ = writeln!(
            s,
            "| 0_{} | {from} | {} | {} | {} | {} | {} | {} | {} |",
            m.partition,
            m.to,
            opt(m.assigned.map(|at| secs(kill, at))),
            opt(m.created.map(|(at, _)| secs(kill, at))),
            opt(m.first_output.map(|(ts, _)| (ts - kill_ms) as f64 / 1000.0)),
            restored.map_or("–".into(), |r| r.to_string()),
            m.standby_applied.map_or("no standby".into(), |r| r.to_string()),
            changelog_ends.get(m.partition as usize).copied().unwrap_or(-1),
        );
    }
    let _ = writeln!(s, "\nrecords restored by the survivors in all: {total}");
    s
}
