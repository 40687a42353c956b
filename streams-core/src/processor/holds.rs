//! Offsets held back from commits by records still being worked on off the task thread
//! (async processors), and the wake-up signal of the thread that runs a task.
//!
//! A record whose work outlives its `process` call takes an [`OffsetHold`]; while the hold
//! lives, the task commits its input partition only up to that record's offset (not past
//! it), so a crash or a rebalance makes the record be processed again rather than lost.
//! The registry lives on the task's thread (`Rc`): holds are taken and dropped there.

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The holds of one task.
#[derive(Debug, Default)]
pub(crate) struct HoldRegistry {
    entries: Vec<(Arc<str>, i32, i64, u64)>,
    next: u64,
}

impl HoldRegistry {
    /// Holds `offset` of `topic`-`partition` until the returned hold is dropped.
    pub fn hold(registry: &Rc<RefCell<Self>>, topic: Arc<str>, partition: i32, offset: i64) -> OffsetHold {
        let mut r = registry.borrow_mut();
        let id = r.next;
        r.next += 1;
        r.entries.push((topic, partition, offset, id));
        OffsetHold {
            registry: Rc::downgrade(registry),
            id,
        }
    }

    /// The smallest held offset of `topic`-`partition`.
    pub fn min_held(&self, topic: &str, partition: i32) -> Option<i64> {
        self.entries
            .iter()
            .filter(|(t, p, _, _)| *p == partition && **t == *topic)
            .map(|(_, _, o, _)| *o)
            .min()
    }

    /// How many holds are alive.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Keeps one record's offset from being committed while it lives.
#[derive(Debug)]
pub struct OffsetHold {
    registry: Weak<RefCell<HoldRegistry>>,
    id: u64,
}

impl Drop for OffsetHold {
    fn drop(&mut self) {
        if let Some(r) = self.registry.upgrade()
            && let Ok(mut r) = r.try_borrow_mut()
        {
            r.entries.retain(|e| e.3 != self.id);
        }
    }
}

/// Wakes the thread running a task while it waits for records: set from any thread
/// (e.g. when async work completes), looked at by the thread between short waits. A
/// processor gets its thread's from [`ProcessorContext::waker`](crate::ProcessorContext::waker);
/// the host hands it to the tasks it builds ([`TaskFactory::with_waker`](crate::engine::TaskFactory::with_waker)).
#[derive(Debug, Clone, Default)]
pub struct ThreadWaker(Arc<AtomicBool>);

impl ThreadWaker {
    /// Asks the thread to look at its tasks soon.
    pub fn wake(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether a wake-up was asked since the last call (and clears it).
    pub(crate) fn take(&self) -> bool {
        self.0.swap(false, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_keeps_its_offset_until_dropped() {
        let r = Rc::new(RefCell::new(HoldRegistry::default()));
        let t: Arc<str> = Arc::from("in");
        let a = HoldRegistry::hold(&r, t.clone(), 0, 10);
        let b = HoldRegistry::hold(&r, t.clone(), 0, 7);
        let _c = HoldRegistry::hold(&r, t.clone(), 1, 3);
        assert_eq!(r.borrow().min_held("in", 0), Some(7));
        drop(b);
        assert_eq!(r.borrow().min_held("in", 0), Some(10));
        drop(a);
        assert_eq!(r.borrow().min_held("in", 0), None);
        assert_eq!(r.borrow().len(), 1);
    }
}
