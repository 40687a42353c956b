//! How a host watches a task.
//!
//! The engine counts in plain fields on the record path (per task in [`TaskCounters`], per
//! node in [`NodeCounts`]) and calls a [`TaskObserver`] only where named here: when the task
//! is built (to watch its nodes and wrap its stores), after a node's record when the observer
//! asked to time that node, and when the host publishes. It knows no metrics library: the
//! Prometheus metrics are one implementation of this trait, outside the engine.

use std::cell::Cell;

use streams_state::KeyValueStore;

/// Dead-letter reasons, as the engine names them; [`TaskCounters::dead_lettered_by`] is
/// indexed in this order.
pub const DLQ_REASONS: [&str; 3] = ["deserialization", "processing", "production"];

/// Counters a task keeps.
#[derive(Debug, Default, Clone, Copy)]
pub struct TaskCounters {
    /// Records processed.
    pub processed: u64,
    /// Records dropped: with a negative timestamp, or skipped after an error.
    pub dropped: u64,
    /// Records delivered again at an offset the task had already queued, and dropped.
    pub redelivered: u64,
    /// Punctuations run.
    pub punctuations: u64,
    /// Records sent to the dead-letter topic.
    pub dead_lettered: u64,
    /// Dead-lettered records by reason, indexed as [`DLQ_REASONS`].
    pub dead_lettered_by: [u64; 3],
}

impl TaskCounters {
    /// What was added since `earlier`.
    pub(crate) fn since(&self, earlier: &Self) -> Self {
        Self {
            processed: self.processed - earlier.processed,
            dropped: self.dropped - earlier.dropped,
            redelivered: self.redelivered - earlier.redelivered,
            punctuations: self.punctuations - earlier.punctuations,
            dead_lettered: self.dead_lettered - earlier.dead_lettered,
            dead_lettered_by: std::array::from_fn(|i| self.dead_lettered_by[i] - earlier.dead_lettered_by[i]),
        }
    }
}

/// Records counted at one node since the observer last took them.
#[derive(Debug, Default)]
pub struct NodeCounts {
    /// Records the node received.
    pub records_in: Cell<u64>,
    /// Records the node forwarded to a child.
    pub forwarded: Cell<u64>,
}

/// Times one node's records (seconds per record).
pub type NodeTimer = Box<dyn Fn(f64)>;

/// What a task reports when its host publishes.
pub struct TaskReport<'a> {
    /// The task's counters (totals since it was created).
    pub counters: TaskCounters,
    /// Bytes held by the caches of the task's stores.
    pub cached_bytes: u64,
    pub(super) nodes: &'a [NodeMeta],
}

impl TaskReport<'_> {
    /// Each node's counts, in the order the observer was asked to watch the nodes; take
    /// them with `Cell::replace(0)`.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeCounts> {
        self.nodes.iter().map(|m| &m.counts)
    }
}

/// Watches one task. Called on the task's thread.
pub trait TaskObserver {
    /// Called once per node, in node order, when the task is built. A timer makes the
    /// engine time each record of the node.
    fn watch_node(&mut self, name: &str) -> Option<NodeTimer>;

    /// Called once per store when the task is built, with the store's stack; returns the
    /// stack to use (the observer may wrap it in a metered layer).
    fn wrap_store(&mut self, name: &str, store: Box<dyn KeyValueStore>) -> Box<dyn KeyValueStore>;

    /// Takes the task's counts. Returns the counters added since the last call.
    fn publish(&mut self, report: TaskReport<'_>) -> TaskCounters;

    /// The host measured the lag of input partition `topic`-`partition`.
    fn lag(&mut self, topic: &str, partition: i32, lag: i64);
}

/// The static facts of a node within a task, with its counts.
pub(crate) struct NodeMeta {
    pub name: String,
    pub children: Vec<usize>,
    pub stores: Vec<String>,
    pub counts: NodeCounts,
    /// Present when the task's observer times this node.
    pub timer: Option<NodeTimer>,
}
