//! Fan-out of a query to the stream threads, and the checks that make its answer whole.
//!
//! Every stream thread has an [`Inbox`]; the [`Router`] holds the matching senders. A query
//! goes to every thread; each answers for the tasks it runs (see `serve.rs`). The answer is
//! complete only if
//! - the application was `RUNNING` before the query was sent and still is after the last
//!   answer arrived, with no rebalance started in between (the status' rebalance epoch is
//!   unchanged);
//! - no thread answered that it is rebalancing or restoring;
//! - no task answered twice (a task that moved between two threads of this instance).
//!
//! Otherwise the caller gets [`QueryError::Rebalancing`]: retry. A stale query (standbys
//! allowed) is exempt from these checks but the first: each thread's state updater answers
//! too, and a task that answers twice counts once. A thread that does not
//! answer within the timeout makes it [`QueryError::Timeout`].
//!
//! The channel is the only thing the stream thread touches: an empty inbox costs it one
//! atomic load per loop iteration, and no lock is taken on its per-record path.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::windowed::{Hit, TimeScan};
use super::{LagInfo, QueryError};
use crate::model::TaskId;
use crate::runtime::status::{State, Status};

/// What a query asks of each task's instance of a store.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// The value of one key.
    Get(Bytes),
    /// Up to `limit` entries of a range, ascending (or descending when `reverse`).
    Scan {
        from: Bound<Bytes>,
        to: Bound<Bytes>,
        reverse: bool,
        limit: usize,
    },
    /// The approximate number of entries.
    Count,
    /// Entries of a window or session store.
    Time(TimeScan),
    /// How far the instance is behind its changelog.
    Lag,
}

/// One task's part of an answer.
#[derive(Debug)]
pub(crate) enum Partial {
    Get(Option<Bytes>),
    Scan(Vec<(Bytes, Bytes)>),
    Count(u64),
    Time(Vec<Hit>),
    Lag(LagInfo),
}

/// A thread's answer.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The thread's tasks that hold the store, each with its part.
    Tasks(Vec<(TaskId, Partial)>),
    /// The thread is in a rebalance, or some of its tasks are restoring.
    Unavailable,
    /// Reading a task's store failed.
    Failed(String),
}

/// Which store instances a query reads.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub store: Arc<str>,
    /// A global store: one thread answers from its replica.
    pub global: bool,
    /// Only the task of this partition (which must be hosted here).
    pub partition: Option<i32>,
    /// Standbys and restoring tasks answer too, and a rebalance does not stop the query
    /// (Kafka Streams' `enableStaleStores`): each thread's state updater is asked besides
    /// the thread.
    pub stale: bool,
}

/// A query on its way to one thread (and, for a stale query, on to its state updater).
#[derive(Clone)]
pub(crate) struct Request {
    pub target: Target,
    pub op: Op,
    pub reply: Sender<Answer>,
}

/// The receiving end of a thread's queries.
pub(crate) struct Inbox {
    rx: Receiver<Request>,
    pending: Arc<AtomicUsize>,
}

impl Inbox {
    /// Whether a query waits (one atomic load).
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }

    /// The next waiting query, if any.
    pub fn take(&self) -> Option<Request> {
        let r = self.rx.try_recv().ok()?;
        self.pending.fetch_sub(1, Ordering::AcqRel);
        Some(r)
    }
}

struct Mailbox {
    thread: String,
    tx: Sender<Request>,
    pending: Arc<AtomicUsize>,
}

/// The senders to every stream thread's inbox.
pub(crate) struct Router {
    status: Arc<Status>,
    threads: Mutex<Vec<Mailbox>>,
}

impl Router {
    pub fn new(status: Arc<Status>) -> Self {
        Self {
            status,
            threads: Mutex::new(Vec::new()),
        }
    }

    /// A new inbox for `thread` (replacing the one of a thread of that name).
    pub fn register(&self, thread: &str) -> Inbox {
        let (tx, rx) = mpsc::channel();
        let pending = Arc::new(AtomicUsize::new(0));
        if let Ok(mut t) = self.threads.lock() {
            t.retain(|m| m.thread != thread);
            t.push(Mailbox {
                thread: thread.to_owned(),
                tx,
                pending: pending.clone(),
            });
        }
        Inbox { rx, pending }
    }

    /// Removes every inbox (the application is closing).
    pub fn clear(&self) {
        if let Ok(mut t) = self.threads.lock() {
            t.clear();
        }
    }

    /// Asks every thread for `op` on `target`; the parts of every task that holds it. A
    /// global store is asked of one thread (each has a full replica).
    ///
    /// Returns the parts with the rebalance epoch they were read in: answers read in two
    /// epochs may mix assignments (a cursor must not continue across them).
    pub fn ask(&self, target: &Target, op: &Op, timeout: Duration) -> Result<Answered, QueryError> {
        let store = &target.store;
        // A global store is whole on every thread whatever the tasks do: only a stopped
        // application cannot answer for it.
        let stale = target.stale && !target.global;
        let check = |state| {
            if target.global || stale {
                stopped(state)
            } else {
                running(state)
            }
        };
        check(self.status.state())?;
        let epoch = self.status.rebalance_epoch();
        let (reply, answers) = mpsc::channel();
        let mut asked = 0;
        {
            let threads = self
                .threads
                .lock()
                .map_err(|_| QueryError::NotRunning { state: State::Error })?;
            let n = if target.global { 1 } else { threads.len() };
            // A thread passes a stale query on to its state updater, which answers too.
            let answers_per_thread = if stale { 2 } else { 1 };
            for m in threads.iter().take(n) {
                m.pending.fetch_add(1, Ordering::AcqRel);
                let sent = m.tx.send(Request {
                    target: target.clone(),
                    op: op.clone(),
                    reply: reply.clone(),
                });
                if sent.is_err() {
                    m.pending.fetch_sub(1, Ordering::AcqRel);
                    // The thread has ended: its tasks are nowhere to be read here now.
                    return Err(QueryError::Rebalancing);
                }
                asked += answers_per_thread;
            }
        }
        drop(reply);
        let deadline = Instant::now() + timeout;
        let mut parts = Vec::new();
        let mut unavailable = false;
        for _ in 0..asked {
            let left = deadline.saturating_duration_since(Instant::now());
            match answers.recv_timeout(left) {
                Ok(Answer::Tasks(t)) => parts.extend(t),
                Ok(Answer::Unavailable) => unavailable = true,
                Ok(Answer::Failed(message)) => {
                    return Err(QueryError::Store {
                        store: store.to_string(),
                        message,
                    });
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return Err(QueryError::Timeout(timeout)),
                // A thread ended without answering.
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(QueryError::Rebalancing),
            }
        }
        check(self.status.state())?;
        if target.global {
            return Ok(Answered { parts, epoch: None });
        }
        let mut seen = std::collections::HashSet::new();
        if stale {
            // A task between two owners of this instance (a standby being promoted) may
            // answer twice: its first answer stands.
            parts.retain(|(t, _)| seen.insert(*t));
        } else {
            if unavailable || self.status.rebalance_epoch() != epoch {
                return Err(QueryError::Rebalancing);
            }
            if !parts.iter().all(|(t, _)| seen.insert(*t)) {
                return Err(QueryError::Rebalancing);
            }
        }
        if let Some(partition) = target.partition
            && parts.is_empty()
        {
            return Err(QueryError::NotHosted {
                store: store.to_string(),
                partition,
            });
        }
        Ok(Answered {
            parts,
            epoch: Some(epoch),
        })
    }

    /// Where each local copy of `target`'s store stands against its changelog, by partition:
    /// running active tasks, restoring tasks and standbys (a stale query of [`Op::Lag`]);
    /// nothing for a global store.
    pub fn lags(&self, target: &Target, timeout: Duration) -> Result<BTreeMap<i32, LagInfo>, QueryError> {
        // A global store is no task's: it has no lag to report.
        if target.global {
            return Ok(BTreeMap::new());
        }
        let target = Target {
            stale: true,
            ..target.clone()
        };
        let answered = self.ask(&target, &Op::Lag, timeout)?;
        Ok(answered
            .parts
            .into_iter()
            .filter_map(|(task, p)| match p {
                Partial::Lag(lag) => Some((task.partition, lag)),
                _ => None,
            })
            .collect())
    }
}

/// The parts of an answer, with the rebalance epoch they were read in (`None` for a global
/// store, which rebalances do not touch).
pub(crate) struct Answered {
    pub parts: Vec<(TaskId, Partial)>,
    pub epoch: Option<u64>,
}

/// The rebalance epoch a cursor's chunks are read in. A later chunk read in another epoch
/// comes from other tasks than the earlier ones: the range so far may miss what moved, so
/// the cursor fails with [`QueryError::Rebalancing`] from then on, for good.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EpochPin {
    /// The epoch of the first chunk (or of the token a cursor resumed from).
    epoch: Option<u64>,
    /// A later chunk came from another epoch.
    broken: bool,
}

impl EpochPin {
    /// The pinned epoch, once a chunk (or a resumed token) set it.
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// Pins `epoch`, as a cursor resumed from a token read in it.
    pub fn pin(&mut self, epoch: u64) {
        self.epoch = Some(epoch);
    }

    /// `Err(Rebalancing)` once the cursor is broken.
    pub fn usable(&self) -> Result<(), QueryError> {
        if self.broken {
            return Err(QueryError::Rebalancing);
        }
        Ok(())
    }

    /// Takes the epoch an answer was read in (`None`: a global store's): the first one pins
    /// it, another one breaks the cursor.
    pub fn observe(&mut self, now: Option<u64>) -> Result<(), QueryError> {
        if let Some(now) = now {
            match self.epoch {
                Some(then) if then != now => {
                    self.broken = true;
                    return Err(QueryError::Rebalancing);
                }
                _ => self.epoch = Some(now),
            }
        }
        Ok(())
    }
}

/// `Ok` unless the application is stopped (not started, shutting down, failed).
fn stopped(state: State) -> Result<(), QueryError> {
    match state {
        State::Running | State::Rebalancing => Ok(()),
        state => Err(QueryError::NotRunning { state }),
    }
}

/// `Ok` when queries may be answered in `state`.
fn running(state: State) -> Result<(), QueryError> {
    match state {
        State::Running => Ok(()),
        State::Rebalancing => Err(QueryError::Rebalancing),
        state => Err(QueryError::NotRunning { state }),
    }
}

/// Merges the scan parts of several tasks: the first `limit` entries in key order (or
/// reverse order), and whether the range may hold more.
pub(crate) fn merge_scans(
    parts: Vec<(TaskId, Partial)>,
    reverse: bool,
    limit: usize,
) -> (Vec<(Bytes, Bytes)>, bool) {
    let mut entries = Vec::new();
    let mut more = false;
    for (_, p) in parts {
        if let Partial::Scan(e) = p {
            // A task that filled its limit may hold more beyond it.
            more |= e.len() >= limit;
            entries.extend(e);
        }
    }
    if reverse {
        entries.sort_by(|a, b| b.0.cmp(&a.0));
    } else {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
    }
    if entries.len() > limit {
        entries.truncate(limit);
        more = true;
    }
    (entries, more)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(p: i32, keys: &[&str]) -> (TaskId, Partial) {
        (
            TaskId {
                subtopology: 0,
                partition: p,
            },
            Partial::Scan(
                keys.iter()
                    .map(|k| (Bytes::copy_from_slice(k.as_bytes()), Bytes::new()))
                    .collect(),
            ),
        )
    }

    fn keys(e: &[(Bytes, Bytes)]) -> Vec<&[u8]> {
        e.iter().map(|(k, _)| k.as_ref()).collect()
    }

    #[test]
    fn scans_merge_in_key_order_up_to_the_limit() {
        let (e, more) = merge_scans(vec![scan(0, &["a", "d"]), scan(1, &["b", "c"])], false, 3);
        assert_eq!(keys(&e), [b"a", b"b", b"c"]);
        assert!(more);
        let (e, more) = merge_scans(vec![scan(0, &["d", "a"]), scan(1, &["c"])], true, 3);
        assert_eq!(keys(&e), [b"d", b"c", b"a"]);
        assert!(!more, "no task filled the limit and nothing was cut");
    }

    #[test]
    fn a_task_that_filled_the_limit_may_hold_more() {
        let (e, more) = merge_scans(vec![scan(0, &["a", "b"]), scan(1, &[])], false, 2);
        assert_eq!(keys(&e), [b"a", b"b"]);
        assert!(more);
    }
}
