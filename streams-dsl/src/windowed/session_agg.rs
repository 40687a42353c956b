//! The aggregation over [`SessionWindows`] (Kafka Streams' `KStreamSessionWindowAggregate`).
//!
//! For a record of key `k` at `t`, with gap `g` and grace `r`, `close = observed - g - r`:
//!
//! 1. the sessions of `k` that end at or after `t - g` and start at or before `t + g` are
//!    found (in store order: by end, then start) and folded into one aggregate with the
//!    merger, starting from the initializer; the merged session spans `t` and all of them;
//! 2. if the merged session ends before `close` the record is late and dropped;
//! 3. otherwise, unless the merged session is just `[t, t]`, every found session is removed
//!    and a deletion (`None`) forwarded for it; then the record is folded in with the
//!    aggregator and the merged session written and forwarded.
//!
//! Every forwarded update is timestamped with its session's end and carries the record's
//! headers. Over a cached store (the default) updates are forwarded when the cache writes
//! them down instead (see [`crate::cache_forward`]): a session's updates between two
//! flushes go out once, and a session created and merged away between them not at all.
//! With old values on (the table is re-grouped downstream), a removed session's
//! deletion carries its aggregate as old value, and so does the merged session's update
//! when it replaces a session with the same window (a record at `t` joining the session
//! `[t, t]`), which Kafka Streams forwards without one; final results carry none.
//!
//! Invariants: sessions are read only if they end after `latest end written - retention`,
//! as Kafka Streams' session stores do, whatever the store's own retention (one more
//! millisecond with final results, see below). With
//! [`EmitStrategy::on_window_close`](crate::EmitStrategy::on_window_close) nothing is
//! forwarded on update; when a record moves `close` on, the sessions ending in
//! `[last close, close - 1]` are forwarded once, ordered by end, start, then key bytes (as
//! Kafka Streams' time-ordered session store yields them), and `close` is put in the
//! task's processor metadata under the store's name. These are read before the record changes the store: the
//! record can neither remove nor create a session that is due, and the store (retention
//! `+ 1` ms) still holds every session ending at or after the last close.

use std::sync::Arc;
use streams_core::Nulls;
use streams_core::state::{SessionStore, StoreError};
use streams_core::{Headers, ProcessResult, Processor, Record};

use crate::cache_forward::CacheForwarding;
use crate::change::Change;
use crate::dyn_serde::DynSerde;
use crate::nulls::{Skip, drop_record};
use crate::windowed::NO_TIMESTAMP;
use crate::windowed::common::{Ctx, EmitFinal, admit};
use crate::windowed::serde::Windowed;
use crate::windowed::session_windows::SessionWindows;

/// A session aggregation's store: aggregates per key and session.
pub(crate) type SessionAggStore<K, A> = SessionStore<DynSerde<K>, DynSerde<A>>;

/// The merger over `Option<A>`.
type MergeFn<K, A> = Arc<dyn Fn(&K, Option<A>, A) -> A + Send + Sync>;

/// The aggregator over `Option<A>`.
type AddFn<K, V, A> = Arc<dyn Fn(&K, V, Option<A>) -> A + Send + Sync>;

/// How a session aggregation folds values (Kafka Streams' initializer, aggregator and
/// merger), over `Option<A>` so that `reduce` can start from no aggregate.
pub(crate) struct SessionFns<K, V, A> {
    /// A new session's aggregate before its first value.
    pub init: Arc<dyn Fn() -> Option<A> + Send + Sync>,
    /// Folds a merged session's aggregate (second) into the aggregate so far (first).
    pub merge: MergeFn<K, A>,
    /// Folds a value into the aggregate so far.
    pub add: AddFn<K, V, A>,
}

impl<K, V, A> Clone for SessionFns<K, V, A> {
    fn clone(&self) -> Self {
        Self {
            init: Arc::clone(&self.init),
            merge: Arc::clone(&self.merge),
            add: Arc::clone(&self.add),
        }
    }
}

pub(crate) struct SessionWindowAggregate<K: 'static, V: 'static, A: 'static> {
    pub windows: SessionWindows,
    pub fns: SessionFns<K, V, A>,
    pub store: SessionAggStore<K, A>,
    pub key_serde: DynSerde<K>,
    /// The retention sessions are read with (ms).
    pub retention_ms: i64,
    /// The largest timestamp processed.
    pub observed: i64,
    /// The latest session end written; read from the store on first use.
    pub max_end: Option<i64>,
    pub emit: Option<EmitFinal>,
    /// Forward old values.
    pub send_old: bool,
    /// Set when the store is cached: updates go out when the cache writes them down.
    pub forwarding: Option<CacheForwarding>,
}

impl<K, V, A> SessionWindowAggregate<K, V, A>
where
    K: Clone + 'static,
    V: Clone + 'static,
    A: Clone + 'static,
{
    fn max_end(&mut self) -> Result<i64, StoreError> {
        if let Some(t) = self.max_end {
            return Ok(t);
        }
        let mut t = NO_TIMESTAMP;
        {
            let reader = self.store.read()?;
            for entry in reader.all()? {
                t = t.max(entry?.0.end);
            }
        }
        self.max_end = Some(t);
        Ok(t)
    }

    fn forward(
        ctx: Ctx<'_, '_, K, A>,
        key: Windowed<K>,
        value: Change<A>,
        headers: &Headers,
    ) -> ProcessResult {
        let timestamp = key.end;
        ctx.forward(Record {
            key,
            value,
            timestamp,
            headers: headers.clone(),
            nulls: Nulls::NONE,
        })
    }

    /// Forwards what the store's cache wrote down during this record's writes (an
    /// eviction), when the cache forwards.
    fn forward_flushed(&self, ctx: Ctx<'_, '_, K, A>) -> ProcessResult {
        match &self.forwarding {
            Some(f) => f.forward(ctx, &self.store),
            None => Ok(()),
        }
    }

    /// Forwards the sessions that closed since the last emission, if `close` moved on.
    fn emit_final(&mut self, ctx: Ctx<'_, '_, K, A>, headers: &Headers, close: i64) -> ProcessResult {
        let Some(emit) = &self.emit else {
            return Ok(());
        };
        let last = emit.last_close(ctx);
        if last.is_some_and(|last| last >= close) {
            return Ok(());
        }
        let upper = close.saturating_sub(1);
        let lower = last.unwrap_or(NO_TIMESTAMP).max(0);
        if upper < 0 || upper < lower {
            return Ok(()); // no session closed yet: the close time is not recorded
        }
        let mut due = Vec::new();
        {
            let reader = self.store.read()?;
            for entry in reader.all()? {
                let (w, v) = entry?;
                if (lower..=upper).contains(&w.end) {
                    let bytes = self.key_serde.serialize(&w.key)?;
                    due.push(((w.end, w.start, bytes), w, v));
                }
            }
        }
        due.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, w, v) in due {
            Self::forward(
                ctx,
                w,
                Change {
                    new: Some(v),
                    old: None,
                },
                headers,
            )?;
        }
        if let Some(emit) = &self.emit {
            emit.emitted(ctx, close);
        }
        Ok(())
    }
}

impl<K, V, A> Processor<K, V, Windowed<K>, Change<A>> for SessionWindowAggregate<K, V, A>
where
    K: Clone + 'static,
    V: Clone + 'static,
    A: Clone + 'static,
{
    fn process(&mut self, ctx: Ctx<'_, '_, K, A>, r: Record<K, V>) -> ProcessResult {
        let grace = self.windows.grace_ms;
        let Some(close) = admit(ctx, &r, Skip::NullKey, &mut self.observed, grace) else {
            return Ok(());
        };
        let (t, gap) = (r.timestamp, self.windows.gap_ms);
        let close = close.saturating_sub(gap);
        self.emit_final(ctx, &r.headers, close)?;

        let earliest_end = t.saturating_sub(gap).max(
            self.max_end()?
                .saturating_sub(self.retention_ms)
                .saturating_add(1),
        );
        let mut found = Vec::new();
        {
            let reader = self.store.read()?;
            for entry in reader.find_sessions(&r.key, earliest_end, t.saturating_add(gap))? {
                found.push(entry?);
            }
        }
        let (mut start, mut end) = (t, t);
        let mut agg = (self.fns.init)();
        for (w, v) in &found {
            start = start.min(w.start);
            end = end.max(w.end);
            agg = Some((self.fns.merge)(&r.key, agg, v.clone()));
        }
        if end < close {
            drop_record(ctx, "its session closed");
            return Ok(());
        }
        // Forwarded now, unless only final results are, or the cache forwards them.
        let forward = self.emit.is_none() && self.forwarding.is_none();
        let send_old = self.send_old;
        let mut replaced = None;
        if (start, end) != (t, t) {
            for (w, v) in found {
                self.store.remove(&w)?;
                if forward {
                    let old = send_old.then_some(v);
                    Self::forward(ctx, w, Change { new: None, old }, &r.headers)?;
                }
            }
        } else if send_old {
            replaced = found.into_iter().next().map(|(_, v)| v);
        }
        if agg.is_none() && r.nulls.value {
            // A reduce starts from no aggregate and takes the first value as it (Kafka
            // Streams' null): a null first value leaves the session empty, and its update
            // is a tombstone. Kafka Streams writes that null, which moves its store's time.
            self.max_end = Some(self.max_end()?.max(end));
            if forward {
                let session = Windowed {
                    key: r.key,
                    start,
                    end,
                };
                Self::forward(ctx, session, Change { new: None, old: None }, &r.headers)?;
            }
            // Cached, Kafka Streams writes the null to the cache, which forwards nothing
            // for a session the store does not hold; but the removals above may be due.
            return self.forward_flushed(ctx);
        }
        let agg = (self.fns.add)(&r.key, r.value, agg);
        let session = Windowed {
            key: r.key,
            start,
            end,
        };
        self.store.put(&session, &agg)?;
        self.max_end = Some(self.max_end()?.max(end));
        if forward {
            let change = Change {
                new: Some(agg),
                old: replaced,
            };
            Self::forward(ctx, session, change, &r.headers)?;
        }
        self.forward_flushed(ctx)
    }

    fn flush(&mut self, ctx: Ctx<'_, '_, K, A>) -> ProcessResult {
        match &self.forwarding {
            Some(f) => f.flush(ctx, &self.store),
            None => Ok(()),
        }
    }
}
