//! What every stream and table of one [`StreamsBuilder`](crate::StreamsBuilder) shares: the
//! Processor-API topology being built, the node namer, the issues `build` reports, and the
//! typed handles of the stores added so far. The builder, streams and tables hold it; it
//! knows none of them.

use std::cell::RefCell;
use std::rc::Rc;

use streams_core::state::KeyValueStoreBuilder;
use streams_core::{
    Processor, ProcessorContext, ProcessorError, SourceValues, StoreRef, Topology, TopologyBuilder,
};
use streams_state::StoreBuilder;

use crate::dyn_serde::DynSerde;
use crate::error::DslIssue;
use crate::naming::{Namer, Naming, On};
use crate::optimization::Optimizations;

/// How a table's store holds the values of the topic it is read from, for restoring it from
/// that topic (see [`Optimizations`]): behind the record's timestamp, as every DSL
/// key-value store (see the `timestamped` module).
pub(crate) const TABLE_SOURCE_VALUES: SourceValues = SourceValues::Timestamped;

/// A supplier of processors made with their task's context, where they open their stores
/// (what [`TopologyBuilder::add_processor_with`] takes).
pub(crate) trait ContextSupplier<P, KOut, VOut>:
    Fn(&mut ProcessorContext<'_, KOut, VOut>) -> Result<P, ProcessorError> + Send + Sync + 'static
{
}

impl<F, P, KOut, VOut> ContextSupplier<P, KOut, VOut> for F where
    F: Fn(&mut ProcessorContext<'_, KOut, VOut>) -> Result<P, ProcessorError> + Send + Sync + 'static
{
}

/// What every stream and table of one builder shares.
pub(crate) struct Inner {
    pub(crate) topology: TopologyBuilder,
    pub(crate) namer: Namer,
    pub(crate) issues: Vec<DslIssue>,
    pub(crate) require_names: bool,
    /// The grace period (ms) of each windowed aggregation's node, for `suppress`.
    pub(crate) window_grace: std::collections::HashMap<String, i64>,
    /// The typed handle of each key-value store added by [`Shared::kv_store`], by store
    /// name: a `StoreRef<DynSerde<K>, DynSerde<V>>`, for [`KTable::store_ref`].
    pub(crate) kv_refs: std::collections::HashMap<String, Box<dyn std::any::Any>>,
    pub(crate) optimizations: Optimizations,
    /// The stream sources by their (sorted) topics, for [`Shared::merged_source`].
    pub(crate) stream_sources: std::collections::HashMap<Vec<String>, StreamSource>,
    /// The source node of the repartition topic of each stream node repartitioned so far,
    /// under `merge.repartition.topics` (see [`Optimizations`]).
    pub(crate) repartitions: std::collections::HashMap<String, String>,
}

/// `topics` in order: the key of [`Inner::stream_sources`].
fn sorted(topics: &[String]) -> Vec<String> {
    let mut key = topics.to_vec();
    key.sort();
    key
}

/// A source node added by `StreamsBuilder::stream`.
pub(crate) struct StreamSource {
    pub(crate) node: String,
    /// The key and value types it reads.
    pub(crate) types: std::any::TypeId,
    pub(crate) offset_reset: streams_core::OffsetReset,
}

/// The shared state behind a builder and its streams.
#[derive(Clone)]
pub(crate) struct Shared(pub(crate) Rc<RefCell<Inner>>);

impl Shared {
    /// The state of a new builder: an empty topology, no issues, no optimizations.
    pub fn new() -> Self {
        Self(Rc::new(RefCell::new(Inner {
            topology: Topology::builder(),
            namer: Namer::default(),
            issues: Vec::new(),
            require_names: false,
            window_grace: std::collections::HashMap::new(),
            kv_refs: std::collections::HashMap::new(),
            optimizations: Optimizations::NONE,
            stream_sources: std::collections::HashMap::new(),
            repartitions: std::collections::HashMap::new(),
        })))
    }

    /// The source node of an earlier `stream()` of exactly `topics` that reads the types
    /// `types` from `offset_reset`: a second `stream()` of those topics shares it, as
    /// Kafka Streams merges such sources.
    pub fn merged_source(
        &self,
        topics: &[String],
        types: std::any::TypeId,
        offset_reset: streams_core::OffsetReset,
    ) -> Option<String> {
        let inner = self.0.borrow();
        let s = inner.stream_sources.get(&sorted(topics))?;
        (s.types == types && s.offset_reset == offset_reset).then(|| s.node.clone())
    }

    /// Records the source node of a `stream()` of `topics`, unless one is recorded (a
    /// second source of the same topics then fails the build).
    pub fn register_source(&self, topics: &[String], source: StreamSource) {
        let mut inner = self.0.borrow_mut();
        inner.stream_sources.entry(sorted(topics)).or_insert(source);
    }

    /// A node name by the naming rule; a taken user-given name is recorded as an issue.
    pub fn name(&self, given: Option<&str>, parent: &str, op: &str) -> String {
        self.name_on(given, parent, op, On::Stream)
    }

    /// As [`name`](Self::name), for an operator on a table.
    pub fn table_name(&self, given: Option<&str>, parent: &str, op: &str) -> String {
        self.name_on(given, parent, op, On::Table)
    }

    fn name_on(&self, given: Option<&str>, parent: &str, op: &str, on: On) -> String {
        let mut inner = self.0.borrow_mut();
        let (name, taken) = inner.namer.name(given, parent, op, on);
        if taken {
            inner.issues.push(DslIssue::DuplicateName(name.clone()));
        }
        name
    }

    /// Whether unnamed things get Kafka Streams' names.
    pub fn kafka_names(&self) -> bool {
        self.0.borrow().namer.naming() == Naming::KafkaStreams
    }

    /// Under [`Naming::KafkaStreams`], `prefix` and the next value of the counter (a store
    /// name such as `KSTREAM-AGGREGATE-STATE-STORE-0000000001`); `None` otherwise.
    pub fn kafka_name(&self, prefix: &str) -> Option<String> {
        let mut inner = self.0.borrow_mut();
        (inner.namer.naming() == Naming::KafkaStreams).then(|| inner.namer.generate(prefix))
    }

    /// Takes a value of Kafka Streams' counter where Kafka Streams takes one without
    /// naming anything (no effect under [`Naming::Derived`]).
    pub fn burn_name(&self) {
        self.0.borrow_mut().namer.burn();
    }

    /// The source node of the repartition topic that stream node `node` is already written
    /// to under `merge.repartition.topics` (only then recorded); `None` otherwise.
    pub fn merged_repartition(&self, node: &str) -> Option<String> {
        self.0.borrow().repartitions.get(node).cloned()
    }

    /// Records that stream node `node` is written to the repartition topic read by the node
    /// `source`, for [`merged_repartition`](Self::merged_repartition).
    pub fn record_repartition(&self, node: &str, source: &str) {
        self.0
            .borrow_mut()
            .repartitions
            .insert(node.to_owned(), source.to_owned());
    }

    /// Whether repartition topics of one stream node are merged.
    pub fn merges_repartitions(&self) -> bool {
        self.0.borrow().optimizations.merges_repartition_topics()
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
        self.processor_with(name, move |_| Ok(supplier()), parent);
    }

    /// Adds a processor with one parent, made by `supplier` with its context (where it
    /// opens its stores).
    pub fn processor_with<P, KIn, VIn, KOut, VOut>(
        &self,
        name: &str,
        supplier: impl ContextSupplier<P, KOut, VOut>,
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
