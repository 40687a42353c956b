//! The aggregation over [`SlidingWindows`] (Kafka Streams' `KStreamSlidingWindowAggregate`,
//! KIP-450), with its window-creation rules. With time difference `d`, a record at `t`:
//!
//! - is dropped when `t + d < observed - grace` (all its windows closed);
//! - with `t < d` ("early"), goes into the shared window `[0, d]` instead of a left window;
//! - otherwise updates every existing window holding it (`start` in `[t - d, t]`), and
//!   creates its left window `[t - d, t]` if missing, with the aggregate of the latest
//!   window that ends before `t` when the previous record is within `d` (else from the
//!   initializer);
//! - creates its right window `[t + 1, t + 1 + d]` if a later record falls in it, with the
//!   aggregate of the latest existing window holding `t` (before this record);
//! - creates the previous record's right window `[p + 1, p + 1 + d]` if missing and `t`
//!   falls in it.
//!
//! Windows are fetched from `t - 2d` to `t + 1`, latest start first, as Kafka does with a
//! reverse iterator (so updates are forwarded latest window first). A window takes updates
//! while `end >= observed - grace`.
//!
//! With old values on, an update carries the window's aggregate as last forwarded: for a
//! window in the store its stored aggregate; for a window the record creates (even from
//! another window's aggregate) none, unless the record already created it (the previous
//! record's right window is the record's left window when `p + 1 + d = t`, and both are
//! written, as in Kafka Streams).

use std::collections::HashSet;

use streams_core::{ProcessResult, Processor, ProcessorError, Record};

use crate::change::Change;
use crate::nulls::{Skip, drop_record};
use crate::processors::UpdateFn;
use crate::windowed::common::{Ctx, WindowCore};
use streams_state::ValueAndTimestamp;

use crate::windowed::serde::Windowed;
use crate::windowed::windows::SlidingWindows;

pub(crate) struct SlidingWindowAggregate<K: 'static, V, A: 'static> {
    pub windows: SlidingWindows,
    pub update: UpdateFn<K, V, A>,
    pub core: WindowCore<K, A>,
}

/// A window's aggregate (`None`: the initializer's), its largest record timestamp, and
/// its aggregate as last forwarded (`None`: never).
type Agg<A> = (Option<A>, i64, Option<A>);

impl<K, V, A> SlidingWindowAggregate<K, V, A>
where
    K: Clone + 'static,
    V: Clone + 'static,
    A: Clone + 'static,
{
    fn diff(&self) -> i64 {
        self.windows.diff_ms
    }

    /// Folds the record into the window at `start` holding `agg`, if the window is open;
    /// returns the aggregate written.
    fn update_window(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        start: i64,
        agg: Agg<A>,
        r: &Record<K, V>,
        close: i64,
    ) -> Result<Option<A>, ProcessorError> {
        let key = self.core.windowed(&r.key, start);
        if key.end < close {
            return Ok(None); // closed: the record is late for this window
        }
        let (old, old_ts, before) = agg;
        let timestamp = if old.is_none() {
            r.timestamp
        } else {
            old_ts.max(r.timestamp)
        };
        let value = (self.update)(&r.key, r.value.clone(), old);
        let new = ValueAndTimestamp { value, timestamp };
        self.core.put(&r.key, start, &new)?;
        let written = self.core.send_old.then(|| new.value.clone());
        self.core.forward_update(ctx, key, new, before, &r.headers)?;
        Ok(written)
    }

    /// The [`Agg`] of a window that was in the store holding `agg`: as last forwarded,
    /// its stored aggregate (when old values are on).
    fn stored(&self, agg: ValueAndTimestamp<A>) -> Agg<A> {
        let before = self.core.send_old.then(|| agg.value.clone());
        (Some(agg.value), agg.timestamp, before)
    }

    /// Creates the record's right window `[t + 1, t + 1 + d]` with `agg` as it is.
    fn create_right_window(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        r: &Record<K, V>,
        agg: ValueAndTimestamp<A>,
    ) -> ProcessResult {
        let start = r.timestamp.saturating_add(1);
        let key = self.core.windowed(&r.key, start);
        self.core.put(&r.key, start, &agg)?;
        self.core.forward_update(ctx, key, agg, None, &r.headers)
    }

    /// A record with `d <= t`.
    fn process_regular(&self, ctx: Ctx<'_, '_, K, A>, r: &Record<K, V>, close: i64) -> ProcessResult {
        let t = r.timestamp;
        let d = self.diff();
        let mut starts = HashSet::new();
        let mut left_agg: Option<ValueAndTimestamp<A>> = None;
        let mut right_agg: Option<ValueAndTimestamp<A>> = None;
        let (mut left_exists, mut right_exists) = (false, false);
        let mut previous: Option<i64> = None;
        let mut found = self
            .core
            .fetch(&r.key, t.saturating_sub(d.saturating_mul(2)).max(0), t + 1)?;
        found.reverse();
        for (start, agg) in found {
            starts.insert(start);
            let end = start.saturating_add(d);
            let max_ts = agg.timestamp;
            if start == t + 1 {
                right_exists = true;
            } else if end > t {
                if right_agg.is_none() {
                    right_agg = Some(agg.clone());
                }
                self.update_window(ctx, start, self.stored(agg), r, close)?;
            } else if end == t {
                left_exists = true;
                self.update_window(ctx, start, self.stored(agg), r, close)?;
                if max_ts < t {
                    previous = Some(max_ts);
                } else {
                    return Ok(()); // a record at `t` came before: every window exists
                }
            } else {
                left_agg = Some(agg);
                previous = Some(max_ts);
                break;
            }
        }
        // The previous record's right window, when created, and its aggregate.
        let mut p_right_written = None;
        if let Some(p) = previous {
            let p_right = p.saturating_add(1);
            if !starts.contains(&p_right) && p_right.saturating_add(d) >= t {
                let written = self.update_window(ctx, p_right, (None, t, None), r, close)?;
                p_right_written = written.map(|w| (p_right, w));
            }
        }
        if !left_exists {
            let from_previous = previous.is_some_and(|p| t - d <= p);
            let agg = match left_agg {
                Some(l) if from_previous => Some(l.value),
                _ => None,
            };
            let before = p_right_written.and_then(|(s, w)| (s == t - d).then_some(w));
            self.update_window(ctx, t - d, (agg, t, before), r, close)?;
        }
        match right_agg {
            Some(agg) if !right_exists && agg.timestamp > t => self.create_right_window(ctx, r, agg),
            _ => Ok(()),
        }
    }

    /// A record with `0 <= t < d`: its left window would start before 0, so it goes into
    /// the window `[0, d]` that holds every such record.
    fn process_early(&self, ctx: Ctx<'_, '_, K, A>, r: &Record<K, V>, close: i64) -> ProcessResult {
        let t = r.timestamp;
        let mut combined: Option<ValueAndTimestamp<A>> = None;
        let mut right_agg: Option<ValueAndTimestamp<A>> = None;
        let mut right_exists = false;
        let mut starts = HashSet::new();
        let mut previous = None;
        for (start, agg) in self.core.fetch(&r.key, 0, t + 1)? {
            starts.insert(start);
            if start == 0 {
                if agg.timestamp < t {
                    previous = Some(agg.timestamp);
                }
                combined = Some(agg);
            } else if start <= t {
                right_agg = Some(agg.clone());
                self.update_window(ctx, start, self.stored(agg), r, close)?;
            } else if start == t + 1 {
                right_exists = true;
            }
        }
        if right_agg.is_none() {
            right_agg = combined.clone().filter(|c| c.timestamp > t);
        }
        if let Some(agg) = right_agg.filter(|a| !right_exists && a.timestamp > t) {
            self.create_right_window(ctx, r, agg)?;
        }
        if let Some(p) = previous
            && !starts.contains(&(p + 1))
        {
            self.update_window(ctx, p + 1, (None, t, None), r, close)?;
        }
        let agg = combined.map_or((None, t, None), |c| self.stored(c));
        self.update_window(ctx, 0, agg, r, close)?;
        Ok(())
    }
}

impl<K, V, A> Processor<K, V, Windowed<K>, Change<A>> for SlidingWindowAggregate<K, V, A>
where
    K: Clone + 'static,
    V: Clone + 'static,
    A: Clone + 'static,
{
    fn process(&mut self, ctx: Ctx<'_, '_, K, A>, r: Record<K, V>) -> ProcessResult {
        let (d, grace) = (self.diff(), self.windows.grace_ms);
        let Some(close) = self.core.admit(ctx, &r, Skip::NullKeyOrValue, grace) else {
            return Ok(());
        };
        if r.timestamp.saturating_add(d) < close {
            drop_record(ctx, "every window holding it closed");
            return Ok(());
        }
        if r.timestamp < d {
            // As Kafka: an early record does not trigger the emission of final results.
            return self.process_early(ctx, &r, close);
        }
        self.process_regular(ctx, &r, close)?;
        let Some(last) = self.core.emit_due(ctx, close) else {
            return Ok(());
        };
        let upper = close.saturating_sub(d).saturating_sub(1);
        if upper < 0 {
            return Ok(());
        }
        let lower = last.map_or(0, |last| last.saturating_sub(d).max(0));
        self.core.emit_final(ctx, &r.headers, (lower, upper), close)
    }

    fn flush(&mut self, ctx: Ctx<'_, '_, K, A>) -> ProcessResult {
        self.core.flush(ctx)
    }
}
