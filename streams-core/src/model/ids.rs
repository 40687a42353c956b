//! Identifiers.

use std::fmt;

/// Identifies a task: its sub-topology and input partition, shown as `0_1` as in Kafka
/// Streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    /// The sub-topology.
    pub subtopology: u32,
    /// The partition of its input topics.
    pub partition: i32,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.subtopology, self.partition)
    }
}
