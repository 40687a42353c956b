//! The processors DSL operators compile to. Each is an ordinary Processor-API
//! [`Processor`]; user functions are shared between the instances of all tasks through
//! `Arc`s.

use std::sync::Arc;
use streams_core::Nulls;

use streams_core::{KvStore, ProcessResult, Processor, ProcessorContext, Record};
use streams_state::{StoreError, ValueAndTimestamp};

use crate::cache_forward::{CacheForwarding, flush_cached};
use crate::change::{Change, TableIn};
use crate::dyn_serde::DynSerde;
use crate::nulls::{Skip, skipped};
use crate::table_lookup::Lookup;
use crate::timestamped::{TimestampedValues, timestamped};

/// A typed handle of a DSL store, values with their timestamps.
pub(crate) type DslStore<K, V> = KvStore<DynSerde<K>, TimestampedValues<V>>;

/// Emits one output record.
pub(crate) type Emit<'e, K, V> = dyn FnMut(Record<K, V>) -> ProcessResult + 'e;

/// A stateless operator: turns one record into any number of records through `emit`.
pub(crate) type OpFn<K, V, K2, V2> =
    Arc<dyn Fn(Record<K, V>, &mut Emit<'_, K2, V2>) -> ProcessResult + Send + Sync>;

/// Runs a stateless operator.
pub(crate) struct OpProcessor<K, V, K2, V2> {
    pub op: OpFn<K, V, K2, V2>,
}

impl<K, V, K2, V2> Processor<K, V, K2, V2> for OpProcessor<K, V, K2, V2>
where
    K: 'static,
    V: 'static,
    K2: Clone + 'static,
    V2: Clone + 'static,
{
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K2, V2>, record: Record<K, V>) -> ProcessResult {
        (self.op)(record, &mut |out| ctx.forward(out))
    }
}

/// Forwards every record as it is: a merge of several parents, a split's branch, and the
/// nodes that only name a step (a repartition's filter, Kafka Streams' `toStream` after a
/// suppression).
pub(crate) struct PassThrough<K, V>(std::marker::PhantomData<fn(K, V)>);

impl<K, V> PassThrough<K, V> {
    /// The processor, for a node of records `K`, `V`.
    pub(crate) fn new() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, V, K, V> for PassThrough<K, V> {
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K, V>, record: Record<K, V>) -> ProcessResult {
        ctx.forward(record)
    }
}

/// Opens the DSL store `name` (in a processor's supplier), values with their timestamps.
pub(crate) fn open<K, V>(
    ctx: &ProcessorContext<'_, impl Sized, impl Sized>,
    name: &str,
) -> Result<DslStore<K, V>, streams_core::state::StoreError>
where
    K: 'static,
    V: 'static,
{
    Ok(timestamped(&ctx.kv_store::<DynSerde<K>, DynSerde<V>>(name)?))
}

/// `value` at `timestamp`, as a store keeps it.
pub(crate) fn stamp<V>(value: V, timestamp: i64) -> ValueAndTimestamp<V> {
    ValueAndTimestamp { value, timestamp }
}

/// Writes `value` stamped `timestamp` as the row of `key`, or deletes the row when `value`
/// is `None`.
pub(crate) fn put_or_delete<K: 'static, V: Clone + 'static>(
    store: &DslStore<K, V>,
    key: &K,
    value: Option<&V>,
    timestamp: i64,
) -> Result<(), StoreError> {
    match value {
        Some(v) => store.put(key, &stamp(v.clone(), timestamp)),
        None => store.delete(key).map(|_| ()),
    }
}

/// The timestamp an aggregation forwards: the largest of the record's and the old
/// aggregate's (Kafka Streams' rule), the record's for a key without an aggregate.
pub(crate) fn aggregate_time<A>(record: i64, old: Option<&ValueAndTimestamp<A>>) -> i64 {
    old.map_or(record, |o| o.timestamp.max(record))
}

/// Keeps a source topic's latest value per key in a store and forwards every change; reads
/// the key's old value first only when old values are on.
pub(crate) struct TableSource<K: 'static, V: 'static> {
    pub store: DslStore<K, V>,
    /// Forward old values (read when the task made this processor).
    pub send_old: bool,
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, Option<V>, K, Change<V>> for TableSource<K, V> {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
        r: Record<K, Option<V>>,
    ) -> ProcessResult {
        if skipped(ctx, &r, Skip::NullKey) {
            return Ok(());
        }
        let old = if self.send_old {
            self.store.get(&r.key)?.map(|o| o.value)
        } else {
            None
        };
        put_or_delete(&self.store, &r.key, r.value.as_ref(), r.timestamp)?;
        ctx.forward(Change { new: r.value, old }.into_record(r.key, r.timestamp, r.headers))
    }
}

/// Updates an aggregate per key: `update(key, value, old aggregate)`.
pub(crate) type UpdateFn<K, V, A> = Arc<dyn Fn(&K, V, Option<A>) -> A + Send + Sync>;

/// The update of `count`: one more record than the aggregate so far (`0` for none).
pub(crate) fn count_fn<K, V>() -> UpdateFn<K, V, u64> {
    Arc::new(|_, _, old| old.unwrap_or(0) + 1)
}

/// The update of `reduce`: `reducer(aggregate, value)`; a key's first value is its first
/// aggregate.
pub(crate) fn reduce_fn<K, V: 'static>(
    reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
) -> UpdateFn<K, V, V> {
    Arc::new(move |_, v, old| match old {
        Some(agg) => reducer(agg, v),
        None => v,
    })
}

/// The update of `aggregate`: `aggregator(key, value, aggregate)`, the aggregate starting
/// as `initializer()`.
pub(crate) fn aggregate_fn<K, V, A: 'static>(
    initializer: impl Fn() -> A + Send + Sync + 'static,
    aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
) -> UpdateFn<K, V, A> {
    Arc::new(move |k, v, old| aggregator(k, v, old.unwrap_or_else(&initializer)))
}

/// `count`, `reduce` and `aggregate` of a grouped stream: reads the key's aggregate,
/// updates it, writes it back and forwards the change (the old aggregate when old values
/// are on), at the largest timestamp of the key's records so far.
pub(crate) struct AggregateProcessor<K: 'static, V, A: 'static> {
    pub update: UpdateFn<K, V, A>,
    pub store: DslStore<K, A>,
    /// Forward old values.
    pub send_old: bool,
    /// Set when the store is cached: updates go out when the cache writes them down.
    pub forwarding: Option<CacheForwarding>,
}

impl<K: 'static, V, A: 'static> AggregateProcessor<K, V, A> {
    /// The aggregation over `store`, forwarding at cache flush when the store is cached.
    pub fn new(update: UpdateFn<K, V, A>, store: DslStore<K, A>, send_old: bool) -> Result<Self, StoreError> {
        let forwarding = CacheForwarding::new(store.forward_on_flush(send_old)?, send_old);
        Ok(Self {
            update,
            store,
            send_old,
            forwarding,
        })
    }
}

impl<K: Clone + 'static, V: 'static, A: Clone + 'static> Processor<K, V, K, Change<A>>
    for AggregateProcessor<K, V, A>
{
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K, Change<A>>, r: Record<K, V>) -> ProcessResult {
        if skipped(ctx, &r, Skip::NullKeyOrValue) {
            return Ok(());
        }
        let old = self.store.get(&r.key)?;
        let timestamp = aggregate_time(r.timestamp, old.as_ref());
        let old = old.map(|o| o.value);
        if let Some(f) = &self.forwarding {
            // Written down and forwarded by the cache, with the old value of its last flush.
            let new = (self.update)(&r.key, r.value, old);
            self.store.put(&r.key, &stamp(new, timestamp))?;
            return f.forward(ctx, &self.store);
        }
        let kept = if self.send_old { old.clone() } else { None };
        let new = (self.update)(&r.key, r.value, old);
        self.store.put(&r.key, &stamp(new.clone(), timestamp))?;
        let change = Change {
            new: Some(new),
            old: kept,
        };
        ctx.forward(change.into_record(r.key, timestamp, r.headers))
    }

    fn flush(&mut self, ctx: &mut ProcessorContext<'_, K, Change<A>>) -> ProcessResult {
        flush_cached(self.forwarding.as_ref(), ctx, &self.store)
    }
}

/// A table operator on one value of an update (the new or the old one): `None` is absent.
pub(crate) type TableFn<K, V, V2> = Arc<dyn Fn(&K, Option<V>) -> Option<V2> + Send + Sync>;

/// `KTable::filter` and `KTable::map_values`: transforms each update and, when the result
/// is materialized, keeps it in its own store. With old values on, the old value is read
/// from that store before writing, else it is the parent's old value transformed alike.
pub(crate) struct TableOpProcessor<K: 'static, V, V2: 'static> {
    pub f: TableFn<K, V, V2>,
    /// The result's store, when it is materialized.
    pub store: Option<DslStore<K, V2>>,
    /// Forward old values.
    pub send_old: bool,
}

impl<K, I, V, V2> Processor<K, I, K, Change<V2>> for TableOpProcessor<K, V, V2>
where
    K: Clone + 'static,
    I: TableIn<V>,
    V: 'static,
    V2: Clone + 'static,
{
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K, Change<V2>>, r: Record<K, I>) -> ProcessResult {
        let change = r.value.into_change();
        let new = (self.f)(&r.key, change.new);
        let mut old = None;
        if let Some(store) = &self.store {
            if self.send_old {
                old = store.get(&r.key)?.map(|o| o.value);
            }
            put_or_delete(store, &r.key, new.as_ref(), r.timestamp)?;
        } else if self.send_old {
            old = (self.f)(&r.key, change.old);
        }
        ctx.forward(Change { new, old }.into_record(r.key, r.timestamp, r.headers))
    }
}

/// `KTable::to_stream`: a table's changes as plain updates, the new value only.
pub(crate) struct ChangeView;

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, Change<V>, K, Option<V>> for ChangeView {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Option<V>>,
        r: Record<K, Change<V>>,
    ) -> ProcessResult {
        ctx.forward(update_of(r))
    }
}

/// A table's change as an update: the new value, `None` (a null value on the wire) for a
/// deletion, which a stream aggregation skips, as Kafka Streams' does.
fn update_of<K, V>(r: Record<K, Change<V>>) -> Record<K, Option<V>> {
    let is_deletion = r.value.new.is_none();
    Record {
        key: r.key,
        value: r.value.new,
        timestamp: r.timestamp,
        headers: r.headers,
        nulls: Nulls {
            key: false,
            value: is_deletion,
        },
    }
}

/// A processor of a table's updates (`Option<V>`, as [`ChangeView`] makes them) reading the
/// table's changes directly, with no node between: where Kafka Streams' topology has none.
pub(crate) struct FromChanges<P>(pub P);

impl<K, V, KO, VO, P> Processor<K, Change<V>, KO, VO> for FromChanges<P>
where
    K: Clone + 'static,
    V: Clone + 'static,
    P: Processor<K, Option<V>, KO, VO>,
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, KO, VO>) -> ProcessResult {
        self.0.init(ctx)
    }

    fn process(&mut self, ctx: &mut ProcessorContext<'_, KO, VO>, r: Record<K, Change<V>>) -> ProcessResult {
        self.0.process(ctx, update_of(r))
    }

    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, KO, VO>,
        schedule: streams_core::ScheduleId,
        timestamp: i64,
    ) -> ProcessResult {
        self.0.punctuate(ctx, schedule, timestamp)
    }

    fn flush(&mut self, ctx: &mut ProcessorContext<'_, KO, VO>) -> ProcessResult {
        self.0.flush(ctx)
    }

    fn close(&mut self) -> ProcessResult {
        self.0.close()
    }
}

/// Forwards `join(key, value)` of the stream record `r` with the record's key, timestamp
/// and headers (a null key stays null); nothing when it is `None`.
pub(crate) fn forward_joined<K: Clone + 'static, V, VR: Clone + 'static>(
    ctx: &mut ProcessorContext<'_, K, VR>,
    r: Record<K, V>,
    join: impl FnOnce(&K, V) -> Option<VR>,
) -> ProcessResult {
    let Record {
        key,
        value,
        timestamp,
        headers,
        nulls,
    } = r;
    match join(&key, value) {
        Some(value) => ctx.forward(Record {
            key,
            value,
            timestamp,
            headers,
            nulls: nulls.without_value(),
        }),
        None => Ok(()),
    }
}

/// Joins a stream value with the table's current value, if any; `None` drops the record.
pub(crate) type JoinFn<K, V, VT, VR> = Arc<dyn Fn(&K, V, Option<VT>) -> Option<VR> + Send + Sync>;

/// The stream side of a stream-table join: looks each record's key up in the table's
/// store (connected to this processor, so stream and table share a task).
pub(crate) struct StreamTableJoin<K: 'static, V, VT: 'static, VR> {
    pub joiner: JoinFn<K, V, VT, VR>,
    /// The table's rows.
    pub table: Lookup<K, VT>,
    /// A left join: a record with a null key is joined with no row rather than skipped.
    pub left: bool,
}

impl<K: Clone + 'static, V: 'static, VT: Clone + 'static, VR: Clone + 'static> Processor<K, V, K, VR>
    for StreamTableJoin<K, V, VT, VR>
{
    fn process(&mut self, ctx: &mut ProcessorContext<'_, K, VR>, r: Record<K, V>) -> ProcessResult {
        let null_key_left = r.nulls.key && !r.nulls.value && self.left;
        if !null_key_left && skipped(ctx, &r, Skip::NullKeyOrValue) {
            return Ok(());
        }
        // No row has a null key.
        let other = if null_key_left {
            None
        } else {
            self.table.get(&r.key)?.map(|o| o.value)
        };
        forward_joined(ctx, r, |k, v| (self.joiner)(k, v, other))
    }
}
