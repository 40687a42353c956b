//! The global tasks of a stream thread: each thread keeps its own replica of every global
//! store, fed from every partition of the store's topic by the store's processor.
//!
//! A replica per thread keeps the read path what it is for a task's own stores: a shared
//! handle on the same thread, no lock. It costs memory and one topic read per thread.
//!
//! At thread start the replica is rebuilt from the beginning of its topics (the topic is the
//! store's changelog; there is no checkpoint yet), up to the end offsets found then, before
//! any task is created. Afterwards the loop polls the global consumer without waiting, once
//! per iteration, so updates arrive while tasks process. Global offsets are never committed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use streams_state::StoreError;

use crate::engine::StoreSlot;
use crate::engine::{RecordCollector, SendError};
use crate::engine::{Task, TaskId};
use crate::model::error::StreamsError;
use crate::model::record::{OutputRef, RawRecord};
use crate::runtime::client::consumed::{TopicNames, to_raw};
use crate::runtime::client::errors::kafka_err;
use crate::runtime::tasks::TaskSettings;
use crate::runtime::topics::resets::AssignedConsumer;

/// How long the bootstrap may go without progress before it fails.
const STALL: Duration = Duration::from_secs(60);
/// Records taken from the global consumer per loop iteration at most.
const PER_POLL: usize = 1_000;

/// Global processors write their store and forward nothing.
struct NoOutput;

impl RecordCollector for NoOutput {
    fn send(&mut self, r: OutputRef<'_>) -> Result<(), SendError> {
        Err(SendError {
            topic: r.topic.to_owned(),
            message: "a global store's processor cannot write to a topic".into(),
            retriable: false,
            transaction_failed: false,
        })
    }
    fn partitions(&mut self, _: &str) -> Option<i32> {
        None
    }
}

/// The global tasks of one thread and their consumer.
pub(crate) struct GlobalTasks {
    topology: Arc<crate::topology::Topology>,
    tasks: Vec<Task>,
    consumer: AssignedConsumer,
    slots: Vec<StoreSlot>,
    topics: TopicNames,
}

impl GlobalTasks {
    /// The replica of the global store `name`.
    pub fn slot(&self, name: &str) -> Option<&StoreSlot> {
        self.slots.iter().find(|s| *s.name == *name)
    }

    /// Builds the global tasks of the topology (none: `Ok(None)`) with their stores in
    /// `dir` (wiped first), and reads their topics to the end.
    pub fn start(
        settings: &TaskSettings,
        dir: PathBuf,
        consumer: AssignedConsumer,
    ) -> Result<Option<Self>, StreamsError> {
        let topology = settings.factory.topology().clone();
        let subs: Vec<_> = topology.subtopologies().iter().filter(|s| s.global).collect();
        if subs.is_empty() {
            return Ok(None);
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| {
                StreamsError::Store(StoreError::Io {
                    store: "global".into(),
                    path: dir.clone(),
                    source: e,
                })
            })?;
        }
        let mut tasks = Vec::new();
        let mut slots = Vec::new();
        let mut assignment = TopicPartitionList::new();
        let mut ends: HashMap<(String, i32), i64> = HashMap::new();
        for sub in subs {
            let id = TaskId {
                subtopology: sub.id,
                partition: -1,
            };
            let stores = settings.factory.stores(id, &dir.join(id.to_string()), None)?;
            let mut task = settings.factory.task(
                id,
                stores,
                Box::new(NoOutput),
                0,
                Arc::new(AtomicI64::new(0)),
                None,
            )?;
            task.initialize()?;
            slots.extend(task.stores().iter().cloned());
            for topic in &sub.source_topics {
                let md = consumer
                    .fetch_metadata(Some(topic), Duration::from_secs(30))
                    .map_err(|e| kafka_err(&format!("metadata of global topic {topic}"), e))?;
                if let Some(code) = md.topics().first().and_then(|t| t.error())
                    && code == rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED
                {
                    return Err(crate::runtime::client::connect::denied(
                        format!("topic `{topic}`"),
                        "describing the global store's topic",
                        rdkafka::types::RDKafkaErrorCode::TopicAuthorizationFailed,
                        "READ on it",
                    ));
                }
                let partitions = md.topics().first().map_or(0, |t| t.partitions().len() as i32);
                if partitions == 0 {
                    return Err(kafka_err(
                        "global store",
                        format!("topic `{topic}` does not exist"),
                    ));
                }
                for p in 0..partitions {
                    let (low, high) = crate::runtime::client::watermarks::fetch_retrying(
                        &consumer,
                        topic,
                        p,
                        crate::runtime::client::errors::RECOVERY_LIMIT,
                        crate::runtime::client::watermarks::stop_if_denied(topic),
                    )?;
                    // The log start as a concrete offset: librdkafka's lookup of a logical
                    // one can fire again later and move the position (see `start_offsets.rs`).
                    assignment
                        .add_partition_offset(topic, p, Offset::Offset(low))
                        .map_err(|e| kafka_err("global assignment", e))?;
                    if high > low {
                        ends.insert((topic.clone(), p), high);
                    }
                }
            }
            tasks.push(task);
        }
        consumer
            .assign(&assignment)
            .map_err(|e| kafka_err("global assignment", e))?;
        let mut globals = Self {
            topology,
            tasks,
            consumer,
            slots,
            topics: TopicNames::default(),
        };
        globals.bootstrap(ends)?;
        Ok(Some(globals))
    }

    /// Reads every global partition up to `ends`.
    fn bootstrap(&mut self, mut ends: HashMap<(String, i32), i64>) -> Result<(), StreamsError> {
        let started = Instant::now();
        let mut last_progress = Instant::now();
        let mut records = 0u64;
        while !ends.is_empty() {
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    let key = (m.topic().to_owned(), m.partition());
                    if ends.get(&key).is_some_and(|&end| m.offset() + 1 >= end) {
                        ends.remove(&key);
                    }
                    let raw = to_raw(&m, &mut self.topics);
                    self.apply(raw)?;
                    records += 1;
                    last_progress = Instant::now();
                }
                Some(Err(e)) if let Some(denied) = self.denied(&e) => {
                    return Err(denied);
                }
                Some(Err(e)) => {
                    // Transient (a broker restarting), unless it lasts.
                    if last_progress.elapsed() > STALL {
                        return Err(kafka_err("reading a global topic", e));
                    }
                    tracing::debug!(error = %e, "global consumer");
                    std::thread::sleep(Duration::from_millis(100));
                }
                None => {
                    // Transaction markers take offsets but are never returned.
                    if let Ok(pos) = self.consumer.position() {
                        for e in pos.elements() {
                            if let Offset::Offset(p) = e.offset()
                                && ends
                                    .get(&(e.topic().to_owned(), e.partition()))
                                    .is_some_and(|&end| p >= end)
                            {
                                ends.remove(&(e.topic().to_owned(), e.partition()));
                            }
                        }
                    }
                    if last_progress.elapsed() > STALL {
                        return Err(kafka_err(
                            "global store",
                            format!("no progress reading {:?} for {STALL:?}", ends.keys()),
                        ));
                    }
                }
            }
        }
        tracing::info!(records, elapsed = ?started.elapsed(), "global stores loaded");
        Ok(())
    }

    /// Runs one record through the global task of its topic.
    fn apply(&mut self, raw: RawRecord) -> Result<(), StreamsError> {
        let sub = self.topology.subtopology_of_topic(&raw.topic).map(|s| s.id);
        let task = self
            .tasks
            .iter_mut()
            .find(|t| Some(t.id().subtopology) == sub)
            .ok_or_else(|| kafka_err("global store", format!("no global task reads `{}`", raw.topic)))?;
        task.add_records([raw]);
        while task.process_one()? {}
        Ok(())
    }

    /// The authorization error `e` reports, naming the global topics.
    fn denied(&self, e: &rdkafka::error::KafkaError) -> Option<StreamsError> {
        let topics: Vec<String> = self
            .topology
            .subtopologies()
            .iter()
            .filter(|s| s.global)
            .flat_map(|s| &s.source_topics)
            .map(|t| format!("`{t}`"))
            .collect();
        let topics = topics.join(", ");
        self.consumer.context().denied(e, &topics, "READ on each")
    }

    /// The global stores, for the thread's tasks to read.
    pub fn slots(&self) -> &[StoreSlot] {
        &self.slots
    }

    /// Applies the global records that have arrived, without waiting.
    pub fn poll(&mut self) -> Result<usize, StreamsError> {
        let mut n = 0;
        while n < PER_POLL {
            match self.consumer.poll(Duration::ZERO) {
                Some(Ok(m)) => {
                    let raw = to_raw(&m, &mut self.topics);
                    self.apply(raw)?;
                    n += 1;
                }
                Some(Err(e)) if let Some(denied) = self.denied(&e) => {
                    return Err(denied);
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "global consumer");
                    break;
                }
                None => break,
            }
        }
        Ok(n)
    }

    /// Closes the global tasks and their stores.
    pub fn close(&mut self) {
        for mut task in self.tasks.drain(..) {
            if let Err(e) = task.close(true) {
                tracing::warn!(task = %task.id(), error = %e, "closing global task");
            }
        }
    }
}
