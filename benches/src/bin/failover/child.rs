//! One application instance as a child process (`failover app`), and what its log says.
//!
//! A thread reads the child's stderr line by line, copies every line to the instance's log
//! file and turns the lines the driver needs into [`Event`]s stamped with the time they were
//! read: `started`, a task created (with the records its stores restored), a task closed
//! because another member took it, the input partitions newly assigned (the runtime logs
//! their start offsets), and a standby stopped (with the changelog records it had applied).
//! The instance's current tasks are the tasks created and not closed since.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::Res;
use crate::app::AppArgs;

/// What a line of the log said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// The application started, with the group protocol it chose.
    Started(String),
    /// Task `0_p` was created after its stores restored this many records.
    Created { partition: i32, restored: u64 },
    /// Task `0_p` was closed (taken by another member, possibly while restoring).
    Closed(i32),
    /// These input partitions were assigned.
    Assigned(Vec<i32>),
    /// The standby of task `0_p` stopped (removed, or promoted to the active task) after
    /// applying this many changelog records.
    StandbyStopped { partition: i32, applied: u64 },
}

/// One event with the instant it was read.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    pub(crate) at: Instant,
    pub(crate) kind: EventKind,
}

/// The value of `name=` in `line` (up to the next space).
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let pattern = format!(" {name}=");
    let start = line.find(&pattern)? + pattern.len();
    line[start..].split(' ').next()
}

/// The partition of a task id `<subtopology>_<partition>`.
fn task_partition(task: &str) -> Option<i32> {
    task.rsplit('_').next()?.parse().ok()
}

/// The event a log line reports, if any; `input` is the input topic.
pub(crate) fn parse(line: &str, input: &str) -> Option<EventKind> {
    if let Some(rest) = line.strip_prefix("started protocol=") {
        return Some(EventKind::Started(rest.trim().to_owned()));
    }
    if line.contains("task created") {
        let partition = task_partition(field(line, "task")?)?;
        let restored = field(line, "restored")?.parse().ok()?;
        return Some(EventKind::Created { partition, restored });
    }
    if line.contains("standby task stopped") {
        let partition = task_partition(field(line, "task")?)?;
        let applied = field(line, "applied")?.parse().ok()?;
        return Some(EventKind::StandbyStopped { partition, applied });
    }
    if line.contains("taken by another member") {
        return Some(EventKind::Closed(task_partition(field(line, "task")?)?));
    }
    if line.contains("start offsets of the assigned partitions") {
        let prefix = format!("{input}-");
        let parts: Vec<i32> = line
            .split([' ', ',', '='])
            .filter_map(|w| w.strip_prefix(&prefix)?.split('@').next()?.parse().ok())
            .collect();
        return Some(EventKind::Assigned(parts));
    }
    None
}

/// A running instance.
pub(crate) struct Instance {
    pub(crate) name: String,
    child: Child,
    events: Arc<Mutex<Vec<Event>>>,
    reader: Option<JoinHandle<()>>,
}

impl Instance {
    /// Starts `failover app` with `args`, its log copied to `log`.
    pub(crate) fn spawn(name: &str, args: &AppArgs, log: &Path) -> Res<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(args.to_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().ok_or("no stderr pipe")?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
        let input = args.input.clone();
        let sink = events.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let at = Instant::now();
                let _ = writeln!(file, "{line}");
                if let Some(kind) = parse(&line, &input)
                    && let Ok(mut e) = sink.lock()
                {
                    e.push(Event { at, kind });
                }
            }
        });
        Ok(Self {
            name: name.to_owned(),
            child,
            events,
            reader: Some(reader),
        })
    }

    /// The events so far.
    pub(crate) fn events(&self) -> Vec<Event> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// The group protocol it reported at start, once started.
    pub(crate) fn protocol(&self) -> Option<String> {
        self.events().into_iter().find_map(|e| match e.kind {
            EventKind::Started(p) => Some(p),
            _ => None,
        })
    }

    /// Its current tasks (partitions): created and not closed since.
    pub(crate) fn tasks(&self) -> BTreeSet<i32> {
        let mut tasks = BTreeSet::new();
        for e in self.events() {
            match e.kind {
                EventKind::Created { partition, .. } => {
                    tasks.insert(partition);
                }
                EventKind::Closed(p) => {
                    tasks.remove(&p);
                }
                _ => {}
            }
        }
        tasks
    }

    /// Waits up to `timeout` for `started`; fails if the instance exits first.
    pub(crate) fn wait_started(&mut self, timeout: Duration) -> Res<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(p) = self.protocol() {
                return Ok(p);
            }
            if let Some(status) = self.child.try_wait()? {
                return Err(format!("{} exited before it started ({status})", self.name).into());
            }
            if Instant::now() > deadline {
                return Err(format!("{} not started within {timeout:?}", self.name).into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Fails when the instance has exited.
    pub(crate) fn check_alive(&mut self) -> Res<()> {
        match self.child.try_wait()? {
            Some(status) => Err(format!("{} exited ({status})", self.name).into()),
            None => Ok(()),
        }
    }

    /// SIGKILL; returns the instant it was sent, and the events of this run.
    pub(crate) fn kill(mut self) -> Res<(Instant, Vec<Event>)> {
        let at = Instant::now();
        self.child.kill()?;
        self.child.wait()?;
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        Ok((at, self.events()))
    }

    /// Closes standard input (a clean close) and waits up to `timeout`, then kills it.
    pub(crate) fn close(mut self, timeout: Duration) -> Res<Vec<Event>> {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + timeout;
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                eprintln!("{} did not close within {timeout:?}: killed", self.name);
                self.child.kill()?;
                self.child.wait()?;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        Ok(self.events())
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // A driver that fails half-way leaves no instance running.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_runtime_lines() {
        let created = "2026-12-01T21:50:00.123Z  INFO streams_core::runtime::tasks::creation: task created task=0_3 restored=166667";
        assert_eq!(
            parse(created, "in"),
            Some(EventKind::Created {
                partition: 3,
                restored: 166_667
            })
        );
        let closed =
            "... INFO streams_core::runtime::tasks::creation: closing task taken by another member task=0_5";
        assert_eq!(parse(closed, "in"), Some(EventKind::Closed(5)));
        let assigned = "... INFO streams_core::runtime::topics::start_offsets: start offsets of the assigned partitions start=f-in-2@100, f-in-13@reset";
        assert_eq!(parse(assigned, "f-in"), Some(EventKind::Assigned(vec![2, 13])));
        assert_eq!(
            parse("started protocol=Some(Consumer)", "in"),
            Some(EventKind::Started("Some(Consumer)".into()))
        );
        let standby = "... INFO state_updater{thread=a-StreamThread-1-restorer}: streams_core::runtime::restore::updater: standby task stopped task=0_1 applied=183318";
        assert_eq!(
            parse(standby, "in"),
            Some(EventKind::StandbyStopped {
                partition: 1,
                applied: 183_318
            })
        );
        assert_eq!(parse("WARN something else task=0_1", "in"), None);
    }
}
