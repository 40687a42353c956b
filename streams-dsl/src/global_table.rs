//! [`GlobalKTable`]: a table replicated in full to every task, and the stream joins that
//! read it ([`KStream::join_global`], [`KStream::left_join_global`]).
//!
//! [`StreamsBuilder::global_table`] compiles to the core's global store: a source over
//! every partition of the topic feeding a state-update processor (a value puts, a null
//! value deletes) in a sub-topology of its own. The store has no changelog, its topic is
//! its changelog. A join with a global table maps each stream record to a table key with a
//! user function and reads the store directly: the stream is neither repartitioned nor
//! co-partitioned with the table's topic.

use std::sync::Arc;

use streams_core::{ProcessResult, Processor, ProcessorContext, Record, SourceConfig};
use streams_state::serde::NullableSerde;

use crate::builder::StreamsBuilder;
use crate::error::DslIssue;
use crate::kstream::KStream;
use crate::nulls::{Skip, drop_record, skipped};
use crate::options::Materialized;
use crate::processors::{DslStore, forward_joined, put_or_delete};

/// A table of the latest value per key of a topic, every partition of it, readable from
/// every task. Made by [`StreamsBuilder::global_table`]; streams join it with
/// [`KStream::join_global`] and [`KStream::left_join_global`].
pub struct GlobalKTable<K, V> {
    store: String,
    node: String,
    _types: std::marker::PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for GlobalKTable<K, V> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            node: self.node.clone(),
            _types: std::marker::PhantomData,
        }
    }
}

impl<K, V> GlobalKTable<K, V> {
    /// The global store holding the table's values.
    pub fn store_name(&self) -> &str {
        &self.store
    }

    /// The name of the state-update processor that writes the store.
    pub fn node_name(&self) -> &str {
        &self.node
    }
}

impl StreamsBuilder {
    /// A global table of the latest value per key of `topic` (a null value deletes the
    /// key), kept in the global store `materialized` names, else `<topic>-global-store`.
    /// The materialized serdes read the topic and must both be given. The store is neither
    /// logged nor cached, whatever `materialized` says: the topic itself restores it.
    ///
    /// Nodes: `<topic>-global_source` feeding `<topic>-global_table`.
    pub fn global_table<K, V>(&self, topic: &str, materialized: Materialized<K, V>) -> GlobalKTable<K, V>
    where
        K: Clone + 'static,
        V: Clone + 'static,
    {
        let shared = &self.shared;
        // Kafka Streams: store `<topic>-STATE-STORE-<n>`, source `KSTREAM-SOURCE-<n+1>`,
        // processor `KTABLE-SOURCE-<n+2>`.
        let kafka_store = match &materialized.name {
            None => shared.kafka_name(&format!("{topic}-STATE-STORE-")),
            Some(_) => None,
        };
        let source = shared.name(
            None,
            topic,
            if shared.kafka_names() {
                "source"
            } else {
                "global_source"
            },
        );
        let node = shared.table_name(
            None,
            topic,
            if shared.kafka_names() {
                "table"
            } else {
                "global_table"
            },
        );
        let store = materialized
            .name
            .clone()
            .or(kafka_store)
            .unwrap_or_else(|| format!("{topic}-global-store"));
        let table = GlobalKTable {
            store: store.clone(),
            node: node.clone(),
            _types: std::marker::PhantomData,
        };
        let (Some(ks), Some(vs)) = (materialized.key_serde.clone(), materialized.value_serde.clone()) else {
            shared.issue(DslIssue::MissingSerde {
                operator: node,
                what: "key or value",
            });
            return table;
        };
        let builder = materialized
            .without_logging()
            .without_caching()
            .store(&store, ks.clone(), vs.clone());
        let config = SourceConfig::new([topic], ks, NullableSerde(vs));
        shared.with(|t| {
            t.global_store(builder, &source, config, &node, |_ctx, store| {
                Ok(GlobalTableUpdater::<K, V> {
                    store: crate::timestamped(&store),
                })
            });
        });
        table
    }
}

/// Writes a global table's topic into its store: a value puts, a null value deletes.
struct GlobalTableUpdater<K: 'static, V: 'static> {
    store: DslStore<K, V>,
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, Option<V>, (), ()> for GlobalTableUpdater<K, V> {
    fn process(&mut self, ctx: &mut ProcessorContext<'_, (), ()>, r: Record<K, Option<V>>) -> ProcessResult {
        if skipped(ctx, &r, Skip::NullKey) {
            return Ok(());
        }
        put_or_delete(&self.store, &r.key, r.value.as_ref(), r.timestamp)?;
        Ok(())
    }
}

/// Maps a stream record to the key to look up in the global table.
type KeyMapper<K, V, GK> = Arc<dyn Fn(&K, &V) -> GK + Send + Sync>;

/// Joins a stream value with the global table's value, if any; `None` drops the record.
type GlobalJoinFn<K, V, GV, VR> = Arc<dyn Fn(&K, V, Option<GV>) -> Option<VR> + Send + Sync>;

/// The stream side of a join with a global table: maps each record to a table key and
/// reads the global store, which every task sees in full.
struct GlobalJoin<K, V, GK: 'static, GV: 'static, VR> {
    key_mapper: KeyMapper<K, V, GK>,
    joiner: GlobalJoinFn<K, V, GV, VR>,
    store: DslStore<GK, GV>,
}

impl<K, V, GK, GV, VR> Processor<K, V, K, VR> for GlobalJoin<K, V, GK, GV, VR>
where
    K: Clone + 'static,
    V: 'static,
    GK: 'static,
    GV: Clone + 'static,
    VR: Clone + 'static,
{
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K, VR>, r: Record<K, V>) -> ProcessResult {
        // A null key goes to the key mapper, which may choose a table key from the value.
        if r.nulls.value {
            drop_record(ctx, "its value is null");
            return Ok(());
        }
        let other = self
            .store
            .get(&(self.key_mapper)(&r.key, &r.value))?
            .map(|o| o.value);
        forward_joined(ctx, r, |k, v| (self.joiner)(k, v, other))
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Joins each record with the global table's value for `key_mapper(key, value)`;
    /// records whose mapped key is not in the table are dropped. Keys are kept, and the
    /// stream is not repartitioned (every task reads the whole table). Records whose value
    /// is null are skipped (see [null keys and values](crate#null-keys-and-values)).
    pub fn join_global<GK, GV, VR>(
        &self,
        table: &GlobalKTable<GK, GV>,
        key_mapper: impl Fn(&K, &V) -> GK + Send + Sync + 'static,
        joiner: impl Fn(&K, V, GV) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR>
    where
        GK: Clone + 'static,
        GV: Clone + 'static,
        VR: Clone + 'static,
    {
        let j: GlobalJoinFn<K, V, GV, VR> = Arc::new(move |k, v, t| t.map(|t| joiner(k, v, t)));
        self.global_join_with("join_global", table, Arc::new(key_mapper), j)
    }

    /// As [`join_global`](Self::join_global), but a record whose mapped key is not in the
    /// table is joined with `None`.
    pub fn left_join_global<GK, GV, VR>(
        &self,
        table: &GlobalKTable<GK, GV>,
        key_mapper: impl Fn(&K, &V) -> GK + Send + Sync + 'static,
        joiner: impl Fn(&K, V, Option<GV>) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR>
    where
        GK: Clone + 'static,
        GV: Clone + 'static,
        VR: Clone + 'static,
    {
        let j: GlobalJoinFn<K, V, GV, VR> = Arc::new(move |k, v, t| Some(joiner(k, v, t)));
        self.global_join_with("left_join_global", table, Arc::new(key_mapper), j)
    }

    fn global_join_with<GK: Clone + 'static, GV: Clone + 'static, VR: Clone + 'static>(
        &self,
        op: &str,
        table: &GlobalKTable<GK, GV>,
        key_mapper: KeyMapper<K, V, GK>,
        joiner: GlobalJoinFn<K, V, GV, VR>,
    ) -> KStream<K, VR> {
        let node = self.child_name(op);
        let store_name = table.store.clone();
        self.shared.processor_with(
            &node,
            move |ctx| {
                Ok(GlobalJoin {
                    key_mapper: key_mapper.clone(),
                    joiner: joiner.clone(),
                    store: crate::processors::open(ctx, &store_name)?,
                })
            },
            &self.node,
        );
        self.derive(node, self.key_serde.clone(), None, false)
    }
}
