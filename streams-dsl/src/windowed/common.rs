//! What the time-window and sliding-window aggregations share: the window store handle,
//! the observed stream time, and emitting final results on window close.
//!
//! Invariants: the aggregates live in a window store (`streams_state::window`) of
//! [`ValueAndTimestamp`]s keyed by record key and window start, whose retention drops old
//! windows by segment: a window that started a retention or more before the latest window
//! written is no longer read, as in Kafka Streams. Final results are read from the store
//! between the last emitted bound and the new one only, and the emitted close time is
//! written to the `<store>-emit-time` store before the call returns, so it is committed
//! with the forwarded results.
//!
//! Updates are forwarded as [`Change`]s: with old values on (the table is re-grouped
//! downstream), an update of a window that was in the store carries the window's aggregate
//! before the update; a new window's update and a final result carry none.

use streams_core::Nulls;
use streams_core::serdes::{I64Serde, StringSerde};
use streams_core::state::StoreError;
use streams_core::{Headers, KvStore, ProcessResult, ProcessorContext, Record, WindowStoreRef};
use streams_state::{ValueAndTimestamp, ValueAndTimestampSerde, WindowStore};

use crate::cache_forward::CacheForwarding;
use crate::change::{Change, OldValues};
use crate::dyn_serde::DynSerde;
use crate::options::Materialized;
use crate::shared::Shared;
use crate::windowed::serde::Windowed;

/// The window store of an aggregation: the key's serde, timestamped aggregates.
pub(crate) type AggStore<K, A> = WindowStore<DynSerde<K>, ValueAndTimestampSerde<DynSerde<A>>>;

/// The handle of an aggregation's window store while the topology is built.
pub(crate) type AggStoreRef<K, A> = WindowStoreRef<DynSerde<K>, ValueAndTimestampSerde<DynSerde<A>>>;

/// The store of the last emitted close time, for [`EmitStrategy::on_window_close`](
/// crate::EmitStrategy::on_window_close).
pub(crate) type EmitTimeStore = KvStore<StringSerde, I64Serde>;

/// The one key of the emit-time store.
const EMIT_TIME_KEY: &str = "close-time";

/// Kafka Streams' `NO_TIMESTAMP`: the observed stream time before any record.
pub(crate) const NO_TIMESTAMP: i64 = -1;

/// The name of the store that keeps the last emitted close time of store `store`.
pub(crate) fn emit_time_store(store: &str) -> String {
    format!("{store}-emit-time")
}

/// Connects the aggregation `node` to its `store`, adds its emit-time store `emit_store`
/// (final results only, see [`emit_time_store`]) and records the grace of its windows.
pub(crate) fn connect_stores<K: 'static, A: 'static>(
    shared: &Shared,
    node: &str,
    store: &str,
    emit_store: Option<&str>,
    materialized: &Materialized<K, A>,
    grace_ms: i64,
) {
    shared.with(|t| {
        t.connect_processor_and_state_stores(node, [store]);
    });
    if let Some(name) = emit_store {
        shared.store(materialized.store_of(name, StringSerde, I64Serde), &[node]);
    }
    shared.set_window_grace(node, grace_ms);
}

/// Final-result emission state (of time, sliding and session windows alike).
pub(crate) struct EmitFinal {
    store: EmitTimeStore,
    /// The close time up to which final results were emitted; read from the store on
    /// first use (after the store was restored), then kept here.
    last_close: Option<Option<i64>>,
}

impl EmitFinal {
    /// The emission state kept in `store`.
    pub fn new(store: EmitTimeStore) -> Self {
        Self {
            store,
            last_close: None,
        }
    }

    /// The state in the emit-time store `name`, opened in a processor's supplier; `None`
    /// without final results (no such store).
    pub fn open<KO, VO>(
        ctx: &ProcessorContext<'_, KO, VO>,
        name: Option<&str>,
    ) -> Result<Option<Self>, StoreError> {
        name.map(|n| Ok(Self::new(ctx.kv_store::<StringSerde, I64Serde>(n)?)))
            .transpose()
    }

    /// The close time final results were emitted up to, if any.
    pub fn last_close(&mut self) -> Result<Option<i64>, StoreError> {
        if let Some(last) = self.last_close {
            return Ok(last);
        }
        let last = self.store.get(&EMIT_TIME_KEY.to_owned())?;
        self.last_close = Some(last);
        Ok(last)
    }

    /// Records that final results were emitted up to `close`.
    pub fn emitted(&mut self, close: i64) -> Result<(), StoreError> {
        self.last_close = Some(Some(close));
        self.store.put(&EMIT_TIME_KEY.to_owned(), &close)
    }
}

/// What a task needs to open a [`WindowCore`].
pub(crate) struct CoreParams<K, A> {
    pub store: AggStoreRef<K, A>,
    pub emit_store: Option<String>,
    /// The old-value switch of the aggregation's table.
    pub old_values: std::sync::Arc<OldValues>,
}

impl<K, A> Clone for CoreParams<K, A> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            emit_store: self.emit_store.clone(),
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
        let emit = EmitFinal::open(ctx, self.emit_store.as_deref())?;
        let store = ctx.window_store(&self.store)?;
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
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
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
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
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
        ctx.forward(Record {
            key,
            value: change,
            timestamp,
            headers: headers.clone(),
            nulls: Nulls::NONE,
        })
    }

    /// At a task flush: writes the store's cache down and forwards what it held.
    pub fn flush(&self, ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>) -> ProcessResult {
        self.forwarding
            .as_ref()
            .map_or(Ok(()), |f| f.flush(ctx, &self.store))
    }

    /// The last emitted close time when final results are due at `close` (the close time
    /// moved on): `Some(None)` before any emission, `None` when nothing is due.
    pub fn emit_due(&mut self, close: i64) -> Result<Option<Option<i64>>, StoreError> {
        let Some(emit) = self.emit.as_mut() else {
            return Ok(None);
        };
        Ok(match emit.last_close()? {
            Some(last) if last >= close => None,
            last => Some(last),
        })
    }

    /// Forwards the final result of every retained window starting in `[lower, upper]`, by
    /// window start, then key bytes (the order of Kafka Streams' time-ordered window store
    /// of emit-final aggregations), with the triggering record's headers, and records
    /// `close` as emitted.
    pub fn emit_final(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
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
        if let Some(emit) = &mut self.emit {
            emit.emitted(close)?;
        }
        Ok(())
    }
}
