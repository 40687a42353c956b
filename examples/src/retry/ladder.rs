//! The ladder: the main topic, its retry topics with their delays, and the dead-letter
//! topic, all named after the main topic.
//!
//! Invariants: stage 0 is the main topic and stage `i` retry topic `i`; a record that
//! fails at stage `i` goes to stage `i + 1`, after the last retry topic to the dead-letter
//! topic; a ladder without retry topics dead-letters at the first failure.

use std::time::Duration;

/// One rung of the ladder: a retry topic and how long its records wait before their
/// attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryStep {
    /// The retry topic.
    pub topic: String,
    /// The delay between the failure and the attempt from this topic.
    pub delay: Duration,
}

/// The topics of a retry ladder: the main topic, its retry topics in order, and the
/// dead-letter topic.
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

    /// The production ladder of the seed article: retries after 5 minutes, 30 minutes and
    /// 1 hour.
    pub fn production(source: impl Into<String>) -> Self {
        Self::new(
            source,
            &[
                Duration::from_secs(300),
                Duration::from_secs(1800),
                Duration::from_secs(3600),
            ],
        )
    }

    /// The main topic.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The retry topics, in order.
    pub fn steps(&self) -> &[RetryStep] {
        &self.steps
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

    /// The retry topics and the dead-letter topic (the topics to create besides the main one).
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
        self.steps.len() as u32 + 1
    }

    /// The topic consumed at `stage` (0 = the main topic, `i` = retry topic `i`).
    pub(super) fn stage_topic(&self, stage: usize) -> &str {
        if stage == 0 {
            &self.source
        } else {
            &self.steps[stage - 1].topic
        }
    }

    /// Where a record that failed at `stage` goes: the next retry topic and its delay, or
    /// `None` for the dead-letter topic.
    pub(super) fn next_after(&self, stage: usize) -> Option<&RetryStep> {
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
        assert_eq!(l.stage_topic(0), "req");
        assert_eq!(l.stage_topic(2), "req-retry-2");
        assert_eq!(l.next_after(0).map(|s| s.topic.as_str()), Some("req-retry-1"));
        assert_eq!(l.next_after(2), None);
        assert_eq!(RetryLadder::new("x", &[]).replay_topic(), "x");
        let p = RetryLadder::production("web_hook_requests");
        assert_eq!(p.steps()[2].delay, Duration::from_secs(3600));
    }
}
