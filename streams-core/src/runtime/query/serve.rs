//! Answering queries on a stream thread, between two loop iterations.
//!
//! The thread answers only when all of its tasks are running: during a rebalance, while a
//! task restores or waits for another thread's state directory, or while tasks are
//! suspended, it answers `Unavailable`, so that a caller never merges a partial set of
//! tasks.

use std::ops::Bound;

use super::router::{Answer, Inbox, Op, Partial, Request};
use crate::engine::StoreSlot;
use crate::model::TaskId;
use crate::runtime::tasks::TaskManager;

/// Answers every waiting query. `rebalancing`: the thread's consumer is in a rebalance.
pub(crate) fn serve(inbox: &Inbox, tm: &TaskManager, rebalancing: bool) {
    if !inbox.has_pending() {
        return;
    }
    while let Some(request) = inbox.take() {
        let ready = !rebalancing
            && !tm.has_pending()
            && !tm.is_restoring()
            && tm.waiting.is_empty()
            && tm.suspended.is_empty();
        // A thread's global replica is whole whatever its tasks do.
        let answer = if ready || request.target.global {
            answer(tm, &request)
        } else {
            Answer::Unavailable
        };
        // The caller may have given up (timeout): nothing to do then.
        let _ = request.reply.send(answer);
    }
}

fn answer(tm: &TaskManager, request: &Request) -> Answer {
    let target = &request.target;
    if target.global {
        let Some(slot) = tm.globals.as_ref().and_then(|g| g.slot(&target.store)) else {
            return Answer::Unavailable;
        };
        let id = TaskId {
            subtopology: u32::MAX,
            partition: -1,
        };
        return match read(slot, &request.op) {
            Ok(p) => Answer::Tasks(vec![(id, p)]),
            Err(e) => Answer::Failed(e),
        };
    }
    let mut parts = Vec::new();
    for (id, task) in &tm.tasks {
        if target.partition.is_some_and(|p| p != id.partition) {
            continue;
        }
        let Some(slot) = task.stores().iter().find(|s| *s.name == *target.store) else {
            continue;
        };
        match read(slot, &request.op) {
            Ok(p) => parts.push((*id, p)),
            Err(e) => return Answer::Failed(e),
        }
    }
    Answer::Tasks(parts)
}

/// One store instance's part of `op`.
fn read(slot: &StoreSlot, op: &Op) -> Result<Partial, String> {
    if let Op::Time(scan) = op {
        return super::windowed::read(slot, scan).map(Partial::Time);
    }
    // Between two loop iterations no processor holds the store.
    let store = slot
        .store
        .try_borrow()
        .map_err(|_| "the store is in use by its task".to_owned())?;
    let part = match op {
        Op::Get(key) => store.get(key).map(Partial::Get),
        Op::Count => store.approximate_num_entries().map(Partial::Count),
        Op::Scan {
            from,
            to,
            reverse,
            limit,
        } => {
            let (from, to) = (as_slice(from), as_slice(to));
            let iter = if *reverse {
                store.reverse_range(from, to)
            } else {
                store.range(from, to)
            };
            iter.and_then(|i| i.take(*limit).collect::<Result<Vec<_>, _>>())
                .map(Partial::Scan)
        }
        Op::Time(_) => return Err("not a key-value query".to_owned()),
    };
    part.map_err(|e| e.to_string())
}

fn as_slice(b: &Bound<bytes::Bytes>) -> Bound<&[u8]> {
    b.as_ref().map(|k| k.as_ref())
}
