//! [`KTable`]: a changelog stream read as a table (the latest value per key), its
//! operators, and the stream-table joins of [`KStream`].
//!
//! A table's node forwards its updates as `Record<K, Change<V>>` (see [`crate::change`]):
//! the key's new value (`None` a deletion) and, when a node downstream asked for it, the
//! old one. [`KTable::to_stream`] turns them into plain `Option<V>` updates. A suppressed table
//! forwards plain `Option<V>` updates and has no old values; the
//! operators here read either. A materialized table also keeps its values in a named
//! store, which joins read.

use std::cell::OnceCell;
use std::rc::Rc;
use std::sync::Arc;

use streams_state::serde::NullableSerde;

use crate::change::{Change, OldValues};
use crate::dyn_serde::{DynSerde, dyn_serde};
use crate::error::DslIssue;
use crate::kstream::KStream;
use crate::options::Materialized;
use crate::processors::{ChangeView, JoinFn, PassThrough, StreamTableJoin, TableFn, TableOpProcessor, open};
use crate::shared::{ContextSupplier, Shared};
use crate::table_lookup::{OpenLookup, kv_lookup};

/// A table of the latest value per key. Its node forwards every update of a row (its
/// deletion included); [`to_stream`](Self::to_stream) reads them as `Option<V>` values. A
/// materialized table also keeps its values in a named store, which joins read.
pub struct KTable<K, V> {
    pub(crate) shared: Shared,
    pub(crate) node: String,
    pub(crate) store: Option<String>,
    pub(crate) key_serde: Option<DynSerde<K>>,
    pub(crate) value_serde: Option<DynSerde<V>>,
    /// `Some` when the node forwards `Change<V>` (with old values on demand), `None` when it
    /// forwards plain `Option<V>` updates.
    pub(crate) changes: Option<Arc<OldValues>>,
    /// The node `to_stream` added, shared by the clones of this table.
    view: Rc<OnceCell<String>>,
    /// How joins read a row of this table, when its store is not a key-value store of
    /// its keys (a windowed aggregation's).
    lookup: Option<OpenLookup<K, V>>,
}

impl<K, V> Clone for KTable<K, V> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            node: self.node.clone(),
            store: self.store.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            changes: self.changes.clone(),
            view: self.view.clone(),
            lookup: self.lookup.clone(),
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// A table whose node forwards plain `Option<V>` updates (no old values).
    pub(crate) fn new(shared: Shared, node: String, store: Option<String>) -> Self {
        Self {
            shared,
            node,
            store,
            key_serde: None,
            value_serde: None,
            changes: None,
            view: Rc::new(OnceCell::new()),
            lookup: None,
        }
    }

    /// This table, read by joins through `lookup` rather than as a key-value store.
    pub(crate) fn with_lookup(mut self, lookup: OpenLookup<K, V>) -> Self {
        self.lookup = Some(lookup);
        self
    }

    /// How a join reads a row of this table; `None` when it is not materialized.
    pub(crate) fn lookup(&self) -> Option<OpenLookup<K, V>> {
        match (&self.lookup, &self.store) {
            (Some(lookup), _) => Some(lookup.clone()),
            (None, Some(store)) => Some(kv_lookup(store.clone())),
            (None, None) => None,
        }
    }

    /// A table whose node forwards `Change<V>`, with old values when `old_values` is on.
    pub(crate) fn changes(
        shared: Shared,
        node: String,
        store: Option<String>,
        old_values: Arc<OldValues>,
    ) -> Self {
        Self {
            changes: Some(old_values),
            ..Self::new(shared, node, store)
        }
    }

    /// How this table's old values are found (unavailable for a plain table).
    pub(crate) fn old_values(&self) -> Arc<OldValues> {
        self.changes.clone().unwrap_or_else(OldValues::unavailable)
    }

    /// Adds the processor `name` as a child of this table's node, for the update type the
    /// node forwards.
    pub(crate) fn add_child<P, KOut, VOut>(&self, name: &str, supplier: impl ContextSupplier<P, KOut, VOut>)
    where
        P: streams_core::Processor<K, Option<V>, KOut, VOut>
            + streams_core::Processor<K, Change<V>, KOut, VOut>,
        KOut: 'static,
        VOut: 'static,
    {
        match self.changes {
            None => self
                .shared
                .processor_with::<P, K, Option<V>, KOut, VOut>(name, supplier, &self.node),
            Some(_) => self
                .shared
                .processor_with::<P, K, Change<V>, KOut, VOut>(name, supplier, &self.node),
        }
    }

    pub(crate) fn with_serdes(
        mut self,
        key_serde: Option<DynSerde<K>>,
        value_serde: Option<DynSerde<V>>,
    ) -> Self {
        self.key_serde = key_serde;
        self.value_serde = value_serde;
        self
    }

    /// The name of the node that forwards this table's updates, in the DSL's internal form
    /// (new and old value); a Processor-API node that reads them as `Option<V>` values
    /// attaches to [`to_stream`](Self::to_stream)`().node_name()` instead.
    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// The store holding this table's values, if it is materialized.
    pub fn store_name(&self) -> Option<&str> {
        self.store.as_deref()
    }

    /// The rows for which `predicate` holds; an update to a row that fails it is forwarded
    /// as a deletion. Not materialized.
    pub fn filter(&self, predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static) -> Self {
        self.filter_as(predicate, None)
    }

    /// As [`filter`](Self::filter), kept in the store `materialized` describes.
    pub fn filter_as(
        &self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
        materialized: impl Into<Option<Materialized<K, V>>>,
    ) -> Self {
        let f: TableFn<K, V, V> = Arc::new(move |k, v| v.filter(|v| predicate(k, v)));
        self.table_op("filter", f, materialized.into(), self.value_serde.clone())
    }

    /// Each row's value replaced by `f(key, value)`. Not materialized.
    pub fn map_values<V2: Clone + 'static>(
        &self,
        f: impl Fn(&K, V) -> V2 + Send + Sync + 'static,
    ) -> KTable<K, V2> {
        self.map_values_as(f, None)
    }

    /// As [`map_values`](Self::map_values), kept in the store `materialized` describes.
    pub fn map_values_as<V2: Clone + 'static>(
        &self,
        f: impl Fn(&K, V) -> V2 + Send + Sync + 'static,
        materialized: impl Into<Option<Materialized<K, V2>>>,
    ) -> KTable<K, V2> {
        let g: TableFn<K, V, V2> = Arc::new(move |k, v| v.map(|v| f(k, v)));
        self.table_op("map_values", g, materialized.into(), None)
    }

    fn table_op<V2: Clone + 'static>(
        &self,
        op: &str,
        f: TableFn<K, V, V2>,
        materialized: Option<Materialized<K, V2>>,
        value_fallback: Option<DynSerde<V2>>,
    ) -> KTable<K, V2> {
        let given = materialized.as_ref().and_then(|m| m.name.clone());
        let mut materialized = materialized;
        let mut value_fallback = value_fallback;
        if self.shared.kafka_names()
            && let Some(m) = materialized.take_if(|m| m.name.is_none())
        {
            // Kafka Streams keeps no store for an unnamed `Materialized` here, but takes a
            // value of its counter for one.
            self.shared.burn_name();
            value_fallback = m.value_serde.or(value_fallback);
        }
        let node = self.shared.table_name(given.as_deref(), &self.node, op);
        let mut store = None;
        let mut value_serde = value_fallback.clone();
        if let Some(m) = &materialized {
            let name = m.name.clone().unwrap_or_else(|| format!("{node}-store"));
            self.shared.check_named(m.name.is_some(), &node, "a store");
            let ks = m.key_serde.clone().or_else(|| self.key_serde.clone());
            let vs = m.value_serde.clone().or(value_fallback);
            match (ks, vs) {
                (Some(ks), Some(vs)) => {
                    value_serde = Some(vs.clone());
                    store = Some((name.clone(), m.store(&name, ks, vs)));
                }
                _ => self.shared.issue(DslIssue::MissingSerde {
                    operator: node.clone(),
                    what: "store key or value",
                }),
            }
        }
        let store_name = store.as_ref().map(|(n, _)| n.clone());
        let for_supplier = store_name.clone();
        // A materialized result reads its old values from its own store.
        let old_values = if store_name.is_some() {
            OldValues::from_store()
        } else {
            OldValues::derived(vec![self.old_values()])
        };
        let send_old = old_values.clone();
        self.add_child(&node, move |ctx| {
            Ok(TableOpProcessor {
                f: f.clone(),
                store: match &for_supplier {
                    Some(name) => Some(open(ctx, name)?),
                    None => None,
                },
                send_old: send_old.is_on(),
            })
        });
        if let Some((_, builder)) = store {
            self.shared.store(builder, &[&node]);
        }
        KTable::changes(self.shared.clone(), node, store_name, old_values)
            .with_serdes(self.key_serde.clone(), value_serde)
    }

    /// The table's updates as a stream: `Some(value)` for a new value, `None` for a
    /// deletion (Kafka's null value). Adds the node `<table node>-to_stream` (once per
    /// table; a suppressed table needs none).
    pub fn to_stream(&self) -> KStream<K, Option<V>> {
        let value_serde = self.value_serde.clone().map(|vs| dyn_serde(NullableSerde(vs)));
        let node = match self.changes {
            // Kafka Streams adds its node after a suppression too; it passes records on.
            None if self.shared.kafka_names() => self
                .view
                .get_or_init(|| {
                    let node = self.shared.table_name(None, &self.node, "to_stream");
                    self.shared
                        .processor(&node, PassThrough::<K, Option<V>>::new, &self.node);
                    node
                })
                .clone(),
            None => self.node.clone(),
            Some(_) => self
                .view
                .get_or_init(|| {
                    let node = self.shared.table_name(None, &self.node, "to_stream");
                    self.shared.processor_with::<_, K, Change<V>, K, Option<V>>(
                        &node,
                        |_| Ok(ChangeView),
                        &self.node,
                    );
                    node
                })
                .clone(),
        };
        KStream::new(self.shared.clone(), node, self.key_serde.clone(), value_serde)
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Joins each record with the table's current value for its key; records whose key is
    /// not in the table are dropped. The table must be materialized; a stream whose key
    /// changed is repartitioned first, so both sides are partitioned alike. Records whose
    /// key or value is null are skipped (see [null keys and values](crate#null-keys-and-values)).
    pub fn join<VT, VR>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&K, V, VT) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR>
    where
        VT: Clone + 'static,
        VR: Clone + 'static,
    {
        let j: JoinFn<K, V, VT, VR> = Arc::new(move |k, v, t| t.map(|t| joiner(k, v, t)));
        self.join_with("join", table, j)
    }

    /// As [`join`](Self::join), but a record whose key is not in the table is joined with
    /// `None`; so is a record whose key is null (see [null keys and values](crate#null-keys-and-values)).
    pub fn left_join<VT, VR>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&K, V, Option<VT>) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR>
    where
        VT: Clone + 'static,
        VR: Clone + 'static,
    {
        let j: JoinFn<K, V, VT, VR> = Arc::new(move |k, v, t| Some(joiner(k, v, t)));
        self.join_with("left_join", table, j)
    }

    fn join_with<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        op: &str,
        table: &KTable<K, VT>,
        joiner: JoinFn<K, V, VT, VR>,
    ) -> KStream<K, VR> {
        let is_left = op == "left_join";
        let left = if self.repartition_required {
            // A left join takes records with a null key: they cross the topic.
            self.through_topic("group", None, is_left)
        } else {
            self.clone()
        };
        let node = left.child_name(op);
        let (Some(store), Some(lookup)) = (table.store.clone(), table.lookup()) else {
            self.shared.issue(DslIssue::NotMaterialized {
                operator: node.clone(),
                table: table.node.clone(),
            });
            return left.derive(node, None, None, false);
        };
        self.shared.processor_with(
            &node,
            move |ctx| {
                Ok(StreamTableJoin {
                    joiner: joiner.clone(),
                    table: lookup(ctx.stores())?,
                    left: is_left,
                })
            },
            &left.node,
        );
        self.shared.with(|t| {
            t.connect_processor_and_state_stores(&node, [store]);
        });
        left.derive(node, left.key_serde.clone(), None, false)
    }
}
