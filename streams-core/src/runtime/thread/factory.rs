//! Building a stream thread: its consumers, producer and task settings from the
//! application's config. Shared by every thread of an instance, so a failed thread can be
//! replaced with one built the same way.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::config::StreamsConfig;
use crate::engine::TaskFactory;
use crate::metrics::Metrics;
use crate::model::error::StreamsError;
use crate::runtime::client::client_log;
use crate::runtime::client::defaults;
use crate::runtime::client::errors;
use crate::runtime::client::oauth::Authenticated;
use crate::runtime::client::protocol::GroupProtocol;
use crate::runtime::group::assignment::TaskPartitions;
use crate::runtime::produce::producer::DeliveryTracker;
use crate::runtime::produce::producer_recipe::ProducerRecipe;
use crate::runtime::restore;
use crate::runtime::status::Status;
use crate::runtime::streams_group::{MemberSettings, StreamsMember};
use crate::runtime::tasks::{TaskManagerParts, TaskSettings};
use crate::runtime::thread::{LoopSettings, ThreadContext};
use crate::runtime::topics::resets::{self, AssignedConsumer};
use crate::runtime::topics::start_offsets;
use crate::topology::Topology;

/// `connections.max.idle.ms` of a transactional producer where the user sets none.
const EOS_PRODUCER_IDLE_MS: &str = "5000";

/// What a stream thread is built from; shared so a failed thread can be replaced.
pub(in crate::runtime) struct ThreadFactory {
    pub(in crate::runtime) metrics: Metrics,
    pub(in crate::runtime) topology: Arc<Topology>,
    pub(in crate::runtime) config: Arc<StreamsConfig>,
    pub(in crate::runtime) status: Arc<Status>,
    pub(in crate::runtime) bootstrap: String,
    pub(in crate::runtime) process_id: String,
    /// The application runs on the embedded mock cluster (an offset reset is then fatal).
    pub(in crate::runtime) on_mock: bool,
    /// The main consumers' group protocol, chosen at start (`protocol.rs`).
    pub(in crate::runtime) group_protocol: GroupProtocol,
    /// Under the streams protocol: the topology each thread's member sends on joining.
    pub(in crate::runtime) group_topology: Option<Arc<crate::runtime::streams_group::GroupTopology>>,
    /// Under the streams protocol: how each thread's member connects.
    pub(in crate::runtime) group_security: crate::runtime::streams_group::Security,
    /// How much of each task's state the instance holds (reported by the members).
    pub(in crate::runtime) offset_sums: Arc<crate::runtime::restore::offset_sums::OffsetSums>,
    /// The RocksDB memory (block cache, memtables) all stores of the instance share.
    pub(in crate::runtime) rocksdb: streams_state::RocksDbResources,
    /// Where the threads report the tasks they host (for interactive queries).
    pub(in crate::runtime) hosting: Arc<crate::runtime::query::discovery::Hosting>,
    /// Under the streams protocol: where the members leave the group's endpoint map (for
    /// interactive queries).
    pub(in crate::runtime) group_endpoints: Arc<crate::runtime::streams_group::endpoints::GroupEndpoints>,
    /// Deletes the committed records of repartition topics (none on the embedded cluster).
    pub(in crate::runtime) purger: Option<crate::runtime::topics::purge::Purger>,
    /// The topology's repartition topics.
    pub(in crate::runtime) repartition_topics: Arc<std::collections::BTreeSet<String>>,
}

impl ThreadFactory {
    pub(crate) fn client_config(&self, props: std::collections::BTreeMap<String, String>) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set_log_level(client_log::client_log_level());
        for (k, v) in props {
            c.set(k, v);
        }
        // After the properties, which carry the configured list: the runtime's also names
        // the brokers the cluster listed at start (`client/connect.rs`).
        c.set("bootstrap.servers", &self.bootstrap);
        c
    }

    /// Settings of a consumer that is assigned partitions itself (restore, global stores):
    /// never commits, reads only committed records under exactly-once.
    fn assigned_consumer_config(&self, group: &str, eos: bool) -> ClientConfig {
        let mut c = self.client_config(self.config.restore_consumer_properties());
        // They never join the group: its protocol and membership are not theirs.
        c.remove("group.protocol")
            .remove("group.remote.assignor")
            .remove("group.instance.id");
        defaults::consumer(&mut c);
        c.set("group.id", group).set("enable.auto.commit", "false").set(
            "isolation.level",
            if eos { "read_committed" } else { "read_uncommitted" },
        );
        c
    }

    /// The restorations' lookup of changelog offsets at the partitions' current leaders
    /// (`restore/log_end.rs`), with the restore consumers' security settings; none on the embedded
    /// mock cluster, nor where the runtime's own client cannot authenticate as librdkafka
    /// would (GSSAPI, librdkafka's OIDC tokens): the restore
    /// consumer's watermarks serve then. The lookup keeps its connections, one per broker,
    /// for the thread's life.
    fn log_ends(&self, client_id: &str) -> Option<restore::log_end::LogEnds> {
        if self.on_mock {
            return None;
        }
        match crate::runtime::streams_group::Security::with_tokens(
            &self.config.restore_consumer_properties(),
            self.config.oauth_bearer_token_provider(),
        ) {
            Ok(security) => Some(restore::log_end::LogEnds::new(
                Arc::new(crate::runtime::streams_group::wire::KnownBrokers::new(security)),
                self.bootstrap.clone(),
                client_id.to_owned(),
            )),
            Err(e) => {
                tracing::debug!(error = %e, "changelog offsets come from the restore consumer's watermarks");
                None
            }
        }
    }

    /// A consumer with `config` whose client-level errors are warnings (see `resets.rs`).
    fn assigned_consumer(
        &self,
        config: &ClientConfig,
        name: String,
    ) -> Result<AssignedConsumer, StreamsError> {
        resets::assigned_consumer(
            config,
            &name,
            self.config.application_id(),
            self.config.oauth_bearer_token_provider(),
        )
    }

    pub(in crate::runtime) fn parts(
        &self,
        name: &str,
        index: usize,
    ) -> Result<
        (
            Authenticated<BaseConsumer<ThreadContext>>,
            TaskManagerParts,
            LoopSettings,
        ),
        StreamsError,
    > {
        let cfg = &self.config;
        let eos = cfg.is_exactly_once();
        let app_id = cfg.application_id();
        let mut cc = self.client_config(cfg.main_consumer_properties());
        // Both protocols assign with `range`, which keeps co-partitioned topics on one task:
        // the classic one on the client, the consumer protocol (KIP-848) on the broker.
        match self.group_protocol {
            GroupProtocol::Consumer => {
                cc.set("group.protocol", "consumer");
                if cc.get("group.remote.assignor").is_none() {
                    cc.set("group.remote.assignor", "range");
                }
            }
            // The consumer joins no group: the thread's streams-group member does, and the
            // session settings are the group's (see `streams_group::group_configs_of`).
            GroupProtocol::Streams => {
                for k in ["group.protocol", "session.timeout.ms", "heartbeat.interval.ms"] {
                    cc.remove(k);
                }
            }
            GroupProtocol::Classic => {
                cc.set("partition.assignment.strategy", "range");
            }
        }
        // Static membership: each thread is its own member, `<group.instance.id>-<n>` as in
        // Kafka Streams (n counts threads from 1). Under the streams protocol the thread's
        // streams-group member carries it, not the consumer.
        let instance_id = cc
            .get("group.instance.id")
            .map(|id| format!("{id}-{}", index + 1));
        cc.remove("group.instance.id");
        if let (Some(id), false) = (&instance_id, self.group_protocol == GroupProtocol::Streams) {
            cc.set("group.instance.id", id);
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
        defaults::request_timeout(&mut cc);
        if cc.get("statistics.interval.ms").is_none() {
            // End offsets for the lag metric.
            cc.set("statistics.interval.ms", "1000");
        }
        // Without `auto.offset.reset`, each source topic starts where its source's offset
        // reset says (the runtime resolves start offsets itself, see `start_offsets.rs`).
        let mut topic_resets = std::collections::HashMap::new();
        if cc.get("auto.offset.reset").is_none() {
            for t in self.topology.source_topics() {
                let reset = match self.topology.offset_reset(&t) {
                    crate::topology::OffsetReset::Earliest => start_offsets::ResetTo::Earliest,
                    crate::topology::OffsetReset::Latest => start_offsets::ResetTo::Latest,
                };
                topic_resets.insert(t, reset);
            }
            cc.set("auto.offset.reset", "earliest");
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
            topic_resets,
            cooperative: std::sync::OnceLock::new(),
            fetch_route: Default::default(),
        };
        let consumer: BaseConsumer<ThreadContext> = cc
            .create_with_context(context)
            .map_err(|e| errors::kafka_err("consumer", e))?;
        let consumer = Authenticated::new(consumer, cfg.oauth_bearer_token_provider(), name)?;
        let member = match &self.group_topology {
            Some(topology) if self.group_protocol == GroupProtocol::Streams => Some(Arc::new(
                self.join_streams_group(name, topology, &cc, instance_id)?,
            )),
            _ => {
                let topics: Vec<String> = self.topology.source_topics().into_iter().collect();
                let topic_refs: Vec<&str> = topics.iter().map(String::as_str).collect();
                consumer
                    .subscribe(&topic_refs)
                    .map_err(|e| errors::kafka_err("subscribe", e))?;
                None
            }
        };

        // A changelog offset out of range is corrupted state, never a silent skip: the
        // restore loop sees it as an error and wipes the store (see `restore/mod.rs`).
        let mut rc = self.assigned_consumer_config(&format!("{app_id}-restore"), eos);
        defaults::request_timeout(&mut rc);
        rc.set("auto.offset.reset", "error");
        // Standbys read with a consumer of their own, made when the first one steps; it
        // keeps the default fetch wait (see `restore/standby_reader.rs`).
        let mut sc = rc.clone();
        sc.set("client.id", format!("{name}-standby"));
        let standby = restore::StandbyReader::new(
            sc,
            format!("{name}-standby"),
            app_id.to_owned(),
            cfg.oauth_bearer_token_provider().cloned(),
        );
        defaults::restore_fetch_wait(&mut rc);
        rc.set("client.id", format!("{name}-restore"));
        let restore_consumer = self.assigned_consumer(&rc, format!("{name}-restore"))?;
        // Under exactly-once the end of a restoration is the high watermark, not the last
        // stable offset: see `restore/mod.rs`.
        let ends = if eos {
            rc.set("client.id", format!("{name}-restore-ends"))
                .set("isolation.level", "read_uncommitted");
            Some(self.assigned_consumer(&rc, format!("{name}-restore-ends"))?)
        } else {
            None
        };
        let restore_consumers = restore::RestoreConsumers {
            reader: restore_consumer,
            ends,
            log_ends: self.log_ends(&format!("{name}-restore-ends")),
            standby,
        };

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
            if pc.get("connections.max.idle.ms").is_none() {
                // librdkafka 2.12 re-runs a coordinator request that waits for a broker only
                // when some broker connection changes state; a group coordinator that left
                // the cluster's metadata (a broker paused or killed) then leaves
                // `send_offsets_to_transaction` blocked past its timeout until one does
                // (librdkafka issues 5456, 5511), minutes later. Closing connections idle
                // for 5 s makes that change while the blocked thread sends nothing.
                pc.set("connections.max.idle.ms", EOS_PRODUCER_IDLE_MS);
            }
        } else if pc.get("enable.idempotence").is_none() {
            pc.set("enable.idempotence", "true");
        }
        let tracker = DeliveryTracker {
            keep_failed: eos
                || cfg.error_policy().production == crate::model::handlers::ErrorHandling::DeadLetterQueue,
            transactional: eos,
            ..DeliveryTracker::default()
        };
        let recipe = ProducerRecipe {
            config: pc,
            tracker: tracker.clone(),
            application_id: app_id.to_owned(),
            tokens: cfg.oauth_bearer_token_provider().cloned(),
        };
        let producer = recipe.create()?;
        recipe.init(&producer, Duration::from_secs(60))?;
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
            idle: crate::engine::IdlePolicy {
                idle: cfg.max_task_idle(),
                behind: StreamsConfig::BEHIND_PARTITION_WAIT,
            },
            offset_sums: self.offset_sums.clone(),
            purge: self.purger.clone().map(|p| {
                crate::runtime::topics::purge::PurgeSchedule::new(
                    p,
                    self.repartition_topics.clone(),
                    cfg.repartition_purge_interval(),
                )
            }),
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
            recipe,
            restore_consumers,
            member: member.clone(),
        };
        let loop_settings = LoopSettings {
            application_id: app_id.to_owned(),
            commit_interval: cfg.commit_interval(),
            poll: cfg.poll_interval(),
            max_poll_records: cfg.max_poll_records(),
            on_mock: self.on_mock,
            hosting: self.hosting.clone(),
            member: member.map(|m| (m, TaskPartitions::of(&self.topology))),
        };
        Ok((consumer, tasks, loop_settings))
    }

    /// Joins the streams group (`group.protocol=streams`) with a member for thread `name`,
    /// whose main consumer has the properties `consumer`; `instance_id` makes it a static
    /// member.
    fn join_streams_group(
        &self,
        name: &str,
        topology: &crate::runtime::streams_group::GroupTopology,
        consumer: &ClientConfig,
        instance_id: Option<String>,
    ) -> Result<StreamsMember, StreamsError> {
        let cfg = &self.config;
        let rebalance_timeout = consumer
            .get("max.poll.interval.ms")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(Duration::from_secs(300), Duration::from_millis);
        let user_endpoint = cfg.application_server().and_then(|s| {
            let (host, port) = s.rsplit_once(':')?;
            Some((host.to_owned(), port.parse().ok()?))
        });
        StreamsMember::join(MemberSettings {
            bootstrap: self.bootstrap.clone(),
            known: Arc::new(crate::runtime::streams_group::wire::KnownBrokers::new(
                self.group_security.clone(),
            )),
            group_id: cfg.application_id().to_owned(),
            client_id: name.to_owned(),
            process_id: self.process_id.clone(),
            instance_id,
            rebalance_timeout,
            user_endpoint,
            topology: topology.clone(),
            thread_name: name.to_owned(),
            group_configs: crate::runtime::streams_group::group_configs_of(cfg),
            task_offsets: {
                let sums = self.offset_sums.clone();
                crate::runtime::streams_group::TaskOffsetSource(Arc::new(move || sums.snapshot()))
            },
            task_end_offsets: {
                let sums = self.offset_sums.clone();
                crate::runtime::streams_group::TaskOffsetSource(Arc::new(move || sums.end_snapshot()))
            },
            endpoints: self.group_endpoints.clone(),
        })
    }
}
