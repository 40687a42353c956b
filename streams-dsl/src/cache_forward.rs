//! Forwarding at cache flush, as Kafka Streams' DSL aggregations do
//! (`TimestampedCacheFlushListener`).
//!
//! An aggregation over a cached store (the default `Materialized`) forwards a key's
//! aggregate when the store's cache writes it down, not at every update: at a commit (the
//! task flushes, [`Processor::flush`](streams_core::Processor::flush)) or when the thread's
//! cache budget evicts it (inside one of the aggregation's own writes). All updates of a key
//! between two flushes reach downstream as one record: the latest aggregate, at its
//! timestamp, with the aggregate the store held at the previous flush as the old value
//! (when old values are on). A store without a cache (`without_caching`, or a zero
//! `statestore.cache.max.bytes`) forwards every update at once.
//!
//! Invariant: a processor with forwarding takes the cache's entries after each of its
//! writes and at each flush, so no entry waits in [`FlushedEntries`] past the flush that
//! wrote it down. Headers are not kept in the cache: a record forwarded at a flush has none.

use streams_core::{Headers, KvStore, ProcessResult, ProcessorContext};
use streams_state::{
    Flushed, FlushedEntries, FlushedEntry, SessionStore, StoreError, ValueAndTimestamp, WindowStore,
};

use crate::change::Change;
use crate::dyn_serde::DynSerde;
use crate::timestamped::TimestampedValues;
use crate::windowed::{AggStore, Windowed};

/// The cache-flush forwarding of one aggregation processor (see the module doc).
pub(crate) struct CacheForwarding {
    flushed: FlushedEntries,
    send_old: bool,
}

/// A DSL store whose cache can be written down and its entries decoded: the key-value
/// store of an aggregation (keys `K`), the window store of a windowed one or the session
/// store of a session aggregation (keys `Windowed<K>`).
pub(crate) trait FlushSource<K, A> {
    /// Writes the cache's dirty entries down, without flushing the layers below.
    fn flush_cache(&self) -> Result<(), StoreError>;
    /// The key, new and old aggregate of an entry the cache wrote down.
    fn decode(&self, entry: &FlushedEntry) -> Result<Flushed<K, ValueAndTimestamp<A>>, StoreError>;
    /// The time of a key's delete when no aggregate gives one; `None`: the stream time.
    fn deleted_at(&self, _key: &K) -> Option<i64> {
        None
    }
}

// The DSL's key-value store (`processors::DslStore`), named here so that this module does
// not import the processors that use it.
impl<K: 'static, A: 'static> FlushSource<K, A> for KvStore<DynSerde<K>, TimestampedValues<A>> {
    fn flush_cache(&self) -> Result<(), StoreError> {
        KvStore::flush_cache(self)
    }
    fn decode(&self, entry: &FlushedEntry) -> Result<Flushed<K, ValueAndTimestamp<A>>, StoreError> {
        self.decode_flushed(entry)
    }
}

impl<K: 'static, A: 'static> FlushSource<Windowed<K>, A> for AggStore<K, A> {
    fn flush_cache(&self) -> Result<(), StoreError> {
        WindowStore::flush_cache(self)
    }
    fn decode(&self, entry: &FlushedEntry) -> Result<Flushed<Windowed<K>, ValueAndTimestamp<A>>, StoreError> {
        self.decode_flushed(entry)
    }
}

// A session aggregation's store (`windowed::session_agg::SessionAggStore`), named here for
// the same reason. Sessions hold plain aggregates: each is forwarded at its session's end,
// as Kafka Streams' `SessionCacheFlushListener` does.
impl<K: 'static, A: 'static> FlushSource<Windowed<K>, A> for SessionStore<DynSerde<K>, DynSerde<A>> {
    fn flush_cache(&self) -> Result<(), StoreError> {
        SessionStore::flush_cache(self)
    }
    fn decode(&self, entry: &FlushedEntry) -> Result<Flushed<Windowed<K>, ValueAndTimestamp<A>>, StoreError> {
        let f = self.decode_flushed(entry)?;
        let end = f.key.end;
        let at_end = |value| ValueAndTimestamp {
            value,
            timestamp: end,
        };
        Ok(Flushed {
            key: f.key,
            new: f.new.map(at_end),
            old: f.old.map(at_end),
        })
    }
    fn deleted_at(&self, session: &Windowed<K>) -> Option<i64> {
        Some(session.end)
    }
}

impl CacheForwarding {
    /// Forwarding over the store whose `forward_on_flush` answered `flushed`: `None` (no
    /// cache) forwards at once.
    pub fn new(flushed: Option<FlushedEntries>, send_old: bool) -> Option<Self> {
        flushed.map(|flushed| Self { flushed, send_old })
    }

    /// Forwards every entry the cache wrote down since the last call: the key's change at
    /// its new aggregate's timestamp (for a delete, the old aggregate's, else the store's
    /// [`FlushSource::deleted_at`] or the task's stream time). A delete of a key the store
    /// never held is not forwarded.
    pub fn forward<K: Clone + 'static, A: Clone + 'static>(
        &self,
        ctx: &mut ProcessorContext<'_, K, Change<A>>,
        store: &impl FlushSource<K, A>,
    ) -> ProcessResult {
        for entry in self.flushed.take() {
            let f = store.decode(&entry)?;
            if f.new.is_none() && f.old.is_none() && self.send_old {
                continue;
            }
            let timestamp = f
                .new
                .as_ref()
                .or(f.old.as_ref())
                .map(|v| v.timestamp)
                .or_else(|| store.deleted_at(&f.key))
                .unwrap_or_else(|| ctx.stream_time());
            let change = Change {
                new: f.new.map(|v| v.value),
                old: f.old.filter(|_| self.send_old).map(|v| v.value),
            };
            ctx.forward(change.into_record(f.key, timestamp, Headers::default()))?;
        }
        Ok(())
    }

    /// At a task flush: writes `store`'s cache down and forwards what it held.
    pub fn flush<K: Clone + 'static, A: Clone + 'static>(
        &self,
        ctx: &mut ProcessorContext<'_, K, Change<A>>,
        store: &impl FlushSource<K, A>,
    ) -> ProcessResult {
        store.flush_cache()?;
        self.forward(ctx, store)
    }
}

/// At a task flush: writes a cached `store` down and forwards what it held through
/// `forwarding`; nothing when `forwarding` is unset (the store is not cached).
pub(crate) fn flush_cached<K: Clone + 'static, A: Clone + 'static>(
    forwarding: Option<&CacheForwarding>,
    ctx: &mut ProcessorContext<'_, K, Change<A>>,
    store: &impl FlushSource<K, A>,
) -> ProcessResult {
    forwarding.map_or(Ok(()), |f| f.flush(ctx, store))
}
