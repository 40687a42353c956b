//! What the time-window and sliding-window aggregations share: the window store handle,
//! the observed stream time, per-key fetches by window start, retention, and emitting
//! final results on window close.
//!
//! Invariants: the store is keyed window start first, so a fetch of one key's windows in
//! `[from, to]` reads the store between `[from][key]` and `[to][key]` and keeps that key's
//! entries; final results are read between the last emitted bound and the new one only;
//! the emitted close time is written to the `<store>-emit-time` store before the call
//! returns, so it is committed with the forwarded results.

use std::cell::Cell;

use streams_core::serdes::{I64Serde, StringSerde};
use streams_core::state::StoreError;
use streams_core::{Headers, KvStore, ProcessResult, ProcessorContext, Record};

use crate::windowed::serde::{ValueAndTimestamp, ValueAndTimestampSerde, Windowed, WindowedSerde};

/// A windowed aggregation's store.
pub(crate) type WindowStore<K, A> = KvStore<WindowedSerde<K>, ValueAndTimestampSerde<A>>;

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

/// Final-result emission state.
pub(crate) struct EmitFinal {
    store: EmitTimeStore,
    /// The close time up to which final results were emitted.
    pub last_close: Option<i64>,
}

impl EmitFinal {
    /// Opens the emit-time store and reads the last emitted close time back.
    pub fn open(store: EmitTimeStore) -> Result<Self, StoreError> {
        let last_close = store.get(&EMIT_TIME_KEY.to_owned())?;
        Ok(Self { store, last_close })
    }
}

/// What a task needs to open a [`WindowCore`].
#[derive(Clone)]
pub(crate) struct CoreParams {
    pub store: String,
    pub emit_store: Option<String>,
    pub window_ms: i64,
    pub retention_ms: i64,
    pub inclusive_end: bool,
}

impl CoreParams {
    /// Opens the stores (in a processor's supplier).
    pub fn open<K: 'static, A: 'static>(
        &self,
        ctx: &ProcessorContext<'_, Windowed<K>, Option<A>>,
    ) -> Result<WindowCore<K, A>, StoreError> {
        let emit = match &self.emit_store {
            Some(name) => Some(EmitFinal::open(ctx.kv_store::<StringSerde, I64Serde>(name)?)?),
            None => None,
        };
        Ok(WindowCore {
            store: ctx.kv_store::<WindowedSerde<K>, ValueAndTimestampSerde<A>>(&self.store)?,
            observed: NO_TIMESTAMP,
            store_time: Cell::new(None),
            window_ms: self.window_ms,
            retention_ms: self.retention_ms,
            inclusive_end: self.inclusive_end,
            emit,
        })
    }
}

/// The state of one windowed aggregation processor.
pub(crate) struct WindowCore<K: 'static, A: 'static> {
    pub store: WindowStore<K, A>,
    /// The largest timestamp processed (Kafka's `observedStreamTime`).
    pub observed: i64,
    /// `end - start` of every window.
    pub window_ms: i64,
    /// Windows older than this behind stream time are removed.
    pub retention_ms: i64,
    /// Whether window ends are inclusive (sliding windows).
    pub inclusive_end: bool,
    /// Set when only final results are forwarded.
    pub emit: Option<EmitFinal>,
    /// The largest window start written (Kafka's window-store stream time); read from the
    /// store on first use, so it is right after a restore.
    pub store_time: Cell<Option<i64>>,
}

impl<K: Clone + PartialEq + 'static, A: Clone + 'static> WindowCore<K, A> {
    /// The windowed key of `key` in the window starting at `start`.
    pub fn windowed(&self, key: &K, start: i64) -> Windowed<K> {
        Windowed {
            key: key.clone(),
            start,
            end: start.saturating_add(self.window_ms),
        }
    }

    fn store_time(&self) -> Result<i64, StoreError> {
        if let Some(t) = self.store_time.get() {
            return Ok(t);
        }
        let t = {
            let reader = self.store.read()?;
            let last = reader.reverse_all()?.next().transpose()?;
            last.map_or(NO_TIMESTAMP, |(w, _)| w.start)
        };
        self.store_time.set(Some(t));
        Ok(t)
    }

    /// The earliest window start still retained: as in Kafka Streams' window stores, a
    /// window that started `retention` or more before the latest window written is expired
    /// and no longer read, even before the punctuator removes it.
    fn first_retained(&self) -> Result<i64, StoreError> {
        Ok(self
            .store_time()?
            .saturating_sub(self.retention_ms)
            .saturating_add(1))
    }

    /// Writes a window's aggregate.
    pub fn put(&self, key: &Windowed<K>, value: &ValueAndTimestamp<A>) -> Result<(), StoreError> {
        let t = self.store_time()?;
        self.store_time.set(Some(t.max(key.start)));
        self.store.put(key, value)
    }

    /// The retained windows of `key` that start in `[from, to]`, by ascending start.
    pub fn fetch(&self, key: &K, from: i64, to: i64) -> Result<Vec<(i64, ValueAndTimestamp<A>)>, StoreError> {
        let from = from.max(self.first_retained()?);
        let reader = self.store.read()?;
        let mut found = Vec::new();
        for entry in reader.range_inclusive(&self.windowed(key, from), &self.windowed(key, to))? {
            let (w, v) = entry?;
            if w.key == *key {
                found.push((w.start, v));
            }
        }
        Ok(found)
    }

    /// Forwards an update of a window (unless only final results are forwarded).
    pub fn forward_update(
        &self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Option<A>>,
        key: Windowed<K>,
        value: ValueAndTimestamp<A>,
        headers: &Headers,
    ) -> ProcessResult {
        if self.emit.is_some() {
            return Ok(());
        }
        ctx.forward(Record {
            key,
            value: Some(value.value),
            timestamp: value.timestamp,
            headers: headers.clone(),
        })
    }

    /// The last emitted close time when final results are due at `close` (the close time
    /// moved on): `Some(None)` before any emission, `None` when nothing is due.
    pub fn emit_due(&self, close: i64) -> Option<Option<i64>> {
        let emit = self.emit.as_ref()?;
        match emit.last_close {
            Some(last) if last >= close => None,
            last => Some(last),
        }
    }

    /// Forwards the final result of every retained window starting in `[lower, upper]`, in
    /// store order (start, then key bytes), with the triggering record's headers, and
    /// records `close` as emitted. `anchor` is any key, used to bound the store range.
    pub fn emit_final(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Option<A>>,
        anchor: &K,
        headers: &Headers,
        (lower, upper): (i64, i64),
        close: i64,
    ) -> ProcessResult {
        let lower = lower.max(self.first_retained()?);
        let mut due = Vec::new();
        {
            let reader = self.store.read()?;
            let from = self.windowed(anchor, lower.saturating_sub(1));
            let to = self.windowed(anchor, upper.saturating_add(1));
            for entry in reader.range_inclusive(&from, &to)? {
                let (w, v) = entry?;
                if (lower..=upper).contains(&w.start) {
                    due.push((w, v));
                }
            }
        }
        for (key, v) in due {
            ctx.forward(Record {
                key,
                value: Some(v.value),
                timestamp: v.timestamp,
                headers: headers.clone(),
            })?;
        }
        if let Some(emit) = &mut self.emit {
            emit.last_close = Some(close);
            emit.store.put(&EMIT_TIME_KEY.to_owned(), &close)?;
        }
        Ok(())
    }

    /// Removes the windows that started more than the retention before `now`, and never
    /// a window whose final result is still to be emitted.
    pub fn expire(&self, now: i64) -> ProcessResult {
        let mut cutoff = now.saturating_sub(self.retention_ms);
        if let Some(emit) = &self.emit {
            // Windows with `end <= last_close` (`<` for inclusive ends) were emitted.
            let emitted_below = match emit.last_close {
                None => i64::MIN,
                Some(last) => last.saturating_sub(self.window_ms) + i64::from(!self.inclusive_end),
            };
            cutoff = cutoff.min(emitted_below);
        }
        let mut expired = Vec::new();
        {
            let reader = self.store.read()?;
            for entry in reader.all()? {
                let (key, _) = entry?;
                if key.start >= cutoff {
                    break;
                }
                expired.push(key);
            }
        }
        for key in expired {
            self.store.delete(&key)?;
        }
        Ok(())
    }
}
