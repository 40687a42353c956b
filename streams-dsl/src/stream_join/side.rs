//! One side of a stream-stream join: the processor that joins a record of its stream with
//! the other stream's window store, keeps it in its own, and (left and outer joins) holds
//! it in the outer-join store until its window closes without a partner.
//!
//! Invariants:
//! - Both sides of one task share one [`Tracker`] (a value of the task, see
//!   `ProcessorContext::task_shared`): the join's stream time is the largest timestamp
//!   either side has seen, so windows close alike for both.
//! - A record is joined when it arrives with every partner the other store still retains,
//!   as in Kafka Streams: the partner's own window may have closed (and, in an outer join,
//!   the partner may have been emitted as unmatched), and so may the record's own (a late
//!   record: its store keeps it only while retained; unmatched in an outer join, it is
//!   emitted at once, as no partner can come for it any more).
//! - Unmatched records are emitted, oldest first, only by a record that is the stream
//!   time (one behind it emits nothing), and only once their window's end plus the grace
//!   period is behind it. A pass over the outer-join store notes the time of the last
//!   entry it read (Kafka Streams' `minTime`), and no pass runs until that entry's window
//!   could have closed: a closed entry can wait behind a later open one, as there.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use streams_core::Nulls;

use streams_core::{Headers, ProcessResult, Processor, ProcessorContext, Record, WindowStore};

use crate::dyn_serde::DynSerde;
use crate::nulls::{Skip, skipped};
use crate::processors::forward_joined;
use crate::stream_join::options::JoinWindows;
use crate::stream_join::outer::{OuterKey, OuterStore};

/// The join's observed stream time and the time that gates the next pass over the
/// outer-join store, shared by the two sides of one task.
#[derive(Debug)]
pub(crate) struct Tracker {
    stream_time: Cell<i64>,
    /// The time of the last entry the last pass read, or of an older entry added since
    /// (Kafka Streams' `minTime`); `i64::MIN` when unknown (after a restart), so the
    /// first pass runs.
    min_outer: Cell<i64>,
}

impl Tracker {
    pub(crate) fn new() -> Self {
        Self {
            stream_time: Cell::new(i64::MIN),
            min_outer: Cell::new(i64::MIN),
        }
    }

    /// Advances the stream time to `t` if later and returns it.
    fn advance(&self, t: i64) -> i64 {
        let now = self.stream_time.get().max(t);
        self.stream_time.set(now);
        now
    }
}

/// Joins a record of this side with a partner of the other.
pub(crate) type PairFn<K, VT, VO, VR> = Arc<dyn Fn(&K, &VT, &VO) -> VR + Send + Sync>;

/// The result for an unmatched left (`Some`, `None`) or right (`None`, `Some`) value;
/// `None` when the join emits nothing for it.
pub(crate) type UnmatchedFn<K, V1, V2, VR> =
    Arc<dyn Fn(&K, Option<&V1>, Option<&V2>) -> Option<VR> + Send + Sync>;

/// The outer-join store and how to emit what waits in it.
pub(crate) struct Outer<K: 'static, V1: 'static, V2: 'static, VR> {
    pub store: OuterStore<K>,
    pub unmatched: UnmatchedFn<K, V1, V2, VR>,
    pub left_serde: DynSerde<V1>,
    pub right_serde: DynSerde<V2>,
    /// Whether unmatched left records wait here (left and outer joins).
    pub left_outer: bool,
    /// Whether unmatched right records wait here (outer joins).
    pub right_outer: bool,
}

/// The processor of one side of a join; `VT` is this side's value type, `VO` the other's,
/// `V1`/`V2` the left and right value types.
pub(crate) struct JoinSide<K: 'static, VT: 'static, VO: 'static, V1: 'static, V2: 'static, VR> {
    /// Whether this is the left (this) stream's side.
    pub left: bool,
    pub windows: JoinWindows,
    pub this_store: WindowStore<DynSerde<K>, DynSerde<VT>>,
    pub other_store: WindowStore<DynSerde<K>, DynSerde<VO>>,
    /// Serializes this side's values into the outer-join store.
    pub this_serde: DynSerde<VT>,
    pub pair: PairFn<K, VT, VO, VR>,
    pub outer: Option<Outer<K, V1, V2, VR>>,
    pub tracker: Rc<Tracker>,
}

impl<K, VT, VO, V1, V2, VR> JoinSide<K, VT, VO, V1, V2, VR>
where
    K: Clone + 'static,
    VT: Clone + 'static,
    VO: Clone + 'static,
    VR: Clone + 'static,
{
    /// Whether unmatched records of side `left` wait in the outer-join store.
    fn is_outer(&self, left: bool) -> bool {
        self.outer
            .as_ref()
            .is_some_and(|o| if left { o.left_outer } else { o.right_outer })
    }

    /// Emits and removes every waiting record whose window is closed at `now`.
    fn emit_closed(
        &self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        now: i64,
        headers: &Headers,
    ) -> ProcessResult {
        let Some(outer) = &self.outer else {
            return Ok(());
        };
        // The soonest a waiting entry can close, over the sides that wait.
        let ahead = match (outer.left_outer, outer.right_outer) {
            (true, true) => self.windows.after_ms.min(self.windows.before_ms),
            (true, false) => self.windows.after_ms,
            _ => self.windows.before_ms,
        };
        let grace = self.windows.grace_ms;
        let open_from = |t: i64| t.saturating_add(ahead).saturating_add(grace) >= now;
        if open_from(self.tracker.min_outer.get()) {
            return Ok(());
        }
        // As Kafka Streams' pass over its outer-join store: entries in time order; an entry
        // whose window is still open marks its side open and is kept; the pass ends once
        // both sides are open (a left join never opens the right side: it reads to the
        // end). The tracked time becomes that of the last entry read, which is not always
        // the earliest kept: later passes wait for that one, as Kafka Streams' do.
        let mut due = Vec::new();
        let mut last_read = i64::MAX;
        let (mut left_open, mut right_open) = (false, false);
        {
            let reader = outer.store.read()?;
            for entry in reader.all()? {
                let (key, values) = entry?;
                last_read = key.time;
                if left_open && right_open {
                    break;
                }
                if !self.windows.closed(key.left, key.time, now) {
                    *(if key.left { &mut left_open } else { &mut right_open }) = true;
                    continue;
                }
                due.push((key, values));
            }
        }
        for (key, waiting) in due {
            for bytes in waiting.values {
                let value = if key.left {
                    let v = outer.left_serde.deserialize(&bytes)?;
                    (outer.unmatched)(&key.key, Some(&v), None)
                } else {
                    let v = outer.right_serde.deserialize(&bytes)?;
                    (outer.unmatched)(&key.key, None, Some(&v))
                };
                if let Some(value) = value {
                    ctx.forward(Record {
                        key: key.key.clone(),
                        value,
                        timestamp: key.time,
                        headers: headers.clone(),
                        nulls: Nulls::NONE,
                    })?;
                }
            }
            outer.store.delete(&key)?;
        }
        self.tracker.min_outer.set(last_read);
        Ok(())
    }

    /// Emits `r` (of a side whose unmatched records are emitted) as unmatched, now.
    fn emit_unmatched_now(&self, ctx: &mut ProcessorContext<'_, K, VR>, r: Record<K, VT>) -> ProcessResult {
        let Some(outer) = &self.outer else {
            return Ok(());
        };
        // `VT` is the left or the right value type: through bytes, as the waiting records go.
        let bytes = self.this_serde.serialize(&r.value)?;
        let value = if self.left {
            (outer.unmatched)(&r.key, Some(&outer.left_serde.deserialize(&bytes)?), None)
        } else {
            (outer.unmatched)(&r.key, None, Some(&outer.right_serde.deserialize(&bytes)?))
        };
        forward_joined(ctx, r, |_, _| value)
    }

    /// Adds `value` to the waiting records of its key at `time`.
    fn wait(&self, key: &K, value: &VT, time: i64) -> ProcessResult {
        let Some(outer) = &self.outer else {
            return Ok(());
        };
        let okey = OuterKey {
            time,
            left: self.left,
            key: key.clone(),
        };
        let mut waiting = outer.store.get(&okey)?.unwrap_or_default();
        waiting.left = self.left;
        waiting.values.push(self.this_serde.serialize(value)?);
        outer.store.put(&okey, &waiting)?;
        let min = self.tracker.min_outer.get().min(time);
        self.tracker.min_outer.set(min);
        Ok(())
    }
}

impl<K, VT, VO, V1, V2, VR> Processor<K, VT, K, VR> for JoinSide<K, VT, VO, V1, V2, VR>
where
    K: Clone + 'static,
    VT: Clone + 'static,
    VO: Clone + 'static,
    VR: Clone + 'static,
{
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K, VR>, r: Record<K, VT>) -> ProcessResult {
        let t = r.timestamp;
        let now = self.tracker.advance(t);
        if r.nulls.key && !r.nulls.value && self.is_outer(self.left) {
            // No partner can have a null key: unmatched at once (Kafka Streams' KIP-962).
            return self.emit_unmatched_now(ctx, r);
        }
        if skipped(ctx, &r, Skip::NullKeyOrValue) {
            return Ok(());
        }
        // Late (its own window closed already): still joined with what the other store
        // retains, as Kafka Streams does; unmatched, it can never be matched later.
        let late = self.windows.closed(self.left, t, now);
        if t == now {
            self.emit_closed(ctx, now, &r.headers)?;
        }
        let w = &self.windows;
        let (back, ahead) = if self.left {
            (w.before_ms, w.after_ms)
        } else {
            (w.after_ms, w.before_ms)
        };
        let partners: Vec<(i64, VO)> = {
            let reader = self.other_store.read()?;
            // Every partner the other store still holds, as in Kafka Streams: an in-time
            // record joins a partner whose own window closed, if the store retains it.
            let found = reader.fetch_range(&r.key, t.saturating_sub(back), t.saturating_add(ahead))?;
            found.collect::<Result<_, _>>()?
        };
        if let Some(outer) = self.outer.as_ref().filter(|_| self.is_outer(!self.left)) {
            let mut last = None;
            for (ts, _) in &partners {
                if last != Some(*ts) {
                    last = Some(*ts);
                    let okey = OuterKey {
                        time: *ts,
                        left: !self.left,
                        key: r.key.clone(),
                    };
                    if outer.store.get(&okey)?.is_some() {
                        outer.store.delete(&okey)?;
                    }
                }
            }
        }
        for (ts, other) in &partners {
            ctx.forward(Record {
                key: r.key.clone(),
                value: (self.pair)(&r.key, &r.value, other),
                timestamp: t.max(*ts),
                headers: r.headers.clone(),
                nulls: Nulls::NONE,
            })?;
        }
        // Kept while its store retains it (a put out of retention writes nothing).
        self.this_store.put(&r.key, Some(&r.value), t)?;
        if partners.is_empty() && self.is_outer(self.left) {
            if late {
                return self.emit_unmatched_now(ctx, r);
            }
            self.wait(&r.key, &r.value, t)?;
        }
        Ok(())
    }
}
