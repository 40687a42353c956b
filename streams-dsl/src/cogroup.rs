//! Cogrouping (Kafka Streams' KIP-150): [`KGroupedStream::cogroup`] starts a
//! [`CogroupedKStream`], [`CogroupedKStream::cogroup`] adds more grouped streams (each of
//! its own value type, with its own aggregator), and [`CogroupedKStream::aggregate`] folds
//! all of them into one aggregate per key, kept in one store.
//!
//! Each input gets an aggregation node `<name>-input-<n>` (from 1, in the order the inputs
//! were added) that reads the key's aggregate from the shared store, applies its own
//! aggregator and writes it back; a merge node `<name>` forwards the updates of all of them
//! as the result table. `<name>` is the `Materialized` name, else the grouping name of the
//! first input, else `<first input node>-cogroup`; the store is the `Materialized` name,
//! else `<name>-store`.
//!
//! Invariants:
//! - every input is grouped already: a grouped stream whose key changed was repartitioned
//!   when it was grouped (`group_by`, `group_by_key`), so all records of a key reach the
//!   one task that owns the key's aggregate;
//! - connecting all aggregation nodes to the one store puts every input in one
//!   sub-topology, so the inputs' topics must be co-partitioned;
//! - an update forwards the new aggregate (and, when a node downstream asks for it, the
//!   old one), at the largest timestamp of the key's records so far.

use std::sync::Arc;

use crate::builder::Shared;
use crate::change::{Change, OldValues};
use crate::error::DslIssue;
use crate::grouped::KGroupedStream;
use crate::ktable::KTable;
use crate::options::{DynSerde, Materialized};
use crate::processors::{AggregateProcessor, OpFn, OpProcessor, UpdateFn, open};

/// Adds one input's aggregation node: `(node, store, initializer, old values)`.
type AddInput<A> = Box<dyn Fn(&str, &str, Arc<dyn Fn() -> A + Send + Sync>, Arc<OldValues>)>;

/// One grouped input of a cogroup.
struct Input<A> {
    /// The grouped stream's node (after any repartitioning).
    node: String,
    /// The grouping name, if given.
    name: Option<String>,
    add: AddInput<A>,
}

/// Several grouped streams with one aggregate per key (Kafka Streams'
/// `CogroupedKStream`). Made by [`KGroupedStream::cogroup`].
pub struct CogroupedKStream<K, A> {
    shared: Shared,
    key_serde: Option<DynSerde<K>>,
    inputs: Vec<Input<A>>,
}

impl<K: Clone + 'static, V: Clone + 'static> KGroupedStream<K, V> {
    /// Starts a cogroup with this stream, whose records update the key's aggregate by
    /// `aggregator(key, value, aggregate)`.
    pub fn cogroup<A: Clone + 'static>(
        &self,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
    ) -> CogroupedKStream<K, A> {
        let s = self.stream();
        CogroupedKStream {
            shared: s.shared.clone(),
            key_serde: s.key_serde.clone(),
            inputs: Vec::new(),
        }
        .cogroup(self, aggregator)
    }
}

impl<K: Clone + 'static, A: Clone + 'static> CogroupedKStream<K, A> {
    /// Adds `grouped`, whose records update the key's aggregate by
    /// `aggregator(key, value, aggregate)`.
    pub fn cogroup<V: Clone + 'static>(
        mut self,
        grouped: &KGroupedStream<K, V>,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
    ) -> Self {
        let s = grouped.stream();
        let (shared, parent) = (s.shared.clone(), s.node.clone());
        let aggregator = Arc::new(aggregator);
        let add: AddInput<A> = Box::new(move |node, store, init, old_values| {
            let f = aggregator.clone();
            let update: UpdateFn<K, V, A> = Arc::new(move |k, v, old| f(k, v, old.unwrap_or_else(|| init())));
            let store = store.to_owned();
            shared.processor_with::<_, K, V, K, Change<A>>(
                node,
                move |ctx| {
                    Ok(AggregateProcessor {
                        update: update.clone(),
                        store: open(ctx, &store)?,
                        send_old: old_values.is_on(),
                    })
                },
                &parent,
            );
        });
        self.inputs.push(Input {
            node: s.node.clone(),
            name: s.next_name.clone(),
            add,
        });
        self
    }

    /// One aggregate per key over all inputs, starting as `initializer()`, kept in the store
    /// `materialized` names (its serde for `A` is required).
    pub fn aggregate(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        materialized: Materialized<K, A>,
    ) -> KTable<K, A> {
        let shared = &self.shared;
        let first = &self.inputs[0];
        let given = materialized.name.clone().or_else(|| first.name.clone());
        shared.check_named(given.is_some(), &first.node, "a store");
        let node = shared.name(given.as_deref(), &first.node, "cogroup");
        let store = materialized
            .name
            .clone()
            .unwrap_or_else(|| format!("{node}-store"));
        let ks = materialized.key_serde.clone().or_else(|| self.key_serde.clone());
        let (Some(ks), Some(vs)) = (ks, materialized.value_serde.clone()) else {
            shared.issue(DslIssue::MissingSerde {
                operator: node.clone(),
                what: "store key or value",
            });
            return KTable::new(shared.clone(), node, None);
        };
        let init: Arc<dyn Fn() -> A + Send + Sync> = Arc::new(initializer);
        let old_values = OldValues::from_store();
        let mut parents = Vec::new();
        for (i, input) in self.inputs.iter().enumerate() {
            let name = shared.name(Some(&format!("{node}-input-{}", i + 1)), "", "");
            (input.add)(&name, &store, init.clone(), old_values.clone());
            parents.push(name);
        }
        let merge: OpFn<K, Change<A>, K, Change<A>> = Arc::new(|r, emit| emit(r));
        shared.with(|t| {
            t.add_processor(&node, move || OpProcessor { op: merge.clone() }, parents.iter());
        });
        let refs: Vec<&str> = parents.iter().map(String::as_str).collect();
        shared.store(materialized.store(&store, ks.clone(), vs.clone()), &refs);
        KTable::changes(shared.clone(), node, Some(store), old_values).with_serdes(Some(ks), Some(vs))
    }
}
