//! Adds a ladder's nodes to a topology: per stage a source, a processor and the sinks it
//! forwards failures to; per retry stage a store.
//!
//! Invariants: the names derive from the stage's topic `T` and number `i` only — source
//! `T-source`, processor `T-attempt`, sinks `T-to-retry-<i + 1>` and `T-to-dlq`, store
//! `T-pending` — so a ladder rebuilt with the same arguments has the same names, and so
//! the same changelog topics (`<application.id>-T-pending-changelog`) and committed
//! offsets; each stage is its own sub-topology (stages meet only through topics), so its
//! tasks can run on any stream thread; the sources and sinks move bytes (null kept null),
//! the ladder's serdes are used only to hand the handler typed records.

use std::sync::Arc;

use streams_core::serdes::Serde;
use streams_core::state::Stores;
use streams_core::{SinkConfig, SourceConfig, StoreRef, Topology, TopologyBuilder, TopologyError};

use super::attempt::{NextStage, Stage, raw_serde};
use super::delayed::{Bounds, DelayedAttempt};
use super::first::FirstAttempt;
use super::handler::RetryHandler;
use super::ladder::RetryLadder;
use super::options::RetryOptions;
use super::pending::{PendingKeySerde, PendingRecordSerde};

/// The handle of a retry stage's store, for reading what waits there (e.g. with the test
/// driver's `store`).
pub type PendingStore = StoreRef<PendingKeySerde, PendingRecordSerde>;

/// The nodes of one stage, by name.
#[derive(Debug, Clone)]
pub struct StageNodes {
    /// The topic the stage reads.
    pub topic: String,
    /// Its source.
    pub source: String,
    /// Its processor.
    pub processor: String,
    /// Its sinks: to the next retry topic (when there is one), then to the dead-letter
    /// topic.
    pub sinks: Vec<String>,
    /// The store of waiting records (retry stages only).
    pub store: Option<PendingStore>,
}

/// What [`add_retry_ladder`] added, stage by stage (the main topic's first).
#[derive(Debug, Clone)]
pub struct RetryNodes {
    /// The stages, in ladder order.
    pub stages: Vec<StageNodes>,
}

impl RetryNodes {
    /// The retry stages' stores, in ladder order.
    pub fn stores(&self) -> Vec<PendingStore> {
        self.stages.iter().filter_map(|s| s.store.clone()).collect()
    }
}

/// The store name of the stage reading `topic`.
pub fn pending_store_name(topic: &str) -> String {
    format!("{topic}-pending")
}

/// Adds `ladder`'s stages to `builder`: the main topic's records are attempted by
/// `handler` at once, failures wait in the retry stages' stores for their delays, and what
/// fails for good goes to the dead-letter topic. `key_serde` and `value_serde` read the
/// records for the handler (an undecodable one is dead-lettered as a fatal failure).
///
/// The topics must exist (the main topic, [`RetryLadder::topics`]); the runtime creates
/// the stores' changelogs. See the [module docs](super) for the guarantees and for what a
/// slow handler holds up.
pub fn add_retry_ladder<KS, VS, H>(
    builder: &mut TopologyBuilder,
    ladder: &RetryLadder,
    key_serde: KS,
    value_serde: VS,
    handler: H,
    options: &RetryOptions,
) -> RetryNodes
where
    KS: Serde + Clone,
    VS: Serde + Clone,
    KS::Target: 'static,
    VS::Target: 'static,
    H: RetryHandler<KS::Target, VS::Target>,
{
    let handler: Arc<dyn RetryHandler<KS::Target, VS::Target>> = Arc::new(handler);
    let bounds = Bounds {
        every: options.punctuate_every,
        max_records: options.max_records_per_punctuation,
        max_time: options.max_punctuation_time,
    };
    let mut stages = Vec::with_capacity(ladder.stages());
    let topics = std::iter::once(ladder.source()).chain(ladder.steps().iter().map(|s| s.topic.as_str()));
    for (index, topic) in topics.enumerate() {
        let next = ladder.next_after(index).map(|step| NextStage {
            sink: format!("{topic}-to-retry-{}", index + 1),
            topic: step.topic.clone(),
            delay_ms: i64::try_from(step.delay.as_millis()).unwrap_or(i64::MAX),
        });
        let dead_letter_sink = format!("{topic}-to-dlq");
        let stage = Arc::new(Stage {
            index,
            topic: topic.to_owned(),
            next: next.clone(),
            dead_letter_sink: dead_letter_sink.clone(),
            key_serde: key_serde.clone(),
            value_serde: value_serde.clone(),
            handler: handler.clone(),
            listener: options.listener.clone(),
        });
        let source_name = format!("{topic}-source");
        let processor_name = format!("{topic}-attempt");
        let source = builder.source(&source_name, SourceConfig::new([topic], raw_serde(), raw_serde()));
        let (processor, store) = if index == 0 {
            let processor = builder.processor(&processor_name, [&source], move |_| {
                Ok(FirstAttempt { stage: stage.clone() })
            });
            (processor, None)
        } else {
            let name = pending_store_name(topic);
            let store_builder = if options.persistent {
                Stores::persistent_kv(name, PendingKeySerde, PendingRecordSerde)
            } else {
                Stores::in_memory_kv(name, PendingKeySerde, PendingRecordSerde)
            }
            .with_logging(options.changelog_config.clone());
            let store = builder.store(store_builder);
            let opened = store.clone();
            let processor = builder.processor(&processor_name, [&source], move |ctx| {
                Ok(DelayedAttempt {
                    stage: stage.clone(),
                    store: ctx.store(&opened)?,
                    bounds,
                })
            });
            builder.connect(&processor, &store);
            (processor, Some(store))
        };
        let mut sinks = Vec::new();
        if let Some(next) = &next {
            builder.sink(
                &next.sink,
                SinkConfig::topic(next.topic.as_str(), raw_serde(), raw_serde()),
                [&processor],
            );
            sinks.push(next.sink.clone());
        }
        builder.sink(
            &dead_letter_sink,
            SinkConfig::topic(ladder.dead_letter(), raw_serde(), raw_serde()),
            [&processor],
        );
        sinks.push(dead_letter_sink);
        stages.push(StageNodes {
            topic: topic.to_owned(),
            source: source_name,
            processor: processor_name,
            sinks,
            store,
        });
    }
    RetryNodes { stages }
}

impl crate::StreamsBuilder {
    /// Adds `ladder`'s stages to this program's topology, as [`add_retry_ladder`] does: a
    /// stream written to the ladder's main topic (`to`) is then attempted by `handler`,
    /// retried with the ladder's delays, and dead-lettered.
    pub fn retry_ladder<KS, VS, H>(
        &self,
        ladder: &RetryLadder,
        key_serde: KS,
        value_serde: VS,
        handler: H,
        options: &RetryOptions,
    ) -> RetryNodes
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
        KS::Target: 'static,
        VS::Target: 'static,
        H: RetryHandler<KS::Target, VS::Target>,
    {
        self.shared
            .with(|b| add_retry_ladder(b, ladder, key_serde, value_serde, handler, options))
    }
}

/// A topology of `ladder` alone (see [`add_retry_ladder`]), for an application that only
/// delivers.
pub fn retry_topology<KS, VS, H>(
    ladder: &RetryLadder,
    key_serde: KS,
    value_serde: VS,
    handler: H,
    options: &RetryOptions,
) -> Result<Topology, TopologyError>
where
    KS: Serde + Clone,
    VS: Serde + Clone,
    KS::Target: 'static,
    VS::Target: 'static,
    H: RetryHandler<KS::Target, VS::Target>,
{
    let mut builder = Topology::builder();
    add_retry_ladder(&mut builder, ladder, key_serde, value_serde, handler, options);
    builder.build()
}
