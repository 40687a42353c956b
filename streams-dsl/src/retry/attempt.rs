//! One attempt, the same at every stage: decode the record, call the handler, and on a
//! failure forward the record's original bytes down the ladder.
//!
//! Invariants: the key and value bytes leave exactly as they came (only the headers
//! change, as [`moved_headers`] says); a retriable failure at the last stage, or a fatal
//! one anywhere, goes to the dead-letter sink, any other failure to the next stage's sink
//! with a due time of the task's wall-clock time plus that stage's delay; the listener hears
//! of an attempt only after its record was forwarded.

use std::sync::Arc;
use streams_core::Nulls;

use streams_core::serdes::{BytesSerde, NullableSerde, Serde};
use streams_core::{Headers, ProcessResult, ProcessorContext, Record, RecordMetadata};

use super::handler::{Attempt, RetryError, RetryHandler};
use super::headers::{
    HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, failed_attempts, moved_headers, original_position,
};
use super::outcome::{Outcome, OutcomeEvent, RetryListener};

/// A key or value as bytes, `None` for Kafka's null.
pub(super) type Raw = Option<Vec<u8>>;

/// The serde of the ladder's topics: bytes as they are, null kept as null.
pub(super) type RawSerde = NullableSerde<BytesSerde>;

/// The serde of the ladder's topics.
pub(super) fn raw_serde() -> RawSerde {
    NullableSerde(BytesSerde)
}

/// The context of a stage's processor: it forwards records in bytes.
pub(super) type RawContext<'a> = ProcessorContext<'a, Raw, Raw>;

/// Where a stage sends the records that fail retriably.
#[derive(Debug, Clone)]
pub(super) struct NextStage {
    /// The sink writing the next retry topic.
    pub sink: String,
    /// The next retry topic.
    pub topic: String,
    /// Its delay in ms.
    pub delay_ms: i64,
}

/// A record read for an attempt.
pub(super) struct ReadRecord {
    pub key: Raw,
    pub value: Raw,
    pub timestamp: i64,
    pub headers: Headers,
    /// Where it was read.
    pub from: RecordMetadata,
}

/// One stage of the ladder, shared by its tasks' processors.
pub(super) struct Stage<KS: Serde, VS: Serde> {
    /// 0 for the main topic, `i` for retry topic `i`.
    pub index: usize,
    /// The topic it reads.
    pub topic: String,
    /// Where retriable failures go; `None` at the last stage.
    pub next: Option<NextStage>,
    /// The sink writing the dead-letter topic.
    pub dead_letter_sink: String,
    pub key_serde: KS,
    pub value_serde: VS,
    pub handler: Arc<dyn RetryHandler<KS::Target, VS::Target>>,
    pub listener: Option<RetryListener>,
}

impl<KS: Serde, VS: Serde> Stage<KS, VS> {
    /// The record through the ladder's serdes; an undecodable key or value is fatal.
    fn decode(&self, read: &ReadRecord) -> Result<Record<KS::Target, VS::Target>, RetryError> {
        let key = self
            .key_serde
            .deserialize_nullable(read.key.as_deref())
            .map_err(|e| RetryError::Fatal(format!("undecodable key: {e}")))?;
        let value = self
            .value_serde
            .deserialize_nullable(read.value.as_deref())
            .map_err(|e| RetryError::Fatal(format!("undecodable value: {e}")))?;
        Ok(Record {
            key,
            value,
            timestamp: read.timestamp,
            headers: read.headers.clone(),
            nulls: Nulls::NONE,
        })
    }

    /// Attempts `read` and forwards it down the ladder when the attempt fails.
    pub fn attempt(&self, ctx: &mut RawContext<'_>, read: ReadRecord) -> ProcessResult {
        let number = failed_attempts(&read.headers).saturating_add(1);
        let original = original_position(&read.headers, &read.from);
        let result = self.decode(&read).and_then(|record| {
            self.handler.handle(&Attempt {
                record: &record,
                number,
                stage: self.index,
                read_from: &read.from,
                original: &original,
            })
        });
        let error = match result {
            Ok(()) => {
                self.report(&read, number, Outcome::Succeeded, None);
                return Ok(());
            }
            Err(error) => error,
        };
        let next = match &error {
            RetryError::Retriable(_) => self.next.as_ref(),
            RetryError::Fatal(_) => None,
        };
        let message = error.to_string();
        let (sink, headers, outcome) = match next {
            Some(next) => {
                let due = ctx.wall_clock_time().saturating_add(next.delay_ms);
                let headers = moved_headers(
                    &read.headers,
                    &read.from,
                    &[
                        (HEADER_ATTEMPT, number.to_string()),
                        (HEADER_NEXT_AT, due.to_string()),
                        (HEADER_LAST_ERROR, message),
                    ],
                );
                let outcome = Outcome::Retrying {
                    topic: next.topic.clone(),
                    due_at_ms: due,
                };
                (next.sink.as_str(), headers, outcome)
            }
            None => {
                let headers = moved_headers(
                    &read.headers,
                    &read.from,
                    &[(HEADER_ATTEMPT, number.to_string()), (HEADER_LAST_ERROR, message)],
                );
                let outcome = Outcome::DeadLettered {
                    fatal: error.is_fatal(),
                };
                (self.dead_letter_sink.as_str(), headers, outcome)
            }
        };
        ctx.forward_to(
            sink,
            Record {
                key: read.key.clone(),
                value: read.value.clone(),
                timestamp: read.timestamp,
                headers,
                nulls: Nulls::NONE,
            },
        )?;
        self.report(&read, number, outcome, Some(&error));
        Ok(())
    }

    /// Tells the listener, if any.
    pub fn report(&self, read: &ReadRecord, attempt: u32, outcome: Outcome, error: Option<&RetryError>) {
        if let Some(listener) = &self.listener {
            listener(&OutcomeEvent {
                stage: self.index,
                read_from: &read.from,
                attempt,
                key: read.key.as_deref(),
                value: read.value.as_deref(),
                headers: &read.headers,
                outcome,
                error,
            });
        }
    }
}
