//! The one place tasks and their stores are built, for every host: the runtime's stream
//! threads and their global tasks, and streams-test-utils' test driver.
//!
//! A host says only where a task's stores live (a directory), where their changelog writes
//! go (a [`ChangelogSink`] per changelog partition), where the task's output goes (a
//! [`RecordCollector`]) and who observes it (a [`TaskObserver`]). Stores are built apart from
//! the task because the runtime restores them on another thread first: stores are `Send`,
//! a task is not.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use streams_state::{ChangelogSink, KeyValueStore, RocksDbResources, StoreBuildContext, ThreadCache};

use super::Task;
use super::collector::RecordCollector;
use super::observer::TaskObserver;
use crate::model::TaskId;
use crate::model::error::StreamsError;
use crate::model::handlers::ErrorPolicy;
use crate::model::record::Headers;
use crate::processor::ThreadWaker;
use crate::topology::{Topology, changelog_topic};

/// A store built for a task, before the task exists: made by [`TaskFactory::stores`],
/// handed to [`TaskFactory::task`].
pub struct TaskStore {
    pub(crate) name: String,
    /// Its changelog topic; `None` for a store that is not logged, or global (a global
    /// store's topic is its source, not a changelog). For a store restored from a source
    /// topic (see [`TopologyBuilder::use_source_topic_as_changelog`]), that topic.
    ///
    /// [`TopologyBuilder::use_source_topic_as_changelog`]: crate::TopologyBuilder::use_source_topic_as_changelog
    pub(crate) changelog: Option<String>,
    /// Set when [`changelog`](Self::changelog) is a source topic of the task: how the store
    /// holds that topic's values.
    pub(crate) from_source: Option<crate::topology::SourceValues>,
    /// How the store holds the values of its [`changelog`](Self::changelog) topic: for a
    /// timestamped store, the record's timestamp goes in front of each value restored.
    pub(crate) values: crate::topology::SourceValues,
    /// The offset restoration stops before, when not the changelog's end: for a store
    /// restored from a source topic, the group's committed offset of that topic.
    pub(crate) restore_until: Option<i64>,
    pub(crate) store: Box<dyn KeyValueStore>,
}

/// Makes the changelog sink of a logged store: called with the changelog topic, the task's
/// partition, how the store holds the topic's values and the headers its records carry
/// ([`StoreBuilder::changelog_headers`](streams_state::StoreBuilder::changelog_headers),
/// tombstones aside).
/// A sink of a [`Timestamped`](crate::topology::SourceValues::Timestamped) store writes
/// each value without its leading timestamp, which becomes the record's timestamp (Kafka
/// Streams' changelog format).
pub type SinkMaker<'a> =
    dyn FnMut(&str, i32, crate::topology::SourceValues, &Headers) -> Box<dyn ChangelogSink> + 'a;

/// Builds the tasks of one topology, with their stores.
///
/// One factory serves one stream thread (or one test driver): the caches of every store it
/// builds share one record-cache budget, its [`ThreadCache`]. Clones share it too.
#[derive(Clone)]
pub struct TaskFactory {
    topology: Arc<Topology>,
    app_id: Arc<str>,
    policy: ErrorPolicy,
    thread_cache: ThreadCache,
    rocksdb: RocksDbResources,
    exactly_once: bool,
    waker: ThreadWaker,
}

impl TaskFactory {
    /// A factory of `topology`'s tasks in application `app_id`: their processors fail by
    /// `policy`, the caches of all the stores it builds share one budget of
    /// `cache_max_bytes` (the thread's share of `statestore.cache.max.bytes`), and RocksDB
    /// stores share `rocksdb`.
    pub fn new(
        topology: Arc<Topology>,
        app_id: Arc<str>,
        policy: ErrorPolicy,
        cache_max_bytes: usize,
        rocksdb: RocksDbResources,
    ) -> Self {
        Self {
            topology,
            app_id,
            policy,
            thread_cache: ThreadCache::new(cache_max_bytes),
            rocksdb,
            exactly_once: false,
            waker: ThreadWaker::default(),
        }
    }

    /// The tasks built from here on wake the host's thread through `waker` (see
    /// [`ProcessorContext::waker`](crate::ProcessorContext::waker)). Without one, a waker
    /// nobody looks at: the host then finds completed work at its next poll.
    pub fn with_waker(mut self, waker: ThreadWaker) -> Self {
        self.waker = waker;
        self
    }

    /// The waker the tasks of this factory wake their host with.
    pub fn waker(&self) -> &ThreadWaker {
        &self.waker
    }

    /// Under exactly-once, persistent stores of the tasks hold their writes until
    /// [`commit_writes`](streams_state::KeyValueStore::commit_writes), which the host calls
    /// once the transaction that logged them has committed (see
    /// [`TransactionalKeyValueStore`](streams_state::TransactionalKeyValueStore)).
    pub fn exactly_once(mut self, on: bool) -> Self {
        self.exactly_once = on;
        self
    }

    /// The record-cache budget the caches of this factory's stores share.
    pub fn thread_cache(&self) -> &ThreadCache {
        &self.thread_cache
    }

    /// The RocksDB resources this factory's persistent stores share.
    pub fn rocksdb(&self) -> &RocksDbResources {
        &self.rocksdb
    }

    /// The topology.
    pub(crate) fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    /// The application id.
    pub(crate) fn app_id(&self) -> &Arc<str> {
        &self.app_id
    }

    /// The error handlers tasks are built with.
    pub(crate) fn policy(&self) -> &ErrorPolicy {
        &self.policy
    }

    /// Builds the stores of task `id` in `dir`, in the order of its sub-topology. The
    /// logged stores of a non-global task write their changelog to `sink` (a global task,
    /// whose stores have no changelog, passes `None`).
    pub fn stores(
        &self,
        id: TaskId,
        dir: &Path,
        mut sink: Option<&mut SinkMaker<'_>>,
    ) -> Result<Vec<TaskStore>, StreamsError> {
        let sub = self.subtopology(id)?;
        let mut stores = Vec::with_capacity(sub.stores.len());
        for &s in &sub.stores {
            let def = &self.topology.stores[s];
            let name = def.builder.name();
            let mut ctx = StoreBuildContext::new(Some(dir.to_path_buf()))
                .with_rocksdb(self.rocksdb.clone())
                .with_thread_cache(self.thread_cache.clone())
                .with_transactional(self.exactly_once && !def.global);
            let changelog = def
                .builder
                .logging_config()
                .filter(|_| !def.global)
                .map(|_| changelog_topic(&self.app_id, name));
            let layout = def.builder.layout();
            let values = if matches!(layout, streams_state::StoreLayout::Versioned) {
                crate::topology::SourceValues::Versioned
            } else if layout.timestamped() {
                crate::topology::SourceValues::Timestamped
            } else {
                crate::topology::SourceValues::Plain
            };
            if let (Some(topic), Some(sink)) = (&changelog, sink.as_mut()) {
                let mut headers = Headers::new();
                for (name, value) in def.builder.changelog_headers() {
                    headers.add(name.clone(), value.clone());
                }
                ctx.changelog = Some(sink(topic, id.partition, values, &headers));
            }
            // A store restored from its source topic writes no changelog: the topic is it.
            let source = self
                .topology
                .source_changelog(name)
                .filter(|_| !def.global)
                .map(str::to_owned);
            let from_source = if changelog.is_none() && source.is_some() {
                self.topology.source_values(name)
            } else {
                None
            };
            stores.push(TaskStore {
                name: name.to_owned(),
                from_source,
                values: from_source.unwrap_or(values),
                changelog: changelog.or(source),
                restore_until: None,
                store: def.builder.build(ctx)?,
            });
        }
        Ok(stores)
    }

    /// Builds task `id` around `stores` (built by [`TaskFactory::stores`], restored or
    /// not). Its output goes to `collector`; its wall clock starts at `wall_clock` (ms); it
    /// keeps the timestamp of the record being processed in `timestamp`, for the changelog
    /// sinks of its stores to stamp their records with; `observer` watches it. Its processors are not initialized yet: see
    /// [`Task::initialize`].
    pub fn task(
        &self,
        id: TaskId,
        stores: Vec<TaskStore>,
        collector: Box<dyn RecordCollector>,
        wall_clock: i64,
        timestamp: Arc<AtomicI64>,
        observer: Option<Box<dyn TaskObserver>>,
    ) -> Result<Task, StreamsError> {
        let mut task = Task::new(
            &self.topology,
            id,
            self.app_id.clone(),
            collector,
            stores,
            self.policy.clone(),
            wall_clock,
            timestamp,
            observer,
        )?;
        task.shared.exactly_once.set(self.exactly_once);
        task.shared.waker = self.waker.clone();
        Ok(task)
    }

    fn subtopology(&self, id: TaskId) -> Result<&crate::topology::SubTopology, StreamsError> {
        self.topology
            .subtopology(id.subtopology)
            .ok_or_else(|| StreamsError::Usage(format!("no sub-topology {}", id.subtopology)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SendError;
    use crate::model::record::{OutputRef, Record};
    use crate::serdes::StringSerde;
    use crate::{ProcessResult, Processor, ProcessorContext};

    /// What processors of the tests saw at init: their task and the count of its shared
    /// counter after they bumped it.
    type Seen = Arc<std::sync::Mutex<Vec<(TaskId, u32)>>>;

    /// At init: wakes its thread, bumps its task's shared counter and notes the count.
    struct AtInit(Seen);

    impl Processor<String, String, String, String> for AtInit {
        fn init(&mut self, ctx: &mut ProcessorContext<'_, String, String>) -> ProcessResult {
            ctx.waker().wake();
            let counter = ctx.task_shared("counter", || std::cell::Cell::new(0u32))?;
            counter.set(counter.get() + 1);
            assert!(
                ctx.task_shared("counter", || 0u64).is_err(),
                "another type under the name"
            );
            self.0.lock().unwrap().push((ctx.task_id(), counter.get()));
            Ok(())
        }

        fn process(
            &mut self,
            _: &mut ProcessorContext<'_, String, String>,
            _: Record<String, String>,
        ) -> ProcessResult {
            Ok(())
        }
    }

    struct Discard;

    impl RecordCollector for Discard {
        fn send(&mut self, _: OutputRef<'_>) -> Result<(), SendError> {
            Ok(())
        }
        fn partitions(&mut self, _: &str) -> Option<i32> {
            Some(1)
        }
    }

    /// A factory of `topology`'s tasks with default settings.
    fn factory_of(topology: &Arc<Topology>) -> TaskFactory {
        TaskFactory::new(
            topology.clone(),
            Arc::from("app"),
            ErrorPolicy::default(),
            0,
            RocksDbResources::default(),
        )
    }

    /// The task of `partition` of sub-topology 0 built by `factory`, not initialized.
    fn task_of(factory: &TaskFactory, partition: i32) -> Task {
        let id = TaskId {
            subtopology: 0,
            partition,
        };
        let stores = factory.stores(id, &std::env::temp_dir(), None).unwrap();
        let (collector, timestamp) = (Box::new(Discard), Arc::new(AtomicI64::new(0)));
        factory.task(id, stores, collector, 0, timestamp, None).unwrap()
    }

    /// A processor's waker is the one its host built the task with: waking it is seen by
    /// the host, and by no other factory's host.
    #[test]
    fn a_processor_wakes_the_host_that_built_its_task() {
        let mut b = Topology::builder();
        b.add_source("src", ["in"], StringSerde, StringSerde)
            .add_processor("wake", || AtInit(Seen::default()), ["src"]);
        let topology = Arc::new(b.build().unwrap());
        let (host, other) = (ThreadWaker::default(), ThreadWaker::default());
        let _unused = factory_of(&topology).with_waker(other.clone());
        let ours = factory_of(&topology).with_waker(host.clone());
        let mut task = task_of(&ours, 0);
        assert!(!host.take(), "no wake-up before the processor runs");
        task.initialize().unwrap();
        assert!(host.take(), "the processor woke its host");
        assert!(!other.take(), "and no other");
    }

    /// The processors of one task share one value per name; each task has its own.
    #[test]
    fn the_processors_of_a_task_share_its_values() {
        let seen = Seen::default();
        let (a, b) = (seen.clone(), seen.clone());
        let mut t = Topology::builder();
        t.add_source("src", ["in"], StringSerde, StringSerde)
            .add_processor("one", move || AtInit(a.clone()), ["src"])
            .add_processor("two", move || AtInit(b.clone()), ["one"]);
        let factory = factory_of(&Arc::new(t.build().unwrap()));
        for partition in [0, 1] {
            task_of(&factory, partition).initialize().unwrap();
        }
        let mut counts: Vec<(i32, u32)> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|(t, c)| (t.partition, *c))
            .collect();
        counts.sort();
        assert_eq!(counts, [(0, 1), (0, 2), (1, 1), (1, 2)]);
    }
}
