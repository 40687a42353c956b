//! What the time-window and sliding-window aggregations share: the window store handle,
//! the observed stream time, and emitting final results on window close.
//!
//! Invariants: the aggregates live in a window store (`streams_state::window`) of
//! [`ValueAndTimestamp`]s keyed by record key and window start, whose retention drops old
//! windows by segment: a window that started a retention or more before the latest window
//! written is no longer read, as in Kafka Streams. Final results are read from the store
//! between the last emitted bound and the new one only, and the emitted close time is
//! put in the task's processor metadata before the call returns, so it is committed with
//! the input offsets of the forwarded results.
//!
//! Updates are forwarded as [`Change`]s: with old values on (the table is re-grouped
//! downstream), an update of a window that was in the store carries the window's aggregate
//! before the update; a new window's update and a final result carry none.

use streams_core::Nulls;
use streams_core::state::StoreError;
use streams_core::{Headers, ProcessResult, ProcessorContext, Record, WindowStoreRef};
use streams_state::{ValueAndTimestamp, ValueAndTimestampSerde, WindowStore};

use crate::cache_forward::{CacheForwarding, flush_cached};
use crate::change::{Change, OldValues};
use crate::dyn_serde::DynSerde;
use crate::nulls::{Skip, skipped};
use crate::shared::Shared;
use crate::windowed::serde::Windowed;

/// The window store of an aggregation: the key's serde, timestamped aggregates.
pub(crate) type AggStore<K, A> = WindowStore<DynSerde<K>, ValueAndTimestampSerde<DynSerde<A>>>;

/// The handle of an aggregation's window store while the topology is built.
pub(crate) type AggStoreRef<K, A> = WindowStoreRef<DynSerde<K>, ValueAndTimestampSerde<DynSerde<A>>>;

/// The context of a windowed aggregation, which forwards changes of windowed keys.
pub(crate) type Ctx<'a, 'b, K, A> = &'a mut ProcessorContext<'b, Windowed<K>, Change<A>>;

/// Kafka Streams' `NO_TIMESTAMP`: the observed stream time before any record.
pub(crate) const NO_TIMESTAMP: i64 = -1;

/// Admits a record to a windowed aggregation whose observed stream time is `observed`:
/// `None` when no window takes it (a negative timestamp, which the engine drops before, or
/// a null `skip` drops, counted as dropped); else advances `observed` to its timestamp and
/// returns the close time, `observed - grace_ms`.
pub(crate) fn admit<K, V, KO, VO>(
    ctx: &ProcessorContext<'_, KO, VO>,
    r: &Record<K, V>,
    skip: Skip,
    observed: &mut i64,
    grace_ms: i64,
) -> Option<i64> {
    if r.timestamp < 0 || skipped(ctx, r, skip) {
        return None;
    }
    *observed = (*observed).max(r.timestamp);
    Some(observed.saturating_sub(grace_ms))
}

/// Connects the aggregation `node` to its `store` and records the grace of its windows.
pub(crate) fn connect_stores(shared: &Shared, node: &str, store: &str, grace_ms: i64) {
    shared.with(|t| {
        t.connect_processor_and_state_stores(node, [store]);
    });
    shared.set_window_grace(node, grace_ms);
}

/// Final-result emission state (of time, sliding and session windows alike): the close
/// time up to which final results were emitted, kept in the task's processor metadata
/// under the aggregation's store name, as Kafka Streams keeps it. It is committed with the
/// input offsets, so a task created elsewhere (or by Kafka Streams) goes on from there.
pub(crate) struct EmitFinal {
    /// The aggregation's store name: the metadata key.
    key: String,
}

impl EmitFinal {
    /// The emission state of the aggregation whose store is `store`.
    pub fn new(store: &str) -> Self {
        Self {
            key: store.to_owned(),
        }
    }

    /// The close time final results were emitted up to, if any.
    pub fn last_close<KO, VO>(&self, ctx: &ProcessorContext<'_, KO, VO>) -> Option<i64> {
        ctx.processor_metadata(&self.key)
    }

    /// Records that final results were emitted up to `close`.
    pub fn emitted<KO, VO>(&self, ctx: &mut ProcessorContext<'_, KO, VO>, close: i64) {
        ctx.put_processor_metadata(&self.key, close);
    }
}

/// What a task needs to open a [`WindowCore`].
pub(crate) struct CoreParams<K, A> {
    pub store: AggStoreRef<K, A>,
    /// The store name, when only final results are forwarded (see [`EmitFinal`]).
    pub emit_final: Option<String>,
    /// The old-value switch of the aggregation's table.
    pub old_values: std::sync::Arc<OldValues>,
}

impl<K, A> Clone for CoreParams<K, A> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            emit_final: self.emit_final.clone(),
            old_values: self.old_values.clone(),
        }
    }
}

impl<K: 'static, A: 'static> CoreParams<K, A> {
    /// Opens the stores (in a processor's supplier).
    pub fn open(
        &self,
        ctx: &ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<WindowCore<K, A>, StoreError> {
        let emit = self.emit_final.as_deref().map(EmitFinal::new);
        let store = ctx.store(&self.store)?;
        let send_old = self.old_values.is_on();
        // Final results only: nothing is forwarded at updates, cached or not.
        let forwarding = match emit {
            Some(_) => None,
            None => CacheForwarding::new(store.forward_on_flush(send_old)?, send_old),
        };
        Ok(WindowCore {
            store,
            observed: NO_TIMESTAMP,
            emit,
            send_old,
            forwarding,
        })
    }
}

/// The state of one windowed aggregation processor.
pub(crate) struct WindowCore<K: 'static, A: 'static> {
    pub store: AggStore<K, A>,
    /// The largest timestamp processed (Kafka's `observedStreamTime`).
    pub observed: i64,
    /// Set when only final results are forwarded.
    pub emit: Option<EmitFinal>,
    /// Forward old values.
    pub send_old: bool,
    /// Set when the store is cached: updates go out when the cache writes them down.
    pub forwarding: Option<CacheForwarding>,
}

impl<K: Clone + 'static, A: Clone + 'static> WindowCore<K, A> {
    /// Admits a record to this aggregation, advancing its observed stream time (see
    /// [`admit`]): the close time, or `None` when no window takes the record.
    pub fn admit<V, KO, VO>(
        &mut self,
        ctx: &ProcessorContext<'_, KO, VO>,
        r: &Record<K, V>,
        skip: Skip,
        grace_ms: i64,
    ) -> Option<i64> {
        admit(ctx, r, skip, &mut self.observed, grace_ms)
    }

    /// The windowed key of `key` in the window starting at `start`.
    pub fn windowed(&self, key: &K, start: i64) -> Windowed<K> {
        Windowed {
            key: key.clone(),
            start,
            end: start.saturating_add(self.store.window_size()),
        }
    }

    /// The aggregate of `key`'s window starting at `start`, if retained.
    pub fn get(&self, key: &K, start: i64) -> Result<Option<ValueAndTimestamp<A>>, StoreError> {
        self.store.fetch(key, start)
    }

    /// Writes the aggregate of `key`'s window starting at `start`.
    pub fn put(&self, key: &K, start: i64, value: &ValueAndTimestamp<A>) -> Result<(), StoreError> {
        self.store.put(key, Some(value), start)
    }

    /// Writes that `key`'s window starting at `start` has no aggregate (a delete, which
    /// moves the store's time as any write does, as in Kafka Streams).
    pub fn put_none(&self, key: &K, start: i64) -> Result<(), StoreError> {
        self.store.put(key, None, start)
    }

    /// The retained windows of `key` that start in `[from, to]`, by ascending start.
    pub fn fetch(&self, key: &K, from: i64, to: i64) -> Result<Vec<(i64, ValueAndTimestamp<A>)>, StoreError> {
        let reader = self.store.read()?;
        reader.fetch_range(key, from, to)?.collect()
    }

    /// Forwards an update of a window (unless only final results are forwarded), with
    /// `old`, the window's stored aggregate before the update, when old values are on.
    pub fn forward_update(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        key: Windowed<K>,
        value: ValueAndTimestamp<A>,
        old: Option<A>,
        headers: &Headers,
    ) -> ProcessResult {
        let change = Change {
            new: Some(value.value),
            old: old.filter(|_| self.send_old),
        };
        self.forward_change(ctx, key, change, value.timestamp, headers)
    }

    /// Forwards `change` of the window `key` at `timestamp` (unless only final results are
    /// forwarded).
    pub fn forward_change(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        key: Windowed<K>,
        change: Change<A>,
        timestamp: i64,
        headers: &Headers,
    ) -> ProcessResult {
        if self.emit.is_some() {
            return Ok(());
        }
        if let Some(f) = &self.forwarding {
            // Written already: it goes out when the cache writes it down.
            return f.forward(ctx, &self.store);
        }
        ctx.forward(change.into_record(key, timestamp, headers.clone()))
    }

    /// At a task flush: writes the store's cache down and forwards what it held.
    pub fn flush(&self, ctx: Ctx<'_, '_, K, A>) -> ProcessResult {
        flush_cached(self.forwarding.as_ref(), ctx, &self.store)
    }

    /// The last emitted close time when final results are due at `close` (the close time
    /// moved on): `Some(None)` before any emission, `None` when nothing is due.
    pub fn emit_due(
        &self,
        ctx: &ProcessorContext<'_, Windowed<K>, Change<A>>,
        close: i64,
    ) -> Option<Option<i64>> {
        match self.emit.as_ref()?.last_close(ctx) {
            Some(last) if last >= close => None,
            last => Some(last),
        }
    }

    /// Forwards the final result of every retained window starting in `[lower, upper]`, by
    /// window start, then key bytes (the order of Kafka Streams' time-ordered window store
    /// of emit-final aggregations), with the triggering record's headers, and records
    /// `close` as emitted.
    pub fn emit_final(
        &mut self,
        ctx: Ctx<'_, '_, K, A>,
        headers: &Headers,
        (lower, upper): (i64, i64),
        close: i64,
    ) -> ProcessResult {
        let mut due: Vec<(Windowed<K>, ValueAndTimestamp<A>)> = {
            let reader = self.store.read()?;
            reader.fetch_all(lower, upper)?.collect::<Result<_, _>>()?
        };
        // Kafka Streams keeps emit-final aggregations in a time-ordered window store: final
        // results go out by window start, then key bytes. The store yields windows by
        // segment, then key bytes, then start, so equal starts (one segment) are already in
        // key-byte order and a stable sort by start gives Kafka's order.
        due.sort_by_key(|(w, _)| w.start);
        for (key, v) in due {
            ctx.forward(Record {
                key,
                value: Change {
                    new: Some(v.value),
                    old: None,
                },
                timestamp: v.timestamp,
                headers: headers.clone(),
                nulls: Nulls::NONE,
            })?;
        }
        if let Some(emit) = &self.emit {
            emit.emitted(ctx, close);
        }
        Ok(())
    }
}
