//! The stream thread owns its task manager; rebalance callbacks borrow it.
//!
//! librdkafka runs a consumer's rebalance callbacks inside calls the thread makes on that
//! consumer (`poll`), and the streams protocol applies its assignments through the same
//! callbacks. A callback must reach the tasks there: revoked tasks commit and suspend
//! before their partitions move. The loop keeps the [`TaskManager`] as a local value and
//! passes `&mut` to everything that works on it; for exactly the calls that may run a
//! callback it [`lend`]s it, and a callback reaches it through [`with_lent`].
//!
//! Invariants:
//! - a task manager is reachable from [`with_lent`] only while a [`lend`] of it runs, on
//!   the lending thread; outside a lend (for example while the consumer closes after the
//!   tasks are gone) a callback finds nothing;
//! - one `&mut` at a time: [`lend`] holds the caller's exclusive borrow for its whole
//!   call, and [`with_lent`] takes the loan out of the slot while its closure runs, so a
//!   callback nested inside another finds nothing rather than a second `&mut`.

use std::cell::Cell;
use std::ptr::NonNull;

use crate::runtime::tasks::TaskManager;

thread_local! {
    /// The task manager lent by the innermost [`lend`] running on this thread, unless a
    /// [`with_lent`] holds it now.
    static LENT: Cell<Option<NonNull<TaskManager>>> = const { Cell::new(None) };
}

/// Puts `previous` back into the slot when dropped (also when a closure panics).
struct Restore(Option<NonNull<TaskManager>>);

impl Drop for Restore {
    fn drop(&mut self) {
        LENT.with(|l| l.set(self.0));
    }
}

/// Runs `f` (a call that may run rebalance callbacks) with `tasks` reachable from
/// [`with_lent`] on this thread.
pub(in crate::runtime) fn lend<R>(tasks: &mut TaskManager, f: impl FnOnce() -> R) -> R {
    let previous = LENT.with(|l| l.replace(Some(NonNull::from(tasks))));
    let _restore = Restore(previous);
    f()
}

/// Runs `f` on the task manager lent to this thread, if one is (see the module's
/// invariants); `None` when nothing is lent.
pub(in crate::runtime) fn with_lent<R>(f: impl FnOnce(&mut TaskManager) -> R) -> Option<R> {
    let lent = LENT.with(Cell::take)?;
    let _restore = Restore(Some(lent));
    // SAFETY: `lent` was made from the `&mut TaskManager` of a `lend` that is still
    // running on this thread (the slot is reset when it returns), so it points to a live
    // task manager that its owner cannot touch until `lend` returns. The slot is empty
    // while `f` runs, so no other `&mut` to it can be made meanwhile.
    #[allow(unsafe_code)]
    let tasks = unsafe { &mut *lent.as_ptr() };
    Some(f(tasks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::tasks::standby::tests::Setup;

    /// A task manager is reachable exactly while it is lent, through one `&mut` at a time.
    #[test]
    fn a_lent_task_manager_is_reachable_only_inside_its_lend() {
        assert!(with_lent(|_| ()).is_none(), "nothing lent yet");
        let Some(mut setup) = Setup::new("a_lent_task_manager_is_reachable_only_inside_its_lend", false)
        else {
            return;
        };
        let owned: *const TaskManager = &setup.tm;
        let seen = lend(&mut setup.tm, || {
            with_lent(|tm| {
                let nested = with_lent(|_| ()).is_some();
                (std::ptr::eq(tm, owned), nested)
            })
        });
        assert_eq!(
            seen,
            Some((true, false)),
            "the lent manager, and no second borrow"
        );
        assert!(with_lent(|_| ()).is_none(), "the loan ends with the lend");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lend(&mut setup.tm, || with_lent(|_| panic!("a callback panics")))
        }));
        assert!(panicked.is_err());
        assert!(with_lent(|_| ()).is_none(), "a panic ends the loan too");
    }
}
