//! [`StreamsBuilder`]: the entry point of the DSL. It records every DSL call as nodes of a
//! Processor-API [`TopologyBuilder`] at once, so `build()` is the core's own validation.

use std::cell::RefCell;
use std::rc::Rc;

use streams_core::state::KeyValueStoreBuilder;
use streams_core::{
    Processor, ProcessorContext, ProcessorError, SourceConfig, SourceValues, StoreRef, Topology,
    TopologyBuilder,
};
use streams_state::{Serde, StoreBuilder};

use crate::change::OldValues;
use crate::error::{DslError, DslIssue};
use crate::kstream::KStream;
use crate::ktable::KTable;
use crate::naming::Namer;
use crate::optimization::Optimizations;
use crate::options::{Consumed, DynSerde, Materialized, dyn_serde};
use crate::processors::{TableSource, open};

/// How a table's store holds the values of the topic it is read from, for restoring it from
/// that topic (see [`Optimizations`]): behind the record's timestamp, as every DSL
/// key-value store (see the `timestamped` module).
const TABLE_SOURCE_VALUES: SourceValues = SourceValues::Timestamped;

/// What every stream and table of one builder shares.
pub(crate) struct Inner {
    topology: TopologyBuilder,
    namer: Namer,
    issues: Vec<DslIssue>,
    require_names: bool,
    /// The grace period (ms) of each windowed aggregation's node, for `suppress`.
    window_grace: std::collections::HashMap<String, i64>,
    /// The typed handle of each key-value store added by [`Shared::kv_store`], by store
    /// name: a `StoreRef<DynSerde<K>, DynSerde<V>>`, for [`KTable::store_ref`].
    kv_refs: std::collections::HashMap<String, Box<dyn std::any::Any>>,
    optimizations: Optimizations,
}

/// The shared state behind a builder and its streams.
#[derive(Clone)]
pub(crate) struct Shared(Rc<RefCell<Inner>>);

impl Shared {
    /// A node name by the naming rule; a taken user-given name is recorded as an issue.
    pub fn name(&self, given: Option<&str>, parent: &str, op: &str) -> String {
        let mut inner = self.0.borrow_mut();
        let (name, taken) = inner.namer.name(given, parent, op);
        if taken {
            inner.issues.push(DslIssue::DuplicateName(name.clone()));
        }
        name
    }

    /// Records a problem reported by `build`.
    pub fn issue(&self, issue: DslIssue) {
        self.0.borrow_mut().issues.push(issue);
    }

    /// Reports an unnamed stateful operator when names are required.
    pub fn check_named(&self, given: bool, operator: &str, what: &'static str) {
        if !given && self.0.borrow().require_names {
            self.issue(DslIssue::Unnamed {
                operator: operator.to_owned(),
                what,
            });
        }
    }

    /// The repartition topic for `name`, named relative to the application (it runs as
    /// `<application.id>-<name>-repartition`).
    pub fn repartition_topic(&self, name: &str) -> String {
        let topic = format!("{name}-repartition");
        self.0.borrow_mut().topology.internal_topic(&topic);
        topic
    }

    /// Records the grace period of the windowed aggregation at `node`.
    pub fn set_window_grace(&self, node: &str, grace_ms: i64) {
        self.0.borrow_mut().window_grace.insert(node.to_owned(), grace_ms);
    }

    /// The grace period of the windowed aggregation at `node`, if it is one.
    pub fn window_grace(&self, node: &str) -> Option<i64> {
        self.0.borrow().window_grace.get(node).copied()
    }

    /// Runs `f` on the topology builder.
    pub fn with<R>(&self, f: impl FnOnce(&mut TopologyBuilder) -> R) -> R {
        f(&mut self.0.borrow_mut().topology)
    }

    /// Adds a processor with one parent.
    pub fn processor<P, KIn, VIn, KOut, VOut>(
        &self,
        name: &str,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        parent: &str,
    ) where
        P: Processor<KIn, VIn, KOut, VOut>,
        KIn: 'static,
        VIn: 'static,
        KOut: 'static,
        VOut: 'static,
    {
        self.with(|t| {
            t.add_processor(name, supplier, [parent]);
        });
    }

    /// Adds a processor with one parent, made by `supplier` with its context (where it
    /// opens its stores).
    pub fn processor_with<P, KIn, VIn, KOut, VOut>(
        &self,
        name: &str,
        supplier: impl Fn(&mut ProcessorContext<'_, KOut, VOut>) -> Result<P, ProcessorError>
        + Send
        + Sync
        + 'static,
        parent: &str,
    ) where
        P: Processor<KIn, VIn, KOut, VOut>,
        KIn: 'static,
        VIn: 'static,
        KOut: 'static,
        VOut: 'static,
    {
        self.with(|t| {
            t.add_processor_with(name, supplier, [parent]);
        });
    }

    /// Adds the key-value store of a table connected to `processors`, keeping its typed
    /// handle for [`KTable::store_ref`].
    pub fn kv_store<K: 'static, V: 'static>(
        &self,
        builder: KeyValueStoreBuilder<DynSerde<K>, DynSerde<V>>,
        processors: &[&str],
    ) {
        let handle = self.with(|t| {
            let handle = t.store(builder);
            for p in processors {
                t.connect_processor_and_state_stores(p, [handle.name()]);
            }
            handle
        });
        let name = handle.name().to_owned();
        self.0.borrow_mut().kv_refs.insert(name, Box::new(handle));
    }

    /// The typed handle of the key-value store `name` added by [`kv_store`](Self::kv_store)
    /// with keys `K` and values `V`.
    pub fn kv_ref<K: 'static, V: 'static>(&self, name: &str) -> Option<StoreRef<DynSerde<K>, DynSerde<V>>> {
        self.0
            .borrow()
            .kv_refs
            .get(name)
            .and_then(|h| h.downcast_ref::<StoreRef<DynSerde<K>, DynSerde<V>>>())
            .cloned()
    }

    /// Adds a store connected to `processors`.
    pub fn store(&self, builder: impl StoreBuilder, processors: &[&str]) {
        self.with(|t| {
            t.add_state_store(builder, processors.iter().copied());
        });
    }
}

/// Builds a topology from DSL calls: [`stream`](Self::stream) and [`table`](Self::table)
/// start streams and tables, whose operators add Processor-API nodes; [`build`](Self::build)
/// validates the result.
///
/// Repartition topics are named relative to the application, as in Kafka Streams:
/// `describe()` shows `<name>-repartition`, and the topology runs them as
/// `<application.id>-<name>-repartition`.
pub struct StreamsBuilder {
    pub(crate) shared: Shared,
}

impl Default for StreamsBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamsBuilder {
    /// A new builder.
    pub fn new() -> Self {
        Self {
            shared: Shared(Rc::new(RefCell::new(Inner {
                topology: Topology::builder(),
                namer: Namer::default(),
                issues: Vec::new(),
                require_names: false,
                window_grace: std::collections::HashMap::new(),
                kv_refs: std::collections::HashMap::new(),
                optimizations: Optimizations::NONE,
            }))),
        }
    }

    /// Makes every stateful operator without a user-given name for its store or repartition
    /// topic a build error, so that no state depends on the naming rule.
    pub fn require_names(self) -> Self {
        self.shared.0.borrow_mut().require_names = true;
        self
    }

    /// Applies `optimizations` (Kafka Streams' `topology.optimization`; none by default) to
    /// the topology built from here on: call it first.
    pub fn with_optimization(self, optimizations: Optimizations) -> Self {
        self.shared.0.borrow_mut().optimizations = optimizations;
        self
    }

    /// A stream of the records of `topics`.
    pub fn stream<KS, VS, T>(
        &self,
        topics: impl IntoIterator<Item = T>,
        consumed: Consumed<KS, VS>,
    ) -> KStream<KS::Target, VS::Target>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        KS::Target: Clone + 'static,
        VS::Target: Clone + 'static,
        T: Into<String>,
    {
        let topics: Vec<String> = topics.into_iter().map(Into::into).collect();
        let name = self
            .shared
            .name(consumed.name.as_deref(), &topics.join("+"), "source");
        let mut config = SourceConfig::new(topics, consumed.key_serde.clone(), consumed.value_serde.clone())
            .offset_reset(consumed.offset_reset);
        if let Some(extractor) = consumed.extractor {
            config = config.timestamp_extractor(move |raw, partition_time| extractor(raw, partition_time));
        }
        self.shared.with(|t| {
            t.add_source_with(&name, config);
        });
        KStream::new(
            self.shared.clone(),
            name,
            Some(dyn_serde(consumed.key_serde)),
            Some(dyn_serde(consumed.value_serde)),
        )
    }

    /// A table of the latest value per key of `topic` (a null value deletes the key), kept
    /// in the store `materialized` names, else `<topic>-table-store`. The materialized
    /// serdes read the topic and must both be given.
    ///
    /// With [`Optimizations::ALL`] (Kafka Streams' `reuse.ktable.source.topics`) a logged
    /// store gets no changelog topic: it is restored from `topic` itself, up to the group's
    /// committed offset.
    pub fn table<K, V>(&self, topic: &str, materialized: Materialized<K, V>) -> KTable<K, V>
    where
        K: Clone + 'static,
        V: Clone + 'static,
    {
        let source = self.shared.name(None, topic, "source");
        let node = self.shared.name(None, topic, "table");
        let (Some(ks), Some(vs)) = (materialized.key_serde.clone(), materialized.value_serde.clone()) else {
            self.shared.issue(DslIssue::MissingSerde {
                operator: node.clone(),
                what: "key or value",
            });
            return KTable::new(self.shared.clone(), source, None);
        };
        let store = materialized
            .name
            .clone()
            .unwrap_or_else(|| format!("{topic}-table-store"));
        let value_source = streams_state::serde::NullableSerde(vs.clone());
        self.shared.with(|t| {
            t.add_source(&source, [topic], ks.clone(), value_source);
        });
        let store_name = store.clone();
        let old_values = OldValues::from_store();
        let send_old = old_values.clone();
        self.shared.processor_with(
            &node,
            move |ctx| {
                Ok(TableSource::<K, V> {
                    store: open(ctx, &store_name)?,
                    send_old: send_old.is_on(),
                })
            },
            &source,
        );
        let reuse =
            materialized.is_logged() && self.shared.0.borrow().optimizations.reuses_ktable_source_topics();
        let builder = materialized.store(&store, ks.clone(), vs.clone());
        if reuse {
            self.shared.kv_store(builder.without_logging(), &[&node]);
            self.shared.with(|t| {
                t.use_source_topic_as_changelog(&store, topic, TABLE_SOURCE_VALUES);
            });
        } else {
            self.shared.kv_store(builder, &[&node]);
        }
        KTable::changes(self.shared.clone(), node, Some(store), old_values).with_serdes(Some(ks), Some(vs))
    }

    /// Adds a store for user processors; [`KStream::process`] connects it to one by name.
    pub fn add_state_store(&self, builder: impl StoreBuilder) -> &Self {
        self.shared.store(builder, &[]);
        self
    }

    /// Validates the program and compiles it into a [`Topology`]. Every DSL problem is
    /// reported together; then the core's own validation runs.
    pub fn build(&self) -> Result<Topology, DslError> {
        let inner = self.shared.0.borrow();
        if !inner.issues.is_empty() {
            return Err(DslError::Invalid(inner.issues.clone()));
        }
        Ok(inner.topology.build()?)
    }
}
