//! [`SessionWindowedKStream`]: a grouped stream cut into sessions ([`SessionWindows`]), with
//! `count`, `reduce`, `aggregate` and the [`EmitStrategy`].
//!
//! Every aggregation compiles to one processor (`session_agg`) and a session store
//! (`streams_state::session`, keys `K`, values the aggregate) named by `Materialized`,
//! else `<node>-store`, with retention `Materialized::with_retention`, else `gap + grace`
//! (less is [`DslIssue::RetentionTooShort`]); with [`EmitStrategy::on_window_close`] the
//! last close time emitted goes in the task's processor metadata under the store's name,
//! and the session store is never cached (as in Kafka
//! Streams). The returned table's node forwards updates keyed by [`Windowed`]
//! sessions `[start, end]` (both inclusive), timestamped with the session's end (with old
//! values when the table is re-grouped, see `session_agg`); its keys
//! are written with [`SessionWindowedSerde`]. A `suppress(until_window_closes)` of the
//! table holds a session until stream time reaches `end + gap + grace`.

use std::sync::Arc;
use std::time::Duration;

use crate::cache_forward::CacheForwarding;
use crate::change::OldValues;
use crate::dyn_serde::{DynSerde, dyn_serde};
use crate::error::DslIssue;
use crate::grouped::KGroupedStream;
use crate::ktable::KTable;
use crate::options::Materialized;
use crate::processors::{aggregate_fn, count_fn, reduce_fn};
use crate::table_lookup::session_lookup;
use crate::windowed::NO_TIMESTAMP;
use crate::windowed::common::{EmitFinal, connect_stores};
use crate::windowed::serde::Windowed;
use crate::windowed::session_agg::{SessionFns, SessionWindowAggregate};
use crate::windowed::session_windows::{SessionWindowedSerde, SessionWindows};
use crate::windowed::windows::{EmitStrategy, millis};

/// A grouped stream cut into sessions, to count, reduce or aggregate per key and session.
/// Made by [`KGroupedStream::windowed_by_session`](crate::KGroupedStream::windowed_by_session).
///
/// Records whose key is null are skipped and counted as dropped; a null value is
/// aggregated, and a `reduce` whose first value is null forwards a tombstone (see
/// [null keys and values](crate#null-keys-and-values)).
pub struct SessionWindowedKStream<K, V> {
    grouped: KGroupedStream<K, V>,
    windows: SessionWindows,
    emit: EmitStrategy,
}

impl<K, V> Clone for SessionWindowedKStream<K, V> {
    fn clone(&self) -> Self {
        Self {
            grouped: self.grouped.clone(),
            windows: self.windows,
            emit: self.emit,
        }
    }
}

impl<K: Clone + PartialEq + 'static, V: Clone + 'static> KGroupedStream<K, V> {
    /// Aggregates per key and session (Kafka Streams' `windowedBy(SessionWindows)`).
    pub fn windowed_by_session(&self, windows: SessionWindows) -> SessionWindowedKStream<K, V> {
        SessionWindowedKStream {
            grouped: self.clone(),
            windows,
            emit: EmitStrategy::default(),
        }
    }
}

impl<K: Clone + PartialEq + 'static, V: Clone + 'static> SessionWindowedKStream<K, V> {
    /// Forwards every update (the default: each merged-away session's deletion, then the
    /// new session's aggregate) or only each session's final result, once stream time
    /// passes its `end + gap + grace`.
    pub fn emit_strategy(mut self, emit: EmitStrategy) -> Self {
        self.emit = emit;
        self
    }

    /// The number of records per key and session; merged sessions add up.
    pub fn count(&self, materialized: Materialized<K, u64>) -> KTable<Windowed<K>, u64> {
        self.grouped.count_burn(&materialized);
        let materialized = materialized.or_count_serde();
        let fns = SessionFns {
            init: Arc::new(|| Some(0)),
            merge: Arc::new(|_, agg: Option<u64>, other| agg.unwrap_or(0) + other),
            add: count_fn(),
        };
        self.build("session_count", fns, materialized, None)
    }

    /// Combines the values of each key and session with `reducer(aggregate, value)`; a
    /// session's first value is its first aggregate, and merged sessions combine as
    /// `reducer(earlier aggregate, later aggregate)` in store order (by end).
    pub fn reduce(
        &self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        materialized: Materialized<K, V>,
    ) -> KTable<Windowed<K>, V> {
        let reducer = Arc::new(reducer);
        let r2 = Arc::clone(&reducer);
        let fns = SessionFns {
            init: Arc::new(|| None),
            merge: Arc::new(move |_, agg: Option<V>, other| match agg {
                Some(agg) => r2(agg, other),
                None => other,
            }),
            add: reduce_fn(move |agg, v| reducer(agg, v)),
        };
        let fallback = self.grouped.stream().value_serde.clone();
        self.build("session_reduce", fns, materialized, fallback)
    }

    /// Folds the values of each key and session into an aggregate that starts as
    /// `initializer()`; when a record bridges sessions, their aggregates are combined with
    /// `merger(key, aggregate so far, session aggregate)`, starting from `initializer()`,
    /// before the record is folded in. `materialized` must carry the aggregate's serde.
    pub fn aggregate<A: Clone + 'static>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        merger: impl Fn(&K, A, A) -> A + Send + Sync + 'static,
        materialized: Materialized<K, A>,
    ) -> KTable<Windowed<K>, A> {
        let initializer = Arc::new(initializer);
        let (i2, i3) = (Arc::clone(&initializer), Arc::clone(&initializer));
        let fns = SessionFns {
            init: Arc::new(move || Some(initializer())),
            merge: Arc::new(move |k, agg: Option<A>, other| merger(k, agg.unwrap_or_else(|| i2()), other)),
            add: aggregate_fn(move || i3(), aggregator),
        };
        self.build("session_aggregate", fns, materialized, None)
    }

    /// Adds the aggregation's processor and stores; returns its table.
    fn build<A: Clone + 'static>(
        &self,
        op: &str,
        fns: SessionFns<K, V, A>,
        materialized: Materialized<K, A>,
        value_fallback: Option<DynSerde<A>>,
    ) -> KTable<Windowed<K>, A> {
        let (s, node, materialized) =
            self.grouped
                .aggregation(op, materialized, crate::grouped::store_prefix(op));
        let s = &s;
        let windows = self.windows;
        let least_ms = windows.min_retention_ms();
        let retention_ms = materialized.retention.map_or(least_ms, millis);
        if retention_ms < least_ms {
            s.shared.issue(DslIssue::RetentionTooShort {
                operator: node.clone(),
                retention_ms,
                least_ms,
            });
        }
        let Some((store, ks, vs)) = s.aggregation_store(&node, &materialized, value_fallback) else {
            return KTable::new(s.shared.clone(), node, None);
        };
        let on_close = self.emit.is_on_window_close();
        // With final results the store keeps sessions 1 ms longer, so that every session
        // not yet emitted is still readable when it is (see `session_agg`).
        let store_retention = retention_ms.saturating_add(i64::from(on_close));
        let builder = materialized.session_store_of(
            &store,
            Duration::from_millis(store_retention.max(0).unsigned_abs()),
            ks.clone(),
            vs.clone(),
            !on_close,
        );
        let store_ref = s.shared.with(|t| t.store(builder));
        let lookup = session_lookup(store_ref.clone());
        let emit_name = on_close.then(|| store.clone());
        let key_serde = ks.clone();
        let old_values = OldValues::from_store();
        let send_old = old_values.clone();
        s.shared.processor_with(
            &node,
            move |ctx| {
                let emit = emit_name.as_deref().map(EmitFinal::new);
                let store = ctx.store(&store_ref)?;
                let send_old = send_old.is_on();
                // Final results only: nothing is forwarded at updates, cached or not.
                let forwarding = match emit {
                    Some(_) => None,
                    None => CacheForwarding::new(store.forward_on_flush(send_old)?, send_old),
                };
                Ok(SessionWindowAggregate::<K, V, A> {
                    windows,
                    fns: fns.clone(),
                    store,
                    key_serde: key_serde.clone(),
                    retention_ms,
                    observed: NO_TIMESTAMP,
                    max_end: None,
                    emit,
                    send_old,
                    forwarding,
                })
            },
            &s.node,
        );
        connect_stores(&s.shared, &node, &store, windows.min_retention_ms());
        let wks = SessionWindowedSerde::of(ks);
        KTable::changes(s.shared.clone(), node, Some(store), old_values)
            .with_serdes(Some(dyn_serde(wks)), Some(vs))
            .with_lookup(lookup)
    }
}
