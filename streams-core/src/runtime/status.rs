//! The application's state, shared by its threads, with the state listener.
//!
//! Taken only on state changes and rebalances, never per record.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::metrics::Metrics;
pub use crate::model::State;

/// Called with `(new, old)` on every state change.
pub type StateListener = Arc<dyn Fn(State, State) + Send + Sync>;

pub(crate) struct Status {
    metrics: Metrics,
    state: Mutex<State>,
    listener: Mutex<Option<StateListener>>,
    rebalancing: AtomicUsize,
    /// Counts rebalances begun by any thread: a query whose answers span a change of it
    /// may mix tasks from before and after.
    epoch: AtomicU64,
    threads: AtomicUsize,
    processed: Mutex<HashMap<String, u64>>,
}

impl Status {
    pub fn new(metrics: Metrics) -> Self {
        metrics.set_state(State::Created);
        Self {
            metrics,
            state: Mutex::new(State::Created),
            listener: Mutex::new(None),
            rebalancing: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
            threads: AtomicUsize::new(0),
            processed: Mutex::new(HashMap::new()),
        }
    }

    pub fn state(&self) -> State {
        self.state.lock().map_or(State::Error, |s| *s)
    }

    pub fn set_listener(&self, l: StateListener) {
        if let Ok(mut slot) = self.listener.lock() {
            *slot = Some(l);
        }
    }

    /// Moves to `new` unless the move is not allowed from the current state (nothing
    /// leaves `NotRunning`/`Error` but `Error` -> `PendingShutdown` -> `NotRunning`).
    pub fn transition(&self, new: State) {
        let old = {
            let Ok(mut s) = self.state.lock() else { return };
            let old = *s;
            let allowed = match (old, new) {
                (a, b) if a == b => false,
                (State::NotRunning, _) => false,
                (State::Error, State::PendingShutdown | State::NotRunning) => true,
                (State::Error, _) => false,
                (State::PendingShutdown, State::NotRunning | State::Error) => true,
                (State::PendingShutdown, _) => false,
                _ => true,
            };
            if !allowed {
                return;
            }
            *s = new;
            self.metrics.set_state(new);
            old
        };
        let listener = self.listener.lock().ok().and_then(|l| l.clone());
        if let Some(l) = listener {
            l(new, old);
        }
    }

    pub fn set_threads(&self, n: usize) {
        self.threads.store(n, Ordering::Relaxed);
    }

    /// A thread enters a rebalance.
    pub fn enter_rebalance(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        if self.rebalancing.fetch_add(1, Ordering::Relaxed) == 0 && self.state() == State::Running {
            self.transition(State::Rebalancing);
        }
    }

    /// How many rebalances have begun.
    pub fn rebalance_epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// A thread finished a rebalance and created its tasks.
    pub fn leave_rebalance(&self) {
        if self.rebalancing.fetch_sub(1, Ordering::Relaxed) == 1 && self.state() == State::Rebalancing {
            self.transition(State::Running);
        }
    }

    pub fn set_processed(&self, thread: &str, total: u64) {
        if let Ok(mut p) = self.processed.lock()
            && p.get(thread) != Some(&total)
        {
            p.insert(thread.to_owned(), total);
        }
    }

    pub fn processed_total(&self) -> u64 {
        self.processed.lock().map_or(0, |p| p.values().sum())
    }
}
