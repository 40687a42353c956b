//! The typed topology builder.

use std::sync::Arc;

use streams_state::{Serde, StoreBuilder};

use super::nodes::{ProcessorNode, SinkDestination, SinkNode, SourceNode};
use super::spec::{
    NodeDef, NodeKind, OffsetReset, RecordTypes, SinkTarget, SourceValues, StoreDef, TimestampExtractor,
};
use crate::model::partitioner::StreamPartitioner;
use crate::model::record::RawRecord;
use crate::processor::Processor;
use crate::processor::node::ErasedNode;

/// A source's topics, serdes, timestamp extractor and offset reset.
pub struct SourceConfig<KS, VS> {
    topics: Vec<String>,
    key_serde: KS,
    value_serde: VS,
    extractor: Option<TimestampExtractor>,
    offset_reset: OffsetReset,
}

impl<KS: Serde + Clone, VS: Serde + Clone> SourceConfig<KS, VS> {
    /// Reads `topics` with the given serdes.
    pub fn new<T: Into<String>>(topics: impl IntoIterator<Item = T>, key_serde: KS, value_serde: VS) -> Self {
        Self {
            topics: topics.into_iter().map(Into::into).collect(),
            key_serde,
            value_serde,
            extractor: None,
            offset_reset: OffsetReset::default(),
        }
    }

    /// Takes each record's timestamp from `f(record, partition_time)` instead of the
    /// record's own timestamp. A negative result drops the record.
    pub fn timestamp_extractor(mut self, f: impl Fn(&RawRecord, i64) -> i64 + Send + Sync + 'static) -> Self {
        self.extractor = Some(Arc::new(f));
        self
    }

    /// Where to start without a committed offset.
    pub fn offset_reset(mut self, reset: OffsetReset) -> Self {
        self.offset_reset = reset;
        self
    }
}

/// A sink's destination, serdes and partitioner.
pub struct SinkConfig<KS: Serde, VS: Serde> {
    destination: SinkDestination<KS::Target, VS::Target>,
    key_serde: KS,
    value_serde: VS,
    partitioner: Option<Arc<dyn StreamPartitioner<KS::Target, VS::Target>>>,
    /// What `describe()` shows for a topic-name extractor.
    extractor_name: String,
    /// Records with a null key are not written.
    skip_null_keys: bool,
}

impl<KS: Serde + Clone, VS: Serde + Clone> SinkConfig<KS, VS> {
    /// Writes to `topic`.
    pub fn topic(topic: impl Into<String>, key_serde: KS, value_serde: VS) -> Self {
        Self {
            destination: SinkDestination::Topic(topic.into()),
            key_serde,
            value_serde,
            partitioner: None,
            extractor_name: String::new(),
            skip_null_keys: false,
        }
    }

    /// Writes each record to the topic `extractor(key, value)` names. `describe()` shows
    /// the sink as `Sink: <name> (extractor class: <extractor name>)`, where the extractor's
    /// name is its Rust type name unless [`extractor_name`](Self::extractor_name) sets it.
    pub fn extractor(
        extractor: impl Fn(&KS::Target, &VS::Target) -> String + Send + Sync + 'static,
        key_serde: KS,
        value_serde: VS,
    ) -> Self {
        let extractor_name = std::any::type_name_of_val(&extractor).to_owned();
        Self {
            destination: SinkDestination::Extractor(Arc::new(extractor)),
            key_serde,
            value_serde,
            partitioner: None,
            extractor_name,
            skip_null_keys: false,
        }
    }

    /// The name `describe()` shows for this sink's topic-name extractor, after
    /// `extractor class:` (Kafka Streams shows the extractor object's `toString()` there).
    /// Without it, the extractor's Rust type name is shown: for a closure, the path of the
    /// function it is written in followed by `{{closure}}`. No effect on a sink that writes
    /// to a fixed topic.
    pub fn extractor_name(mut self, name: impl Into<String>) -> Self {
        self.extractor_name = name.into();
        self
    }

    /// Does not write records whose key is null (see [`Nulls`](crate::Nulls)), and counts
    /// them as dropped: a repartition topic feeding an operator that would skip them
    /// anyway (Kafka Streams filters null keys before such a topic).
    pub fn skip_null_keys(mut self) -> Self {
        self.skip_null_keys = true;
        self
    }

    /// Chooses partitions with `partitioner` instead of murmur2 of the key bytes.
    pub fn partitioner(mut self, partitioner: impl StreamPartitioner<KS::Target, VS::Target>) -> Self {
        self.partitioner = Some(Arc::new(partitioner));
        self
    }
}

/// Builds a [`Topology`](super::Topology). Methods chain; every problem (unknown parents, duplicate names,
/// cycles, type mismatches, unconnected stores, topics read twice) is reported together by
/// [`build`](TopologyBuilder::build).
///
/// ```
/// use streams_core::serdes::{StringSerde, U64Serde};
/// use streams_core::{ProcessResult, Processor, ProcessorContext, Record, Topology};
///
/// struct Upper;
/// impl Processor<String, String, String, String> for Upper {
///     fn process(&mut self, ctx: &mut ProcessorContext<'_, String, String>, r: Record<String, String>) -> ProcessResult {
///         let v = r.value.to_uppercase();
///         ctx.forward(r.with_value(v))
///     }
/// }
///
/// let mut b = Topology::builder();
/// b.add_source("in", ["words"], StringSerde, StringSerde)
///     .add_processor("upper", || Upper, ["in"])
///     .add_sink("out", "upper-words", StringSerde, StringSerde, ["upper"]);
/// let topology = b.build().unwrap();
/// assert!(topology.describe().to_string().contains("Processor: upper (stores: [])"));
/// ```
#[derive(Default)]
pub struct TopologyBuilder {
    pub(crate) nodes: Vec<NodeDef>,
    pub(crate) stores: Vec<StoreDef>,
    pub(crate) connections: Vec<(String, String)>,
    pub(crate) repartition_partitions: std::collections::BTreeMap<String, i32>,
    pub(crate) internal_topics: std::collections::BTreeSet<String>,
    /// Every (processor, store) connection in the order it was made, however it was made:
    /// `describe()` lists a processor's stores in Kafka Streams' order, which depends on it.
    pub(crate) store_links: Vec<(String, String)>,
    /// Stores restored from a source topic instead of a changelog: store → (topic, layout).
    pub(crate) source_changelogs: std::collections::BTreeMap<String, (String, SourceValues)>,
}

pub(super) fn names<T: AsRef<str>>(items: impl IntoIterator<Item = T>) -> Vec<String> {
    items.into_iter().map(|s| s.as_ref().to_owned()).collect()
}

/// The definition of a processor taking `KIn, VIn` records and forwarding `KOut, VOut`
/// ones, whose instances (one per task) `make` makes.
pub(super) fn processor_node<KIn, VIn, KOut, VOut, N>(
    name: &str,
    parents: Vec<String>,
    global: bool,
    make: impl Fn() -> N + Send + Sync + 'static,
) -> NodeDef
where
    KIn: 'static,
    VIn: 'static,
    KOut: 'static,
    VOut: 'static,
    N: ErasedNode + 'static,
{
    NodeDef {
        name: name.to_owned(),
        kind: NodeKind::Processor,
        parents,
        input: Some(RecordTypes::of::<KIn, VIn>()),
        output: Some(RecordTypes::of::<KOut, VOut>()),
        factory: Arc::new(move || Box::new(make()) as Box<dyn ErasedNode>),
        global,
    }
}

impl TopologyBuilder {
    /// Adds a source named `name` reading `topics` with the given serdes.
    pub fn add_source<KS, VS, T>(
        &mut self,
        name: &str,
        topics: impl IntoIterator<Item = T>,
        key_serde: KS,
        value_serde: VS,
    ) -> &mut Self
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        KS::Target: Clone + 'static,
        VS::Target: Clone + 'static,
        T: Into<String>,
    {
        self.add_source_with(name, SourceConfig::new(topics, key_serde, value_serde))
    }

    /// Adds a source with a full [`SourceConfig`].
    pub fn add_source_with<KS, VS>(&mut self, name: &str, config: SourceConfig<KS, VS>) -> &mut Self
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        KS::Target: Clone + 'static,
        VS::Target: Clone + 'static,
    {
        self.nodes.push(Self::source_def(name, config, false));
        self
    }

    pub(super) fn source_def<KS, VS>(name: &str, config: SourceConfig<KS, VS>, global: bool) -> NodeDef
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        KS::Target: Clone + 'static,
        VS::Target: Clone + 'static,
    {
        let (ks, vs) = (config.key_serde, config.value_serde);
        NodeDef {
            name: name.to_owned(),
            kind: NodeKind::Source {
                topics: config.topics,
                extractor: config.extractor,
                offset_reset: config.offset_reset,
            },
            parents: Vec::new(),
            input: None,
            output: Some(RecordTypes::of::<KS::Target, VS::Target>()),
            factory: Arc::new(move || {
                Box::new(SourceNode::new(ks.clone(), vs.clone())) as Box<dyn ErasedNode>
            }),
            global,
        }
    }

    /// Adds a processor named `name`, made by `supplier` once per task, receiving the
    /// records of `parents` (in the order given, children are called in the order they are
    /// added).
    pub fn add_processor<P, KIn, VIn, KOut, VOut, F, T>(
        &mut self,
        name: &str,
        supplier: F,
        parents: impl IntoIterator<Item = T>,
    ) -> &mut Self
    where
        F: Fn() -> P + Send + Sync + 'static,
        P: Processor<KIn, VIn, KOut, VOut>,
        KIn: 'static,
        VIn: 'static,
        KOut: 'static,
        VOut: 'static,
        T: AsRef<str>,
    {
        self.nodes
            .push(Self::processor_def(name, supplier, names(parents), false));
        self
    }

    pub(super) fn processor_def<P, KIn, VIn, KOut, VOut, F>(
        name: &str,
        supplier: F,
        parents: Vec<String>,
        global: bool,
    ) -> NodeDef
    where
        F: Fn() -> P + Send + Sync + 'static,
        P: Processor<KIn, VIn, KOut, VOut>,
        KIn: 'static,
        VIn: 'static,
        KOut: 'static,
        VOut: 'static,
    {
        processor_node::<KIn, VIn, KOut, VOut, _>(name, parents, global, move || {
            ProcessorNode::<P, KIn, VIn, KOut, VOut>::new(supplier())
        })
    }

    /// Adds a sink named `name` writing the records of `parents` to `topic`.
    pub fn add_sink<KS, VS, T>(
        &mut self,
        name: &str,
        topic: &str,
        key_serde: KS,
        value_serde: VS,
        parents: impl IntoIterator<Item = T>,
    ) -> &mut Self
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        KS::Target: 'static,
        VS::Target: 'static,
        T: AsRef<str>,
    {
        self.add_sink_with(name, SinkConfig::topic(topic, key_serde, value_serde), parents)
    }

    /// Adds a sink with a full [`SinkConfig`] (topic-name extractor, partitioner).
    pub fn add_sink_with<KS, VS, T>(
        &mut self,
        name: &str,
        config: SinkConfig<KS, VS>,
        parents: impl IntoIterator<Item = T>,
    ) -> &mut Self
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        KS::Target: 'static,
        VS::Target: 'static,
        T: AsRef<str>,
    {
        let SinkConfig {
            destination,
            key_serde,
            value_serde,
            partitioner,
            extractor_name,
            skip_null_keys,
        } = config;
        let target = match &destination {
            SinkDestination::Topic(t) => SinkTarget::Topic(t.clone()),
            SinkDestination::Extractor(_) => SinkTarget::Extractor(extractor_name),
        };
        self.nodes.push(NodeDef {
            name: name.to_owned(),
            kind: NodeKind::Sink { target },
            parents: names(parents),
            input: Some(RecordTypes::of::<KS::Target, VS::Target>()),
            output: None,
            factory: Arc::new(move || {
                Box::new(SinkNode {
                    destination: destination.clone(),
                    key_serde: key_serde.clone(),
                    value_serde: value_serde.clone(),
                    partitioner: partitioner.clone(),
                    skip_null_keys,
                    key_buf: Vec::new(),
                    value_buf: Vec::new(),
                }) as Box<dyn ErasedNode>
            }),
            global: false,
        });
        self
    }

    /// Adds a state store, connected to `processors`.
    pub fn add_state_store<T: AsRef<str>>(
        &mut self,
        builder: impl StoreBuilder,
        processors: impl IntoIterator<Item = T>,
    ) -> &mut Self {
        let processors = names(processors);
        for p in &processors {
            self.link_store(p, builder.name());
        }
        self.stores.push(StoreDef {
            builder: Arc::new(builder),
            processors,
            global: false,
        });
        self
    }

    /// Connects existing stores to a processor.
    pub fn connect_processor_and_state_stores<T: AsRef<str>>(
        &mut self,
        processor: &str,
        stores: impl IntoIterator<Item = T>,
    ) -> &mut Self {
        for s in stores {
            self.connect_store(processor, s.as_ref());
        }
        self
    }

    /// Connects `store` to `processor`.
    pub(super) fn connect_store(&mut self, processor: &str, store: &str) {
        self.link_store(processor, store);
        self.connections.push((processor.to_owned(), store.to_owned()));
    }

    /// Records that `processor` was connected to `store`, in order (see `store_links`).
    pub(super) fn link_store(&mut self, processor: &str, store: &str) {
        self.store_links.push((processor.to_owned(), store.to_owned()));
    }

    /// Adds a global store: every instance holds all of it, fed from every partition of the
    /// source's topics by `processor` (which writes the store and forwards nothing). Every
    /// processor of the topology can read it. The store should not be logged: its topic is
    /// its changelog.
    pub fn add_global_store<KS, VS, P, F>(
        &mut self,
        builder: impl StoreBuilder,
        source_name: &str,
        source: SourceConfig<KS, VS>,
        processor_name: &str,
        supplier: F,
    ) -> &mut Self
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        KS::Target: Clone + 'static,
        VS::Target: Clone + 'static,
        F: Fn() -> P + Send + Sync + 'static,
        P: Processor<KS::Target, VS::Target, (), ()>,
    {
        let source = Self::source_def(source_name, source, true);
        let processor = Self::processor_def(processor_name, supplier, vec![source_name.to_owned()], true);
        self.push_global(source, processor, Arc::new(builder));
        self
    }

    /// Adds a global store: its source, the processor that writes it, and the store
    /// connected to that processor.
    pub(super) fn push_global(
        &mut self,
        source: NodeDef,
        processor: NodeDef,
        builder: Arc<dyn StoreBuilder>,
    ) {
        let processor_name = processor.name.clone();
        self.nodes.push(source);
        self.nodes.push(processor);
        self.link_store(&processor_name, builder.name());
        self.stores.push(StoreDef {
            builder,
            processors: vec![processor_name],
            global: true,
        });
    }

    /// Restores `store` from the source topic `topic` instead of a changelog of its own
    /// (Kafka Streams' `reuse.ktable.source.topics` optimization): the store holds what its
    /// processor wrote from that topic's records, so the topic already is its changelog. The
    /// store must be built without logging (no `<application.id>-<store>-changelog` is
    /// created or written), and `topic` must be read by a source of the store's
    /// sub-topology: both are checked by [`build`](Self::build).
    ///
    /// A task restores the store from its partition of `topic` up to the group's committed
    /// offset (none without one: the task then processes the topic from where
    /// `auto.offset.reset` says), and checkpoints the committed offset at each commit. The
    /// store's processor must write the topic's records unchanged (key and value bytes, the
    /// value behind the record's timestamp for [`SourceValues::Timestamped`]), since
    /// restoring applies the raw records: a null value deletes the key.
    pub fn use_source_topic_as_changelog(
        &mut self,
        store: &str,
        topic: &str,
        values: SourceValues,
    ) -> &mut Self {
        self.source_changelogs
            .insert(store.to_owned(), (topic.to_owned(), values));
        self
    }

    /// Fixes the partition count of repartition topic `topic` (a topic the topology both
    /// writes and reads), instead of deriving it from the topics upstream. At start an
    /// existing topic with another count, or a count that breaks the co-partitioning of the
    /// topic's reader, is an error; the test driver gives the topic this count unless its
    /// config names one.
    pub fn set_repartition_partitions(&mut self, topic: &str, partitions: std::num::NonZeroU16) -> &mut Self {
        self.repartition_partitions
            .insert(topic.to_owned(), i32::from(partitions.get()));
        self
    }
}
