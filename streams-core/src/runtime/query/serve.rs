//! Answering queries on a stream thread, between two loop iterations.
//!
//! The thread answers only when all of its tasks are running: during a rebalance, while a
//! task restores or waits for another thread's state directory, or while tasks are
//! suspended, it answers `Unavailable`, so that a caller never merges a partial set of
//! tasks.
//!
//! A stale query (standbys allowed) is answered at once from the tasks the thread has,
//! whatever it is doing, and passed on to the thread's state updater, which answers for
//! the standbys and restoring tasks it holds (`stale.rs`).

use super::read::read;
use super::router::{Answer, Inbox, Op, Partial, Request};
use super::{LagInfo, Replica};
use crate::model::TaskId;
use crate::runtime::restore::held::ChangelogLag;
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
        let stale = request.target.stale && !request.target.global;
        if stale {
            pass_to_updater(tm, &request);
        }
        // A thread's global replica is whole whatever its tasks do.
        let answer = if ready || stale || request.target.global {
            answer(tm, &request)
        } else {
            Answer::Unavailable
        };
        // The caller may have given up (timeout): nothing to do then.
        let _ = request.reply.send(answer);
    }
}

/// Hands a stale query to the thread's state updater, which answers on the same channel
/// (with nothing when the store is not in the topology or the updater is gone).
fn pass_to_updater(tm: &TaskManager, request: &Request) {
    let topology = tm.settings.factory.topology();
    let builder = topology
        .store_def(&request.target.store)
        .map(|s| s.builder.clone());
    let passed =
        builder.is_some_and(|builder| tm.updater.visit(super::stale::answer(request.clone(), builder)));
    if !passed {
        let _ = request.reply.send(Answer::Tasks(Vec::new()));
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
        return match read(&slot.store, slot.builder.as_ref(), &request.op) {
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
        let part = match request.op {
            // A running task's store is where its changelog comes from.
            Op::Lag => Ok(Partial::Lag(LagInfo::of(
                Replica::Active,
                ChangelogLag::caught_up(),
            ))),
            _ => read(&slot.store, slot.builder.as_ref(), &request.op),
        };
        match part {
            Ok(p) => parts.push((*id, p)),
            Err(e) => return Answer::Failed(e),
        }
    }
    Answer::Tasks(parts)
}
