//! What the ladder's consumers did: lock-free counters per stage, and the snapshot of
//! them that [`RetryConsumers::stats`](super::RetryConsumers::stats) returns.
//!
//! Invariant: every attempt bumps exactly one of `delivered`, `retried` and
//! `dead_lettered` of the stage that made it, so a record's journey ends once, in
//! [`DeliveryStats::finished`].

use std::sync::atomic::{AtomicU64, Ordering};

/// The counters of one consumer of the ladder.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) delivered: AtomicU64,
    pub(super) retried: AtomicU64,
    pub(super) dead_lettered: AtomicU64,
    pub(super) waits: AtomicU64,
}

impl Counters {
    /// The counters now, for the stage reading `topic`.
    pub(super) fn snapshot(&self, topic: &str) -> StageStats {
        StageStats {
            topic: topic.to_owned(),
            delivered: self.delivered.load(Ordering::Relaxed),
            retried: self.retried.load(Ordering::Relaxed),
            dead_lettered: self.dead_lettered.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
        }
    }
}

/// What one consumer of the ladder did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageStats {
    /// The topic it reads.
    pub topic: String,
    /// Records handled successfully.
    pub delivered: u64,
    /// Records that failed and went to the next retry topic.
    pub retried: u64,
    /// Records that failed and went to the dead-letter topic.
    pub dead_lettered: u64,
    /// Times it paused a partition to wait for a record's due time.
    pub waits: u64,
}

/// What all consumers of the ladder did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryStats {
    /// Per consumer, the main topic's first.
    pub stages: Vec<StageStats>,
}

impl DeliveryStats {
    /// Records handled successfully, at any attempt.
    pub fn delivered(&self) -> u64 {
        self.stages.iter().map(|s| s.delivered).sum()
    }

    /// Failed attempts that were sent to a retry topic.
    pub fn retried(&self) -> u64 {
        self.stages.iter().map(|s| s.retried).sum()
    }

    /// Records sent to the dead-letter topic.
    pub fn dead_lettered(&self) -> u64 {
        self.stages.iter().map(|s| s.dead_lettered).sum()
    }

    /// Records whose journey ended: delivered or dead-lettered.
    pub fn finished(&self) -> u64 {
        self.delivered() + self.dead_lettered()
    }
}
