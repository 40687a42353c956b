//! The aggregation over [`TimeWindows`] (Kafka Streams' `KStreamWindowAggregate`).
//!
//! For each record: every window holding its timestamp that is still open
//! (`end > observed - grace`) folds the value in and takes the larger of its timestamp and
//! the record's; closed windows drop the record. With final results only, the windows
//! that closed since the last emission (`start` in `(last_close - size, close - size]`,
//! never below 0) are then forwarded, once. With old values on, an update carries the
//! window's aggregate before it.

use streams_core::{ProcessResult, Processor, Record};

use crate::change::Change;
use crate::nulls::{Skip, drop_record};
use crate::processors::UpdateFn;
use crate::windowed::common::{Ctx, WindowCore};
use streams_state::ValueAndTimestamp;

use crate::windowed::serde::Windowed;
use crate::windowed::windows::TimeWindows;

pub(crate) struct TimeWindowAggregate<K: 'static, V, A: 'static> {
    pub windows: TimeWindows,
    pub update: UpdateFn<K, V, A>,
    pub core: WindowCore<K, A>,
    /// A reduce. Kafka Streams' reduce starts a window from a null aggregate and takes the
    /// first value as it: a null first value leaves the window empty, and its update is a
    /// tombstone.
    pub reduce: bool,
}

impl<K, V, A> Processor<K, V, Windowed<K>, Change<A>> for TimeWindowAggregate<K, V, A>
where
    K: Clone + 'static,
    V: Clone + 'static,
    A: Clone + 'static,
{
    fn process(&mut self, ctx: Ctx<'_, '_, K, A>, r: Record<K, V>) -> ProcessResult {
        let core = &mut self.core;
        let Some(close) = core.admit(ctx, &r, Skip::NullKey, self.windows.grace_ms) else {
            return Ok(());
        };
        for start in self.windows.window_starts(r.timestamp) {
            let key = core.windowed(&r.key, start);
            if key.end <= close {
                // Closed: the record is late for this window (counted per window, as
                // Kafka Streams does).
                drop_record(ctx, "its window closed");
                continue;
            }
            let old = core.get(&r.key, start)?;
            if self.reduce && r.nulls.value && old.is_none() {
                core.put_none(&r.key, start)?;
                // The window stays empty; its update is a tombstone.
                let change = Change { new: None, old: None };
                core.forward_change(ctx, key, change, r.timestamp, &r.headers)?;
                continue;
            }
            let timestamp = old.as_ref().map_or(r.timestamp, |o| o.timestamp.max(r.timestamp));
            let old = old.map(|o| o.value);
            let value = (self.update)(&r.key, r.value.clone(), old.clone());
            let new = ValueAndTimestamp { value, timestamp };
            core.put(&r.key, start, &new)?;
            core.forward_update(ctx, key, new, old, &r.headers)?;
        }
        let Some(last) = core.emit_due(ctx, close) else {
            return Ok(());
        };
        let size = self.windows.size_ms;
        let upper = close.saturating_sub(size);
        if upper < 0 {
            return Ok(()); // no window closed yet
        }
        let lower = match last {
            None => 0,
            Some(last) => last.saturating_sub(size).max(0) + 1,
        };
        // Kafka skips the fetch (and keeps the last close time) when the windows holding
        // both ends of the range are the same: no window closed in between.
        if last.is_some() && self.windows.window_starts(upper) == self.windows.window_starts(lower - 1) {
            return Ok(());
        }
        core.emit_final(ctx, &r.headers, (lower, upper), close)
    }

    fn flush(&mut self, ctx: Ctx<'_, '_, K, A>) -> ProcessResult {
        self.core.flush(ctx)
    }
}
