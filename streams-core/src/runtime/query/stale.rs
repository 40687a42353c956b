//! Stale queries (Kafka Streams' `enableStaleStores`) answered on a state updater's thread,
//! for the stores it holds: its standbys' and its restoring tasks'.
//!
//! The stream thread answers for its running tasks and hands the updater a visit
//! ([`answer`]) that reads the same store of every task the updater lends it
//! (`restore/held.rs`) and replies on the query's own channel, so the caller merges that
//! answer with the threads'. A store read there is exactly what the updater has applied: a
//! standby as far as its changelog was read, a restoring store as far as it was restored.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use streams_state::{InMemoryKeyValueStore, KeyValueStore, StoreBuilder};

use super::read::read;
use super::router::{Answer, Op, Partial, Request};
use super::{LagInfo, Replica};
use crate::engine::TaskStore;
use crate::runtime::restore::held::{HeldTask, Visit};

/// The visit that answers `request` from the tasks a state updater holds. `builder` is the
/// queried store's (how a window or session store lays out its bytes).
pub(crate) fn answer(request: Request, builder: Arc<dyn StoreBuilder>) -> Visit {
    Box::new(move |held: Vec<HeldTask<'_>>| {
        let target = &request.target;
        let mut parts = Vec::new();
        for mut task in held {
            if target.partition.is_some_and(|p| p != task.id.partition) {
                continue;
            }
            let Some(index) = task.stores.iter().position(|s| *s.name == *target.store) else {
                continue;
            };
            let part = match &request.op {
                Op::Lag => {
                    let replica = if task.standby {
                        Replica::Standby
                    } else {
                        Replica::Restoring
                    };
                    Ok(Partial::Lag(LagInfo::of(replica, (task.lag)(index))))
                }
                op => read_owned(&mut task.stores[index], builder.as_ref(), op),
            };
            match part {
                Ok(p) => parts.push((task.id, p)),
                Err(e) => {
                    let _ = request.reply.send(Answer::Failed(e));
                    return;
                }
            }
        }
        // The caller may have given up (timeout): nothing to do then.
        let _ = request.reply.send(Answer::Tasks(parts));
    })
}

/// Reads `store`, which the updater owns outright: it is lent to the shared handle the
/// readers take for the read, and taken back after it.
fn read_owned(store: &mut TaskStore, builder: &dyn StoreBuilder, op: &Op) -> Result<Partial, String> {
    let placeholder: Box<dyn KeyValueStore> = Box::new(InMemoryKeyValueStore::new(""));
    let shared = Rc::new(RefCell::new(std::mem::replace(&mut store.store, placeholder)));
    let part = read(&shared, builder, op);
    match Rc::try_unwrap(shared) {
        Ok(cell) => store.store = cell.into_inner(),
        // `read` opens its handles on the store within the call and drops them before it
        // returns; a store left behind here would be lost to its task.
        Err(_) => unreachable!("a store read kept a handle on the store"),
    }
    part
}
