//! [`KStream`]: an unbounded stream of records, and its stateless operators. Each operator
//! adds one Processor-API node and returns the stream of that node's output.

use std::sync::Arc;

use streams_core::{Processor, Record, SinkConfig};
use streams_state::Serde;

use crate::dyn_serde::{DynSerde, carry};
use crate::options::Produced;
use crate::processors::{Emit, OpFn, OpProcessor, PassThrough};
use crate::shared::Shared;

/// A stream of `Record<K, V>`: every record is an independent event.
///
/// The record types are checked at compile time through the chain. The serdes a stream was
/// read with are carried along while the key or value type stays the same (a `map_values`
/// to another type drops the value serde) and are used where a repartition topic or a
/// store needs them; `Grouped` and `Materialized` give the ones that were dropped.
pub struct KStream<K, V> {
    pub(crate) shared: Shared,
    pub(crate) node: String,
    pub(crate) key_serde: Option<DynSerde<K>>,
    pub(crate) value_serde: Option<DynSerde<V>>,
    /// The key changed since the last (re)partitioning: grouping must repartition.
    pub(crate) repartition_required: bool,
    /// The name of the next operator, set by [`KStream::named`].
    pub(crate) next_name: Option<String>,
}

impl<K, V> Clone for KStream<K, V> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            node: self.node.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            repartition_required: self.repartition_required,
            next_name: self.next_name.clone(),
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    pub(crate) fn new(
        shared: Shared,
        node: String,
        key_serde: Option<DynSerde<K>>,
        value_serde: Option<DynSerde<V>>,
    ) -> Self {
        Self {
            shared,
            node,
            key_serde,
            value_serde,
            repartition_required: false,
            next_name: None,
        }
    }

    /// The name of this stream's node.
    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// Names the next operator applied to this stream (Kafka Streams' `Named`). Names of
    /// nodes, stores and topics further down derive from it.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.next_name = Some(name.into());
        self
    }

    /// The name of a new node for operator `op` on this stream.
    pub(crate) fn child_name(&self, op: &str) -> String {
        self.shared.name(self.next_name.as_deref(), &self.node, op)
    }

    /// A stream of node `node` with these serdes, keyed as this one unless `rekeyed`.
    pub(crate) fn derive<K2: Clone + 'static, V2: Clone + 'static>(
        &self,
        node: String,
        key_serde: Option<DynSerde<K2>>,
        value_serde: Option<DynSerde<V2>>,
        rekeyed: bool,
    ) -> KStream<K2, V2> {
        KStream {
            repartition_required: self.repartition_required || rekeyed,
            ..KStream::new(self.shared.clone(), node, key_serde, value_serde)
        }
    }

    fn op<K2: Clone + 'static, V2: Clone + 'static>(
        &self,
        name: &str,
        f: impl Fn(Record<K, V>, &mut Emit<'_, K2, V2>) -> streams_core::ProcessResult + Send + Sync + 'static,
    ) {
        let op: OpFn<K, V, K2, V2> = Arc::new(f);
        self.shared
            .processor(name, move || OpProcessor { op: op.clone() }, &self.node);
    }

    fn same(&self, node: String) -> Self {
        self.derive(node, self.key_serde.clone(), self.value_serde.clone(), false)
    }

    /// The records for which `predicate` holds.
    pub fn filter(&self, predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static) -> Self {
        let name = self.child_name("filter");
        self.op(&name, move |r, emit| {
            if predicate(&r.key, &r.value) {
                emit(r)
            } else {
                Ok(())
            }
        });
        self.same(name)
    }

    /// The records for which `predicate` does not hold.
    pub fn filter_not(&self, predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static) -> Self {
        let name = self.child_name("filter_not");
        self.op(&name, move |r, emit| {
            if predicate(&r.key, &r.value) {
                Ok(())
            } else {
                emit(r)
            }
        });
        self.same(name)
    }

    /// Each record's key and value replaced by `f(key, value)`. Grouping afterwards
    /// repartitions.
    pub fn map<K2: Clone + 'static, V2: Clone + 'static>(
        &self,
        f: impl Fn(K, V) -> (K2, V2) + Send + Sync + 'static,
    ) -> KStream<K2, V2> {
        let name = self.child_name("map");
        self.op(&name, move |r: Record<K, V>, emit| {
            let (k, v) = f(r.key, r.value);
            emit(Record::new(k, v, r.timestamp).with_headers(r.headers))
        });
        self.derive(name, carry(&self.key_serde), carry(&self.value_serde), true)
    }

    /// Each record's value replaced by `f(key, value)`; keys (and partitioning) kept.
    pub fn map_values<V2: Clone + 'static>(
        &self,
        f: impl Fn(&K, V) -> V2 + Send + Sync + 'static,
    ) -> KStream<K, V2> {
        let name = self.child_name("map_values");
        self.op(&name, move |r: Record<K, V>, emit| emit(r.map_value(&f)));
        self.derive(name, self.key_serde.clone(), carry(&self.value_serde), false)
    }

    /// Each record replaced by the records `f(key, value)` returns. Grouping afterwards
    /// repartitions.
    pub fn flat_map<K2, V2, I>(&self, f: impl Fn(K, V) -> I + Send + Sync + 'static) -> KStream<K2, V2>
    where
        K2: Clone + 'static,
        V2: Clone + 'static,
        I: IntoIterator<Item = (K2, V2)>,
    {
        let name = self.child_name("flat_map");
        self.op(&name, move |r: Record<K, V>, emit| {
            for (k, v) in f(r.key, r.value) {
                emit(Record::new(k, v, r.timestamp).with_headers(r.headers.clone()))?;
            }
            Ok(())
        });
        self.derive(name, carry(&self.key_serde), carry(&self.value_serde), true)
    }

    /// Each record replaced by one record per value `f(key, value)` returns, with its key.
    pub fn flat_map_values<V2, I>(&self, f: impl Fn(&K, V) -> I + Send + Sync + 'static) -> KStream<K, V2>
    where
        V2: Clone + 'static,
        I: IntoIterator<Item = V2>,
    {
        let name = self.child_name("flat_map_values");
        self.op(&name, move |r: Record<K, V>, emit| {
            // The key stays as it was, null included.
            let nulls = r.nulls.without_value();
            for v in f(&r.key, r.value) {
                emit(
                    Record::new(r.key.clone(), v, r.timestamp)
                        .with_headers(r.headers.clone())
                        .with_nulls(nulls),
                )?;
            }
            Ok(())
        });
        self.derive(name, self.key_serde.clone(), carry(&self.value_serde), false)
    }

    /// Each record re-keyed with `f(key, value)`. Grouping afterwards repartitions.
    pub fn select_key<K2: Clone + 'static>(
        &self,
        f: impl Fn(&K, &V) -> K2 + Send + Sync + 'static,
    ) -> KStream<K2, V> {
        let name = self.child_name("select_key");
        self.op(&name, move |r: Record<K, V>, emit| {
            let k = f(&r.key, &r.value);
            emit(r.with_key(k))
        });
        self.derive(name, carry(&self.key_serde), self.value_serde.clone(), true)
    }

    /// Calls `f` on each record and passes it on unchanged.
    pub fn peek(&self, f: impl Fn(&K, &V) + Send + Sync + 'static) -> Self {
        let name = self.child_name("peek");
        self.op(&name, move |r, emit| {
            f(&r.key, &r.value);
            emit(r)
        });
        self.same(name)
    }

    /// Calls `f` on each record; a terminal operator.
    pub fn foreach(&self, f: impl Fn(&K, &V) + Send + Sync + 'static) {
        let name = self.child_name("foreach");
        self.op::<K, V>(&name, move |r, _| {
            f(&r.key, &r.value);
            Ok(())
        });
    }

    /// The records of this stream and of `other`, interleaved as they are processed.
    pub fn merge(&self, other: &KStream<K, V>) -> Self {
        let name = self.child_name("merge");
        let parents = [self.node.clone(), other.node.clone()];
        self.shared.with(|t| {
            t.add_processor(&name, PassThrough::<K, V>::new, parents);
        });
        let mut merged = self.same(name);
        merged.repartition_required |= other.repartition_required;
        merged
    }

    /// Writes every record to `topic` with the serdes of `produced`.
    pub fn to<KS, VS>(&self, topic: &str, produced: Produced<KS, VS>)
    where
        KS: Serde<Target = K> + Clone,
        VS: Serde<Target = V> + Clone,
    {
        let given = produced.name.as_deref().or(self.next_name.as_deref());
        let name = self.shared.name(given, &self.node, "to");
        let mut config = SinkConfig::topic(topic, produced.key_serde, produced.value_serde);
        if let Some(p) = produced.partitioner {
            config = config.partitioner(move |topic: &str, k: &K, v: &V, n| p.partition(topic, k, v, n));
        }
        self.shared.with(|t| {
            t.add_sink_with(&name, config, [&self.node]);
        });
    }

    /// Runs a user [`Processor`] on every record; it may use the stores named in `stores`
    /// (added with [`StreamsBuilder::add_state_store`](crate::StreamsBuilder::add_state_store)).
    /// Grouping afterwards repartitions, as the processor may have changed keys.
    pub fn process<P, K2, V2>(
        &self,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        stores: &[&str],
    ) -> KStream<K2, V2>
    where
        P: Processor<K, V, K2, V2>,
        K2: Clone + 'static,
        V2: Clone + 'static,
    {
        let name = self.add_user_processor(supplier, stores);
        self.derive(name, carry(&self.key_serde), carry(&self.value_serde), true)
    }

    /// As [`process`](Self::process), for a processor that keeps every key as it is (its
    /// contract: grouping afterwards does not repartition).
    pub fn process_values<P, V2>(
        &self,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        stores: &[&str],
    ) -> KStream<K, V2>
    where
        P: Processor<K, V, K, V2>,
        V2: Clone + 'static,
    {
        let name = self.add_user_processor(supplier, stores);
        self.derive(name, self.key_serde.clone(), carry(&self.value_serde), false)
    }

    fn add_user_processor<P, K2, V2>(
        &self,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        stores: &[&str],
    ) -> String
    where
        P: Processor<K, V, K2, V2>,
        K2: 'static,
        V2: 'static,
    {
        let name = self.child_name("process");
        self.shared.processor(&name, supplier, &self.node);
        self.shared.with(|t| {
            t.connect_processor_and_state_stores(&name, stores.iter().copied());
        });
        name
    }
}
