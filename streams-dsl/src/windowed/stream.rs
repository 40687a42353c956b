//! [`TimeWindowedKStream`] and [`SlidingWindowedKStream`]: a grouped stream cut into
//! windows, with `count`, `reduce`, `aggregate` and the [`EmitStrategy`].
//!
//! Every aggregation compiles to one processor and its window store
//! `WindowStore<DynSerde<K>, ValueAndTimestampSerde<DynSerde<A>>>` (named by
//! `Materialized`, else `<node>-store`; read it with `TopologyTestDriver::window_store`),
//! with the retention of `Materialized::with_retention`, else the least the windows need;
//! with [`EmitStrategy::on_window_close`] the last close time emitted goes in the task's
//! processor metadata under the store's name (see `common::EmitFinal`). The returned table's node forwards updates keyed by [`Windowed`] keys, timestamped with the
//! window's largest record timestamp, with the window's aggregate before as old value when
//! the table is re-grouped downstream (final results only carry none).

use streams_state::ValueAndTimestampSerde;

use crate::change::OldValues;
use crate::dyn_serde::{DynSerde, dyn_serde};
use crate::error::DslIssue;
use crate::grouped::KGroupedStream;
use crate::ktable::KTable;
use crate::options::Materialized;
use crate::processors::{UpdateFn, aggregate_fn, count_fn, reduce_fn};
use crate::table_lookup::window_lookup;
use crate::windowed::common::{CoreParams, connect_stores};
use crate::windowed::serde::{Windowed, WindowedSerde};
use crate::windowed::sliding_agg::SlidingWindowAggregate;
use crate::windowed::time_agg::TimeWindowAggregate;
use crate::windowed::windows::{EmitStrategy, SlidingWindows, TimeWindows, millis};

/// A grouped stream cut into time windows (tumbling or hopping), to count, reduce or
/// aggregate per key and window. Made by
/// [`KGroupedStream::windowed_by`](crate::KGroupedStream::windowed_by).
///
/// Records whose key is null are skipped and counted as dropped; a null value is
/// aggregated, and a `reduce` whose first value is null forwards a tombstone (see
/// [null keys and values](crate#null-keys-and-values)).
pub struct TimeWindowedKStream<K, V> {
    grouped: KGroupedStream<K, V>,
    windows: TimeWindows,
    emit: EmitStrategy,
}

/// A grouped stream cut into sliding windows, to count, reduce or aggregate per key and
/// window. Made by [`KGroupedStream::windowed_by_sliding`](crate::KGroupedStream::windowed_by_sliding).
///
/// Records whose key or value is null are skipped and counted as dropped (see
/// [null keys and values](crate#null-keys-and-values)).
pub struct SlidingWindowedKStream<K, V> {
    grouped: KGroupedStream<K, V>,
    windows: SlidingWindows,
    emit: EmitStrategy,
}

impl<K: Clone + 'static, V: Clone + 'static> KGroupedStream<K, V> {
    /// Aggregates per key and time window.
    pub fn windowed_by(&self, windows: TimeWindows) -> TimeWindowedKStream<K, V> {
        TimeWindowedKStream {
            grouped: self.clone(),
            windows,
            emit: EmitStrategy::default(),
        }
    }

    /// Aggregates per key and sliding window (Kafka Streams' `windowedBy(SlidingWindows)`).
    pub fn windowed_by_sliding(&self, windows: SlidingWindows) -> SlidingWindowedKStream<K, V> {
        SlidingWindowedKStream {
            grouped: self.clone(),
            windows,
            emit: EmitStrategy::default(),
        }
    }
}

/// What differs between the two kinds of windows.
#[derive(Clone, Copy)]
enum Kind {
    Time(TimeWindows),
    Sliding(SlidingWindows),
}

impl Kind {
    /// `end - start` of a window.
    fn window_ms(self) -> i64 {
        match self {
            Kind::Time(w) => w.size_ms,
            Kind::Sliding(w) => w.diff_ms,
        }
    }

    fn grace_ms(self) -> i64 {
        match self {
            Kind::Time(w) => w.grace_ms,
            Kind::Sliding(w) => w.grace_ms,
        }
    }

    /// Kafka's least (and default) retention.
    fn min_retention_ms(self) -> i64 {
        match self {
            Kind::Time(w) => w.size_ms.saturating_add(w.grace_ms),
            Kind::Sliding(w) => w.diff_ms.saturating_mul(2).saturating_add(w.grace_ms),
        }
    }
}

macro_rules! windowed_ops {
    ($ty:ident, $kind:ident, $count:literal, $reduce:literal, $aggregate:literal) => {
        impl<K: Clone + 'static, V: Clone + 'static> $ty<K, V> {
            /// Forwards every update (the default) or only each window's final result.
            pub fn emit_strategy(mut self, emit: EmitStrategy) -> Self {
                self.emit = emit;
                self
            }

            /// The number of records per key and window.
            pub fn count(&self, materialized: Materialized<K, u64>) -> KTable<Windowed<K>, u64> {
                if $count == "windowed_count" {
                    self.grouped.count_burn(&materialized);
                }
                build(
                    &self.grouped,
                    Kind::$kind(self.windows),
                    self.emit,
                    $count,
                    count_fn(),
                    materialized.or_count_serde(),
                    None,
                )
            }

            /// Combines the values of each key and window with `reducer(aggregate, value)`;
            /// a window's first value is its first aggregate.
            pub fn reduce(
                &self,
                reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
                materialized: Materialized<K, V>,
            ) -> KTable<Windowed<K>, V> {
                let fallback = self.grouped.stream().value_serde.clone();
                let kind = Kind::$kind(self.windows);
                build(
                    &self.grouped,
                    kind,
                    self.emit,
                    $reduce,
                    reduce_fn(reducer),
                    materialized,
                    fallback,
                )
            }

            /// Folds the values of each key and window into an aggregate that starts as
            /// `initializer()`. `materialized` must carry the aggregate's serde.
            pub fn aggregate<A: Clone + 'static>(
                &self,
                initializer: impl Fn() -> A + Send + Sync + 'static,
                aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
                materialized: Materialized<K, A>,
            ) -> KTable<Windowed<K>, A> {
                let update = aggregate_fn(initializer, aggregator);
                build(
                    &self.grouped,
                    Kind::$kind(self.windows),
                    self.emit,
                    $aggregate,
                    update,
                    materialized,
                    None,
                )
            }
        }
    };
}

windowed_ops!(
    TimeWindowedKStream,
    Time,
    "windowed_count",
    "windowed_reduce",
    "windowed_aggregate"
);
windowed_ops!(
    SlidingWindowedKStream,
    Sliding,
    "sliding_count",
    "sliding_reduce",
    "sliding_aggregate"
);

/// Adds the aggregation's processor and stores; returns its table.
fn build<K, V, A>(
    grouped: &KGroupedStream<K, V>,
    kind: Kind,
    emit: EmitStrategy,
    op: &str,
    update: UpdateFn<K, V, A>,
    materialized: Materialized<K, A>,
    value_fallback: Option<DynSerde<A>>,
) -> KTable<Windowed<K>, A>
where
    K: Clone + 'static,
    V: Clone + 'static,
    A: Clone + 'static,
{
    let (s, node, materialized) = grouped.aggregation(op, materialized, crate::grouped::store_prefix(op));
    let s = &s;
    let reduce = op.ends_with("reduce");
    if let Kind::Time(w) = kind
        && !w.valid()
    {
        s.shared.issue(DslIssue::InvalidWindows {
            operator: node.clone(),
            size_ms: w.size_ms,
            advance_ms: w.advance_ms,
        });
    }
    let retention_ms = materialized.retention.map_or(kind.min_retention_ms(), millis);
    if retention_ms < kind.min_retention_ms() {
        s.shared.issue(DslIssue::RetentionTooShort {
            operator: node.clone(),
            retention_ms,
            least_ms: kind.min_retention_ms(),
        });
    }
    let Some((store, ks, vs)) = s.aggregation_store(&node, &materialized, value_fallback) else {
        return KTable::new(s.shared.clone(), node, None);
    };
    let window_ms = kind.window_ms();
    let wks = WindowedSerde::of(ks.clone(), window_ms);
    // Kafka Streams keeps an emit-final aggregation in a time-ordered window store, which
    // still reads a window that started exactly a retention before its stream time (the
    // other window stores stop one millisecond earlier): one more millisecond here.
    let store_retention_ms = retention_ms.saturating_add(i64::from(emit.is_on_window_close()));
    let builder = materialized.window_store_of(
        &store,
        store_retention_ms,
        window_ms,
        ks,
        ValueAndTimestampSerde(vs.clone()),
    );
    let store_ref = s.shared.with(|t| t.store(builder));
    let old_values = OldValues::from_store();
    let lookup = window_lookup(store_ref.clone());
    let params = CoreParams {
        store: store_ref,
        emit_final: emit.is_on_window_close().then(|| store.clone()),
        old_values: old_values.clone(),
    };
    match kind {
        Kind::Time(windows) => s.shared.processor_with(
            &node,
            move |ctx| {
                Ok(TimeWindowAggregate {
                    windows,
                    update: update.clone(),
                    core: params.open(ctx)?,
                    reduce,
                })
            },
            &s.node,
        ),
        Kind::Sliding(windows) => s.shared.processor_with(
            &node,
            move |ctx| {
                Ok(SlidingWindowAggregate {
                    windows,
                    update: update.clone(),
                    core: params.open(ctx)?,
                })
            },
            &s.node,
        ),
    }
    connect_stores(&s.shared, &node, &store, kind.grace_ms());
    KTable::changes(s.shared.clone(), node, Some(store), old_values)
        .with_serdes(Some(dyn_serde(wks)), Some(vs))
        .with_lookup(lookup)
}
