//! Table-table joins: [`KTable::join`], [`KTable::left_join`], [`KTable::outer_join`].
//!
//! Both tables must be materialized. Each side's update looks the key up in the other
//! side's store (two nodes, `<join>-this` and `<join>-other`, each connected to the other
//! table's store); a merge node `<join>` forwards the joined update: `Some` the key's new
//! joined value, `None` that the key has no joined row (any more). Connecting both stores
//! puts both tables in one sub-topology, so their topics must be co-partitioned.
//!
//! As in Kafka Streams, a side forwards nothing when the other side has no row for the key
//! and the update cannot change the joined row: always for a side that is not kept (both
//! sides of `join`, the other side of `left_join`), and for a kept side (this side of
//! `left_join`, both sides of `outer_join`) when the update has neither a new nor an old
//! value (a deletion of an absent key). Kept sides therefore always forward old values.
//!
//! A joined update carries the larger of both sides' timestamps (this side's record's and
//! the other side's stored one), as in Kafka Streams; the record's when the other side has
//! no row.
//!
//! With old values on (the joined table is re-grouped downstream), a side also joins the
//! old value of its update with the other side's current value: that is the joined value
//! the key had before this update, since the other side did not change meanwhile. Turning
//! them on for the join turns them on for both tables.

use std::marker::PhantomData;
use std::sync::Arc;

use streams_core::{ProcessResult, Processor, ProcessorContext, Record};

use crate::change::{Change, OldValues, TableIn};
use crate::error::DslIssue;
use crate::ktable::KTable;
use crate::processors::PassThrough;
use crate::table_lookup::Lookup;

/// Joins the optional values of both sides for one key.
type BothFn<K, V, VO, VR> = Arc<dyn Fn(&K, Option<V>, Option<VO>) -> Option<VR> + Send + Sync>;

/// One side of a table-table join: joins the new (and, with old values on, the old) value
/// of this side's update with the other side's current value.
struct TableJoinSide<K: 'static, V, VO: 'static, VR> {
    /// `joiner(key, this side's value, other side's value)`.
    joiner: BothFn<K, V, VO, VR>,
    /// The other table's rows.
    other: Lookup<K, VO>,
    send_old: bool,
    /// This side's rows are kept without a row on the other side (left and outer joins).
    kept: bool,
    /// This side's updates carry old values.
    old_in: bool,
    _types: PhantomData<fn(V) -> VR>,
}

impl<K, I, V, VO, VR> Processor<K, I, K, Change<VR>> for TableJoinSide<K, V, VO, VR>
where
    K: Clone + 'static,
    I: TableIn<V>,
    V: 'static,
    VO: Clone + 'static,
    VR: Clone + 'static,
{
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K, Change<VR>>, r: Record<K, I>) -> ProcessResult {
        let change = r.value.into_change();
        let other = self.other.get(&r.key)?;
        let timestamp = other
            .as_ref()
            .map_or(r.timestamp, |o| o.timestamp.max(r.timestamp));
        let other = other.map(|o| o.value);
        let unchanged = self.old_in && change.new.is_none() && change.old.is_none();
        if other.is_none() && (!self.kept || unchanged) {
            return Ok(());
        }
        let old = if self.send_old {
            (self.joiner)(&r.key, change.old, other.clone())
        } else {
            None
        };
        let new = (self.joiner)(&r.key, change.new, other);
        ctx.forward(Change { new, old }.into_record(r.key, timestamp, r.headers))
    }
}

impl<K, V> KTable<K, V> {
    /// The stores of this table and `other`, which the join `node` reads; `None` after
    /// reporting [`DslIssue::NotMaterialized`] for the first of them that has none.
    pub(crate) fn join_stores<KO, VO>(&self, other: &KTable<KO, VO>, node: &str) -> Option<(String, String)> {
        let (Some(this_store), Some(other_store)) = (self.store.clone(), other.store.clone()) else {
            let table = if self.store.is_none() {
                &self.node
            } else {
                &other.node
            };
            self.shared.issue(DslIssue::NotMaterialized {
                operator: node.to_owned(),
                table: table.clone(),
            });
            return None;
        };
        Some((this_store, other_store))
    }
}

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
        self.table_join("join", other, f, (false, false))
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
        self.table_join("left_join", other, f, (true, false))
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
        self.table_join("outer_join", other, f, (true, true))
    }

    fn table_join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        op: &str,
        other: &KTable<K, VO>,
        f: BothFn<K, V, VO, VR>,
        (this_kept, other_kept): (bool, bool),
    ) -> KTable<K, VR> {
        let shared = &self.shared;
        let node = shared.table_name(None, &self.node, op);
        let (Some((this_store, other_store)), Some(this_rows), Some(other_rows)) =
            (self.join_stores(other, &node), self.lookup(), other.lookup())
        else {
            return KTable::new(shared.clone(), node, None);
        };
        let [this_side, other_side] = [("KTABLE-JOINTHIS-", "this"), ("KTABLE-JOINOTHER-", "other")]
            .map(|(prefix, side)| {
                shared
                    .kafka_name(prefix)
                    .unwrap_or_else(|| format!("{node}-{side}"))
            })
            .map(|name| shared.name(Some(&name), "", ""));

        let (this_old, other_old) = (self.old_values(), other.old_values());
        if this_kept {
            this_old.enable();
        }
        if other_kept {
            other_old.enable();
        }
        let old_values = OldValues::derived(vec![this_old.clone(), other_old.clone()]);
        let (send_this, send_other) = (old_values.clone(), old_values.clone());
        let this_joiner = f.clone();
        self.add_child(&this_side, move |ctx| {
            Ok(TableJoinSide {
                joiner: this_joiner.clone(),
                other: other_rows(ctx.stores())?,
                send_old: send_this.is_on(),
                kept: this_kept,
                old_in: this_old.is_on(),
                _types: PhantomData,
            })
        });
        let other_joiner: BothFn<K, VO, V, VR> = Arc::new(move |k, b, a| f(k, a, b));
        other.add_child(&other_side, move |ctx| {
            Ok(TableJoinSide {
                joiner: other_joiner.clone(),
                other: this_rows(ctx.stores())?,
                send_old: send_other.is_on(),
                kept: other_kept,
                old_in: other_old.is_on(),
                _types: PhantomData,
            })
        });
        let parents = [this_side.clone(), other_side.clone()];
        shared.with(|t| {
            t.add_processor(&node, PassThrough::<K, Change<VR>>::new, parents)
                .connect_processor_and_state_stores(&this_side, [other_store])
                .connect_processor_and_state_stores(&other_side, [this_store]);
        });
        KTable::changes(shared.clone(), node, None, old_values).with_serdes(self.key_serde.clone(), None)
    }
}
