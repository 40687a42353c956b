//! A retry topic's stage: records wait in a changelogged store until they are due; a
//! wall-clock punctuator attempts the due ones.
//!
//! Invariants:
//! - processing a record only stores it (key [`PendingKey`]: its due time from
//!   [`HEADER_NEXT_AT`](super::HEADER_NEXT_AT), or the task's wall-clock time when the
//!   header is absent or unreadable, then its partition and offset); the store's changelog
//!   commits with the input offset, so a committed record is in the store, restored with
//!   it wherever the task moves;
//! - a punctuation at wall-clock time `now` attempts records whose due time is at most
//!   `now`, earliest first, never one that is not due; it attempts at most
//!   `max_records_per_punctuation`, and no new one once `max_punctuation_time` has
//!   passed; the rest wait for the next punctuation;
//! - a record is deleted from the store after its attempt's outcome was forwarded, so the
//!   deletion and the forward commit together; a crash in between repeats the attempt.

use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use streams_core::serdes::Serde;
use streams_core::{KvStore, ProcessResult, Processor, PunctuationType, Record, RecordMetadata, ScheduleId};

use super::attempt::{Raw, RawContext, ReadRecord, Stage};
use super::headers::{due_at_ms, failed_attempts};
use super::outcome::Outcome;
use super::pending::{PendingKey, PendingKeySerde, PendingRecord, PendingRecordSerde};

/// A retry stage's store of waiting records.
pub(super) type PendingKv = KvStore<PendingKeySerde, PendingRecordSerde>;

/// How much one punctuation may do.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    pub every: Duration,
    pub max_records: usize,
    pub max_time: Duration,
}

/// Stores each record of a retry topic and attempts it once due.
pub(super) struct DelayedAttempt<KS: Serde, VS: Serde> {
    pub stage: Arc<Stage<KS, VS>>,
    pub store: PendingKv,
    pub bounds: Bounds,
}

impl<KS: Serde, VS: Serde> DelayedAttempt<KS, VS> {
    /// The records due at `now`, earliest first, at most `max_records` of them.
    fn due(&self, now: i64) -> Result<Vec<(PendingKey, PendingRecord)>, streams_core::state::StoreError> {
        let reader = self.store.read()?;
        let last = PendingKey::last_due_at(now);
        reader
            .range(Bound::Unbounded, Bound::Included(&last))?
            .take(self.bounds.max_records)
            .collect()
    }
}

impl<KS: Serde, VS: Serde> Processor<Raw, Raw, Raw, Raw> for DelayedAttempt<KS, VS> {
    fn init(&mut self, ctx: &mut RawContext<'_>) -> ProcessResult {
        ctx.schedule(self.bounds.every, PunctuationType::WallClock);
        Ok(())
    }

    fn process(&mut self, ctx: &mut RawContext<'_>, r: Record<Raw, Raw>) -> ProcessResult {
        let from = ctx.record_metadata().unwrap_or_else(|| RecordMetadata {
            topic: self.stage.topic.clone(),
            partition: -1,
            offset: -1,
        });
        let due = due_at_ms(&r.headers).unwrap_or_else(|| ctx.wall_clock_time());
        let key = PendingKey {
            due_at_ms: due,
            partition: from.partition,
            offset: from.offset,
        };
        let pending = PendingRecord {
            key: r.key,
            value: r.value,
            timestamp: r.timestamp,
            headers: r.headers,
        };
        self.store.put(&key, &pending)?;
        if self.stage.listener.is_some() {
            let attempt = failed_attempts(&pending.headers).saturating_add(1);
            let read = ReadRecord {
                key: pending.key,
                value: pending.value,
                timestamp: pending.timestamp,
                headers: pending.headers,
                from,
            };
            self.stage
                .report(&read, attempt, Outcome::Waiting { due_at_ms: due }, None);
        }
        Ok(())
    }

    fn punctuate(&mut self, ctx: &mut RawContext<'_>, _: ScheduleId, now: i64) -> ProcessResult {
        let started = Instant::now();
        for (key, pending) in self.due(now)? {
            let read = ReadRecord {
                key: pending.key,
                value: pending.value,
                timestamp: pending.timestamp,
                headers: pending.headers,
                from: RecordMetadata {
                    topic: self.stage.topic.clone(),
                    partition: key.partition,
                    offset: key.offset,
                },
            };
            self.stage.attempt(ctx, read)?;
            self.store.delete(&key)?;
            if started.elapsed() >= self.bounds.max_time {
                break;
            }
        }
        Ok(())
    }
}
