//! [`TopologyTestDriver`]: runs a topology synchronously, without a broker, for unit tests.
//!
//! The contract is documented on [`TopologyTestDriver`].

mod log;
mod metadata;
mod topics;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use streams_state::{
    ChangelogSink, KvStore, RocksDbResources, Serde, SessionStore, StoreBuildContext, StoreError,
    ThreadCache, WindowStore,
};

pub use topics::{TestInputTopic, TestOutputTopic, TestRecord};

use streams_core::engine::{StoreSlot, Task, TaskFactory};
use streams_core::metrics::{Metrics, RecordingLevel, ThreadMetrics};
use streams_core::{
    ErrorPolicy, Headers, OutputRecord, PunctuationType, StoreRef, StreamsConfig, StreamsError, TaskId,
    Topology, default_partition,
};

use self::log::{DriverChangelog, DriverCollector, SharedLog};

/// Settings of a [`TopologyTestDriver`].
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// The application id (names changelog topics).
    pub application_id: String,
    /// Partition counts of topics; topics not listed have one partition.
    pub partitions: HashMap<String, i32>,
    /// The wall-clock time the driver starts at (ms).
    pub start_wall_clock: i64,
    /// The record-cache budget that the caches of all the driver's stores share, as the
    /// stores of one stream thread do (see [`ThreadCache`]).
    pub cache_max_bytes: usize,
    /// The error handlers.
    pub errors: ErrorPolicy,
    /// Commit (flush caches and stores) after every this many piped records; 1 by default,
    /// as Kafka Streams' test driver does. Larger values suit bulk tests on RocksDB stores,
    /// whose flush writes a table file. [`TopologyTestDriver::commit`] commits on demand.
    pub commit_every: u32,
    /// Record metrics at this level (none by default); read them with
    /// [`TopologyTestDriver::metrics`].
    pub metrics: Option<RecordingLevel>,
}

impl From<&StreamsConfig> for DriverConfig {
    /// The settings matching an application's configuration: its application id, cache
    /// budget and error handlers.
    fn from(config: &StreamsConfig) -> Self {
        Self {
            application_id: config.application_id().to_owned(),
            cache_max_bytes: config.cache_max_bytes(),
            errors: config.error_policy(),
            ..Self::default()
        }
    }
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            application_id: "test-driver".into(),
            partitions: HashMap::new(),
            start_wall_clock: 0,
            cache_max_bytes: StoreBuildContext::DEFAULT_CACHE_MAX_BYTES,
            errors: ErrorPolicy::default(),
            commit_every: 1,
            metrics: None,
        }
    }
}

impl DriverConfig {
    /// Gives `topic` `n` partitions.
    pub fn partitions(mut self, topic: &str, n: i32) -> Self {
        self.partitions.insert(topic.to_owned(), n);
        self
    }

    /// Sets the application id.
    pub fn application_id(mut self, id: &str) -> Self {
        self.application_id = id.to_owned();
        self
    }

    /// Sets the error handlers.
    pub fn errors(mut self, errors: ErrorPolicy) -> Self {
        self.errors = errors;
        self
    }

    /// Commits after every `n` piped records (at least 1).
    pub fn commit_every(mut self, n: u32) -> Self {
        self.commit_every = n.max(1);
        self
    }

    /// Sets the record-cache budget all cached stores share.
    pub fn cache_max_bytes(mut self, bytes: usize) -> Self {
        self.cache_max_bytes = bytes;
        self
    }

    /// Records metrics at `level`, as one stream thread named `<application id>-driver`.
    pub fn metrics(mut self, level: RecordingLevel) -> Self {
        self.metrics = Some(level);
        self
    }
}

/// The driver's state, shared with its input and output topics.
pub(crate) struct DriverInner {
    topology: Arc<Topology>,
    log: SharedLog,
    tasks: BTreeMap<TaskId, Task>,
    wall_clock: i64,
    timestamp: Arc<AtomicI64>,
    round_robin: HashMap<String, u32>,
    routed: HashMap<String, usize>,
    commit_every: u32,
    since_commit: u32,
    metrics: Option<(Metrics, ThreadMetrics)>,
    /// The record-cache budget of every store's cache.
    thread_cache: ThreadCache,
    _state_dir: tempfile::TempDir,
}

/// Runs a [`Topology`] without Kafka: synchronously, without a broker, for unit tests.
///
/// It drives the very task code the runtime runs: the same nodes, stores (including
/// RocksDB, in a temporary directory), caches, changelogs, punctuation and error handlers.
/// Only the edges differ: input comes from [`TestInputTopic`]s instead of a consumer, and
/// produced records land in in-memory topics instead of a producer.
///
/// Like the runtime, the driver
/// - places keyed records on partitions with murmur2 of the key bytes, so a topic can have
///   several partitions and every (sub-topology, partition) has its own task and stores;
/// - routes records written to a topic that a sub-topology reads (a repartition topic) to
///   that sub-topology's task;
/// - commits (flushes caches and stores) after every piped record, as Kafka Streams' own
///   test driver does;
/// - gives the caches of all its stores one shared budget, as one stream thread's
///   ([`TopologyTestDriver::thread_cache`]);
/// - writes logged stores' changes to `<application.id>-<store>-changelog`, readable as an
///   output topic.
///
/// ```
/// use streams_core::serdes::StringSerde;
/// use streams_core::{ProcessResult, Processor, ProcessorContext, Record, Topology};
/// use streams_test_utils::{DriverConfig, TopologyTestDriver};
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
/// let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
/// let input = driver.input_topic("words", StringSerde, StringSerde);
/// let output = driver.output_topic("upper-words", StringSerde, StringSerde);
/// input.pipe("k".to_string(), "hello".to_string()).unwrap();
/// assert_eq!(output.read_value().unwrap(), Some("HELLO".to_string()));
/// ```
pub struct TopologyTestDriver {
    inner: Rc<RefCell<DriverInner>>,
}

impl TopologyTestDriver {
    /// Creates every task of `topology`: one per (sub-topology, partition), with its stores.
    pub fn new(topology: Topology, config: DriverConfig) -> Result<Self, StreamsError> {
        let topology = topology.with_application_id(&config.application_id);
        let state_dir =
            tempfile::tempdir().map_err(|e| StreamsError::Usage(format!("temporary state dir: {e}")))?;
        let log = SharedLog::default();
        for (t, n) in topology.repartition_partitions() {
            log.lock().set_partitions(t, *n);
        }
        for (t, n) in &config.partitions {
            log.lock().set_partitions(t, *n);
        }
        let topology = Arc::new(topology);
        let factory = TaskFactory::new(
            topology.clone(),
            Arc::from(config.application_id.as_str()),
            config.errors.clone(),
            config.cache_max_bytes,
            RocksDbResources::default(),
        );
        let timestamp = Arc::new(AtomicI64::new(0));
        let metrics = match config.metrics {
            Some(level) => {
                let m = Metrics::new(&config.application_id, level)?;
                let thread = m.thread(&format!("{}-driver", config.application_id));
                Some((m, thread))
            }
            None => None,
        };
        let mut tasks = BTreeMap::new();
        // Global sub-topologies first: every other task reads their stores.
        let mut subs: Vec<_> = topology.subtopologies().iter().collect();
        subs.sort_by_key(|s| !s.global);
        let mut globals: Vec<StoreSlot> = Vec::new();
        for sub in subs {
            let counts: Vec<i32> = sub
                .source_topics
                .iter()
                .map(|t| log.lock().partitions(t))
                .collect();
            let n = counts.first().copied().unwrap_or(1);
            if counts.iter().any(|&c| c != n) {
                return Err(StreamsError::Usage(format!(
                    "source topics {:?} of sub-topology {} have different partition counts {counts:?}",
                    sub.source_topics, sub.id
                )));
            }
            let partitions: Vec<i32> = if sub.global { vec![-1] } else { (0..n).collect() };
            for partition in partitions {
                let id = TaskId {
                    subtopology: sub.id,
                    partition,
                };
                let sink =
                    &mut |topic: &str, partition: i32, values, headers: &Headers| -> Box<dyn ChangelogSink> {
                        Box::new(DriverChangelog {
                            log: log.clone(),
                            topic: topic.to_owned(),
                            partition,
                            timestamp: timestamp.clone(),
                            values,
                            headers: headers.clone(),
                        })
                    };
                let stores = factory.stores(id, &state_dir.path().join(id.to_string()), Some(sink))?;
                let collector = Box::new(DriverCollector {
                    log: log.clone(),
                    round_robin: 0,
                });
                let observer = metrics.as_ref().map(|(_, t)| t.task_observer(id));
                let mut task = factory.task(
                    id,
                    stores,
                    collector,
                    config.start_wall_clock,
                    timestamp.clone(),
                    observer,
                )?;
                if sub.global {
                    globals.extend(task.stores().iter().cloned());
                } else {
                    task.with_globals(&globals);
                }
                task.initialize()?;
                tasks.insert(id, task);
            }
        }
        let inner = DriverInner {
            topology,
            log,
            tasks,
            wall_clock: config.start_wall_clock,
            timestamp,
            round_robin: HashMap::new(),
            routed: HashMap::new(),
            commit_every: config.commit_every.max(1),
            since_commit: 0,
            metrics,
            thread_cache: factory.thread_cache().clone(),
            _state_dir: state_dir,
        };
        Ok(Self {
            inner: Rc::new(RefCell::new(inner)),
        })
    }

    /// A typed handle for piping records into `topic`.
    pub fn input_topic<KS: Serde, VS: Serde>(
        &self,
        topic: &str,
        key_serde: KS,
        value_serde: VS,
    ) -> TestInputTopic<KS, VS> {
        TestInputTopic::new(self.inner.clone(), topic, key_serde, value_serde)
    }

    /// A typed handle for reading the records written to `topic`, from the first one.
    pub fn output_topic<KS: Serde, VS: Serde>(
        &self,
        topic: &str,
        key_serde: KS,
        value_serde: VS,
    ) -> TestOutputTopic<KS, VS> {
        TestOutputTopic::new(self.inner.clone(), topic, key_serde, value_serde)
    }

    /// Advances the wall clock by `by` and runs the wall-clock punctuators that became due.
    pub fn advance_wall_clock(&self, by: Duration) -> Result<(), StreamsError> {
        let mut inner = self.inner.borrow_mut();
        inner.wall_clock = inner
            .wall_clock
            .saturating_add(i64::try_from(by.as_millis()).unwrap_or(i64::MAX));
        let now = inner.wall_clock;
        inner.timestamp.store(now, Ordering::Relaxed);
        for task in inner.tasks.values_mut() {
            task.punctuate(PunctuationType::WallClock, now)?;
            // Records a task held back while it took none (an async processor's buffer
            // was full) go on once a punctuation let it take them again.
            while task.process_one()? {}
        }
        inner.route_internal()?;
        inner.commit()
    }

    /// Commits every task now: flushes caches and stores.
    pub fn commit(&self) -> Result<(), StreamsError> {
        self.inner.borrow_mut().commit()
    }

    /// The metrics, published up to now, when [`DriverConfig::metrics`] asked for them.
    pub fn metrics(&self) -> Option<Metrics> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let (m, thread) = inner.metrics.as_ref()?;
        for task in inner.tasks.values_mut() {
            thread.add(&task.publish());
        }
        Some(m.clone())
    }

    /// The record-cache budget the caches of all the driver's stores share, as the stores of
    /// one stream thread do: its [`used_bytes`](ThreadCache::used_bytes) never exceed its
    /// [`max_bytes`](ThreadCache::max_bytes) ([`DriverConfig::cache_max_bytes`]).
    pub fn thread_cache(&self) -> ThreadCache {
        self.inner.borrow().thread_cache.clone()
    }

    /// The wall-clock time (ms).
    pub fn wall_clock(&self) -> i64 {
        self.inner.borrow().wall_clock
    }

    /// The store `name` of partition 0 (or of the global task).
    pub fn kv_store<KS, VS>(&self, name: &str) -> Result<KvStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        self.with_slot(name, |p| p <= 0, StoreSlot::typed)
    }

    /// The window store `name` of partition 0, if its key and value serdes are `KS`/`VS`.
    pub fn window_store<KS, VS>(&self, name: &str) -> Result<WindowStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        self.handle(name)
    }

    /// The session store `name` of partition 0, if its key and value serdes are `KS`/`VS`.
    pub fn session_store<KS, VS>(&self, name: &str) -> Result<SessionStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        self.handle(name)
    }

    /// The handle of store `name` of partition 0 (or of the global task) as its builder
    /// makes it.
    fn handle<H: 'static>(&self, name: &str) -> Result<H, StoreError> {
        self.with_slot(name, |p| p <= 0, StoreSlot::handle)
    }

    /// `open` applied to the slot of store `name` in the first task whose partition is
    /// `wanted`.
    fn with_slot<T>(
        &self,
        name: &str,
        wanted: impl Fn(i32) -> bool,
        open: impl FnOnce(&StoreSlot) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let inner = self.inner.borrow();
        let slot = inner
            .tasks
            .values()
            .filter(|t| wanted(t.id().partition))
            .find_map(|t| t.stores().iter().find(|s| s.name() == name))
            .ok_or_else(|| StoreError::NotFound {
                store: name.to_owned(),
                place: "in the test driver's tasks".into(),
            })?;
        open(slot)
    }

    /// The store `name` of the task for `partition`.
    pub fn kv_store_at<KS, VS>(&self, name: &str, partition: i32) -> Result<KvStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        self.with_slot(name, |p| p == partition, StoreSlot::typed)
    }

    /// The typed handle of `store` in the task for `partition` (`-1` or `0` for the global
    /// task or partition 0), opened with the store's own serdes.
    pub fn store<KS, VS>(
        &self,
        store: &StoreRef<KS, VS>,
        partition: i32,
    ) -> Result<KvStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        let inner = self.inner.borrow();
        inner
            .tasks
            .values()
            .filter(|t| t.id().partition == partition || (partition <= 0 && t.id().partition == -1))
            .find_map(|t| t.stores().iter().find_map(|s| s.open(store)))
            .ok_or_else(|| StoreError::NotFound {
                store: store.name().to_owned(),
                place: format!("in the task of partition {partition}"),
            })
    }

    /// The names of every topic that holds records (inputs, outputs, changelogs).
    pub fn topics(&self) -> Vec<String> {
        let inner = self.inner.borrow();
        let mut v: Vec<String> = inner.log.lock().topics().cloned().collect();
        v.sort();
        v
    }

    /// The ids of the driver's tasks.
    pub fn task_ids(&self) -> Vec<TaskId> {
        self.inner.borrow().tasks.keys().copied().collect()
    }

    /// Closes every task cleanly (flush, processors' `close`, stores' `close`).
    pub fn close(self) -> Result<(), StreamsError> {
        let mut inner = self.inner.borrow_mut();
        let mut first = None;
        for task in inner.tasks.values_mut() {
            if let Err(e) = task.close(true) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl DriverInner {
    /// Appends a piped record to its topic and runs it (and everything it causes) through
    /// the tasks.
    pub(crate) fn pipe(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        key: Option<Bytes>,
        value: Option<Bytes>,
        timestamp: i64,
        headers: Headers,
    ) -> Result<(), StreamsError> {
        let n = self.log.lock().partitions(topic);
        if let Some(p) = partition.filter(|p| !(0..n).contains(p)) {
            return Err(StreamsError::Usage(format!(
                "topic `{topic}` has {n} partitions, not {}",
                p + 1
            )));
        }
        let partition = match (&key, partition) {
            (_, Some(p)) => p,
            (Some(k), None) => default_partition(k, n),
            (None, None) => {
                let rr = self.round_robin.entry(topic.to_owned()).or_insert(0);
                *rr = rr.wrapping_add(1);
                (*rr % n.max(1) as u32) as i32
            }
        };
        self.log.lock().append(
            topic,
            partition,
            OutputRecord {
                topic: topic.to_owned(),
                partition: Some(partition),
                key,
                value,
                timestamp,
                headers,
            },
        );
        self.route_internal()?;
        self.since_commit += 1;
        if self.since_commit >= self.commit_every {
            self.commit()?;
        }
        Ok(())
    }

    /// Flushes every task's stores. What processors forward at the flush (a cached
    /// aggregation's updates) is routed and processed first, and what that forwards in
    /// turn, until nothing is left: as Kafka Streams' test driver, which commits until no
    /// internal topic has records pending.
    fn commit(&mut self) -> Result<(), StreamsError> {
        self.since_commit = 0;
        loop {
            for task in self.tasks.values_mut() {
                task.forward_held()?;
            }
            if !self.route_internal()? {
                break;
            }
        }
        for task in self.tasks.values_mut() {
            task.flush()?;
        }
        self.route_internal().map(drop)
    }

    /// Delivers every record not yet delivered to the task reading its topic, processing
    /// until no task has work left (records written to a repartition topic loop back).
    /// Returns whether any record was delivered.
    fn route_internal(&mut self) -> Result<bool, StreamsError> {
        let mut routed = false;
        loop {
            let mut pending = Vec::new();
            {
                let log = self.log.lock();
                for sub in self.topology.subtopologies() {
                    for t in &sub.source_topics {
                        let from = self.routed.get(t).copied().unwrap_or(0);
                        let new = log.read_from(t, from);
                        if !new.is_empty() {
                            pending.push((sub.id, sub.global, t.clone(), new.to_vec()));
                        }
                    }
                }
            }
            if pending.is_empty() {
                return Ok(routed);
            }
            routed = true;
            for (sub, global, topic, records) in pending {
                *self.routed.entry(topic).or_insert(0) += records.len();
                for r in records {
                    let id = TaskId {
                        subtopology: sub,
                        partition: if global { -1 } else { r.partition },
                    };
                    self.timestamp.store(r.timestamp, Ordering::Relaxed);
                    let Some(task) = self.tasks.get_mut(&id) else {
                        return Err(StreamsError::Usage(format!(
                            "no task {id} for {}-{}",
                            r.topic, r.partition
                        )));
                    };
                    task.add_records([r]);
                    while task.process_one()? {}
                }
            }
        }
    }
}
