//! Re-grouping a table: [`KTable::group_by`] and the `count`, `reduce` and `aggregate` of a
//! [`KGroupedTable`], which keep an aggregate per new key correct as rows change, move
//! between groups, or are deleted.
//!
//! The table's node is asked for old values (see [`crate::change`]). For each update of a
//! row, the selecting node `<Grouped name>-select` (else `<table node>-group_by`) maps the
//! old value and the new value with the selector and writes them to the repartition topic
//! `<base>-repartition` (`<base>`: the `Grouped` name, else `<selecting node>-group`) as
//! [`Change`]s: when both map to the same new key, one record carrying both; otherwise the
//! old one first (`old` only), then the new one (`new` only), each to its key's partition.
//! A deletion only subtracts; an update with no old value only adds. Read back, the
//! aggregation first subtracts `old` from the key's aggregate (if the key has one), then
//! adds `new` (starting from the initializer, or, for `reduce`, from the value itself),
//! writes the result and forwards it with the aggregate before as its old value. These are
//! Kafka Streams' semantics, as is the forwarded timestamp: the largest of the record's and
//! the aggregate's before (the record's for a key without an aggregate).

use std::sync::Arc;

use streams_core::{ProcessResult, Processor, ProcessorContext, Record};

use crate::cache_forward::{CacheForwarding, flush_cached};
use crate::change::{Change, ChangeSerde, OldValues, TableIn};
use crate::dyn_serde::{DynSerde, carry, dyn_serde};
use crate::error::DslIssue;
use crate::kstream::KStream;
use crate::ktable::KTable;
use crate::options::{Grouped, Materialized};
use crate::processors::{
    DslStore, UpdateFn, aggregate_fn, aggregate_time, count_fn, open, put_or_delete, reduce_fn,
};

/// Maps a row to its new key and value.
type SelectFn<K, V, K2, V2> = Arc<dyn Fn(&K, &V) -> (K2, V2) + Send + Sync>;

/// Removes a value from an aggregate: `subtract(key, value, aggregate)`.
type SubtractFn<K, V, A> = Arc<dyn Fn(&K, V, A) -> A + Send + Sync>;

/// A table re-grouped by a new key, ready to aggregate. Made by [`KTable::group_by`].
pub struct KGroupedTable<K, V> {
    /// The repartition topic's source: changes keyed by the new key.
    stream: KStream<K, Change<V>>,
    value_serde: Option<DynSerde<V>>,
    /// Under [`Naming::KafkaStreams`](crate::Naming), the repartition topic is added by the
    /// aggregation (named after its store unless the `Grouped` is named, given here), and
    /// `stream` is the selecting node's output.
    deferred: Option<(Option<String>, Option<std::num::NonZeroU16>)>,
}

impl<K, V> Clone for KGroupedTable<K, V> {
    fn clone(&self) -> Self {
        Self {
            stream: self.stream.clone(),
            value_serde: self.value_serde.clone(),
            deferred: self.deferred.clone(),
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// Re-groups the rows by `selector(key, value) -> (new key, new value)`, always through
    /// a repartition topic. A row's update is subtracted from the group of its old value and
    /// added to the group of its new one. The `grouped` name names the repartition topic
    /// (`<application.id>-<name>-repartition`) and the selecting node (`<name>-select`); its
    /// serdes are needed unless the new key or value has the table's type.
    pub fn group_by<K2, V2>(
        &self,
        selector: impl Fn(&K, &V) -> (K2, V2) + Send + Sync + 'static,
        grouped: Grouped<K2, V2>,
    ) -> KGroupedTable<K2, V2>
    where
        K2: Clone + PartialEq + 'static,
        V2: Clone + 'static,
    {
        let kafka = self.shared.kafka_names();
        // Kafka Streams names the selecting node after the `Grouped` itself.
        let select_name = match (&grouped.name, kafka) {
            (Some(n), true) => Some(n.clone()),
            (Some(n), false) => Some(format!("{n}-select")),
            (None, _) => None,
        };
        let node = self
            .shared
            .table_name(select_name.as_deref(), &self.node, "group_by");
        let old_values = self.old_values();
        if old_values.available() {
            old_values.enable();
        } else {
            self.shared.issue(DslIssue::NoOldValues {
                operator: node.clone(),
                table: self.node.clone(),
            });
        }
        let selector: SelectFn<K, V, K2, V2> = Arc::new(selector);
        self.add_child(&node, move |_| {
            Ok(RepartitionMap {
                selector: selector.clone(),
            })
        });
        let key_serde = grouped.key_serde.or_else(|| carry(&self.key_serde));
        let value_serde = grouped.value_serde.or_else(|| carry(&self.value_serde));
        let change_serde = value_serde.clone().map(|vs| dyn_serde(ChangeSerde(vs)));
        let mut mapped = KStream::new(self.shared.clone(), node, key_serde, change_serde);
        mapped.repartition_required = true;
        if kafka {
            return KGroupedTable {
                stream: mapped,
                value_serde,
                deferred: Some((grouped.name, grouped.partitions)),
            };
        }
        mapped.next_name = grouped.name;
        KGroupedTable {
            stream: mapped.through_topic("group", grouped.partitions, false),
            value_serde,
            deferred: None,
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KGroupedTable<K, V> {
    /// The number of rows per key (a group that loses its last row stays at `0`, as in
    /// Kafka Streams).
    pub fn count(&self, materialized: Materialized<K, u64>) -> KTable<K, u64> {
        self.aggregate_with(
            "count",
            count_fn(),
            Arc::new(|_, _, agg: u64| agg.saturating_sub(1)),
            materialized.or_count_serde(),
            None,
        )
    }

    /// Combines the values of each key: `adder(aggregate, value)` for a value that joins the
    /// group, `subtractor(aggregate, value)` for one that leaves it; the first value of a
    /// key is its first aggregate.
    pub fn reduce(
        &self,
        adder: impl Fn(V, V) -> V + Send + Sync + 'static,
        subtractor: impl Fn(V, V) -> V + Send + Sync + 'static,
        materialized: Materialized<K, V>,
    ) -> KTable<K, V> {
        self.aggregate_with(
            "reduce",
            reduce_fn(adder),
            Arc::new(move |_, v, agg| subtractor(agg, v)),
            materialized,
            self.value_serde.clone(),
        )
    }

    /// Folds the values of each key into an aggregate that starts as `initializer()`:
    /// `adder(key, value, aggregate)` for a value that joins the group,
    /// `subtractor(key, value, aggregate)` for one that leaves it. `materialized` must carry
    /// the aggregate's serde.
    pub fn aggregate<A: Clone + 'static>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        adder: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        subtractor: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        materialized: Materialized<K, A>,
    ) -> KTable<K, A> {
        self.aggregate_with(
            "aggregate",
            aggregate_fn(initializer, adder),
            Arc::new(subtractor),
            materialized,
            None,
        )
    }

    /// The stream the aggregation `op` reads, its node's name and `materialized` with its
    /// store's name filled in under [`Naming::KafkaStreams`](crate::Naming), taken in Kafka
    /// Streams' order: the store, the repartition sink and source, the node.
    fn aggregation<A>(
        &self,
        op: &str,
        materialized: Materialized<K, A>,
    ) -> (KStream<K, Change<V>>, String, Materialized<K, A>) {
        let s = &self.stream;
        let Some((grouped_name, partitions)) = &self.deferred else {
            let node = s.aggregation_node(op, &materialized);
            return (s.clone(), node, materialized);
        };
        let (store, mut materialized) = s.kafka_store(materialized, "KTABLE-AGGREGATE-STATE-STORE-");
        let [sink, source] =
            [("-sink", "KSTREAM-SINK-"), ("-source", "KSTREAM-SOURCE-")].map(|(suffix, prefix)| {
                let generated = s.shared.kafka_name(prefix).unwrap_or_default();
                match &s.next_name {
                    Some(n) => format!("{n}{suffix}"),
                    None => generated,
                }
            });
        let node = s.shared.table_name(s.next_name.as_deref(), &s.node, op);
        let topic = s
            .shared
            .repartition_topic(grouped_name.as_deref().unwrap_or(&store));
        let input = s.through_nodes(&store, &topic, [sink, source], None, *partitions, false);
        materialized.name = Some(store);
        (input, node, materialized)
    }

    fn aggregate_with<A: Clone + 'static>(
        &self,
        op: &str,
        add: UpdateFn<K, V, A>,
        subtract: SubtractFn<K, V, A>,
        materialized: Materialized<K, A>,
        value_fallback: Option<DynSerde<A>>,
    ) -> KTable<K, A> {
        let (s, node, materialized) = self.aggregation(op, materialized);
        let s = &s;
        let Some((store, ks, vs)) = s.aggregation_store(&node, &materialized, value_fallback) else {
            return KTable::new(s.shared.clone(), node, None);
        };
        let old_values = OldValues::from_store();
        let send_old = old_values.clone();
        let store_name = store.clone();
        s.shared.processor_with(
            &node,
            move |ctx| {
                let store = open(ctx, &store_name)?;
                let send_old = send_old.is_on();
                Ok(TableAggregateProcessor {
                    add: add.clone(),
                    subtract: subtract.clone(),
                    forwarding: CacheForwarding::new(store.forward_on_flush(send_old)?, send_old),
                    store,
                    send_old,
                })
            },
            &s.node,
        );
        s.shared
            .store(materialized.store(&store, ks.clone(), vs.clone()), &[&node]);
        KTable::changes(s.shared.clone(), node, Some(store), old_values).with_serdes(Some(ks), Some(vs))
    }
}

/// The selecting node: maps the old and new value of an update to `(new key, value)` and
/// forwards them as changes (see the [module docs](self)).
struct RepartitionMap<K, V, K2, V2> {
    selector: SelectFn<K, V, K2, V2>,
}

impl<K, I, V, K2, V2> Processor<K, I, K2, Change<V2>> for RepartitionMap<K, V, K2, V2>
where
    K: 'static,
    I: TableIn<V>,
    V: 'static,
    K2: Clone + PartialEq + 'static,
    V2: Clone + 'static,
{
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K2, Change<V2>>, r: Record<K, I>) -> ProcessResult {
        let change = r.value.into_change();
        let old = change.old.map(|v| (self.selector)(&r.key, &v));
        let new = change.new.map(|v| (self.selector)(&r.key, &v));
        let record = |key, new, old, headers| Change { new, old }.into_record(key, r.timestamp, headers);
        match (old, new) {
            (Some((old_key, old)), Some((new_key, new))) if old_key == new_key => {
                ctx.forward(record(new_key, Some(new), Some(old), r.headers))
            }
            (old, new) => {
                if let Some((key, old)) = old {
                    ctx.forward(record(key, None, Some(old), r.headers.clone()))?;
                }
                match new {
                    Some((key, new)) => ctx.forward(record(key, Some(new), None, r.headers)),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The aggregation of a re-grouped table: subtracts a change's old value, adds its new
/// one, writes the result and forwards it (with the aggregate before, when old values are
/// on). An aggregate that ends up absent (only possible when a change had neither a value
/// to add nor an aggregate to subtract from) is deleted.
struct TableAggregateProcessor<K: 'static, V, A: 'static> {
    add: UpdateFn<K, V, A>,
    subtract: SubtractFn<K, V, A>,
    store: DslStore<K, A>,
    send_old: bool,
    /// Set when the store is cached: updates go out when the cache writes them down.
    forwarding: Option<CacheForwarding>,
}

impl<K, V, A> Processor<K, Change<V>, K, Change<A>> for TableAggregateProcessor<K, V, A>
where
    K: Clone + 'static,
    V: 'static,
    A: Clone + 'static,
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<A>>,
        r: Record<K, Change<V>>,
    ) -> ProcessResult {
        let before = self.store.get(&r.key)?;
        let timestamp = aggregate_time(r.timestamp, before.as_ref());
        let before = before.map(|b| b.value);
        // Forwarding at flush reads the old value back from the store.
        let kept = if self.send_old && self.forwarding.is_none() {
            before.clone()
        } else {
            None
        };
        let intermediate = match (r.value.old, before) {
            (Some(old), Some(agg)) => Some((self.subtract)(&r.key, old, agg)),
            (_, agg) => agg,
        };
        let after = match r.value.new {
            Some(new) => Some((self.add)(&r.key, new, intermediate)),
            None => intermediate,
        };
        put_or_delete(&self.store, &r.key, after.as_ref(), timestamp)?;
        if let Some(f) = &self.forwarding {
            return f.forward(ctx, &self.store);
        }
        let change = Change {
            new: after,
            old: kept,
        };
        ctx.forward(change.into_record(r.key, timestamp, r.headers))
    }

    fn flush(&mut self, ctx: &mut ProcessorContext<'_, K, Change<A>>) -> ProcessResult {
        flush_cached(self.forwarding.as_ref(), ctx, &self.store)
    }
}
