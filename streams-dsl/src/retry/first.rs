//! The main topic's stage: every record is attempted as soon as it is processed.
//!
//! Invariants: nothing waits here and nothing is stored: a record is attempted once per
//! processing (again only if it is processed again after a crash or a rebalance, before
//! its offset was committed); its outcome (the forward to retry topic 1 or the
//! dead-letter topic) commits with its input offset, in one transaction under
//! exactly-once.

use std::sync::Arc;

use streams_core::serdes::Serde;
use streams_core::{ProcessResult, Processor, Record, RecordMetadata};

use super::attempt::{Raw, RawContext, ReadRecord, Stage};

/// Attempts each record of the main topic at once.
pub(super) struct FirstAttempt<KS: Serde, VS: Serde> {
    pub stage: Arc<Stage<KS, VS>>,
}

impl<KS: Serde, VS: Serde> Processor<Raw, Raw, Raw, Raw> for FirstAttempt<KS, VS> {
    fn process(&mut self, ctx: &mut RawContext<'_>, r: Record<Raw, Raw>) -> ProcessResult {
        // Processing always has a record's metadata; only punctuators lack it.
        let from = ctx.record_metadata().unwrap_or_else(|| RecordMetadata {
            topic: self.stage.topic.clone(),
            partition: -1,
            offset: -1,
        });
        self.stage.attempt(
            ctx,
            ReadRecord {
                key: r.key,
                value: r.value,
                timestamp: r.timestamp,
                headers: r.headers,
                from,
            },
        )
    }
}
