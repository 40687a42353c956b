//! Cogrouping (Kafka Streams' KIP-150): [`KGroupedStream::cogroup`] starts a
//! [`CogroupedKStream`], [`CogroupedKStream::cogroup`] adds more grouped streams (each of
//! its own value type, with its own aggregator), and [`CogroupedKStream::aggregate`] folds
//! all of them into one aggregate per key, kept in one store; `windowed_by` aggregates per
//! key and time window instead (see `cogroup_windowed`).
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

use crate::change::{Change, OldValues};
use crate::dyn_serde::DynSerde;
use crate::error::DslIssue;
use crate::grouped::KGroupedStream;
use crate::ktable::KTable;
use crate::options::Materialized;
use crate::processors::{AggregateProcessor, PassThrough, UpdateFn, open};
use crate::shared::Shared;
use crate::windowed::{CoreParams, TimeWindowAggregate, TimeWindows, Windowed};

/// Starts a key's aggregate.
pub(crate) type Init<A> = Arc<dyn Fn() -> A + Send + Sync>;

/// Where an input's aggregation node keeps the aggregates.
pub(crate) enum Target<K, A> {
    /// One aggregate per key in the key-value store `store`.
    Table {
        store: String,
        init: Init<A>,
        old_values: Arc<OldValues>,
    },
    /// One aggregate per key and time window in the window store of `params`.
    Windows {
        windows: TimeWindows,
        params: CoreParams<K, A>,
        init: Init<A>,
    },
}

/// Adds one input's aggregation node, named by the first argument, fed by the node named
/// by the second.
type AddInput<K, A> = Box<dyn Fn(&str, &str, Target<K, A>)>;

/// Repartitions an input whose repartition is deferred (under Kafka Streams' names), its
/// topic named after the argument unless the grouping is named; the node to read it from.
type Repartition = Box<dyn Fn(&str) -> String>;

/// One grouped input of a cogroup.
struct Input<K, A> {
    /// The grouped stream's node (before a deferred repartitioning).
    node: String,
    /// The grouping name, if given.
    name: Option<String>,
    repartition: Repartition,
    add: AddInput<K, A>,
}

/// Several grouped streams with one aggregate per key (Kafka Streams'
/// `CogroupedKStream`). Made by [`KGroupedStream::cogroup`].
pub struct CogroupedKStream<K, A> {
    pub(crate) shared: Shared,
    pub(crate) key_serde: Option<DynSerde<K>>,
    inputs: Vec<Input<K, A>>,
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
        let shared = s.shared.clone();
        // A deferred repartition (Kafka Streams' names) happens at the aggregation, named
        // after its store, as Kafka Streams does.
        let deferred = grouped.clone();
        let repartition: Repartition = Box::new(move |base| deferred.repartitioned(base).node);
        let aggregator = Arc::new(aggregator);
        let add: AddInput<K, A> = Box::new(move |node, parent, target| {
            let f = aggregator.clone();
            match target {
                Target::Table {
                    store,
                    init,
                    old_values,
                } => {
                    let update: UpdateFn<K, V, A> =
                        Arc::new(move |k, v, old| f(k, v, old.unwrap_or_else(|| init())));
                    shared.processor_with::<_, K, V, K, Change<A>>(
                        node,
                        move |ctx| {
                            // Every input's processor writes the one store; the last
                            // made takes what its cache writes down (see cache_forward.rs).
                            Ok(AggregateProcessor::new(
                                update.clone(),
                                open(ctx, &store)?,
                                old_values.is_on(),
                            )?)
                        },
                        parent,
                    );
                }
                Target::Windows {
                    windows,
                    params,
                    init,
                } => {
                    let update: UpdateFn<K, V, A> =
                        Arc::new(move |k, v, old| f(k, v, old.unwrap_or_else(|| init())));
                    shared.processor_with::<_, K, V, Windowed<K>, Change<A>>(
                        node,
                        move |ctx| {
                            Ok(TimeWindowAggregate {
                                windows,
                                update: update.clone(),
                                core: params.open(ctx)?,
                                reduce: false,
                            })
                        },
                        parent,
                    );
                }
            }
        });
        self.inputs.push(Input {
            node: s.node.clone(),
            name: s.next_name.clone(),
            repartition,
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
        let (node, store) = self.names(materialized.name.as_deref(), "cogroup");
        let ks = materialized.key_serde.clone().or_else(|| self.key_serde.clone());
        let (Some(ks), Some(vs)) = (ks, materialized.value_serde.clone()) else {
            shared.issue(DslIssue::MissingSerde {
                operator: node.clone(),
                what: "store key or value",
            });
            return KTable::new(shared.clone(), node, None);
        };
        let init: Init<A> = Arc::new(initializer);
        let old_values = OldValues::from_store();
        let (node, inputs) = self.add_inputs(&node, &store, || Target::Table {
            store: store.clone(),
            init: init.clone(),
            old_values: old_values.clone(),
        });
        self.merge::<K>(&node, &inputs);
        let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        shared.store(materialized.store(&store, ks.clone(), vs.clone()), &refs);
        KTable::changes(shared.clone(), node, Some(store), old_values).with_serdes(Some(ks), Some(vs))
    }
}

impl<K: Clone + 'static, A: Clone + 'static> CogroupedKStream<K, A> {
    /// The first input's node and grouping name, which an unnamed aggregation is named after.
    pub(crate) fn first(&self) -> (&str, Option<&str>) {
        // A cogroup starts with one input (`KGroupedStream::cogroup`) and only gains more.
        let first = &self.inputs[0];
        (&first.node, first.name.as_deref())
    }

    /// The aggregation's node and store (`op` the operator name): the `Materialized` name
    /// `given`, else as the [module docs](self) say. Under Kafka Streams' names the store
    /// is `COGROUPKSTREAM-AGGREGATE-STATE-STORE-<n>` and the node, named by
    /// [`add_inputs`](Self::add_inputs), is the store's name until then.
    pub(crate) fn names(&self, given: Option<&str>, op: &str) -> (String, String) {
        let shared = &self.shared;
        let (first, first_name) = self.first();
        shared.check_named(given.or(first_name).is_some(), first, "a store");
        if shared.kafka_names() {
            let store = match given {
                Some(g) => g.to_owned(),
                None => shared
                    .kafka_name("COGROUPKSTREAM-AGGREGATE-STATE-STORE-")
                    .unwrap_or_default(),
            };
            return (store.clone(), store);
        }
        let node = shared.name(given.or(first_name), first, op);
        let store = given.map_or_else(|| format!("{node}-store"), str::to_owned);
        (node, store)
    }

    /// Adds every input's aggregation node on `target()`, each reading its input's
    /// repartition topic (named after `store`) where one is deferred: `<node>-input-<n>`,
    /// or under Kafka Streams' names `COGROUPKSTREAM-AGGREGATE-<n>` after every
    /// repartition, then the merge node `COGROUPKSTREAM-MERGE-<n>`. Returns the merge
    /// node's name and the inputs' nodes.
    pub(crate) fn add_inputs(
        &self,
        node: &str,
        store: &str,
        target: impl Fn() -> Target<K, A>,
    ) -> (String, Vec<String>) {
        let parents: Vec<String> = self.inputs.iter().map(|i| (i.repartition)(store)).collect();
        let kafka = self.shared.kafka_names();
        let mut names = Vec::new();
        for (i, (input, parent)) in self.inputs.iter().zip(&parents).enumerate() {
            let name = match kafka {
                true => self
                    .shared
                    .kafka_name("COGROUPKSTREAM-AGGREGATE-")
                    .unwrap_or_default(),
                false => format!("{node}-input-{}", i + 1),
            };
            let name = self.shared.name(Some(&name), "", "");
            (input.add)(&name, parent, target());
            names.push(name);
        }
        let node = match self.shared.kafka_name("COGROUPKSTREAM-MERGE-") {
            Some(merge) => self.shared.name(Some(&merge), "", ""),
            None => node.to_owned(),
        };
        (node, names)
    }

    /// Adds the node `node` that forwards the updates of all `inputs`, keyed by `KR`.
    pub(crate) fn merge<KR: Clone + 'static>(&self, node: &str, inputs: &[String]) {
        self.shared.with(|t| {
            t.add_processor(node, PassThrough::<KR, Change<A>>::new, inputs.iter());
        });
    }
}
