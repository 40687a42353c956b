//! How a task learns what failed while a record (or a punctuation) ran through its nodes,
//! and hands it to the right handler.
//!
//! Two channels, neither of which inspects an error's type:
//! - a node's own error travels up as the return value; the engine notes the innermost node
//!   whose call failed ([`TaskShared::failed_node`], cleared again when a node above
//!   handles the error and returns `Ok`);
//! - faults the engine handles by its own rules (a source that cannot deserialize, a sink
//!   that cannot serialize or send) are recorded on the side ([`TaskShared::fault`]) when
//!   they happen. They stick: a processor that swallows the error it got from `forward`
//!   does not make the record succeed, so nothing is skipped silently.

use super::Task;
use super::observer::DLQ_REASONS;
use super::shared::{Fault, TaskShared};
use crate::model::error::{ErrorOrigin, ProcessorError, StreamsError};
use crate::model::handlers::{ErrorHandling, dead_letter};
use crate::model::record::RawRecord;

/// Which handler a failure goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Deserialization,
    Processing,
    Production,
}

impl Kind {
    /// The name used in logs, dead-letter headers and the `reason` label.
    fn label(self) -> &'static str {
        match self {
            Self::Deserialization => DLQ_REASONS[0],
            Self::Processing => DLQ_REASONS[1],
            Self::Production => DLQ_REASONS[2],
        }
    }
}

/// What failed, ready for its handler.
pub(crate) struct Failure {
    kind: Kind,
    node: String,
    error: StreamsError,
}

impl Failure {
    /// The error the task fails with.
    pub fn into_error(self) -> StreamsError {
        self.error
    }
}

impl TaskShared {
    /// Forgets the failures of the previous call into the graph.
    pub fn reset_failure(&self) {
        self.failed_node.set(None);
        self.fault.borrow_mut().take();
    }
}

impl Task {
    /// The failure of the call into the graph that returned `error`, on `record` (topic,
    /// partition, offset): a recorded fault wins over the error; `None` when neither.
    pub(super) fn failure(
        &self,
        error: Option<ProcessorError>,
        record: Option<(String, i32, i64)>,
    ) -> Option<Failure> {
        let name = |node: Option<usize>| {
            node.and_then(|i| self.graph.meta.get(i))
                .map(|m| m.name.clone())
                .unwrap_or_default()
        };
        let origin = |node: &str| {
            Box::new(ErrorOrigin {
                node: node.to_owned(),
                record: record.clone(),
            })
        };
        match self.shared.fault.borrow_mut().take() {
            Some(Fault::Deserialize { node, what, source }) => {
                let node = name(Some(node));
                Some(Failure {
                    kind: Kind::Deserialization,
                    error: StreamsError::Deserialization {
                        origin: origin(&node),
                        what,
                        source,
                    },
                    node,
                })
            }
            Some(Fault::Produce {
                node,
                topic,
                message,
                retriable,
            }) => {
                let node = name(Some(node));
                Some(Failure {
                    kind: Kind::Production,
                    error: StreamsError::Production {
                        origin: origin(&node),
                        topic,
                        message,
                        retriable,
                    },
                    node,
                })
            }
            None => error.map(|source| {
                let node = name(self.shared.failed_node.get());
                Failure {
                    kind: Kind::Processing,
                    error: StreamsError::Processing {
                        origin: origin(&node),
                        source,
                    },
                    node,
                }
            }),
        }
    }

    /// Hands the failure of `raw` to its handler: fail, skip, or dead-letter the record.
    pub(super) fn handle_failure(
        &mut self,
        failure: Failure,
        raw: Option<RawRecord>,
    ) -> Result<(), StreamsError> {
        let Failure { kind, node, error } = failure;
        if error.corrupt_store().is_some() || error.changelog_failure().is_some() {
            // The store is at fault, not the record: never skipped or dead-lettered. A
            // corrupt store is rebuilt and the record processed again; a refused changelog
            // write fails the task (or, under exactly-once, aborts its transaction), since
            // a skip would leave the store ahead of its changelog.
            return Err(error);
        }
        let handling = match kind {
            Kind::Deserialization => self.policy.deserialization,
            Kind::Processing => self.policy.processing,
            Kind::Production => self.policy.production,
        };
        let label = kind.label();
        match handling {
            ErrorHandling::LogAndFail => Err(error),
            ErrorHandling::LogAndContinue => {
                tracing::warn!(task = %self.id(), error = %error, "skipping record after {label} error");
                self.counters.dropped += 1;
                Ok(())
            }
            ErrorHandling::DeadLetterQueue => {
                let (Some(topic), Some(raw)) = (self.policy.dead_letter_topic.as_deref(), raw.as_ref())
                else {
                    return Err(error);
                };
                tracing::warn!(task = %self.id(), error = %error, dlq = topic, "dead-lettering record after {label} error");
                let record = dead_letter(topic, raw, label, &node, &error.to_string());
                self.shared
                    .collector
                    .borrow_mut()
                    .send(record.as_output_ref())
                    .map_err(|e| StreamsError::Production {
                        origin: Box::new(ErrorOrigin {
                            node,
                            record: Some((raw.topic.to_string(), raw.partition, raw.offset)),
                        }),
                        topic: topic.to_owned(),
                        message: e.message,
                        retriable: e.retriable,
                    })?;
                self.counters.dead_lettered += 1;
                if let Some(i) = DLQ_REASONS.iter().position(|r| *r == label) {
                    self.counters.dead_lettered_by[i] += 1;
                }
                Ok(())
            }
        }
    }

    /// The error of a call outside record processing (init, punctuate, close) that
    /// returned `result`, if it failed or recorded a fault.
    pub(super) fn call_error(&self, result: Result<(), ProcessorError>) -> Result<(), StreamsError> {
        match self.failure(result.err(), None) {
            Some(f) => Err(f.into_error()),
            None => Ok(()),
        }
    }
}
