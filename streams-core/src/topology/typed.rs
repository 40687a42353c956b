//! The typed face of [`TopologyBuilder`]: nodes and stores are added through methods that
//! return handles ([`NodeRef`], [`StoreRef`]), and later nodes name their parents and stores
//! by those handles instead of by strings.
//!
//! What the compiler then checks: a child takes exactly the record types its parents
//! forward (no `build()` type-mismatch error to read); a parent exists before its child (no
//! unknown-parent error, no cycle); a processor opens a store with the store's own serdes
//! (no run-time `WrongType`); and a processor is made by its supplier only once its
//! context is there, so it holds its store handles directly instead of `Option`s filled in
//! `init`. Names remain: they label `describe()`, metrics and errors, and `build()` still
//! reports duplicates and stores connected to nothing.
//!
//! ```
//! use streams_core::serdes::{StringSerde, U64Serde};
//! use streams_core::state::{KvStore, Stores};
//! use streams_core::{ProcessResult, Processor, ProcessorContext, Record, SinkConfig, SourceConfig, Topology};
//!
//! /// Counts words; holds its store handle, no `Option`.
//! struct Count {
//!     counts: KvStore<StringSerde, U64Serde>,
//! }
//! impl Processor<String, String, String, u64> for Count {
//!     fn process(&mut self, ctx: &mut ProcessorContext<'_, String, u64>, r: Record<String, String>) -> ProcessResult {
//!         let n = self.counts.get(&r.value)?.unwrap_or(0) + 1;
//!         self.counts.put(&r.value, &n)?;
//!         ctx.forward(Record::new(r.value, n, r.timestamp))
//!     }
//! }
//!
//! let mut b = Topology::builder();
//! let words = b.source("words", SourceConfig::new(["words"], StringSerde, StringSerde));
//! let counts = b.store(Stores::in_memory_kv("counts", StringSerde, U64Serde));
//! let count = b.processor("count", [&words], {
//!     let counts = counts.clone();
//!     move |ctx| Ok(Count { counts: ctx.store(&counts)? })
//! });
//! b.connect(&count, &counts);
//! b.sink("out", SinkConfig::topic("word-counts", StringSerde, U64Serde), [&count]);
//! let topology = b.build().unwrap();
//! assert!(topology.describe().to_string().contains("Processor: count (stores: [counts])"));
//! ```
//!
//! A child that takes other types than its parent forwards does not compile (with the
//! named builder this is a `TypeMismatch` from `build()`):
//!
//! ```compile_fail
//! # use streams_core::serdes::{StringSerde, U64Serde};
//! # use streams_core::{ProcessResult, Processor, ProcessorContext, Record, SourceConfig, Topology};
//! struct TakesU64;
//! impl Processor<u64, String, u64, String> for TakesU64 {
//!     fn process(&mut self, ctx: &mut ProcessorContext<'_, u64, String>, r: Record<u64, String>) -> ProcessResult {
//!         ctx.forward(r)
//!     }
//! }
//! let mut b = Topology::builder();
//! let words = b.source("words", SourceConfig::new(["words"], StringSerde, StringSerde));
//! let n = b.processor("n", [&words], |_| Ok(TakesU64)); // words forwards String keys
//! ```
//!
//! Nor does opening a store with other serdes than it was built with (with
//! `ProcessorContext::kv_store` this is a run-time `WrongType`):
//!
//! ```compile_fail
//! # use streams_core::serdes::{StringSerde, U64Serde};
//! # use streams_core::state::{KvStore, Stores};
//! # use streams_core::{Processor, ProcessorContext, ProcessResult, Record, SourceConfig, Topology};
//! struct Keep { store: KvStore<StringSerde, StringSerde> }
//! impl Processor<String, String> for Keep {
//!     fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, _: Record<String, String>) -> ProcessResult { Ok(()) }
//! }
//! let mut b = Topology::builder();
//! let words = b.source("words", SourceConfig::new(["words"], StringSerde, StringSerde));
//! let counts = b.store(Stores::in_memory_kv("counts", StringSerde, U64Serde));
//! let keep = b.processor("keep", [&words], move |ctx| Ok(Keep { store: ctx.store(&counts)? }));
//! ```

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use streams_state::{KeyValueStoreBuilder, KvStore, Serde, TypedStoreBuilder};

use super::builder::{SinkConfig, SourceConfig, TopologyBuilder, names, processor_node};
use super::nodes::SuppliedNode;
use super::spec::{NodeDef, StoreDef};
use crate::model::error::ProcessorError;
use crate::processor::{ConnectableStore, Processor, ProcessorContext, StoreRef, TypedStoreRef};
#[cfg(doc)]
use crate::processor::{SessionStoreRef, VersionedStoreRef, WindowStoreRef};

/// A node of a topology being built, which forwards records of type `Record<K, V>`. Pass
/// it as a parent of later nodes; the compiler checks that they take `Record<K, V>`.
pub struct NodeRef<K, V> {
    name: Arc<str>,
    _out: PhantomData<fn() -> (K, V)>,
}

impl<K, V> NodeRef<K, V> {
    fn new(name: &str) -> Self {
        Self {
            name: Arc::from(name),
            _out: PhantomData,
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl<K, V> Clone for NodeRef<K, V> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            _out: PhantomData,
        }
    }
}

impl<K, V> fmt::Debug for NodeRef<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeRef")
            .field("name", &self.name)
            .field("key", &std::any::type_name::<K>())
            .field("value", &std::any::type_name::<V>())
            .finish()
    }
}

fn parent_names<'p, K: 'p, V: 'p>(parents: impl IntoIterator<Item = &'p NodeRef<K, V>>) -> Vec<String> {
    parents.into_iter().map(|p| p.name().to_owned()).collect()
}

/// The definition of a processor made by `supplier` in its `init`.
fn supplied_def<P, F, KIn, VIn, KOut, VOut>(
    name: &str,
    parents: Vec<String>,
    supplier: F,
    global: bool,
) -> NodeDef
where
    F: Fn(&mut ProcessorContext<'_, KOut, VOut>) -> Result<P, ProcessorError> + Send + Sync + 'static,
    P: Processor<KIn, VIn, KOut, VOut>,
    KIn: 'static,
    VIn: 'static,
    KOut: 'static,
    VOut: 'static,
{
    let supplier = Arc::new(supplier);
    processor_node::<KIn, VIn, KOut, VOut, _>(name, parents, global, move || {
        SuppliedNode::<P, F, KIn, VIn, KOut, VOut>::new(supplier.clone())
    })
}

impl TopologyBuilder {
    /// Adds a source named `name`; returns its handle.
    pub fn source<KS, VS>(
        &mut self,
        name: &str,
        config: SourceConfig<KS, VS>,
    ) -> NodeRef<KS::Target, VS::Target>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        KS::Target: Clone + 'static,
        VS::Target: Clone + 'static,
    {
        self.nodes.push(Self::source_def(name, config, false));
        NodeRef::new(name)
    }

    /// Adds a processor named `name` taking the records of `parents` (children are called
    /// in the order they are added). `supplier` makes one processor per task, with the
    /// task's context: open stores there with [`ProcessorContext::store`]. Then
    /// [`Processor::init`] runs as for any processor.
    pub fn processor<'p, P, F, KIn, VIn, KOut, VOut>(
        &mut self,
        name: &str,
        parents: impl IntoIterator<Item = &'p NodeRef<KIn, VIn>>,
        supplier: F,
    ) -> NodeRef<KOut, VOut>
    where
        F: Fn(&mut ProcessorContext<'_, KOut, VOut>) -> Result<P, ProcessorError> + Send + Sync + 'static,
        P: Processor<KIn, VIn, KOut, VOut>,
        KIn: 'static,
        VIn: 'static,
        KOut: 'static,
        VOut: 'static,
    {
        self.nodes
            .push(supplied_def(name, parent_names(parents), supplier, false));
        NodeRef::new(name)
    }

    /// [`processor`](Self::processor) with parents named by strings, for code that
    /// generates topologies (the DSL): `supplier` receives the context, so the processor
    /// opens its stores (by name, [`ProcessorContext::kv_store`]) once, when it is made.
    pub fn add_processor_with<P, F, KIn, VIn, KOut, VOut, T>(
        &mut self,
        name: &str,
        supplier: F,
        parents: impl IntoIterator<Item = T>,
    ) -> &mut Self
    where
        F: Fn(&mut ProcessorContext<'_, KOut, VOut>) -> Result<P, ProcessorError> + Send + Sync + 'static,
        P: Processor<KIn, VIn, KOut, VOut>,
        KIn: 'static,
        VIn: 'static,
        KOut: 'static,
        VOut: 'static,
        T: AsRef<str>,
    {
        self.nodes
            .push(supplied_def(name, names(parents), supplier, false));
        self
    }

    /// Adds a sink named `name` writing the records of `parents` as `config` says.
    pub fn sink<'p, KS, VS>(
        &mut self,
        name: &str,
        config: SinkConfig<KS, VS>,
        parents: impl IntoIterator<Item = &'p NodeRef<KS::Target, VS::Target>>,
    ) -> &mut Self
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        KS::Target: 'static,
        VS::Target: 'static,
    {
        self.add_sink_with(name, config, parent_names(parents))
    }

    /// Adds a state store of any kind (a [`KeyValueStoreBuilder`], or a window, session or
    /// versioned store's builder: see [`streams_state::window`], [`streams_state::session`]
    /// and [`streams_state::versioned`]); returns its handle ([`StoreRef`],
    /// [`WindowStoreRef`], [`SessionStoreRef`] or [`VersionedStoreRef`]). Connect it to the
    /// processors that use it with [`connect`](Self::connect) (`build()` fails for a store
    /// connected to none).
    pub fn store<B: TypedStoreBuilder>(&mut self, builder: B) -> TypedStoreRef<B> {
        let builder = Arc::new(builder);
        self.stores.push(StoreDef {
            builder: builder.clone(),
            processors: Vec::new(),
            global: false,
        });
        TypedStoreRef::new(builder)
    }

    /// Connects `store` (of any kind) to `processor`, which may then open it.
    pub fn connect<K, V>(&mut self, processor: &NodeRef<K, V>, store: &impl ConnectableStore) -> &mut Self {
        self.connect_store(processor.name(), store.store_name());
        self
    }

    /// Adds a global store: every instance holds all of it, fed from every partition of
    /// `source`'s topics by the processor `supplier` makes with the store opened (the
    /// processor writes the store and forwards nothing). Every processor of the topology can open it, without
    /// [`connect`](Self::connect). Build the store without logging: its topic is its
    /// changelog.
    pub fn global_store<KS, VS, SK, SV, P, F>(
        &mut self,
        builder: KeyValueStoreBuilder<KS, VS>,
        source_name: &str,
        source: SourceConfig<SK, SV>,
        processor_name: &str,
        supplier: F,
    ) -> StoreRef<KS, VS>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        SK: Serde + Clone,
        SV: Serde + Clone,
        SK::Target: Clone + 'static,
        SV::Target: Clone + 'static,
        F: Fn(&mut ProcessorContext<'_, (), ()>, KvStore<KS, VS>) -> Result<P, ProcessorError>
            + Send
            + Sync
            + 'static,
        P: Processor<SK::Target, SV::Target, (), ()>,
    {
        let builder = Arc::new(builder);
        let store = StoreRef::new(builder.clone());
        let opened = store.clone();
        let supplier = move |ctx: &mut ProcessorContext<'_, (), ()>| {
            let handle = ctx.store(&opened)?;
            supplier(ctx, handle)
        };
        let source = Self::source_def(source_name, source, true);
        let parents = vec![source_name.to_owned()];
        let processor =
            supplied_def::<P, _, SK::Target, SV::Target, (), ()>(processor_name, parents, supplier, true);
        self.push_global(source, processor, builder);
        store
    }
}
