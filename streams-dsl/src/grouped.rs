//! Grouping and aggregation: [`KStream::group_by_key`], [`KStream::group_by`] and the
//! `count`/`reduce`/`aggregate` of a [`KGroupedStream`], each into a materialized
//! key-value store whose updates form a [`KTable`].
//!
//! A stream whose key changed since it was read (after `map`, `select_key`, `flat_map`,
//! `process`, or `group_by` itself) is first written to a repartition topic
//! `<application.id>-<name>-repartition` and read back, so that all records of a key meet
//! in one task.

use streams_core::SinkConfig;

use crate::change::OldValues;
use crate::dyn_serde::DynSerde;
use crate::error::DslIssue;
use crate::kstream::KStream;
use crate::ktable::KTable;
use crate::options::{Grouped, Materialized};
use crate::processors::{AggregateProcessor, PassThrough, UpdateFn, aggregate_fn, count_fn, open, reduce_fn};

/// A stream grouped by key, ready to aggregate. Made by [`KStream::group_by_key`] or
/// [`KStream::group_by`].
///
/// `count`, `reduce` and `aggregate` skip records whose key or value is null, and count
/// them as dropped (see [null keys and values](crate#null-keys-and-values)).
pub struct KGroupedStream<K, V> {
    stream: KStream<K, V>,
    /// A repartitioning left to the aggregation, as Kafka Streams does (under
    /// [`Naming::KafkaStreams`](crate::Naming), whose topic is named after the store).
    deferred: Option<Deferred>,
}

/// A repartition topic a grouped stream still has to pass through.
#[derive(Clone)]
struct Deferred {
    /// The `Grouped` name, else the topic is named after the aggregation's store.
    name: Option<String>,
    partitions: Option<std::num::NonZeroU16>,
}

impl<K, V> Clone for KGroupedStream<K, V> {
    fn clone(&self) -> Self {
        Self {
            stream: self.stream.clone(),
            deferred: self.deferred.clone(),
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

    /// The store name of an aggregation under [`Naming::KafkaStreams`](crate::Naming): the
    /// `Materialized` name, else `store_prefix` and the next value of the counter, taken
    /// before anything else of the aggregation. `materialized` comes back without its name.
    pub(crate) fn kafka_store<A>(
        &self,
        mut materialized: Materialized<K, A>,
        store_prefix: &str,
    ) -> (String, Materialized<K, A>) {
        self.shared
            .check_named(materialized.name.is_some(), &self.node, "a store");
        let store = match materialized.name.take() {
            Some(n) => n,
            None => {
                let generated = self.shared.kafka_name(store_prefix).unwrap_or_default();
                self.shared.name(Some(&generated), "", "")
            }
        };
        (store, materialized)
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
        let mut deferred = None;
        if self.repartition_required && self.shared.kafka_names() {
            stream.next_name = self.next_name.clone();
            deferred = Some(Deferred {
                name: grouped.name,
                partitions: grouped.partitions,
            });
        } else if self.repartition_required {
            stream.next_name = grouped.name.or_else(|| self.next_name.clone());
            stream = stream.through_topic("group", grouped.partitions, false);
        } else {
            stream.next_name = self.next_name.clone();
        }
        KGroupedStream { stream, deferred }
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
            // Kafka Streams names the key-selecting node after the `Grouped` itself.
            keyed.next_name = Some(if self.shared.kafka_names() {
                name.clone()
            } else {
                format!("{name}-select")
            });
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
        // An explicit repartition keeps its own topic whatever the optimizations.
        let mergeable = op != "through";
        if self.shared.kafka_names() {
            // Kafka Streams names an explicit repartition `KSTREAM-REPARTITION-<n>`, and the
            // topic in front of a join after the stream's node.
            let base = given.unwrap_or_else(|| match op {
                "through" => self.shared.name(None, &self.node, op),
                _ => self.node.clone(),
            });
            return self.through_kafka(&base, partitions, keep_null_keys, mergeable);
        }
        if mergeable && let Some(source) = self.shared.merged_repartition(&self.node) {
            return self.read_back(source, self.key_serde.clone(), self.value_serde.clone());
        }
        let base = match &given {
            Some(n) => self.shared.name(Some(n), "", ""),
            None => self.shared.name(None, &self.node, op),
        };
        let topic = self.shared.repartition_topic(&base);
        let nodes = [format!("{base}-sink"), format!("{base}-source")];
        let out = self.through_nodes(&base, &topic, nodes, None, partitions, keep_null_keys);
        if mergeable && self.shared.merges_repartitions() {
            self.shared.record_repartition(&self.node, &out.node);
        }
        out
    }

    /// This stream as read back from a repartition topic by the node `source`.
    fn read_back(&self, source: String, ks: Option<DynSerde<K>>, vs: Option<DynSerde<V>>) -> Self {
        let mut out = self.derive(source, ks, vs, false);
        out.repartition_required = false;
        out
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// This stream written to the repartition topic `<base>-repartition` and read back
    /// through Kafka Streams' three nodes: a filter, the sink and the source, named after
    /// the topic (`<topic>-filter`, `-sink`, `-source`), or generated when `base` is a
    /// generated name and the topic is not `mergeable` under `merge.repartition.topics`.
    /// Kafka Streams takes the three generated names whether it uses them or not.
    pub(crate) fn through_kafka(
        &self,
        base: &str,
        partitions: Option<std::num::NonZeroU16>,
        keep_null_keys: bool,
        mergeable: bool,
    ) -> Self {
        let generated = [
            self.shared.kafka_name("KSTREAM-SINK-"),
            self.shared.kafka_name("KSTREAM-FILTER-"),
            self.shared.kafka_name("KSTREAM-SOURCE-"),
        ];
        let merged = mergeable && self.shared.merges_repartitions();
        if merged && let Some(source) = self.shared.merged_repartition(&self.node) {
            return self.read_back(source, self.key_serde.clone(), self.value_serde.clone());
        }
        let base = base.strip_suffix("-repartition").unwrap_or(base);
        let topic = self.shared.repartition_topic(base);
        let [sink, filter, source] = if crate::naming::is_generated(base) && !merged {
            generated.map(Option::unwrap_or_default)
        } else {
            ["sink", "filter", "source"].map(|part| format!("{topic}-{part}"))
        };
        let out = self.through_nodes(
            base,
            &topic,
            [sink, source],
            Some(filter),
            partitions,
            keep_null_keys,
        );
        if merged {
            self.shared.record_repartition(&self.node, &out.node);
        }
        out
    }

    /// This stream written to the repartition `topic` by the node `sink` (behind a
    /// pass-through node `filter` if given) and read back by `source`; a missing serde is
    /// reported against `operator`.
    pub(crate) fn through_nodes(
        &self,
        operator: &str,
        topic: &str,
        [sink, source]: [String; 2],
        filter: Option<String>,
        partitions: Option<std::num::NonZeroU16>,
        keep_null_keys: bool,
    ) -> Self {
        let [sink, source] = [sink, source].map(|name| self.shared.name(Some(&name), "", ""));
        let (Some(ks), Some(vs)) = (self.key_serde.clone(), self.value_serde.clone()) else {
            self.shared.issue(DslIssue::MissingSerde {
                operator: operator.to_owned(),
                what: if self.key_serde.is_none() { "key" } else { "value" },
            });
            return self.clone();
        };
        let mut sink_config = SinkConfig::topic(topic, ks.clone(), vs.clone());
        if !keep_null_keys {
            sink_config = sink_config.skip_null_keys();
        }
        let mut parent = self.node.clone();
        if let Some(filter) = filter {
            let filter = self.shared.name(Some(&filter), "", "");
            self.shared.processor(&filter, PassThrough::<K, V>::new, &parent);
            parent = filter;
        }
        self.shared.with(|t| {
            t.add_sink_with(&sink, sink_config, [&parent]).add_source(
                &source,
                [topic],
                ks.clone(),
                vs.clone(),
            );
            if let Some(n) = partitions {
                t.set_repartition_partitions(topic, n);
            }
        });
        self.read_back(source, Some(ks), Some(vs))
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KGroupedStream<K, V> {
    /// The grouped records as a stream, before a deferred repartitioning: for its serdes.
    pub(crate) fn stream(&self) -> &KStream<K, V> {
        &self.stream
    }

    /// The grouped records as a stream, through the repartition topic if one is deferred
    /// (named `<base>-repartition`, `base` the `Grouped` name, else `fallback`).
    pub(crate) fn repartitioned(&self, fallback: &str) -> KStream<K, V> {
        match &self.deferred {
            None => self.stream.clone(),
            Some(d) => {
                let mut pre = self.stream.clone();
                pre.next_name = None;
                pre.through_kafka(d.name.as_deref().unwrap_or(fallback), d.partitions, false, true)
            }
        }
    }

    /// The stream an aggregation `op` reads (repartitioned if a repartition is deferred), its
    /// node's name, and `materialized` with its store's name filled in under
    /// [`Naming::KafkaStreams`](crate::Naming). Names are taken in Kafka Streams' order:
    /// the store, the aggregation's node, then the repartition topic's nodes.
    pub(crate) fn aggregation<A>(
        &self,
        op: &str,
        materialized: Materialized<K, A>,
        store_prefix: &str,
    ) -> (KStream<K, V>, String, Materialized<K, A>) {
        let s = &self.stream;
        if !s.shared.kafka_names() {
            let node = s.aggregation_node(op, &materialized);
            return (s.clone(), node, materialized);
        }
        let (store, mut materialized) = s.kafka_store(materialized, store_prefix);
        let node = s.shared.name(s.next_name.as_deref(), &s.node, op);
        let input = self.repartitioned(&store);
        materialized.name = Some(store);
        (input, node, materialized)
    }

    /// Takes the value of Kafka Streams' name counter that its `count` (stream, time
    /// windows and session windows) takes when given an unnamed `Materialized`.
    pub(crate) fn count_burn(&self, materialized: &Materialized<K, u64>) {
        if materialized.name.is_none() && !materialized.is_default() {
            self.stream.shared.burn_name();
        }
    }

    /// The number of records per key.
    pub fn count(&self, materialized: Materialized<K, u64>) -> KTable<K, u64> {
        self.count_burn(&materialized);
        self.aggregate_with("count", count_fn(), materialized.or_count_serde(), None)
    }

    /// Combines the values of each key with `reducer(aggregate, value)`; the first value of
    /// a key is its first aggregate.
    pub fn reduce(
        &self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        materialized: Materialized<K, V>,
    ) -> KTable<K, V> {
        let fallback = self.stream.value_serde.clone();
        self.aggregate_with("reduce", reduce_fn(reducer), materialized, fallback)
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
            aggregate_fn(initializer, aggregator),
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
        let (s, node, materialized) = self.aggregation(op, materialized, store_prefix(op));
        let s = &s;
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

/// Kafka Streams' store name prefix of the stream aggregation `op`.
pub(crate) fn store_prefix(op: &str) -> &'static str {
    if op.ends_with("reduce") {
        "KSTREAM-REDUCE-STATE-STORE-"
    } else {
        "KSTREAM-AGGREGATE-STATE-STORE-"
    }
}
