//! [`StreamsBuilder`]: the entry point of the DSL. It records every DSL call as nodes of a
//! Processor-API [`TopologyBuilder`](streams_core::TopologyBuilder) at once, so `build()` is
//! the core's own validation.

use std::any::TypeId;

use streams_core::{SourceConfig, Topology};
use streams_state::{Serde, StoreBuilder};

use crate::change::OldValues;
use crate::dyn_serde::dyn_serde;
use crate::error::{DslError, DslIssue};
use crate::kstream::KStream;
use crate::ktable::KTable;
use crate::naming::Naming;
use crate::optimization::Optimizations;
use crate::options::{Consumed, Materialized};
use crate::processors::{TableSource, open};
use crate::shared::{Shared, StreamSource, TABLE_SOURCE_VALUES};

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
            shared: Shared::new(),
        }
    }

    /// Makes every stateful operator without a user-given name for its store or repartition
    /// topic a build error, so that no state depends on the naming rule.
    pub fn require_names(self) -> Self {
        self.shared.0.borrow_mut().require_names = true;
        self
    }

    /// Names unnamed nodes, stores and internal topics as Kafka Streams does
    /// (`KSTREAM-AGGREGATE-STATE-STORE-0000000001`, `<store>-repartition`): for an
    /// application that takes over the state and topics of a Kafka Streams application
    /// whose steps were left unnamed (see [`Naming::KafkaStreams`]). Call it first, before
    /// adding anything, and build the same steps in the same order as the Java program.
    pub fn with_kafka_streams_names(self) -> Self {
        self.shared.0.borrow_mut().namer.set_naming(Naming::KafkaStreams);
        self
    }

    /// Applies `optimizations` (Kafka Streams' `topology.optimization`; none by default) to
    /// the topology built from here on: call it first.
    pub fn with_optimization(self, optimizations: Optimizations) -> Self {
        self.shared.0.borrow_mut().optimizations = optimizations;
        self
    }

    /// A stream of the records of `topics`. A second stream of exactly the same topics, of
    /// the same types and offset reset and without a timestamp extractor of its own, reads
    /// through the first one's source node (as Kafka Streams merges them); other overlaps
    /// fail the build.
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
        let key_serde = Some(dyn_serde(consumed.key_serde.clone()));
        let value_serde = Some(dyn_serde(consumed.value_serde.clone()));
        // A second stream of the same topics reads through the first one's source, whose
        // timestamp extractor it then shares (Kafka Streams' merge of source nodes); it
        // takes no node name of its own.
        let types = TypeId::of::<(KS::Target, VS::Target)>();
        let mergeable = consumed.extractor.is_none();
        if mergeable && let Some(first) = self.shared.merged_source(&topics, types, consumed.offset_reset) {
            return KStream::new(self.shared.clone(), first, key_serde, value_serde);
        }
        let name = self
            .shared
            .name(consumed.name.as_deref(), &topics.join("+"), "source");
        if mergeable {
            let source = StreamSource {
                node: name.clone(),
                types,
                offset_reset: consumed.offset_reset,
            };
            self.shared.register_source(&topics, source);
        }
        let mut config = SourceConfig::new(topics, consumed.key_serde.clone(), consumed.value_serde.clone())
            .offset_reset(consumed.offset_reset);
        if let Some(extractor) = consumed.extractor {
            config = config.timestamp_extractor(move |raw, partition_time| extractor(raw, partition_time));
        }
        self.shared.with(|t| {
            t.add_source_with(&name, config);
        });
        KStream::new(self.shared.clone(), name, key_serde, value_serde)
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
        // Kafka Streams names an unnamed store `<topic>-STATE-STORE-<n>`, before the nodes.
        let kafka_store = match &materialized.name {
            None => self.shared.kafka_name(&format!("{topic}-STATE-STORE-")),
            Some(_) => None,
        };
        let source = self.shared.name(None, topic, "source");
        let node = self.shared.table_name(None, topic, "table");
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
            .or(kafka_store)
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
