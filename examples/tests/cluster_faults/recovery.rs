//! How long the group takes to commit again after a fault, and waiting with the instances
//! watched.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::PARTITIONS;
use crate::common::feed::{IDLE_LIMIT, committed_reader, read_committed};
use crate::common::instance::{Instance, Run, check_all_alive, stalled};

/// How long one read of the group's committed offsets may take during a recovery wait.
const READ_LIMIT: Duration = Duration::from_secs(5);

/// How long the group took to commit again after a fault ended: until the committed offset
/// of one input partition moved, and of every one.
pub(crate) struct Recovery {
    pub(crate) first: Duration,
    pub(crate) all: Duration,
}

/// Waits until the group has committed beyond `from` (where it had committed when the
/// wait began when `None`) on every input partition, polling every 200 ms; fails after
/// [`IDLE_LIMIT`] or when an instance dies.
pub(crate) fn recovery(run: &Run, from: Option<BTreeMap<i32, i64>>, instances: &mut [Instance]) -> Recovery {
    let began = Instant::now();
    let mut from = from;
    let mut first = None;
    let mut last_error: Option<Instant> = None;
    let mut reader = committed_reader(run);
    loop {
        check_all_alive(instances);
        // The committed offsets may not be readable for a while after a fault; a failed
        // read is said (at most every 10 s), since it delays what the wait measures. A read
        // waits at most READ_LIMIT, so one stuck read delays the measurement by no more.
        let read = read_committed(&mut reader, READ_LIMIT);
        if let Err(e) = &read
            && last_error.is_none_or(|at| at.elapsed() >= Duration::from_secs(10))
        {
            eprintln!(
                "{}: {:.1} s into the wait: reading the group's committed offsets failed: {e}",
                run.app,
                began.elapsed().as_secs_f64()
            );
            last_error = Some(Instant::now());
        }
        if let Err(e) = &read
            && began.elapsed() >= IDLE_LIMIT
        {
            stalled(
                instances,
                &format!("the group's committed offsets could not be read for {IDLE_LIMIT:?}: {e}"),
            );
        }
        if let Ok(now) = read {
            let from = from.get_or_insert_with(|| now.clone());
            let moved = |p: &i32| now.get(p).copied().unwrap_or(0) > from.get(p).copied().unwrap_or(0);
            if first.is_none() && (0..PARTITIONS).any(|p| moved(&p)) {
                first = Some(began.elapsed());
            }
            let stuck: Vec<i32> = (0..PARTITIONS).filter(|p| !moved(p)).collect();
            if stuck.is_empty() {
                return Recovery {
                    first: first.unwrap_or_default(),
                    all: began.elapsed(),
                };
            }
            if began.elapsed() >= IDLE_LIMIT {
                stalled(
                    instances,
                    &format!(
                        "the group's committed offsets of input partitions {stuck:?} have not \
                         moved in {IDLE_LIMIT:?} (committed {from:?} at the start of the wait, \
                         {now:?} now)"
                    ),
                );
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
