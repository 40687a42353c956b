//! What a running ladder did: lock-free counters per stage, fed by the ladder's listener
//! ([`DeliveryCounters::record`]), and the snapshot of them ([`DeliveryStats`]).
//!
//! Invariants: every attempt bumps exactly one of `delivered`, `retried` and
//! `dead_lettered` of the stage that made it, and every record stored to wait bumps its
//! stage's `waits`, so a record's journey ends once in [`DeliveryStats::finished`] — per
//! run of a step: the listener hears a step again when the runtime repeats it (a crash or a
//! rebalance before its commit), and so do these counts. Events of stages the ladder does
//! not have are ignored.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use streams_dsl::retry::{Outcome, OutcomeEvent, RetryLadder};

/// The counters of one stage.
#[derive(Debug, Default)]
struct Counters {
    delivered: AtomicU64,
    retried: AtomicU64,
    dead_lettered: AtomicU64,
    waits: AtomicU64,
}

impl Counters {
    /// The counters now, for the stage reading `topic`.
    fn snapshot(&self, topic: &str) -> StageStats {
        StageStats {
            topic: topic.to_owned(),
            delivered: self.delivered.load(Ordering::Relaxed),
            retried: self.retried.load(Ordering::Relaxed),
            dead_lettered: self.dead_lettered.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
        }
    }
}

/// Counts a ladder's outcomes, stage by stage: pass [`record`](Self::record) as (part of)
/// the ladder's listener. Clones share the counts.
#[derive(Debug, Clone)]
pub struct DeliveryCounters {
    stages: Arc<[(String, Counters)]>,
}

impl DeliveryCounters {
    /// Counters for the stages of `ladder`, all zero.
    pub fn new(ladder: &RetryLadder) -> Self {
        let stages = (0..ladder.stages())
            .filter_map(|i| ladder.stage_topic(i))
            .map(|t| (t.to_owned(), Counters::default()))
            .collect();
        Self { stages }
    }

    /// Counts one event of the ladder's listener.
    pub fn record(&self, event: &OutcomeEvent<'_>) {
        let Some((_, c)) = self.stages.get(event.stage) else {
            return;
        };
        let counter = match event.outcome {
            Outcome::Succeeded => &c.delivered,
            Outcome::Retrying { .. } => &c.retried,
            Outcome::DeadLettered { .. } => &c.dead_lettered,
            Outcome::Waiting { .. } => &c.waits,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// What the ladder did so far.
    pub fn stats(&self) -> DeliveryStats {
        DeliveryStats {
            stages: self.stages.iter().map(|(t, c)| c.snapshot(t)).collect(),
        }
    }

    /// Waits until `done(stats)` holds or `timeout` passes, or `running()` turns false;
    /// returns the last stats and whether `done` held.
    pub fn wait_for(
        &self,
        timeout: Duration,
        running: impl Fn() -> bool,
        done: impl Fn(&DeliveryStats) -> bool,
    ) -> (DeliveryStats, bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let stats = self.stats();
            if done(&stats) {
                return (stats, true);
            }
            if Instant::now() >= deadline || !running() {
                return (stats, false);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What one stage of the ladder did so far.
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
    /// Records it stored to wait for their due time (retry stages).
    pub waits: u64,
}

/// What all stages of the ladder did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryStats {
    /// Per stage, the main topic's first.
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
