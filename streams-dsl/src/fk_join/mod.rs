//! Foreign-key table-table joins (Kafka Streams' KIP-213): [`KTable::join_foreign`] and
//! [`KTable::left_join_foreign`] join each row of this (left) table with the row of the
//! other (right) table whose key `extractor(value)` returns (or `extractor(key, value)`,
//! with the `_with_key` methods). The tables need not be co-partitioned; many left rows
//! may join one right row. A `None` foreign key joins no row.
//!
//! A left update is sent, keyed by its foreign key, to the topic
//! `<name>-subscription-registration-topic`, read in the right table's task; there it is
//! kept in the subscription store `<name>-subscription-store` under `[fk][pk]` and answered
//! with the right row's current value through `<name>-subscription-response-topic`, keyed
//! by the left key and sent back to the left row's partition, where the left task joins it
//! with the left row. A right update answers every subscriber of its key (a prefix scan of
//! the subscription store). `<name>` is the `Materialized` name, else
//! `<left table node>-fk_join` (`-fk_left_join`); it also names the result's node, whose
//! store is the `Materialized` name, else `<name>-store`.
//!
//! Invariants (see [`processors`] and [`wire`]):
//! - the result for a key changes only on a response whose hash is the hash of the left
//!   row's current value: a response to an older value of the row (the row changed, or
//!   moved to another foreign key, while the subscription travelled) is dropped, so a row
//!   moving to a new foreign key emits the new join and never the stale one;
//! - a left row whose foreign key changes unsubscribes from the old key; a deleted left
//!   row unsubscribes and is answered with a tombstone;
//! - a row whose foreign key is `None` holds no subscription: an inner join drops it (and
//!   deletes its earlier result), a left join answers it through a subscription of the
//!   null foreign key, which the right side answers at once with no row;
//! - an inner join emits a tombstone for a row without a right value whenever its previous
//!   result might have existed (as Kafka Streams, a tombstone for an absent result is
//!   possible); a left join emits `joiner(v, None)` instead.
//!
//! Both tables must be materialized (the left store checks hashes, the right store answers
//! subscriptions); the left table's updates must carry old values (not a windowed table).

mod processors;
mod wire;

use std::marker::PhantomData;
use std::sync::Arc;

use streams_core::SinkConfig;
use streams_core::state::serde::{BytesSerde, NullableSerde};

use crate::change::OldValues;
use crate::dyn_serde::dyn_serde;
use crate::error::DslIssue;
use crate::ktable::KTable;
use crate::options::Materialized;
use crate::processors::open;
use crate::shared::Shared;
use processors::{
    FkFn, FkJoinFn, ForeignJoin, ResponseJoin, SubscriptionJoin, SubscriptionSend, SubscriptionStore,
};
use wire::{Response, ResponseSerde, SubscriptionSerde};

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// Rows of this table whose foreign key `extractor(value)` is a key of `other`, valued
    /// `joiner(value, other value)`. Updates of either table re-emit the affected rows; a
    /// row that loses its match is deleted. The result is kept in the store `materialized`
    /// names (its serde for `VR` is required).
    ///
    /// The extractor returns the foreign key, or an `Option` of it: a row whose foreign key
    /// is `None` (Kafka Streams' null foreign key) joins no row; it is skipped (logged and
    /// counted as dropped), and its earlier result, if any, deleted.
    pub fn join_foreign<KO, VO, VR, F>(
        &self,
        other: &KTable<KO, VO>,
        extractor: impl Fn(&V) -> F + Send + Sync + 'static,
        joiner: impl Fn(V, VO) -> VR + Send + Sync + 'static,
        materialized: Materialized<K, VR>,
    ) -> KTable<K, VR>
    where
        KO: Clone + 'static,
        VO: Clone + 'static,
        VR: Clone + 'static,
        F: Into<Option<KO>>,
    {
        self.join_foreign_with_key(other, move |_, v| extractor(v), joiner, materialized)
    }

    /// As [`join_foreign`](Self::join_foreign), with an extractor that reads the row's key
    /// as well as its value (Kafka Streams' `BiFunction` extractor, KIP-1104).
    pub fn join_foreign_with_key<KO, VO, VR, F>(
        &self,
        other: &KTable<KO, VO>,
        extractor: impl Fn(&K, &V) -> F + Send + Sync + 'static,
        joiner: impl Fn(V, VO) -> VR + Send + Sync + 'static,
        materialized: Materialized<K, VR>,
    ) -> KTable<K, VR>
    where
        KO: Clone + 'static,
        VO: Clone + 'static,
        VR: Clone + 'static,
        F: Into<Option<KO>>,
    {
        let j: FkJoinFn<V, VO, VR> = Arc::new(move |v, o| o.map(|o| joiner(v, o)));
        let e: FkFn<K, V, KO> = Arc::new(move |k, v| extractor(k, v).into());
        self.fk_join("fk_join", other, e, j, materialized, false)
    }

    /// As [`join_foreign`](Self::join_foreign), but every row of this table is kept:
    /// valued `joiner(value, None)` while its foreign key is not a key of `other`, or is
    /// `None`.
    pub fn left_join_foreign<KO, VO, VR, F>(
        &self,
        other: &KTable<KO, VO>,
        extractor: impl Fn(&V) -> F + Send + Sync + 'static,
        joiner: impl Fn(V, Option<VO>) -> VR + Send + Sync + 'static,
        materialized: Materialized<K, VR>,
    ) -> KTable<K, VR>
    where
        KO: Clone + 'static,
        VO: Clone + 'static,
        VR: Clone + 'static,
        F: Into<Option<KO>>,
    {
        self.left_join_foreign_with_key(other, move |_, v| extractor(v), joiner, materialized)
    }

    /// As [`left_join_foreign`](Self::left_join_foreign), with an extractor that reads the
    /// row's key as well as its value (KIP-1104).
    pub fn left_join_foreign_with_key<KO, VO, VR, F>(
        &self,
        other: &KTable<KO, VO>,
        extractor: impl Fn(&K, &V) -> F + Send + Sync + 'static,
        joiner: impl Fn(V, Option<VO>) -> VR + Send + Sync + 'static,
        materialized: Materialized<K, VR>,
    ) -> KTable<K, VR>
    where
        KO: Clone + 'static,
        VO: Clone + 'static,
        VR: Clone + 'static,
        F: Into<Option<KO>>,
    {
        let j: FkJoinFn<V, VO, VR> = Arc::new(move |v, o| Some(joiner(v, o)));
        let e: FkFn<K, V, KO> = Arc::new(move |k, v| extractor(k, v).into());
        self.fk_join("fk_left_join", other, e, j, materialized, true)
    }

    fn fk_join<KO, VO, VR>(
        &self,
        op: &str,
        other: &KTable<KO, VO>,
        extractor: FkFn<K, V, KO>,
        joiner: FkJoinFn<V, VO, VR>,
        materialized: Materialized<K, VR>,
        left_join: bool,
    ) -> KTable<K, VR>
    where
        KO: Clone + 'static,
        VO: Clone + 'static,
        VR: Clone + 'static,
    {
        let shared = &self.shared;
        let given = materialized.name.clone();
        shared.check_named(given.is_some(), &self.node, "a store and subscription topics");
        let kafka = shared.kafka_names();
        // Under Kafka Streams' names every name is taken after the checks below, in Kafka
        // Streams' order; until then problems are reported against a provisional name.
        let mut node = match kafka {
            true => given.clone().unwrap_or_else(|| format!("{}-{op}", self.node)),
            false => shared.name(given.as_deref(), &self.node, op),
        };
        let failed = || KTable::new(shared.clone(), node.clone(), None);
        let Some((left_store, right_store)) = self.join_stores(other, &node) else {
            return failed();
        };
        if !self.old_values().available() {
            shared.issue(DslIssue::NoOldValues {
                operator: node.clone(),
                table: self.node.clone(),
            });
            return failed();
        }
        let serdes = (
            self.key_serde.clone(),
            self.value_serde.clone(),
            other.key_serde.clone(),
            other.value_serde.clone(),
            materialized.key_serde.clone().or_else(|| self.key_serde.clone()),
            materialized.value_serde.clone(),
        );
        let (Some(ks), Some(vs), Some(fks), Some(vos), Some(rks), Some(rvs)) = serdes else {
            shared.issue(DslIssue::MissingSerde {
                operator: node.clone(),
                what: "table key, table value or result value",
            });
            return failed();
        };
        // The left side needs the old value of each update to unsubscribe its old key.
        self.old_values().enable();

        let names = match kafka {
            true => FkNames::kafka(shared, given.as_deref()),
            false => FkNames::derived(&node, given.as_deref()),
        }
        .claimed(shared, kafka);
        let FkNames {
            send,
            reg_sink,
            reg_source,
            sub_join,
            foreign_join,
            resp_sink,
            resp_source,
            reg_topic,
            resp_topic,
            sub_store,
            result_store,
            result,
        } = names;
        node = result;

        let (extractor_fk, vs_send, fks_send) = (extractor, vs.clone(), fks.clone());
        self.add_child(&send, move |_| {
            Ok(SubscriptionSend {
                extractor: extractor_fk.clone(),
                fk_serde: fks_send.clone(),
                value_serde: vs_send.clone(),
                left_join,
            })
        });
        let sub_wire = SubscriptionSerde(ks.clone());
        let resp_wire = ResponseSerde(vos.clone());
        // A response goes back to the partition of the left row that subscribed.
        let partitioner =
            |_: &str, _: &K, r: &Response<VO>, n: i32| (0..n).contains(&r.partition).then_some(r.partition);
        // A subscription of a null foreign key is written with a null key.
        let reg_keys = dyn_serde(NullableSerde(fks.clone()));
        shared.with(|t| {
            t.internal_topic(&reg_topic).internal_topic(&resp_topic);
            t.add_sink_with(
                &reg_sink,
                SinkConfig::topic(&reg_topic, reg_keys.clone(), sub_wire.clone()),
                [&send],
            )
            .add_source(&reg_source, [&reg_topic], reg_keys, sub_wire.clone());
        });
        let (store_a, right_a, fks_a, ks_a) =
            (sub_store.clone(), right_store.clone(), fks.clone(), ks.clone());
        shared.processor_with(
            &sub_join,
            move |ctx| {
                Ok(SubscriptionJoin::<K, KO, VO> {
                    subscriptions: ctx.kv_store(&store_a)?,
                    right: open(ctx, &right_a)?,
                    fk_serde: fks_a.clone(),
                    pk_serde: ks_a.clone(),
                })
            },
            &reg_source,
        );
        let (store_b, fks_b) = (sub_store.clone(), fks.clone());
        other.add_child(&foreign_join, move |ctx| {
            let subscriptions: SubscriptionStore<K> = ctx.kv_store(&store_b)?;
            Ok(ForeignJoin::<K, KO, VO> {
                subscriptions,
                fk_serde: fks_b.clone(),
                _types: PhantomData,
            })
        });
        shared.store(
            materialized.store_of(&sub_store, BytesSerde, sub_wire.clone()),
            &[&sub_join, &foreign_join],
        );
        let old_values = OldValues::from_store();
        let send_old = old_values.clone();
        let (left_c, result_c, vs_c) = (left_store.clone(), result_store.clone(), vs.clone());
        shared.with(|t| {
            t.add_sink_with(
                &resp_sink,
                SinkConfig::topic(&resp_topic, ks.clone(), resp_wire.clone()).partitioner(partitioner),
                [&sub_join, &foreign_join],
            )
            .add_source(&resp_source, [&resp_topic], ks.clone(), resp_wire)
            .add_processor_with(
                &node,
                move |ctx| {
                    Ok(ResponseJoin::<K, V, VO, VR> {
                        left: open(ctx, &left_c)?,
                        value_serde: vs_c.clone(),
                        joiner: joiner.clone(),
                        store: open(ctx, &result_c)?,
                        send_old: send_old.is_on(),
                    })
                },
                [&resp_source],
            )
            .connect_processor_and_state_stores(&sub_join, [right_store])
            .connect_processor_and_state_stores(&node, [left_store]);
        });
        shared.store(
            materialized.store(&result_store, rks.clone(), rvs.clone()),
            &[&node],
        );
        KTable::changes(shared.clone(), node, Some(result_store), old_values)
            .with_serdes(Some(rks), Some(rvs))
    }
}

/// The names of a foreign-key join's nodes, topics and stores.
struct FkNames {
    send: String,
    reg_sink: String,
    reg_source: String,
    sub_join: String,
    foreign_join: String,
    resp_sink: String,
    resp_source: String,
    reg_topic: String,
    resp_topic: String,
    sub_store: String,
    result_store: String,
    /// The result node (under [`Naming::Derived`](crate::Naming), the join's node itself).
    result: String,
}

impl FkNames {
    /// The names derived from the join's node `node`; the result store is `given`, else
    /// `<node>-store`.
    fn derived(node: &str, given: Option<&str>) -> Self {
        let part = |suffix: &str| format!("{node}-{suffix}");
        Self {
            send: part("subscription-send"),
            reg_sink: part("subscription-registration-sink"),
            reg_source: part("subscription-registration-source"),
            sub_join: part("subscription-join"),
            foreign_join: part("foreign-join"),
            resp_sink: part("subscription-response-sink"),
            resp_source: part("subscription-response-source"),
            reg_topic: part("subscription-registration-topic"),
            resp_topic: part("subscription-response-topic"),
            sub_store: part("subscription-store"),
            result_store: given.map_or_else(|| part("store"), str::to_owned),
            result: node.to_owned(),
        }
    }

    /// These names with every node name claimed (the result node's too when `result_too`:
    /// under [`Naming::Derived`](crate::Naming) it is the join's node, claimed already).
    fn claimed(mut self, shared: &Shared, result_too: bool) -> Self {
        for name in [
            &mut self.send,
            &mut self.reg_sink,
            &mut self.reg_source,
            &mut self.sub_join,
            &mut self.foreign_join,
            &mut self.resp_sink,
            &mut self.resp_source,
        ] {
            *name = shared.name(Some(name), "", "");
        }
        if result_too {
            self.result = shared.name(Some(&self.result), "", "");
        }
        self
    }

    /// Kafka Streams' names of a join whose `TableJoined` is unnamed, taking thirteen
    /// values of its counter in its order (fourteen without a result store name `given`).
    /// Kafka Streams has two nodes more than this crate (a second subscription processor
    /// and the response resolver, whose work the subscription join and the result node do
    /// here): their values are taken unused. Kafka Streams keeps no result store for an
    /// unnamed `Materialized`; this crate needs one, named as Kafka Streams would have
    /// named it.
    fn kafka(shared: &Shared, given: Option<&str>) -> Self {
        // In Kafka Streams' order; the second subscription processor and the response
        // resolver are Kafka Streams' nodes this crate does without.
        let [
            reg_topic,
            send,
            reg_sink,
            reg_source,
            sub_store,
            sub_join,
            _join_foreign,
            foreign_join,
            resp_topic,
            resp_sink,
            resp_source,
            _resolver,
            result,
        ] = [
            "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-",
            "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-",
            "KTABLE-SINK-",
            "KTABLE-SOURCE-",
            "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-",
            "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-",
            "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-",
            "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-",
            "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-",
            "KTABLE-SINK-",
            "KTABLE-SOURCE-",
            "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-",
            "KTABLE-FK-JOIN-OUTPUT-",
        ]
        .map(|prefix| shared.kafka_name(prefix).unwrap_or_default());
        let result_store = match given {
            Some(g) => g.to_owned(),
            None => shared
                .kafka_name("KTABLE-FK-JOIN-OUTPUT-STATE-STORE-")
                .unwrap_or_default(),
        };
        Self {
            send,
            reg_sink,
            reg_source,
            sub_join,
            foreign_join,
            resp_sink,
            resp_source,
            reg_topic: format!("{reg_topic}-topic"),
            resp_topic: format!("{resp_topic}-topic"),
            sub_store,
            result_store,
            result,
        }
    }
}
