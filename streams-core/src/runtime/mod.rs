//! The Kafka runtime: [`KafkaStreams`] runs a [`Topology`] on a Kafka cluster with
//! `num.stream.threads` stream threads in the consumer group `application.id`.
//!
//! Start-up checks the source topics (co-partitioned within each sub-topology), creates the
//! changelog topics, then starts the threads. Each thread owns a consumer and a producer
//! (transactional under `exactly_once_v2`) and the tasks of the partitions assigned to it.
//! See `docs/runtime.md` for threads, tasks, commits and guarantees.

mod connect;
mod creation;
mod defaults;
mod deliveries;
mod embedded;
mod global;
mod producer;
mod protocol;
mod publish;
mod recover;
mod redact;
mod resets;
mod restore;
mod start_offsets;
mod status;
mod tasks;
mod thread;
mod topics;
mod updater;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::Producer;

pub use crate::topology::changelog_topic;
pub use embedded::EmbeddedKafka;
pub use protocol::GroupProtocol;
pub use status::{State, StateListener};

use self::producer::DeliveryTracker;
use self::resets::{AssignedConsumer, QuietContext};
use self::status::Status;
use self::tasks::{TaskManagerParts, TaskSettings};
use self::thread::{LoopSettings, ThreadContext};
use crate::config::StreamsConfig;
use crate::engine::TaskFactory;
use crate::metrics::{Metrics, MetricsServer};
use crate::model::error::StreamsError;
use crate::topology::Topology;

/// What to do when a stream thread fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThreadFailureResponse {
    /// Start a new thread in its place (its tasks are recreated from their changelogs).
    ReplaceThread,
    /// Stop the whole application (state `Error`). The default.
    #[default]
    ShutdownApplication,
}

/// Decides what happens when a thread fails with an error.
pub type UncaughtErrorHandler = Arc<dyn Fn(&StreamsError) -> ThreadFailureResponse + Send + Sync>;

struct ThreadHandle {
    name: String,
    join: JoinHandle<()>,
}

/// What a stream thread is built from; shared so a failed thread can be replaced.
struct ThreadFactory {
    metrics: Metrics,
    topology: Arc<Topology>,
    config: Arc<StreamsConfig>,
    status: Arc<Status>,
    bootstrap: String,
    process_id: String,
    /// The application runs on the embedded mock cluster (an offset reset is then fatal).
    on_mock: bool,
    /// The main consumers' group protocol, chosen at start (`protocol.rs`).
    group_protocol: GroupProtocol,
    /// The RocksDB memory (block cache, memtables) all stores of the instance share.
    rocksdb: streams_state::RocksDbResources,
}

impl ThreadFactory {
    pub(crate) fn client_config(&self, props: std::collections::BTreeMap<String, String>) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set_log_level(resets::client_log_level());
        c.set("bootstrap.servers", &self.bootstrap);
        for (k, v) in props {
            c.set(k, v);
        }
        c
    }

    /// Settings of a consumer that is assigned partitions itself (restore, global stores):
    /// never commits, reads only committed records under exactly-once.
    fn assigned_consumer_config(&self, group: &str, eos: bool) -> ClientConfig {
        let mut c = self.client_config(self.config.restore_consumer_properties());
        // They never join the group: its protocol is not theirs.
        c.remove("group.protocol").remove("group.remote.assignor");
        defaults::consumer(&mut c);
        c.set("group.id", group).set("enable.auto.commit", "false").set(
            "isolation.level",
            if eos { "read_committed" } else { "read_uncommitted" },
        );
        c
    }

    /// A consumer with `config` whose client-level errors are warnings (see `resets.rs`).
    fn assigned_consumer(
        &self,
        config: &ClientConfig,
        name: String,
    ) -> Result<AssignedConsumer, StreamsError> {
        let group = config.get("group.id").unwrap_or_default().to_owned();
        config
            .create_with_context(QuietContext {
                name: name.clone(),
                group,
                application_id: self.config.application_id().to_owned(),
            })
            .map_err(|e| restore::kafka_err(&name, e))
    }

    fn parts(
        &self,
        name: &str,
        index: usize,
    ) -> Result<(BaseConsumer<ThreadContext>, TaskManagerParts, LoopSettings), StreamsError> {
        let cfg = &self.config;
        let eos = cfg.is_exactly_once();
        let app_id = cfg.application_id();
        let mut cc = self.client_config(cfg.main_consumer_properties());
        // Both protocols assign with `range`, which keeps co-partitioned topics on one task:
        // the classic one on the client, the consumer protocol (KIP-848) on the broker.
        if self.group_protocol == GroupProtocol::Consumer {
            cc.set("group.protocol", "consumer");
            if cc.get("group.remote.assignor").is_none() {
                cc.set("group.remote.assignor", "range");
            }
        } else {
            cc.set("partition.assignment.strategy", "range");
        }
        cc.set("group.id", app_id)
            .set("client.id", name)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set(
                "isolation.level",
                if eos { "read_committed" } else { "read_uncommitted" },
            );
        defaults::consumer(&mut cc);
        if cc.get("statistics.interval.ms").is_none() {
            // End offsets for the lag metric.
            cc.set("statistics.interval.ms", "1000");
        }
        if cc.get("auto.offset.reset").is_none() {
            let earliest = self
                .topology
                .source_topics()
                .iter()
                .all(|t| self.topology.offset_reset(t) == crate::topology::OffsetReset::Earliest);
            cc.set("auto.offset.reset", if earliest { "earliest" } else { "latest" });
        }
        let context = ThreadContext {
            status: self.status.clone(),
            name: name.to_owned(),
            in_rebalance: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            generation: std::sync::atomic::AtomicU64::new(0),
            revoked: std::sync::Mutex::new(Vec::new()),
            fetch_positions: std::sync::Mutex::new(std::collections::HashMap::new()),
            resets: resets::ResetWatch::default(),
            reset: start_offsets::ResetTo::of(cc.get("auto.offset.reset")),
        };
        let consumer: BaseConsumer<ThreadContext> = cc
            .create_with_context(context)
            .map_err(|e| restore::kafka_err("consumer", e))?;
        let topics: Vec<String> = self.topology.source_topics().into_iter().collect();
        let topic_refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topic_refs)
            .map_err(|e| restore::kafka_err("subscribe", e))?;

        // A changelog offset out of range is corrupted state, never a silent skip: the
        // restore loop sees it as an error and wipes the store (see `restore.rs`).
        let mut rc = self.assigned_consumer_config(&format!("{app_id}-restore"), eos);
        rc.set("client.id", format!("{name}-restore"))
            .set("auto.offset.reset", "error");
        let restore_consumer = self.assigned_consumer(&rc, format!("{name}-restore"))?;

        let mut pc = self.client_config(cfg.producer_properties());
        pc.set("client.id", format!("{name}-producer"));
        if pc.get("linger.ms").is_none() {
            pc.set("linger.ms", "5");
        }
        if pc.get("partitioner").is_none() {
            // Sinks choose partitions of keyed records themselves (murmur2, as Java); this
            // covers records whose partition is left to the producer.
            pc.set("partitioner", "murmur2_random");
        }
        let transactional_id = format!("{app_id}-{}-{index}", self.process_id);
        if eos {
            pc.set("transactional.id", &transactional_id);
            if pc.get("transaction.timeout.ms").is_none() {
                pc.set("transaction.timeout.ms", "10000");
            }
        } else if pc.get("enable.idempotence").is_none() {
            pc.set("enable.idempotence", "true");
        }
        let tracker = DeliveryTracker {
            keep_failed: cfg.error_policy().production
                == crate::model::handlers::ErrorHandling::DeadLetterQueue,
            ..DeliveryTracker::default()
        };
        let producer: producer::StreamProducer = pc
            .create_with_context(tracker.clone())
            .map_err(|e| restore::kafka_err("producer", e))?;
        if eos {
            producer.init_transactions(Duration::from_secs(60)).map_err(|e| {
                match e.rdkafka_error_code() {
                    Some(code @ rdkafka::types::RDKafkaErrorCode::TransactionalIdAuthorizationFailed) => {
                        connect::denied(
                            format!("transactional id `{transactional_id}`"),
                            "initializing the transactional producer",
                            code,
                            &format!("WRITE and DESCRIBE on transactional ids prefixed `{app_id}`"),
                        )
                    }
                    Some(code @ rdkafka::types::RDKafkaErrorCode::ClusterAuthorizationFailed) => {
                        connect::denied(
                            "the cluster".into(),
                            "initializing the transactional producer",
                            code,
                            "IDEMPOTENT_WRITE on the cluster (brokers before Apache Kafka 2.8 ask for it)",
                        )
                    }
                    _ => restore::kafka_err("init transactions", e),
                }
            })?;
        }
        let settings = TaskSettings {
            factory: TaskFactory::new(
                self.topology.clone(),
                Arc::from(app_id),
                cfg.error_policy(),
                cfg.cache_max_bytes() / cfg.num_stream_threads().max(1),
                self.rocksdb.clone(),
            )
            .exactly_once(eos),
            state_dir: cfg.state_dir().to_path_buf(),
            eos,
            reset: start_offsets::ResetTo::of(cc.get("auto.offset.reset")),
            on_mock: self.on_mock,
        };
        let global_consumer = if self.topology.subtopologies().iter().any(|s| s.global) {
            let mut gc = self.assigned_consumer_config(&format!("{app_id}-global"), eos);
            gc.set("client.id", format!("{name}-global"))
                .set("auto.offset.reset", "earliest");
            Some(self.assigned_consumer(&gc, format!("{name}-global"))?)
        } else {
            None
        };
        let tasks = TaskManagerParts {
            settings,
            global_consumer,
            metrics: self.metrics.clone(),
            thread_name: name.to_owned(),
            producer: Arc::new(producer),
            tracker,
            restore_consumer,
        };
        let loop_settings = LoopSettings {
            application_id: app_id.to_owned(),
            commit_interval: cfg.commit_interval(),
            poll: cfg.poll_interval(),
            max_poll_records: cfg.max_poll_records(),
            on_mock: self.on_mock,
        };
        Ok((consumer, tasks, loop_settings))
    }
}

/// A streams application: a topology running on Kafka. See the [module docs](self).
pub struct KafkaStreams {
    metrics: Metrics,
    server: Option<MetricsServer>,
    topology: Arc<Topology>,
    config: Arc<StreamsConfig>,
    status: Arc<Status>,
    shutdown: Arc<AtomicBool>,
    threads: Vec<ThreadHandle>,
    embedded: Option<EmbeddedKafka>,
    bootstrap: String,
    error_handler: UncaughtErrorHandler,
    next_thread: Arc<std::sync::atomic::AtomicUsize>,
    process_id: String,
    group_protocol: Option<GroupProtocol>,
    /// Sized by `rocksdb.block.cache.bytes` and `rocksdb.write.buffer.bytes`.
    rocksdb: streams_state::RocksDbResources,
    /// The secret values of the configuration, masked in what the runtime logs and reports
    /// while the application exists (see `redact.rs`).
    _secrets: redact::Registration,
}

impl KafkaStreams {
    /// An application running `topology` with `config` on the cluster of
    /// `bootstrap.servers`, which is required: without it construction fails naming the
    /// property. (Small in-process tests can run on an [`EmbeddedKafka`] instead, with
    /// [`KafkaStreams::on_embedded`].)
    ///
    /// # Errors
    /// [`StreamsError::Config`] without `bootstrap.servers`, or naming a client property
    /// librdkafka refuses (an unknown name, a value out of range; a secret's value is never
    /// quoted); an error creating the state directory.
    pub fn new(topology: Topology, config: StreamsConfig) -> Result<Self, StreamsError> {
        let Some(bootstrap) = config.bootstrap_servers().map(str::to_owned) else {
            return Err(StreamsError::Config {
                property: "bootstrap.servers".into(),
                message: "required: the Kafka brokers to connect to (host:port,...). For small, quick \
                          in-process tests use KafkaStreams::on_embedded with an EmbeddedKafka (librdkafka's \
                          mock cluster, which keeps at most 5 MiB or 100,000 message sets per partition)"
                    .into(),
            });
        };
        Self::with_bootstrap(topology, config, None, bootstrap)
    }

    /// An application on an embedded mock cluster (at-least-once only), which other
    /// applications of this process may share. For small, quick tests: the mock keeps at
    /// most 5 MiB or 100,000 message sets per partition, and an application that finds
    /// records deleted before it read them stops with an error saying so.
    pub fn on_embedded(
        topology: Topology,
        config: StreamsConfig,
        cluster: &EmbeddedKafka,
    ) -> Result<Self, StreamsError> {
        if config.is_exactly_once() {
            return Err(StreamsError::Config {
                property: "processing.guarantee".into(),
                message: "exactly_once_v2 is not supported on the embedded mock cluster".into(),
            });
        }
        let bootstrap = cluster.bootstrap_servers().to_owned();
        Self::with_bootstrap(topology, config, Some(cluster.clone()), bootstrap)
    }

    fn with_bootstrap(
        topology: Topology,
        config: StreamsConfig,
        embedded: Option<EmbeddedKafka>,
        bootstrap: String,
    ) -> Result<Self, StreamsError> {
        connect::validate_clients(&config)?;
        let secrets = redact::register(config.secret_values());
        let topology = topology.with_application_id(config.application_id());
        let process_id = process_id(&config.state_dir().join(config.application_id()))?;
        let metrics = Metrics::new(config.application_id(), config.recording_level())?;
        metrics.set_topology(&topology.describe().to_string());
        metrics.set_alive_threads(0);
        Ok(Self {
            rocksdb: config.rocksdb_resources(),
            status: Arc::new(Status::new(metrics.clone())),
            metrics,
            server: None,
            topology: Arc::new(topology),
            config: Arc::new(config),
            shutdown: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            embedded,
            bootstrap,
            error_handler: Arc::new(|_| ThreadFailureResponse::ShutdownApplication),
            next_thread: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            process_id,
            group_protocol: None,
            _secrets: secrets,
        })
    }

    /// The bootstrap servers the application uses (the embedded cluster's when embedded).
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }

    /// The embedded cluster, when the application runs on one.
    pub fn embedded(&self) -> Option<&EmbeddedKafka> {
        self.embedded.as_ref()
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.status.state()
    }

    /// Records processed so far by all threads (updated once per loop iteration).
    pub fn processed_records(&self) -> u64 {
        self.status.processed_total()
    }

    /// The application's metrics (served at `metrics.address` when set).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Where the metrics endpoint listens once started (the bound port when
    /// `metrics.address` asked for port 0).
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        self.server.as_ref().map(MetricsServer::address)
    }

    /// Calls `listener(new, old)` on every state change.
    pub fn set_state_listener(&mut self, listener: impl Fn(State, State) + Send + Sync + 'static) {
        self.status.set_listener(Arc::new(listener));
    }

    /// Decides what happens when a thread fails (default: shut the application down).
    pub fn set_uncaught_error_handler(
        &mut self,
        handler: impl Fn(&StreamsError) -> ThreadFailureResponse + Send + Sync + 'static,
    ) {
        self.error_handler = Arc::new(handler);
    }

    fn factory(&self) -> Arc<ThreadFactory> {
        Arc::new(ThreadFactory {
            metrics: self.metrics.clone(),
            topology: self.topology.clone(),
            config: self.config.clone(),
            status: self.status.clone(),
            bootstrap: self.bootstrap.clone(),
            process_id: self.process_id.clone(),
            on_mock: self.embedded.is_some(),
            group_protocol: self.group_protocol.unwrap_or(GroupProtocol::Classic),
            rocksdb: self.rocksdb.clone(),
        })
    }

    /// The consumer group protocol the stream threads join with, once started: the
    /// consumer protocol of KIP-848 where the broker offers it, unless the configuration
    /// asks for the classic one (see docs/runtime.md, "Group protocols").
    pub fn group_protocol(&self) -> Option<GroupProtocol> {
        self.group_protocol
    }

    /// Reaches the cluster, checks the source topics, creates internal topics, starts the
    /// stream threads.
    ///
    /// # Errors
    /// [`StreamsError::Tls`] or [`StreamsError::Authentication`] as soon as a broker refuses
    /// the connection; [`StreamsError::Kafka`] when no broker answers within 15 s;
    /// [`StreamsError::Authorization`] naming the resource when the principal may not
    /// describe a source topic, create an internal topic or initialize its transactional
    /// producer; [`StreamsError::Usage`] for missing or mismatched topics.
    pub fn start(&mut self) -> Result<(), StreamsError> {
        if self.status.state() != status::State::Created {
            return Err(StreamsError::Usage(format!(
                "cannot start in state {:?}",
                self.status.state()
            )));
        }
        if let Some(address) = self.config.metrics_address() {
            let status = self.status.clone();
            self.server = Some(MetricsServer::start(
                address,
                self.metrics.clone(),
                Arc::new(move || status.state()),
            )?);
        }
        let factory = self.factory();
        let md: connect::StartupConsumer = factory
            .client_config(self.config.consumer_properties())
            .create_with_context(connect::ConnectContext::default())
            .map_err(|e| restore::kafka_err("metadata client", e))?;
        connect::connect(
            &md,
            &self.bootstrap,
            &self.config.consumer_properties(),
            connect::CONNECT_TIMEOUT,
        )?;
        let app_id = self.config.application_id().to_owned();
        let plan = topics::plan(&self.topology, &app_id, &md)?;
        let admin = factory.client_config(self.config.admin_properties());
        self.group_protocol = Some(protocol::choose(
            &self.config.main_consumer_properties(),
            &md,
            &admin,
            self.embedded.is_some(),
        ));
        topics::ensure(
            &plan,
            &app_id,
            &md,
            &admin,
            self.embedded.as_ref(),
            self.config.replication_factor(),
        )?;
        self.status.transition(State::Rebalancing);
        let n = self.config.num_stream_threads();
        self.status.set_threads(n);
        for _ in 0..n {
            self.spawn_thread()?;
        }
        Ok(())
    }

    fn spawn_thread(&mut self) -> Result<(), StreamsError> {
        let index = self.next_thread.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-StreamThread-{}", self.config.application_id(), index + 1);
        let factory = self.factory();
        let (consumer, tasks, settings) = factory.parts(&name, index)?;
        let shutdown = self.shutdown.clone();
        let status = self.status.clone();
        let handler = self.error_handler.clone();
        let thread_name = name.clone();
        let alive = self
            .metrics
            .families()
            .alive_threads
            .with_label_values(&[self.metrics.application_id()]);
        let join = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                alive.inc();
                let _alive = AliveGuard(alive);
                let mut parts = Some((consumer, tasks, settings));
                while let Some((consumer, tasks, settings)) = parts.take() {
                    let result = thread::run(
                        &thread_name,
                        consumer,
                        tasks,
                        settings,
                        shutdown.clone(),
                        status.clone(),
                    );
                    let Err(e) = result else { return };
                    tracing::error!(thread = %thread_name, error = %e, "stream thread failed");
                    if handler(&e) == ThreadFailureResponse::ReplaceThread
                        && !shutdown.load(Ordering::Relaxed)
                    {
                        // The replacement rejoins the group; its tasks restore from their
                        // changelogs (under exactly-once the failed transaction was aborted).
                        match factory.parts(&thread_name, index) {
                            Ok(p) => {
                                tracing::info!(thread = %thread_name, "replacing failed stream thread");
                                parts = Some(p);
                                continue;
                            }
                            Err(e) => {
                                tracing::error!(thread = %thread_name, error = %e, "cannot replace thread")
                            }
                        }
                    }
                    status.transition(State::Error);
                    shutdown.store(true, Ordering::Relaxed);
                }
            })
            .map_err(|e| StreamsError::Usage(format!("spawn thread: {e}")))?;
        self.threads.push(ThreadHandle { name, join });
        Ok(())
    }

    /// Waits until the state is `state` or `timeout` passes; returns whether it was reached.
    pub fn wait_for_state(&self, state: State, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.state() == state {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.state() == state
    }

    /// Stops the threads: each commits, closes its tasks (flushing stores, writing
    /// checkpoints) and leaves the group. Returns whether every thread stopped within
    /// `timeout`.
    pub fn close(&mut self, timeout: Duration) -> bool {
        self.status.transition(State::PendingShutdown);
        self.shutdown.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + timeout;
        let mut all = true;
        for t in std::mem::take(&mut self.threads) {
            while !t.join.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.join.is_finished() {
                let _ = t.join.join();
            } else {
                tracing::warn!(thread = %t.name, "did not stop within the close timeout");
                all = false;
            }
        }
        if self.status.state() != State::Error {
            self.status.transition(State::NotRunning);
        }
        all
    }
}

/// Decrements the alive-threads gauge when a stream thread ends, however it ends.
struct AliveGuard(prometheus::IntGauge);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Drop for KafkaStreams {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.close(Duration::from_secs(30));
        }
    }
}

/// The process id of this instance, kept in its state directory so that a restarted
/// instance uses the same transactional ids (its predecessor's open transaction is then
/// aborted at once instead of timing out).
fn process_id(dir: &std::path::Path) -> Result<String, StreamsError> {
    let path: PathBuf = dir.join("streams-process-id");
    if let Ok(id) = std::fs::read_to_string(&path) {
        let id = id.trim().to_owned();
        if !id.is_empty() {
            return Ok(id);
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let id = format!("{:x}{:x}", nanos, std::process::id());
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, &id))
        .map_err(|e| StreamsError::Config {
            property: "state.dir".into(),
            message: format!("{}: {e}", dir.display()),
        })?;
    Ok(id)
}
