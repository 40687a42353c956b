//! The four processors of a foreign-key join, in the order a left update meets them:
//! [`SubscriptionSend`] (left: subscribe the row to its foreign key),
//! [`SubscriptionJoin`] (right: keep the subscription, answer with the right value),
//! [`ForeignJoin`] (right: a right update answers every subscriber of its key) and
//! [`ResponseJoin`] (left: join the answer with the row's current value, unless stale).
//!
//! Invariants:
//! - the subscription store holds exactly the live subscriptions: one per left row, under
//!   the row's current foreign key (a moved row's old subscription is deleted);
//! - a response carries the hash of the left value that caused it; [`ResponseJoin`] joins
//!   it only if the left row's current value has that hash (or both are absent), so an
//!   answer to an outdated subscription never overwrites a newer result.

use std::marker::PhantomData;
use std::sync::Arc;
use streams_core::Nulls;

use streams_core::state::serde::BytesSerde;
use streams_core::{KvStore, ProcessResult, Processor, ProcessorContext, Record};

use crate::change::{Change, TableIn};
use crate::dyn_serde::DynSerde;
use crate::fk_join::wire::{
    Instruction, Response, Subscription, SubscriptionSerde, hash128, subscription_key, subscription_prefix,
};
use crate::nulls::drop_record;
use crate::processors::{DslStore, put_or_delete};

/// The subscription store: `[fk length][fk][pk]` to the stored subscription.
pub(crate) type SubscriptionStore<K> = KvStore<BytesSerde, SubscriptionSerde<K>>;

/// Extracts a left row's foreign key from its key and value; `None` is a null foreign key.
pub(crate) type FkFn<K, V, KO> = Arc<dyn Fn(&K, &V) -> Option<KO> + Send + Sync>;

/// Joins a left value with the right value, if any; `None` is no joined row.
pub(crate) type FkJoinFn<V, VO, VR> = Arc<dyn Fn(V, Option<VO>) -> Option<VR> + Send + Sync>;

/// Left side: turns each update of a left row into subscriptions of its foreign keys. A
/// subscription's key is the foreign key, `None` for a null one (written as a null key).
pub(crate) struct SubscriptionSend<K: 'static, V: 'static, KO: 'static> {
    pub extractor: FkFn<K, V, KO>,
    pub fk_serde: DynSerde<KO>,
    pub value_serde: DynSerde<V>,
    pub left_join: bool,
}

impl<K, I, V, KO> Processor<K, I, Option<KO>, Subscription<K>> for SubscriptionSend<K, V, KO>
where
    K: Clone + 'static,
    I: TableIn<V>,
    V: 'static,
    KO: Clone + 'static,
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Option<KO>, Subscription<K>>,
        r: Record<K, I>,
    ) -> ProcessResult {
        let change = r.value.into_change();
        let (old_row, new_row) = (change.old.is_some(), change.new.is_some());
        if !old_row && !new_row {
            return Ok(());
        }
        let hash = match &change.new {
            Some(v) => Some(hash128(&self.value_serde.serialize(v)?)),
            None => None,
        };
        let partition = ctx.record_metadata().map_or(-1, |m| m.partition);
        let old_fk = change.old.as_ref().and_then(|v| (self.extractor)(&r.key, v));
        let new_fk = change.new.as_ref().and_then(|v| (self.extractor)(&r.key, v));
        let moved = match (&old_fk, &new_fk) {
            (Some(o), Some(n)) => self.fk_serde.serialize(o)? != self.fk_serde.serialize(n)?,
            _ => false,
        };
        // A row with a null foreign key joins no right row: an inner join drops it (its
        // previous result, if any, deleted), a left join answers it with no right row.
        if !self.left_join && old_fk.is_none() && new_fk.is_none() {
            drop_record(ctx, "its foreign key is null");
            return Ok(());
        }
        let mut send = |fk: Option<KO>, instruction: Instruction| {
            ctx.forward(Record {
                key: fk,
                value: Subscription {
                    instruction,
                    hash,
                    partition,
                    pk: r.key.clone(),
                },
                timestamp: r.timestamp,
                headers: r.headers.clone(),
                nulls: Nulls::NONE,
            })
        };
        use Instruction::*;
        match (old_fk, new_fk) {
            // Moved to another foreign key: unsubscribed from the old one.
            (Some(old), Some(new)) if moved => {
                send(Some(old), DeleteNoPropagate)?;
                send(Some(new), PropagateNullIfAbsent)
            }
            (_, Some(new)) if self.left_join => send(Some(new), PropagateNullIfAbsent),
            (_, Some(new)) => send(Some(new), PropagateOnlyIfPresent),
            // A left join's deleted row, or one with a null foreign key: unsubscribed from
            // its old foreign key, and answered through a subscription of the null foreign
            // key (Kafka Streams' way), with no right row: a tombstone at the row's time
            // for a deleted row, `joiner(value, None)` otherwise.
            (Some(old), None) if self.left_join => {
                send(Some(old), DeleteNoPropagate)?;
                send(None, PropagateNullIfAbsent)
            }
            (None, None) if self.left_join => send(None, PropagateNullIfAbsent),
            // An inner join's deleted row, or one whose foreign key became null: its old
            // foreign key answers with no right value, which the left side turns into a
            // tombstone.
            (Some(old), None) => send(Some(old), DeleteAndPropagate),
            // Dropped above.
            (None, None) => Ok(()),
        }
    }
}

/// Right side, from the subscription topic: stores or removes the subscription, then
/// answers it with the right table's current value as its instruction says.
pub(crate) struct SubscriptionJoin<K: 'static, KO: 'static, VO: 'static> {
    pub subscriptions: SubscriptionStore<K>,
    pub right: DslStore<KO, VO>,
    pub fk_serde: DynSerde<KO>,
    pub pk_serde: DynSerde<K>,
}

impl<K, KO, VO> Processor<Option<KO>, Subscription<K>, K, Response<VO>> for SubscriptionJoin<K, KO, VO>
where
    K: Clone + 'static,
    KO: Clone + 'static,
    VO: Clone + 'static,
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Response<VO>>,
        r: Record<Option<KO>, Subscription<K>>,
    ) -> ProcessResult {
        let sub = r.value;
        // A null foreign key (a left join's row deleted or without a foreign key) has no
        // subscription to keep and no row: its instruction alone answers it.
        if let Some(fk) = &r.key {
            let key = subscription_key(&self.fk_serde.serialize(fk)?, &self.pk_serde.serialize(&sub.pk)?)?;
            if sub.instruction.deletes() {
                self.subscriptions.delete(&key)?;
            } else {
                self.subscriptions.put(&key, &sub)?;
            }
        }
        if sub.instruction == Instruction::DeleteNoPropagate {
            return Ok(());
        }
        // The result's time is the later of the subscription's and the right row's, for a
        // delete too (Kafka Streams reads the row whatever the instruction).
        let row = match &r.key {
            Some(fk) => self.right.get(fk)?,
            None => None,
        };
        let timestamp = row.as_ref().map_or(r.timestamp, |v| v.timestamp.max(r.timestamp));
        let right = match sub.instruction {
            Instruction::DeleteAndPropagate | Instruction::DeleteNoPropagate => None,
            Instruction::PropagateNullIfAbsent => row,
            Instruction::PropagateOnlyIfPresent => match row {
                Some(v) => Some(v),
                None => return Ok(()),
            },
        };
        ctx.forward(Record {
            key: sub.pk,
            value: Response {
                hash: sub.hash,
                value: right.map(|v| v.value),
                partition: sub.partition,
            },
            timestamp,
            headers: r.headers,
            nulls: Nulls::NONE,
        })
    }
}

/// Right side, from the right table: answers every subscriber of the updated key (one
/// prefix scan of the subscription store) with the new right value, at the right update's
/// timestamp (as Kafka Streams 4.1: not the later of it and the subscription's).
pub(crate) struct ForeignJoin<K: 'static, KO: 'static, VO> {
    pub subscriptions: SubscriptionStore<K>,
    pub fk_serde: DynSerde<KO>,
    pub _types: PhantomData<fn(VO)>,
}

impl<K, KO, I, VO> Processor<KO, I, K, Response<VO>> for ForeignJoin<K, KO, VO>
where
    K: Clone + 'static,
    KO: 'static,
    I: TableIn<VO>,
    VO: Clone + 'static,
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Response<VO>>,
        r: Record<KO, I>,
    ) -> ProcessResult {
        let new = r.value.into_change().new;
        let prefix = subscription_prefix(&self.fk_serde.serialize(&r.key)?)?;
        let subscribers: Vec<Subscription<K>> = {
            let reader = self.subscriptions.read()?;
            reader
                .prefix_scan(&prefix, &BytesSerde)?
                .map(|e| e.map(|(_, s)| s))
                .collect::<Result<_, _>>()?
        };
        for sub in subscribers {
            ctx.forward(Record {
                key: sub.pk,
                value: Response {
                    hash: sub.hash,
                    value: new.clone(),
                    partition: sub.partition,
                },
                timestamp: r.timestamp,
                headers: r.headers.clone(),
                nulls: Nulls::NONE,
            })?;
        }
        Ok(())
    }
}

/// Left side, from the response topic: joins a response with the left row's current value
/// if the response answers that value (equal hashes), keeps the result in the join's store
/// and forwards it; drops a stale response.
pub(crate) struct ResponseJoin<K: 'static, V: 'static, VO, VR: 'static> {
    pub left: DslStore<K, V>,
    pub value_serde: DynSerde<V>,
    pub joiner: FkJoinFn<V, VO, VR>,
    pub store: DslStore<K, VR>,
    pub send_old: bool,
}

impl<K, V, VO, VR> Processor<K, Response<VO>, K, Change<VR>> for ResponseJoin<K, V, VO, VR>
where
    K: Clone + 'static,
    V: 'static,
    VO: 'static,
    VR: Clone + 'static,
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<VR>>,
        r: Record<K, Response<VO>>,
    ) -> ProcessResult {
        let current = self.left.get(&r.key)?.map(|v| v.value);
        let hash = match &current {
            Some(v) => Some(hash128(&self.value_serde.serialize(v)?)),
            None => None,
        };
        if hash != r.value.hash {
            return Ok(());
        }
        let new = current.and_then(|v| (self.joiner)(v, r.value.value));
        let old = if self.send_old {
            self.store.get(&r.key)?.map(|v| v.value)
        } else {
            None
        };
        put_or_delete(&self.store, &r.key, new.as_ref(), r.timestamp)?;
        ctx.forward(Change { new, old }.into_record(r.key, r.timestamp, r.headers))
    }
}
