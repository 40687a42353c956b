//! The ladder: the main topic, its retry topics with their delays, and the dead-letter
//! topic, all named after the main topic.
//!
//! Invariants: stage 0 is the main topic and stage `i` retry topic `i`
//! (`<main>-retry-<i>`); a record that fails retriably at stage `i` goes to stage `i + 1`,
//! after the last retry topic to the dead-letter topic (`<main>-dlq`); a ladder without
//! retry topics dead-letters at the first failure. The names depend only on the main topic
//! and the number of delays, so a ladder rebuilt with the same arguments names the same
//! topics (and the same stores, see [`super::add_retry_ladder`]).

use std::time::Duration;

/// One rung of the ladder: a retry topic and how long its records wait before their
/// attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryStep {
    /// The retry topic.
    pub topic: String,
    /// The delay between a failure and the attempt from this topic.
    pub delay: Duration,
}

/// The topics of a retry ladder: the main topic, its retry topics in order, and the
/// dead-letter topic.
///
/// ```
/// use std::time::Duration;
/// use streams_dsl::retry::RetryLadder;
///
/// let ladder = RetryLadder::new("requests", &[Duration::from_secs(5), Duration::from_secs(60)]);
/// assert_eq!(ladder.topics(), ["requests-retry-1", "requests-retry-2", "requests-dlq"]);
/// assert_eq!(ladder.max_attempts(), 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryLadder {
    source: String,
    steps: Vec<RetryStep>,
    dead_letter: String,
}

impl RetryLadder {
    /// A ladder for `source` with one retry topic per delay, named `<source>-retry-1`,
    /// `<source>-retry-2`, ..., and the dead-letter topic `<source>-dlq`.
    pub fn new(source: impl Into<String>, delays: &[Duration]) -> Self {
        let source = source.into();
        let steps = delays
            .iter()
            .enumerate()
            .map(|(i, &delay)| RetryStep {
                topic: format!("{source}-retry-{}", i + 1),
                delay,
            })
            .collect();
        let dead_letter = format!("{source}-dlq");
        Self {
            source,
            steps,
            dead_letter,
        }
    }

    /// The main topic.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The retry topics, in order.
    pub fn steps(&self) -> &[RetryStep] {
        &self.steps
    }

    /// The delays, in order.
    pub fn delays(&self) -> Vec<Duration> {
        self.steps.iter().map(|s| s.delay).collect()
    }

    /// The dead-letter topic.
    pub fn dead_letter(&self) -> &str {
        &self.dead_letter
    }

    /// Where records replayed from the dead-letter topic go: the first retry topic (or the
    /// main topic when the ladder has no retry topics).
    pub fn replay_topic(&self) -> &str {
        self.steps
            .first()
            .map_or(self.source.as_str(), |s| s.topic.as_str())
    }

    /// The retry topics and the dead-letter topic (the topics to create besides the main
    /// one; the stores' changelogs are created by the runtime).
    pub fn topics(&self) -> Vec<String> {
        self.steps
            .iter()
            .map(|s| s.topic.clone())
            .chain([self.dead_letter.clone()])
            .collect()
    }

    /// How many attempts a record gets before it is dead-lettered: one from the main topic
    /// plus one per retry topic.
    pub fn max_attempts(&self) -> u32 {
        u32::try_from(self.steps.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1)
    }

    /// The number of stages: the main topic and each retry topic.
    pub fn stages(&self) -> usize {
        self.steps.len() + 1
    }

    /// The topic read at `stage` (0 = the main topic, `i` = retry topic `i`); `None`
    /// beyond the last retry topic.
    pub fn stage_topic(&self, stage: usize) -> Option<&str> {
        match stage {
            0 => Some(&self.source),
            i => self.steps.get(i - 1).map(|s| s.topic.as_str()),
        }
    }

    /// Where a record that failed retriably at `stage` goes: the next retry topic and its
    /// delay, or `None` for the dead-letter topic.
    pub fn next_after(&self, stage: usize) -> Option<&RetryStep> {
        self.steps.get(stage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_names_and_order() {
        let l = RetryLadder::new("req", &[Duration::from_millis(5), Duration::from_millis(10)]);
        assert_eq!(l.topics(), vec!["req-retry-1", "req-retry-2", "req-dlq"]);
        assert_eq!(l.replay_topic(), "req-retry-1");
        assert_eq!(l.max_attempts(), 3);
        assert_eq!(l.stages(), 3);
        assert_eq!(l.stage_topic(0), Some("req"));
        assert_eq!(l.stage_topic(2), Some("req-retry-2"));
        assert_eq!(l.stage_topic(3), None);
        assert_eq!(l.next_after(0).map(|s| s.topic.as_str()), Some("req-retry-1"));
        assert_eq!(l.next_after(2), None);
        assert_eq!(l.delays(), [5, 10].map(Duration::from_millis));
        let none = RetryLadder::new("x", &[]);
        assert_eq!(none.replay_topic(), "x");
        assert_eq!(none.max_attempts(), 1);
        assert_eq!(none.topics(), vec!["x-dlq"]);
    }
}
