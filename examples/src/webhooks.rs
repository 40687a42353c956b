//! Web hooks with a range join (the seed article "Processor API range join"): every event
//! of a user triggers each of the user's web hooks registered for that event type.
//!
//! - `web_hooks` (key `%020d(user_id):webhook_id`, JSON [`WebHook`], null value deletes) is
//!   materialized by [`WebHookMaterializer`] into the persistent (RocksDB) store
//!   [`STORE`] (`web_hooks_store`).
//! - `event_logs` (key `%020d(user_id)`, JSON [`EventLog`]) is joined by
//!   [`EventLogProcessor`]: one prefix scan over `%020d(user_id):` finds the user's hooks,
//!   and one [`WebHookRequest`] per hook whose `event_id` matches goes to
//!   `web_hook_requests` (key `%020d(user_id):webhook_id`).
//! - The zero padding makes byte order numeric order and keeps user `1`'s prefix from
//!   matching user `10`'s hooks.
//! - Both input topics are partitioned on the user id: [`WebHookProducer`] writes a hook
//!   to partition [`user_partition`] (murmur2 of the key's user part, as Kafka's Java
//!   default partitioner would place the event of that user), so a user's hooks and events
//!   meet in the same task. The runtime checks at start that the two topics have the same
//!   partition count.
//!
//! The requests are then delivered over HTTP by [`HttpDelivery`] under the non-blocking
//! retry ladder of [`crate::retry`]; [`WebHookPipeline`] runs both stages.

pub mod receiver;

use std::path::PathBuf;
use std::time::Duration;

use rdkafka::message::OwnedHeaders;
use serde::{Deserialize, Serialize};
use streams_core::serdes::{JsonSerde, NullableSerde, StringSerde};
use streams_core::{
    KafkaStreams, KvStore, ProcessResult, Processor, ProcessorContext, Record, Stores, StreamsConfig,
    Topology, TopologyError, default_partition,
};

use crate::ExampleError;
use crate::retry::{
    DeliveryStats, Forwarder, HandleError, Handler, RetryConsumers, RetryLadder, RetryOptions, RetryRecord,
};

/// The default web-hook topic.
pub const WEB_HOOKS: &str = "web_hooks";
/// The default event-log topic.
pub const EVENT_LOGS: &str = "event_logs";
/// The default topic of requests to deliver.
pub const WEB_HOOK_REQUESTS: &str = "web_hook_requests";
/// The store of web hooks, keyed `%020d(user_id):webhook_id`.
pub const STORE: &str = "web_hooks_store";

/// A web hook: call `url` when user `user_id` produces an event of type `event_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebHook {
    /// The hook's id (unique per user).
    pub webhook_id: u64,
    /// Its owner.
    pub user_id: u64,
    /// The event type it fires on.
    pub event_id: u64,
    /// Where the event's payload is POSTed.
    pub url: String,
}

/// An event of a user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventLog {
    /// The user.
    pub user_id: u64,
    /// The event type.
    pub event_id: u64,
    /// The event's data, POSTed to each matching hook.
    pub payload: serde_json::Value,
}

/// One delivery to make: an event joined with one matching hook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebHookRequest {
    /// Identifies the delivery (`<topic>/<partition>/<offset>/<webhook_id>` of the event):
    /// the same on every attempt and on a replay after a crash, so receivers can drop
    /// duplicates. Sent as the `x-webhook-request-id` header.
    pub request_id: String,
    /// The user.
    pub user_id: u64,
    /// The hook.
    pub webhook_id: u64,
    /// The event type.
    pub event_id: u64,
    /// The hook's URL.
    pub url: String,
    /// The event's payload, the request body.
    pub payload: serde_json::Value,
}

/// The topic names of the join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebHookTopics {
    /// The web hooks (a table).
    pub web_hooks: String,
    /// The events (a stream).
    pub event_logs: String,
    /// The join's output: requests to deliver.
    pub requests: String,
}

impl Default for WebHookTopics {
    /// `web_hooks`, `event_logs`, `web_hook_requests`.
    fn default() -> Self {
        Self {
            web_hooks: WEB_HOOKS.into(),
            event_logs: EVENT_LOGS.into(),
            requests: WEB_HOOK_REQUESTS.into(),
        }
    }
}

impl WebHookTopics {
    /// The three names with `suffix` appended (fresh topics for a test or a demo run).
    pub fn with_suffix(suffix: &str) -> Self {
        let d = Self::default();
        Self {
            web_hooks: format!("{}{suffix}", d.web_hooks),
            event_logs: format!("{}{suffix}", d.event_logs),
            requests: format!("{}{suffix}", d.requests),
        }
    }
}

/// The key of `user_id`'s events, and the prefix of its hooks' keys: `%020d`.
pub fn user_key(user_id: u64) -> String {
    format!("{user_id:020}")
}

/// The key of a hook: `%020d(user_id):webhook_id`.
pub fn hook_key(user_id: u64, webhook_id: u64) -> String {
    format!("{user_id:020}:{webhook_id}")
}

/// The partition of `user_id`'s hooks and events among `partitions`: murmur2 of
/// [`user_key`], as Kafka's Java default partitioner places the user's events.
pub fn user_partition(user_id: u64, partitions: i32) -> i32 {
    default_partition(user_key(user_id).as_bytes(), partitions)
}

type Hooks = KvStore<StringSerde, JsonSerde<WebHook>>;

/// Materializes the web-hook topic into [`STORE`], as a KTable would: a value upserts, a
/// null value deletes.
#[derive(Debug, Default)]
pub struct WebHookMaterializer {
    store: Option<Hooks>,
}

impl Processor<String, Option<WebHook>> for WebHookMaterializer {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, (), ()>) -> ProcessResult {
        self.store = Some(ctx.kv_store(STORE)?);
        Ok(())
    }

    fn process(
        &mut self,
        _: &mut ProcessorContext<'_, (), ()>,
        r: Record<String, Option<WebHook>>,
    ) -> ProcessResult {
        let store = self.store.as_ref().ok_or("not initialized")?;
        match r.value {
            Some(hook) => store.put(&r.key, &hook)?,
            None => {
                store.delete(&r.key)?;
            }
        }
        Ok(())
    }
}

/// The range join: each event prefix-scans its user's hooks and forwards one
/// [`WebHookRequest`] per hook whose `event_id` matches, keyed by the hook's key.
#[derive(Debug, Default)]
pub struct EventLogProcessor {
    store: Option<Hooks>,
}

impl Processor<String, EventLog, String, WebHookRequest> for EventLogProcessor {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, WebHookRequest>) -> ProcessResult {
        self.store = Some(ctx.kv_store(STORE)?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, WebHookRequest>,
        r: Record<String, EventLog>,
    ) -> ProcessResult {
        let store = self.store.as_ref().ok_or("not initialized")?;
        let source = ctx.record_metadata().map_or_else(
            || format!("t{}", r.timestamp),
            |m| format!("{}/{}/{}", m.topic, m.partition, m.offset),
        );
        let reader = store.read()?;
        // Forwarding while the iterator is open is fine: the store is only read.
        for entry in reader.prefix_scan(&format!("{}:", user_key(r.value.user_id)), &StringSerde)? {
            let (key, hook) = entry?;
            if hook.event_id != r.value.event_id {
                continue;
            }
            let request = WebHookRequest {
                request_id: format!("{source}/{}", hook.webhook_id),
                user_id: hook.user_id,
                webhook_id: hook.webhook_id,
                event_id: hook.event_id,
                url: hook.url,
                payload: r.value.payload.clone(),
            };
            ctx.forward(Record::new(key, request, r.timestamp))?;
        }
        Ok(())
    }
}

/// The join's topology over `topics`:
///
/// ```text
/// Source-WebHook -> WebHookMaterializer --(web_hooks_store)-- EventLogProcessor <- Source-EventLog
///                                                              |
///                                                              v
///                                                  Sink-WebHookRequest (requests)
/// ```
pub fn topology(topics: &WebHookTopics) -> Result<Topology, TopologyError> {
    let mut b = Topology::builder();
    b.add_source(
        "Source-WebHook",
        [topics.web_hooks.as_str()],
        StringSerde,
        NullableSerde(JsonSerde::<WebHook>::new()),
    )
    .add_processor(
        "WebHookMaterializer",
        WebHookMaterializer::default,
        ["Source-WebHook"],
    )
    .add_source(
        "Source-EventLog",
        [topics.event_logs.as_str()],
        StringSerde,
        JsonSerde::<EventLog>::new(),
    )
    .add_processor(
        "EventLogProcessor",
        EventLogProcessor::default,
        ["Source-EventLog"],
    )
    .add_state_store(
        Stores::persistent_kv(STORE, StringSerde, JsonSerde::<WebHook>::new()).with_caching(),
        ["WebHookMaterializer", "EventLogProcessor"],
    )
    .add_sink(
        "Sink-WebHookRequest",
        topics.requests.as_str(),
        StringSerde,
        JsonSerde::<WebHookRequest>::new(),
        ["EventLogProcessor"],
    );
    b.build()
}

/// Writes hooks and events co-partitioned on the user id (see the [module docs](self)).
pub struct WebHookProducer {
    forwarder: Forwarder,
    topics: WebHookTopics,
    partitions: i32,
}

impl WebHookProducer {
    /// A producer for `topics`, which must exist with the same partition count.
    pub fn new(bootstrap: &str, topics: WebHookTopics) -> Result<Self, ExampleError> {
        let forwarder = Forwarder::new(bootstrap, &[])?;
        let timeout = Duration::from_secs(30);
        let hooks = forwarder.partitions(&topics.web_hooks, timeout)?;
        let events = forwarder.partitions(&topics.event_logs, timeout)?;
        if hooks != events {
            return Err(ExampleError::Other(format!(
                "{} has {hooks} partitions but {} has {events}: not co-partitioned",
                topics.web_hooks, topics.event_logs
            )));
        }
        Ok(Self {
            forwarder,
            topics,
            partitions: hooks,
        })
    }

    /// The partition count of both topics.
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// Registers or replaces a hook.
    pub fn upsert(&self, hook: &WebHook) -> Result<(), ExampleError> {
        let key = hook_key(hook.user_id, hook.webhook_id);
        let value = serde_json::to_vec(hook)?;
        let partition = Some(user_partition(hook.user_id, self.partitions));
        self.forwarder.send_to(
            &self.topics.web_hooks,
            partition,
            Some(key.as_bytes()),
            Some(&value),
            OwnedHeaders::new(),
        )
    }

    /// Deletes a hook (a tombstone).
    pub fn delete(&self, user_id: u64, webhook_id: u64) -> Result<(), ExampleError> {
        let key = hook_key(user_id, webhook_id);
        let partition = Some(user_partition(user_id, self.partitions));
        self.forwarder.send_to(
            &self.topics.web_hooks,
            partition,
            Some(key.as_bytes()),
            None,
            OwnedHeaders::new(),
        )
    }

    /// Sends an event.
    pub fn event(&self, event: &EventLog) -> Result<(), ExampleError> {
        let key = user_key(event.user_id);
        let value = serde_json::to_vec(event)?;
        let partition = Some(user_partition(event.user_id, self.partitions));
        self.forwarder.send_to(
            &self.topics.event_logs,
            partition,
            Some(key.as_bytes()),
            Some(&value),
            OwnedHeaders::new(),
        )
    }

    /// Waits until everything sent was acknowledged.
    pub fn flush(&self, timeout: Duration) -> Result<(), ExampleError> {
        self.forwarder.flush(timeout)
    }
}

impl std::fmt::Debug for WebHookProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebHookProducer")
            .field("topics", &self.topics)
            .field("partitions", &self.partitions)
            .finish()
    }
}

/// Delivers a [`WebHookRequest`] record: POSTs its payload (JSON) to its URL with the
/// headers `x-webhook-id`, `x-webhook-request-id` and `x-webhook-attempt` (1 for the first
/// attempt). A 2xx answer is a success; another status or a connection error is
/// [`HandleError::Retriable`]; an undecodable record or a malformed URL is
/// [`HandleError::Permanent`].
#[derive(Debug, Clone)]
pub struct HttpDelivery {
    agent: ureq::Agent,
}

impl HttpDelivery {
    /// A client whose requests each take at most `timeout`.
    pub fn new(timeout: Duration) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build();
        Self {
            agent: ureq::Agent::new_with_config(config),
        }
    }
}

impl Handler for HttpDelivery {
    fn handle(&self, record: &RetryRecord) -> Result<(), HandleError> {
        let value = record
            .value
            .as_deref()
            .ok_or_else(|| HandleError::Permanent("null request".into()))?;
        let request: WebHookRequest = serde_json::from_slice(value)
            .map_err(|e| HandleError::Permanent(format!("undecodable request: {e}")))?;
        let body = serde_json::to_vec(&request.payload).map_err(|e| HandleError::Permanent(e.to_string()))?;
        let sent = self
            .agent
            .post(&request.url)
            .header("content-type", "application/json")
            .header("x-webhook-id", &request.webhook_id.to_string())
            .header("x-webhook-request-id", &request.request_id)
            .header("x-webhook-attempt", &(record.attempt() + 1).to_string())
            .send(&body[..]);
        match sent {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(HandleError::Retriable(format!(
                "HTTP {}",
                response.status().as_u16()
            ))),
            Err(e @ (ureq::Error::BadUri(_) | ureq::Error::Http(_))) => {
                Err(HandleError::Permanent(format!("{}: {e}", request.url)))
            }
            Err(e) => Err(HandleError::Retriable(format!("{}: {e}", request.url))),
        }
    }
}

/// How [`WebHookPipeline`] runs.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// The join's `application.id`.
    pub application_id: String,
    /// The join's `state.dir` (its RocksDB store lives there).
    pub state_dir: PathBuf,
    /// The join's topics.
    pub topics: WebHookTopics,
    /// The delivery's retry ladder (its main topic must be `topics.requests`).
    pub ladder: RetryLadder,
    /// The delivery consumers' settings.
    pub delivery: RetryOptions,
    /// The longest one HTTP request may take.
    pub http_timeout: Duration,
    /// Extra properties of the join's [`StreamsConfig`].
    pub streams_properties: Vec<(String, String)>,
}

impl PipelineConfig {
    /// The defaults for `application_id`: the standard topic names, the production ladder
    /// (5m, 30m, 1h), delivery groups `<application_id>-delivery.<topic>`, 10 s HTTP timeout.
    pub fn new(application_id: impl Into<String>, state_dir: impl Into<PathBuf>) -> Self {
        let application_id = application_id.into();
        let topics = WebHookTopics::default();
        Self {
            ladder: RetryLadder::production(topics.requests.clone()),
            delivery: RetryOptions::new(format!("{application_id}-delivery")),
            application_id,
            state_dir: state_dir.into(),
            topics,
            http_timeout: Duration::from_secs(10),
            streams_properties: Vec::new(),
        }
    }

    /// Uses `topics`, with a ladder of the same delays renamed after `topics.requests`.
    pub fn with_topics(mut self, topics: WebHookTopics) -> Self {
        let delays: Vec<Duration> = self.ladder.steps().iter().map(|s| s.delay).collect();
        self.ladder = RetryLadder::new(topics.requests.clone(), &delays);
        self.topics = topics;
        self
    }

    /// Uses a ladder with these delays.
    pub fn with_delays(mut self, delays: &[Duration]) -> Self {
        self.ladder = RetryLadder::new(self.topics.requests.clone(), delays);
        self
    }

    /// Every topic the pipeline reads or writes.
    pub fn all_topics(&self) -> Vec<String> {
        let t = &self.topics;
        [t.web_hooks.clone(), t.event_logs.clone(), t.requests.clone()]
            .into_iter()
            .chain(self.ladder.topics())
            .collect()
    }
}

/// The whole web-hook application: the join (a [`KafkaStreams`]) and the delivery
/// consumers ([`RetryConsumers`] with [`HttpDelivery`]).
pub struct WebHookPipeline {
    streams: KafkaStreams,
    delivery: RetryConsumers,
}

impl WebHookPipeline {
    /// Starts the join and the delivery on `bootstrap`. The topics must exist
    /// ([`crate::admin::create_topics`] with [`PipelineConfig::all_topics`]).
    pub fn start(bootstrap: &str, config: PipelineConfig) -> Result<Self, ExampleError> {
        if config.ladder.source() != config.topics.requests {
            return Err(ExampleError::Other(format!(
                "the ladder reads {} but the join writes {}",
                config.ladder.source(),
                config.topics.requests
            )));
        }
        let mut properties = vec![
            ("application.id".to_owned(), config.application_id.clone()),
            ("bootstrap.servers".to_owned(), bootstrap.to_owned()),
            ("state.dir".to_owned(), config.state_dir.display().to_string()),
            ("commit.interval.ms".to_owned(), "1000".to_owned()),
        ];
        properties.extend(config.streams_properties.iter().cloned());
        let streams_config = StreamsConfig::from_properties(properties)?;
        let mut streams = KafkaStreams::new(topology(&config.topics)?, streams_config)?;
        streams.start()?;
        let delivery = match RetryConsumers::start(
            bootstrap,
            config.ladder.clone(),
            HttpDelivery::new(config.http_timeout),
            config.delivery.clone(),
        ) {
            Ok(d) => d,
            Err(e) => {
                streams.close(Duration::from_secs(30));
                return Err(e);
            }
        };
        Ok(Self { streams, delivery })
    }

    /// The join.
    pub fn streams(&self) -> &KafkaStreams {
        &self.streams
    }

    /// The delivery consumers.
    pub fn delivery(&self) -> &RetryConsumers {
        &self.delivery
    }

    /// What the delivery did so far.
    pub fn stats(&self) -> DeliveryStats {
        self.delivery.stats()
    }

    /// Stops the delivery, then the join; the first error of a delivery consumer, if any.
    pub fn close(mut self, timeout: Duration) -> Result<(), ExampleError> {
        let delivered = self.delivery.close(timeout);
        if !self.streams.close(timeout) {
            tracing::warn!("the join did not stop within {timeout:?}");
        }
        delivered
    }
}

impl std::fmt::Debug for WebHookPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebHookPipeline")
            .field("state", &self.streams.state())
            .field("delivery", &self.delivery)
            .finish()
    }
}

/// The requests the join should emit for `hooks` (the final state of each hook key, `None`
/// = deleted) and `events`: `(webhook_id, index of the event)` pairs, for checking a run.
pub fn expected_requests(
    hooks: &[WebHook],
    deleted: &[(u64, u64)],
    events: &[EventLog],
) -> Vec<(u64, usize)> {
    let live: Vec<&WebHook> = hooks
        .iter()
        .filter(|h| !deleted.contains(&(h.user_id, h.webhook_id)))
        .collect();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        for h in &live {
            if h.user_id == e.user_id && h.event_id == e.event_id {
                out.push((h.webhook_id, i));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_zero_padded_and_users_co_partitioned() {
        assert_eq!(user_key(1), "00000000000000000001");
        assert_eq!(hook_key(10, 7), "00000000000000000010:7");
        assert!(hook_key(1, 99) < hook_key(2, 1));
        assert!(!hook_key(10, 1).starts_with(&format!("{}:", user_key(1))));
        for user in 0..100 {
            assert_eq!(
                user_partition(user, 3),
                default_partition(user_key(user).as_bytes(), 3)
            );
        }
    }

    #[test]
    fn topology_is_one_subtopology() {
        let t = topology(&WebHookTopics::default()).unwrap();
        assert_eq!(t.subtopologies().len(), 1);
        let d = t.describe().to_string();
        assert!(d.contains("web_hooks_store"), "{d}");
    }

    #[test]
    fn expected_requests_follow_hooks_and_deletions() {
        let hook = |id, user, event| WebHook {
            webhook_id: id,
            user_id: user,
            event_id: event,
            url: String::new(),
        };
        let hooks = [
            hook(1, 1, 100),
            hook(2, 1, 100),
            hook(3, 1, 200),
            hook(4, 10, 100),
        ];
        let ev = |user, event| EventLog {
            user_id: user,
            event_id: event,
            payload: serde_json::Value::Null,
        };
        let events = [ev(1, 100), ev(10, 100), ev(2, 100)];
        assert_eq!(
            expected_requests(&hooks, &[(1, 2)], &events),
            vec![(1, 0), (4, 1)]
        );
    }
}
