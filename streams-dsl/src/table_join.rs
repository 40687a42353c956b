//! Table-table joins: [`KTable::join`], [`KTable::left_join`], [`KTable::outer_join`].
//!
//! Both tables must be materialized. Each side's update looks the key up in the other
//! side's store (two nodes, `<join>-this` and `<join>-other`, each connected to the other
//! table's store); a merge node `<join>` forwards the joined update: `Some` the key's new
//! joined value, `None` that the key has no joined row (any more). Connecting both stores
//! puts both tables in one sub-topology, so their topics must be co-partitioned.

use std::sync::Arc;

use crate::error::DslIssue;
use crate::ktable::KTable;
use crate::processors::{JoinFn, OpFn, OpProcessor, StreamTableJoin, open};

/// Joins the optional values of both sides for one key.
type BothFn<K, V, VO, VR> = Arc<dyn Fn(&K, Option<V>, Option<VO>) -> Option<VR> + Send + Sync>;

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// Rows whose key is in both tables, valued `joiner(key, this, other)`.
    pub fn join<VO, VR>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&K, V, VO) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR>
    where
        VO: Clone + 'static,
        VR: Clone + 'static,
    {
        let f: BothFn<K, V, VO, VR> = Arc::new(move |k, a, b| Some(joiner(k, a?, b?)));
        self.table_join("join", other, f)
    }

    /// Rows of this table, valued `joiner(key, this, other if present)`.
    pub fn left_join<VO, VR>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&K, V, Option<VO>) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR>
    where
        VO: Clone + 'static,
        VR: Clone + 'static,
    {
        let f: BothFn<K, V, VO, VR> = Arc::new(move |k, a, b| Some(joiner(k, a?, b)));
        self.table_join("left_join", other, f)
    }

    /// Rows whose key is in either table, valued `joiner(key, this, other)`.
    pub fn outer_join<VO, VR>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&K, Option<V>, Option<VO>) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR>
    where
        VO: Clone + 'static,
        VR: Clone + 'static,
    {
        let f: BothFn<K, V, VO, VR> = Arc::new(move |k, a, b| match (a, b) {
            (None, None) => None,
            (a, b) => Some(joiner(k, a, b)),
        });
        self.table_join("outer_join", other, f)
    }

    fn table_join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        op: &str,
        other: &KTable<K, VO>,
        f: BothFn<K, V, VO, VR>,
    ) -> KTable<K, VR> {
        let shared = &self.shared;
        let node = shared.name(None, &self.node, op);
        let (Some(this_store), Some(other_store)) = (self.store.clone(), other.store.clone()) else {
            let table = if self.store.is_none() {
                &self.node
            } else {
                &other.node
            };
            shared.issue(DslIssue::NotMaterialized {
                operator: node.clone(),
                table: table.clone(),
            });
            return KTable::new(shared.clone(), node, None);
        };
        let this_side = shared.name(Some(&format!("{node}-this")), "", "");
        let other_side = shared.name(Some(&format!("{node}-other")), "", "");

        let g = f.clone();
        let this_joiner: JoinFn<K, Option<V>, VO, Option<VR>> = Arc::new(move |k, a, b| Some(g(k, a, b)));
        shared.processor_with(
            &this_side,
            move |ctx| {
                Ok(StreamTableJoin {
                    joiner: this_joiner.clone(),
                    store: open(ctx, &other_store)?,
                })
            },
            &self.node,
        );
        let other_joiner: JoinFn<K, Option<VO>, V, Option<VR>> = Arc::new(move |k, b, a| Some(f(k, a, b)));
        let this_store_name = this_store.clone();
        shared.processor_with(
            &other_side,
            move |ctx| {
                Ok(StreamTableJoin {
                    joiner: other_joiner.clone(),
                    store: open(ctx, &this_store_name)?,
                })
            },
            &other.node,
        );
        let merge: OpFn<K, Option<VR>, K, Option<VR>> = Arc::new(|r, emit| emit(r));
        let parents = [this_side.clone(), other_side.clone()];
        let other_store = other.store.clone().unwrap_or_default();
        shared.with(|t| {
            t.add_processor(&node, move || OpProcessor { op: merge.clone() }, parents)
                .connect_processor_and_state_stores(&this_side, [other_store])
                .connect_processor_and_state_stores(&other_side, [this_store]);
        });
        KTable::new(shared.clone(), node, None).with_serdes(self.key_serde.clone(), None)
    }
}
