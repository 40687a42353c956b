//! Grouping and aggregation: [`KStream::group_by_key`], [`KStream::group_by`] and the
//! `count`/`reduce`/`aggregate` of a [`KGroupedStream`], each into a materialized
//! key-value store whose updates form a [`KTable`].
//!
//! A stream whose key changed since it was read (after `map`, `select_key`, `flat_map`,
//! `process`, or `group_by` itself) is first written to a repartition topic
//! `<application.id>-<name>-repartition` and read back, so that all records of a key meet
//! in one task.

use std::sync::Arc;

use streams_core::SinkConfig;

use crate::change::OldValues;
use crate::dyn_serde::DynSerde;
use crate::error::DslIssue;
use crate::kstream::KStream;
use crate::ktable::KTable;
use crate::options::{Grouped, Materialized};
use crate::processors::{AggregateProcessor, UpdateFn, open};

/// A stream grouped by key, ready to aggregate. Made by [`KStream::group_by_key`] or
/// [`KStream::group_by`].
///
/// `count`, `reduce` and `aggregate` skip records whose key or value is null, and count
/// them as dropped (see [null keys and values](crate#null-keys-and-values)).
pub struct KGroupedStream<K, V> {
    stream: KStream<K, V>,
}

impl<K, V> Clone for KGroupedStream<K, V> {
    fn clone(&self) -> Self {
        Self {
            stream: self.stream.clone(),
        }
    }
}

impl<K, V> KStream<K, V> {
    /// Names the node of the aggregation `op` of this stream materialized as `materialized`:
    /// the store's name if given, else the name set by `named`; an unnamed one is checked
    /// against the naming policy.
    pub(crate) fn aggregation_node<A>(&self, op: &str, materialized: &Materialized<K, A>) -> String {
        let given = materialized.name.clone().or_else(|| self.next_name.clone());
        self.shared.check_named(given.is_some(), &self.node, "a store");
        self.shared.name(given.as_deref(), &self.node, op)
    }

    /// The store of the aggregation `node`: its name (`<node>-store` unless named) and its
    /// key and value serdes (the materialized ones, else the stream's key serde and
    /// `value_fallback`). `None` after reporting [`DslIssue::MissingSerde`] if one is
    /// missing.
    pub(crate) fn aggregation_store<A>(
        &self,
        node: &str,
        materialized: &Materialized<K, A>,
        value_fallback: Option<DynSerde<A>>,
    ) -> Option<(String, DynSerde<K>, DynSerde<A>)> {
        let store = materialized
            .name
            .clone()
            .unwrap_or_else(|| format!("{node}-store"));
        let ks = materialized.key_serde.clone().or_else(|| self.key_serde.clone());
        let vs = materialized.value_serde.clone().or(value_fallback);
        let (Some(ks), Some(vs)) = (ks, vs) else {
            self.shared.issue(DslIssue::MissingSerde {
                operator: node.to_owned(),
                what: "store key or value",
            });
            return None;
        };
        Some((store, ks, vs))
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Groups the records by their key, repartitioning first if the key changed upstream.
    pub fn group_by_key(&self, grouped: Grouped<K, V>) -> KGroupedStream<K, V> {
        let key_serde = grouped.key_serde.or_else(|| self.key_serde.clone());
        let value_serde = grouped.value_serde.or_else(|| self.value_serde.clone());
        let mut stream = self.derive(self.node.clone(), key_serde, value_serde, false);
        if self.repartition_required {
            stream.next_name = grouped.name.or_else(|| self.next_name.clone());
            stream = stream.through_topic("group", grouped.partitions, false);
        } else {
            stream.next_name = self.next_name.clone();
        }
        KGroupedStream { stream }
    }

    /// Groups the records by the key `f(key, value)`, through a repartition topic. The
    /// `grouped` name names that topic (`<application.id>-<name>-repartition`) and the
    /// key-selecting node (`<name>-select`).
    pub fn group_by<K2: Clone + 'static>(
        &self,
        f: impl Fn(&K, &V) -> K2 + Send + Sync + 'static,
        grouped: Grouped<K2, V>,
    ) -> KGroupedStream<K2, V> {
        let mut keyed = self.clone();
        if let Some(name) = &grouped.name {
            keyed.next_name = Some(format!("{name}-select"));
        }
        keyed.select_key(f).group_by_key(grouped)
    }

    /// This stream written to a repartition topic and read back, always (Kafka Streams'
    /// `repartition()`): the `options` name names the topic
    /// (`<application.id>-<name>-repartition`), else it is `<node>-through`; its serdes
    /// replace the stream's.
    pub fn repartition(&self, options: Grouped<K, V>) -> Self {
        let mut s = self.clone();
        s.key_serde = options.key_serde.or_else(|| self.key_serde.clone());
        s.value_serde = options.value_serde.or_else(|| self.value_serde.clone());
        s.next_name = options.name.or_else(|| self.next_name.clone());
        s.through_topic("through", options.partitions, false)
    }

    /// This stream written to a repartition topic and read back; an unnamed topic's base
    /// is `<node>-<op>`. Records with a null key are not written unless `keep_null_keys`
    /// (for an operator that takes them: the left side of a left join), as Kafka Streams
    /// filters them before a repartition topic.
    pub(crate) fn through_topic(
        &self,
        op: &str,
        partitions: Option<std::num::NonZeroU16>,
        keep_null_keys: bool,
    ) -> Self {
        let given = self.next_name.clone();
        self.shared
            .check_named(given.is_some(), &self.node, "a repartition topic");
        let base = match &given {
            Some(n) => self.shared.name(Some(n), "", ""),
            None => self.shared.name(None, &self.node, op),
        };
        let topic = self.shared.repartition_topic(&base);
        let (Some(ks), Some(vs)) = (self.key_serde.clone(), self.value_serde.clone()) else {
            self.shared.issue(DslIssue::MissingSerde {
                operator: base,
                what: if self.key_serde.is_none() { "key" } else { "value" },
            });
            return self.clone();
        };
        let sink = self.shared.name(Some(&format!("{base}-sink")), "", "");
        let source = self.shared.name(Some(&format!("{base}-source")), "", "");
        let mut sink_config = SinkConfig::topic(&topic, ks.clone(), vs.clone());
        if !keep_null_keys {
            sink_config = sink_config.skip_null_keys();
        }
        self.shared.with(|t| {
            t.add_sink_with(&sink, sink_config, [&self.node]).add_source(
                &source,
                [&topic],
                ks.clone(),
                vs.clone(),
            );
            if let Some(n) = partitions {
                t.set_repartition_partitions(&topic, n);
            }
        });
        let mut out = self.derive(source, Some(ks), Some(vs), false);
        out.repartition_required = false;
        out
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KGroupedStream<K, V> {
    /// The grouped records as a stream (after any repartitioning).
    pub(crate) fn stream(&self) -> &KStream<K, V> {
        &self.stream
    }

    /// The number of records per key.
    pub fn count(&self, materialized: Materialized<K, u64>) -> KTable<K, u64> {
        let materialized = if materialized.value_serde.is_none() {
            materialized.with_value_serde(streams_core::serdes::U64Serde)
        } else {
            materialized
        };
        self.aggregate_with(
            "count",
            Arc::new(|_, _, old| old.unwrap_or(0) + 1),
            materialized,
            None,
        )
    }

    /// Combines the values of each key with `reducer(aggregate, value)`; the first value of
    /// a key is its first aggregate.
    pub fn reduce(
        &self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        materialized: Materialized<K, V>,
    ) -> KTable<K, V> {
        let fallback = self.stream.value_serde.clone();
        self.aggregate_with(
            "reduce",
            Arc::new(move |_, v, old| match old {
                Some(agg) => reducer(agg, v),
                None => v,
            }),
            materialized,
            fallback,
        )
    }

    /// Folds the values of each key into an aggregate that starts as `initializer()`:
    /// `aggregator(key, value, aggregate)`. `materialized` must carry the aggregate's serde.
    pub fn aggregate<A: Clone + 'static>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        materialized: Materialized<K, A>,
    ) -> KTable<K, A> {
        self.aggregate_with(
            "aggregate",
            Arc::new(move |k, v, old| aggregator(k, v, old.unwrap_or_else(&initializer))),
            materialized,
            None,
        )
    }

    fn aggregate_with<A: Clone + 'static>(
        &self,
        op: &str,
        update: UpdateFn<K, V, A>,
        materialized: Materialized<K, A>,
        value_fallback: Option<DynSerde<A>>,
    ) -> KTable<K, A> {
        let s = &self.stream;
        let node = s.aggregation_node(op, &materialized);
        let Some((store, ks, vs)) = s.aggregation_store(&node, &materialized, value_fallback) else {
            return KTable::new(s.shared.clone(), node, None);
        };
        let (ks_out, vs_out) = (ks.clone(), vs.clone());
        let store_name = store.clone();
        let old_values = OldValues::from_store();
        let send_old = old_values.clone();
        s.shared.processor_with(
            &node,
            move |ctx| {
                Ok(AggregateProcessor::new(
                    update.clone(),
                    open(ctx, &store_name)?,
                    send_old.is_on(),
                )?)
            },
            &s.node,
        );
        s.shared.store(materialized.store(&store, ks, vs), &[&node]);
        KTable::changes(s.shared.clone(), node, Some(store), old_values)
            .with_serdes(Some(ks_out), Some(vs_out))
    }
}
