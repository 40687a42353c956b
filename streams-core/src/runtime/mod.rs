//! The Kafka runtime: [`KafkaStreams`] runs a [`Topology`] on a Kafka cluster with
//! `num.stream.threads` stream threads in the consumer group `application.id`.
//!
//! Start-up checks the source topics (co-partitioned within each sub-topology), creates the
//! changelog topics, then starts the threads. Each thread owns a consumer and a producer
//! (transactional under `exactly_once_v2`) and the tasks of the partitions assigned to it.
//! See `docs/runtime.md` for threads, tasks, commits and guarantees.

mod allocator;
mod client;
mod group;
mod produce;
pub mod query;
mod restore;
mod status;
pub(crate) mod streams_group;
mod tasks;
mod thread;
mod topics;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use crate::topology::changelog_topic;
pub use allocator::limit_malloc_arenas;
pub use client::embedded::EmbeddedKafka;
pub use client::protocol::GroupProtocol;
pub use status::{State, StateListener};
pub use topics::check::{NeededTopic, TopicCheck};

use self::status::Status;
use self::thread::factory::ThreadFactory;
use crate::config::StreamsConfig;
use crate::metrics::{Metrics, MetricsServer};
use crate::model::error::StreamsError;
use crate::topology::Topology;

/// What to do when a stream thread fails (Kafka Streams' `StreamThreadExceptionResponse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThreadFailureResponse {
    /// Start a new thread in its place (its tasks are recreated from their changelogs).
    ReplaceThread,
    /// Stop this instance (state `Error`); the other instances take its tasks over. The
    /// default.
    #[default]
    ShutdownClient,
    /// Stop every instance of the application: under `group.protocol=streams` the failed
    /// thread's member asks the group coordinator to shut the group down (KIP-1071's
    /// `ShutdownApplication`), and every other instance stops with
    /// [`StreamsGroupFailure::ShutdownRequested`](crate::error::StreamsGroupFailure::ShutdownRequested)
    /// (state `Error`), whatever its own handler would say. Under the other group
    /// protocols, which have no such request, this instance stops as with
    /// [`ShutdownClient`](Self::ShutdownClient) and a warning says so.
    ShutdownApplication,
}

/// Decides what happens when a thread fails with an error.
pub type UncaughtErrorHandler = Arc<dyn Fn(&StreamsError) -> ThreadFailureResponse + Send + Sync>;

struct ThreadHandle {
    name: String,
    join: JoinHandle<()>,
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
    /// Under `group.protocol=streams`: the topology the threads' members describe to the
    /// group coordinator (built at start, with the internal topics' partition counts).
    group_topology: Option<Arc<streams_group::GroupTopology>>,
    /// Under `group.protocol=streams`: how its client connects (TLS, SASL), from the main
    /// consumer's properties.
    group_security: streams_group::Security,
    /// How much of each task's state this instance holds, found on disk at construction
    /// and kept up by the threads (see `restore/offset_sums.rs`).
    offset_sums: Arc<restore::offset_sums::OffsetSums>,
    /// Interactive queries: the stream threads' inboxes, which instance hosts what.
    queries: query::Queries,
    /// Announces this instance to the others, with `application.server` set.
    discovery: Option<query::discovery::Discovery>,
    /// Deletes the committed records of repartition topics (not on the embedded cluster);
    /// the stream threads hold clones.
    purger: Option<topics::purge::Purger>,
    /// Sized by `rocksdb.block.cache.bytes` and `rocksdb.write.buffer.bytes`.
    rocksdb: streams_state::RocksDbResources,
    /// The secret values of the configuration, masked in what the runtime logs and reports
    /// while the application exists (see `redact.rs`).
    _secrets: client::redact::Registration,
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
        client::connect::validate_clients(&config)?;
        let secrets = client::redact::register(config.secret_values());
        let topology = topology.with_application_id(config.application_id());
        let process_id = process_id(&config.state_dir().join(config.application_id()))?;
        let metrics = Metrics::new(config.application_id(), config.recording_level())?;
        metrics.set_topology(&topology.describe().to_string());
        metrics.set_alive_threads(0);
        let status = Arc::new(Status::new(metrics.clone()));
        let topology = Arc::new(topology);
        let queries = query::Queries {
            router: Arc::new(query::Router::new(status.clone())),
            directory: Arc::new(query::discovery::Directory::new(
                &process_id,
                config.application_server(),
                Arc::new(query::discovery::Hosting::default()),
            )),
            topology: topology.clone(),
            status: status.clone(),
            partitions: Arc::default(),
        };
        let offset_sums = Arc::new(restore::offset_sums::OffsetSums::load(
            &config.state_dir().join(config.application_id()),
        ));
        Ok(Self {
            rocksdb: config.rocksdb_resources(),
            queries,
            discovery: None,
            purger: None,
            status,
            metrics,
            server: None,
            topology,
            config: Arc::new(config),
            shutdown: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            embedded,
            bootstrap,
            error_handler: Arc::new(|_| ThreadFailureResponse::ShutdownClient),
            next_thread: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            process_id,
            group_protocol: None,
            group_topology: None,
            group_security: Default::default(),
            offset_sums,
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
            group_topology: self.group_topology.clone(),
            group_security: self.group_security.clone(),
            offset_sums: self.offset_sums.clone(),
            rocksdb: self.rocksdb.clone(),
            hosting: self.queries.directory.hosting().clone(),
            group_endpoints: self.queries.directory.group_endpoints().clone(),
            purger: self.purger.clone(),
            repartition_topics: Arc::new(topics::repartition_topic_names(&self.topology)),
        })
    }

    /// The consumer group protocol the stream threads join with, once started: the
    /// consumer protocol of KIP-848 where the broker offers it, unless the configuration
    /// asks for the classic one (see docs/runtime.md, "Group protocols").
    pub fn group_protocol(&self) -> Option<GroupProtocol> {
        self.group_protocol
    }

    /// Compares the internal topics this application needs with those the cluster holds
    /// under its `application.id`, creating none. Before taking over a running application
    /// (a Kafka Streams one included, see `docs/migrating-from-kafka-streams.md`): the
    /// state carries over only when [`TopicCheck::is_ready`] holds; its `Display` says what
    /// is missing, mismatched or left over. Call it on an application not started yet.
    ///
    /// # Errors
    /// As [`KafkaStreams::start`] for reaching the cluster and for the source topics.
    pub fn check_topics(&self) -> Result<TopicCheck, StreamsError> {
        let md = self.metadata_client(&self.factory())?;
        let app_id = self.config.application_id();
        let plan = topics::plan(&self.topology, app_id, &md)?;
        let listed = topics::list_with_prefix(&md, &format!("{app_id}-"))?;
        Ok(topics::check::compare(&plan, &listed, app_id))
    }

    /// A client for the cluster's metadata, connected.
    fn metadata_client(
        &self,
        factory: &ThreadFactory,
    ) -> Result<client::oauth::Authenticated<client::connect::StartupConsumer>, StreamsError> {
        let md = factory
            .client_config(self.config.consumer_properties())
            .create_with_context(client::connect::ConnectContext::default())
            .map_err(|e| client::errors::kafka_err("metadata client", e))?;
        let md =
            client::oauth::Authenticated::new(md, self.config.oauth_bearer_token_provider(), "metadata")?;
        client::connect::connect(
            &md,
            &self.bootstrap,
            &self.config.consumer_properties(),
            client::connect::CONNECT_TIMEOUT,
        )?;
        Ok(md)
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
        let md = self.metadata_client(&self.factory())?;
        if self.embedded.is_none() {
            let topic = self.topology.source_topics().into_iter().next();
            self.bootstrap = client::connect::with_cluster_brokers(&self.bootstrap, &md, topic.as_deref());
        }
        let factory = self.factory();
        let app_id = self.config.application_id().to_owned();
        let mut plan = topics::plan(&self.topology, &app_id, &md)?;
        let _ = self
            .queries
            .partitions
            .set(topics::subtopology_partitions(&self.topology, &plan, &md)?);
        let admin = factory.client_config(self.config.admin_properties());
        let tokens = self.config.oauth_bearer_token_provider().cloned();
        self.group_protocol = Some(client::protocol::choose(
            &self.config.main_consumer_properties(),
            self.config.streams_protocol(),
            self.config.num_standby_replicas(),
            &md,
            &admin,
            tokens.as_ref(),
            self.embedded.is_some(),
        ));
        if self.group_protocol == Some(GroupProtocol::Streams) && self.embedded.is_some() {
            return Err(StreamsError::Config {
                property: "group.protocol".into(),
                message: "the embedded mock cluster has no streams groups (KIP-1071); standby replicas \
                          and group.protocol=streams need a broker (Apache Kafka 4.2 or later)"
                    .into(),
            });
        }
        // Under the streams protocol the group coordinator tells where every task runs;
        // otherwise the instances announce it on a topic of their own.
        let announce =
            self.config.application_server().is_some() && self.group_protocol != Some(GroupProtocol::Streams);
        if announce {
            plan.push(topics::InternalTopic {
                name: query::discovery::instances_topic(&app_id),
                partitions: 1,
                config: std::collections::BTreeMap::from([(
                    "cleanup.policy".to_owned(),
                    "compact".to_owned(),
                )]),
            });
        }
        if self.group_protocol == Some(GroupProtocol::Streams) {
            self.group_security = streams_group::Security::with_tokens(
                &self.config.main_consumer_properties(),
                tokens.as_ref(),
            )?;
            self.group_topology = Some(Arc::new(streams_group::GroupTopology::of(
                &self.topology,
                &app_id,
                &plan,
            )));
            self.queries.directory.follow_group();
        }
        topics::ensure(
            &plan,
            &app_id,
            &md,
            &admin,
            tokens.as_ref(),
            self.embedded.as_ref(),
            self.config.replication_factor(),
        )?;
        if self.embedded.is_none() {
            self.purger = Some(topics::purge::Purger::start(&app_id, &admin, tokens.as_ref())?);
        }
        if announce {
            let mut consumer = factory.client_config(self.config.consumer_properties());
            // Assigned, never subscribed: the group only names the consumer (it never joins
            // or commits), prefixed by the application id like every group it uses.
            consumer
                .set("enable.auto.commit", "false")
                .set("group.id", query::discovery::instances_topic(&app_id));
            self.discovery = Some(query::discovery::Discovery::start(
                self.queries.directory.clone(),
                query::discovery::instances_topic(&app_id),
                &factory.client_config(self.config.producer_properties()),
                &consumer,
                tokens.as_ref(),
            )?);
        }
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
        let inbox = self.queries.router.register(&name);
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
                    // Kept past the thread's end: a request to shut the application down
                    // goes through it (it leaves the group when dropped).
                    let member = settings.member.as_ref().map(|(m, _)| m.clone());
                    let result = thread::run(
                        &thread_name,
                        consumer,
                        tasks,
                        settings,
                        shutdown.clone(),
                        status.clone(),
                        &inbox,
                    );
                    let Err(e) = result else { return };
                    tracing::error!(thread = %thread_name, error = %e, "stream thread failed");
                    let response = if e.is_shutdown_requested() {
                        // Another instance asked the whole application to stop.
                        ThreadFailureResponse::ShutdownClient
                    } else {
                        handler(&e)
                    };
                    if response == ThreadFailureResponse::ShutdownApplication {
                        request_application_shutdown(&thread_name, member.as_deref());
                    }
                    drop(member);
                    if response == ThreadFailureResponse::ReplaceThread && !shutdown.load(Ordering::Relaxed) {
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
        self.queries.router.clear();
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
        if let Some(mut d) = self.discovery.take() {
            d.stop();
        }
        // The purger thread ends once the stream threads' clones are gone too.
        self.purger = None;
        if self.status.state() != State::Error {
            self.status.transition(State::NotRunning);
        }
        all
    }
}

/// Decrements the alive-threads gauge when a stream thread ends, however it ends.
/// A failed thread's [`ThreadFailureResponse::ShutdownApplication`]: its streams-group
/// `member` asks the coordinator to shut the whole group down (waiting at most 10 s for the
/// coordinator to take the request); without one, only a warning.
fn request_application_shutdown(thread: &str, member: Option<&streams_group::StreamsMember>) {
    match member {
        Some(m) if m.request_application_shutdown(Duration::from_secs(10)) => {
            tracing::warn!(thread = %thread, "asked every instance of the application to shut down");
        }
        Some(_) => tracing::error!(
            thread = %thread,
            "could not ask the other instances to shut down (the coordinator did not take the request)"
        ),
        None => tracing::warn!(
            thread = %thread,
            "ShutdownApplication stops only this instance: its group protocol cannot ask the others \
             (group.protocol=streams can)"
        ),
    }
}

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
