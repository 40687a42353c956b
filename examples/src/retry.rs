//! Non-blocking retries with a ladder of delayed retry topics and a dead-letter topic (the
//! seed article "retries, DLQ and Kafka notes"), as an ordinary Kafka consumer application
//! on rdkafka, not a streams topology.
//!
//! A [`RetryLadder`] names the main topic, its retry topics and its dead-letter topic:
//!
//! ```text
//! web_hook_requests ──fail──▶ web_hook_requests-retry-1 (5m) ──fail──▶ -retry-2 (30m)
//!        │                            │                                    │
//!        ok                           ok                                  fail
//!                                                  -retry-3 (1h) ◀─────────┘
//!                                                        │ fail
//!                                                        ▼
//!                                              web_hook_requests-dlq
//! ```
//!
//! [`RetryConsumers::start`] runs one consumer thread per topic of the ladder (its own
//! consumer group, its own producer). Every consumer hands each record to the same
//! [`Handler`]. A record that fails goes to the next topic of the ladder with the headers
//! [`HEADER_ATTEMPT`], [`HEADER_NEXT_AT`], [`HEADER_LAST_ERROR`] and
//! [`HEADER_ORIGINAL_TOPIC`]; after the last retry topic, to the dead-letter topic.
//!
//! Retries never block live traffic: the main consumer never waits; a retry consumer whose
//! next record is not yet due pauses that partition and keeps polling (so it stays in its
//! group, and its other partitions keep flowing) until the record's [`HEADER_NEXT_AT`]
//! time, in its own thread. Handling is at least once: offsets are committed (manually,
//! after the batch's forwards were acknowledged) once records are handled, so a crash or a
//! rebalance can repeat a delivery, never lose one.
//!
//! The dead-letter topic is managed by the functions of [`dlq`] (the `dlq-tool` binary):
//! list, purge, and replay into the first retry topic.

pub mod dlq;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Header, Headers as _, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaErrorCode;

use crate::ExampleError;

/// Header: how many delivery attempts failed so far (decimal text). Absent on the main
/// topic; reset to `0` by a replay from the dead-letter topic.
pub const HEADER_ATTEMPT: &str = "retry.attempt";
/// Header: when the record is due for its next attempt, in ms since the epoch (decimal).
/// Only on records in retry topics.
pub const HEADER_NEXT_AT: &str = "retry.next.at.ms";
/// Header: the error of the last failed attempt.
pub const HEADER_LAST_ERROR: &str = "retry.last.error";
/// Header: the topic the record was first read from (the ladder's main topic).
pub const HEADER_ORIGINAL_TOPIC: &str = "retry.original.topic";
/// Header: the record's partition in the original topic.
pub const HEADER_ORIGINAL_PARTITION: &str = "retry.original.partition";
/// Header: the record's offset in the original topic.
pub const HEADER_ORIGINAL_OFFSET: &str = "retry.original.offset";
/// Header: on a record replayed from the dead-letter topic, where it was read:
/// `<topic>/<partition>/<offset>`.
pub const HEADER_REPLAYED_FROM: &str = "retry.replayed.from";

/// The headers this module writes; they are replaced, not repeated, when a record moves on.
pub const RETRY_HEADERS: [&str; 7] = [
    HEADER_ATTEMPT,
    HEADER_NEXT_AT,
    HEADER_LAST_ERROR,
    HEADER_ORIGINAL_TOPIC,
    HEADER_ORIGINAL_PARTITION,
    HEADER_ORIGINAL_OFFSET,
    HEADER_REPLAYED_FROM,
];

/// The current time in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Parses a duration such as `250ms`, `5s`, `30m`, `1h` or `2d` (a bare number is
/// milliseconds).
pub fn parse_duration(text: &str) -> Result<Duration, ExampleError> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| ExampleError::Other(format!("not a duration: {text:?}")))?;
    let ms = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(ExampleError::Other(format!(
                "unknown duration unit {other:?} in {text:?}"
            )));
        }
    };
    Ok(Duration::from_millis(n.saturating_mul(ms)))
}

/// Parses a comma-separated list of durations (`5m,30m,1h`), see [`parse_duration`].
pub fn parse_delays(text: &str) -> Result<Vec<Duration>, ExampleError> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_duration)
        .collect()
}

/// One rung of the ladder: a retry topic and how long its records wait before their
/// attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryStep {
    /// The retry topic.
    pub topic: String,
    /// The delay between the failure and the attempt from this topic.
    pub delay: Duration,
}

/// The topics of a retry ladder: the main topic, its retry topics in order, and the
/// dead-letter topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryLadder {
    source: String,
    steps: Vec<RetryStep>,
    dead_letter: String,
}

impl RetryLadder {
    /// A ladder for `source` with one retry topic per delay, named `<source>-retry-1`,
    /// `<source>-retry-2`, ..., and the dead-letter topic `<source>-dlq`.
    pub fn new(source: impl Into<String>, delays: &[Duration]) -> Self {
        let source = source.into();
        let steps = delays
            .iter()
            .enumerate()
            .map(|(i, &delay)| RetryStep {
                topic: format!("{source}-retry-{}", i + 1),
                delay,
            })
            .collect();
        let dead_letter = format!("{source}-dlq");
        Self {
            source,
            steps,
            dead_letter,
        }
    }

    /// The production ladder of the seed article: retries after 5 minutes, 30 minutes and
    /// 1 hour.
    pub fn production(source: impl Into<String>) -> Self {
        Self::new(
            source,
            &[
                Duration::from_secs(300),
                Duration::from_secs(1800),
                Duration::from_secs(3600),
            ],
        )
    }

    /// The main topic.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The retry topics, in order.
    pub fn steps(&self) -> &[RetryStep] {
        &self.steps
    }

    /// The dead-letter topic.
    pub fn dead_letter(&self) -> &str {
        &self.dead_letter
    }

    /// Where records replayed from the dead-letter topic go: the first retry topic (or the
    /// main topic when the ladder has no retry topics).
    pub fn replay_topic(&self) -> &str {
        self.steps
            .first()
            .map_or(self.source.as_str(), |s| s.topic.as_str())
    }

    /// The retry topics and the dead-letter topic (the topics to create besides the main one).
    pub fn topics(&self) -> Vec<String> {
        self.steps
            .iter()
            .map(|s| s.topic.clone())
            .chain([self.dead_letter.clone()])
            .collect()
    }

    /// How many attempts a record gets before it is dead-lettered: one from the main topic
    /// plus one per retry topic.
    pub fn max_attempts(&self) -> u32 {
        self.steps.len() as u32 + 1
    }

    /// The topic consumed at `stage` (0 = the main topic, `i` = retry topic `i`).
    fn stage_topic(&self, stage: usize) -> &str {
        if stage == 0 {
            &self.source
        } else {
            &self.steps[stage - 1].topic
        }
    }

    /// Where a record that failed at `stage` goes: the next retry topic and its delay, or
    /// `None` for the dead-letter topic.
    fn next_after(&self, stage: usize) -> Option<&RetryStep> {
        self.steps.get(stage)
    }
}

/// A record as read from one of the ladder's topics, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryRecord {
    /// The topic it was read from.
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its timestamp in ms since the epoch, if it has one.
    pub timestamp: Option<i64>,
    /// The key bytes.
    pub key: Option<Vec<u8>>,
    /// The value bytes (`None` for a tombstone).
    pub value: Option<Vec<u8>>,
    /// The headers in order.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl RetryRecord {
    /// Copies a consumed message.
    pub fn from_message(m: &BorrowedMessage<'_>) -> Self {
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            topic: m.topic().to_owned(),
            partition: m.partition(),
            offset: m.offset(),
            timestamp: m.timestamp().to_millis(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers,
        }
    }

    /// The value of the last header named `name` (`None` when absent or null).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// The last header named `name` as UTF-8 text.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The failed attempts so far ([`HEADER_ATTEMPT`]; 0 when absent or unreadable).
    pub fn attempt(&self) -> u32 {
        self.header_str(HEADER_ATTEMPT)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    /// When the record is due ([`HEADER_NEXT_AT`]); `None` means now.
    pub fn due_at_ms(&self) -> Option<i64> {
        self.header_str(HEADER_NEXT_AT).and_then(|s| s.parse().ok())
    }

    /// The error of the last failed attempt ([`HEADER_LAST_ERROR`]).
    pub fn last_error(&self) -> Option<&str> {
        self.header_str(HEADER_LAST_ERROR)
    }

    /// The topic the record was first read from ([`HEADER_ORIGINAL_TOPIC`]), or the topic it
    /// was read from when it has not been retried yet.
    pub fn original_topic(&self) -> &str {
        self.header_str(HEADER_ORIGINAL_TOPIC).unwrap_or(&self.topic)
    }

    /// The key as text (lossy), for display.
    pub fn key_text(&self) -> String {
        self.key.as_deref().map_or_else(
            || "<null>".to_owned(),
            |k| String::from_utf8_lossy(k).into_owned(),
        )
    }

    /// The value as text (lossy), for display.
    pub fn value_text(&self) -> String {
        self.value.as_deref().map_or_else(
            || "<null>".to_owned(),
            |v| String::from_utf8_lossy(v).into_owned(),
        )
    }

    /// The headers that are not [`RETRY_HEADERS`] (the application's own), in order.
    pub fn application_headers(&self) -> impl Iterator<Item = &(String, Option<Vec<u8>>)> {
        self.headers
            .iter()
            .filter(|(k, _)| !RETRY_HEADERS.contains(&k.as_str()))
    }

    /// The headers of this record moving on after a failure: the application's headers,
    /// the original topic/partition/offset (kept from the first failure), then `extra`.
    fn moved_headers(&self, extra: &[(&str, String)]) -> OwnedHeaders {
        let mut out = OwnedHeaders::new();
        for (k, v) in self.application_headers() {
            out = out.insert(Header {
                key: k,
                value: v.as_deref(),
            });
        }
        let original = [
            (HEADER_ORIGINAL_TOPIC, self.original_topic().to_owned()),
            (
                HEADER_ORIGINAL_PARTITION,
                self.header_str(HEADER_ORIGINAL_PARTITION)
                    .map_or_else(|| self.partition.to_string(), str::to_owned),
            ),
            (
                HEADER_ORIGINAL_OFFSET,
                self.header_str(HEADER_ORIGINAL_OFFSET)
                    .map_or_else(|| self.offset.to_string(), str::to_owned),
            ),
        ];
        for (k, v) in original
            .iter()
            .map(|(k, v)| (*k, v))
            .chain(extra.iter().map(|(k, v)| (*k, v)))
        {
            out = out.insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            });
        }
        out
    }
}

/// Why handling a record failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandleError {
    /// Worth retrying later (a non-2xx answer, a connection error): the record moves to the
    /// next retry topic.
    #[error("{0}")]
    Retriable(String),
    /// Retrying cannot help (an undecodable record): the record goes straight to the
    /// dead-letter topic.
    #[error("permanent: {0}")]
    Permanent(String),
}

/// Handles one record: for web hooks, one HTTP delivery. Shared by every consumer of the
/// ladder, called from their threads.
pub trait Handler: Send + Sync + 'static {
    /// Handles `record`; an error sends it down the ladder.
    fn handle(&self, record: &RetryRecord) -> Result<(), HandleError>;
}

impl<F> Handler for F
where
    F: Fn(&RetryRecord) -> Result<(), HandleError> + Send + Sync + 'static,
{
    fn handle(&self, record: &RetryRecord) -> Result<(), HandleError> {
        self(record)
    }
}

/// What happened to a record at one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Handled successfully.
    Delivered,
    /// Failed; sent to retry topic `topic`, due at `due_at_ms`, with `attempt` failed
    /// attempts so far.
    Retrying {
        /// The retry topic it went to.
        topic: String,
        /// Failed attempts so far.
        attempt: u32,
        /// When it is due, in ms since the epoch.
        due_at_ms: i64,
    },
    /// Failed for the last time (or permanently); sent to the dead-letter topic.
    DeadLettered {
        /// Failed attempts in all.
        attempt: u32,
        /// Whether the failure was [`HandleError::Permanent`].
        permanent: bool,
    },
}

/// One attempt, as reported to a [`Listener`].
#[derive(Debug)]
pub struct OutcomeEvent<'a> {
    /// The topic the record was read from.
    pub topic: &'a str,
    /// The record.
    pub record: &'a RetryRecord,
    /// What happened.
    pub outcome: Outcome,
    /// The error of a failed attempt.
    pub error: Option<&'a HandleError>,
}

/// Called after every attempt, from the consumer threads (keep it quick).
pub type Listener = Arc<dyn Fn(&OutcomeEvent<'_>) + Send + Sync>;

/// Settings of [`RetryConsumers`].
#[derive(Clone)]
pub struct RetryOptions {
    /// The consumer groups are `<group_id>.<topic>`, one per topic of the ladder.
    pub group_id: String,
    /// The longest a consumer blocks in one poll (it also bounds how late a due record is
    /// noticed and how quickly `close` is served).
    pub poll_interval: Duration,
    /// Records handled between two commits on the main topic.
    pub max_batch: usize,
    /// How long a commit's forwards may take to be acknowledged before the consumer fails.
    pub produce_timeout: Duration,
    /// Extra librdkafka consumer properties (e.g. `session.timeout.ms`).
    pub consumer_properties: Vec<(String, String)>,
    /// Extra librdkafka producer properties.
    pub producer_properties: Vec<(String, String)>,
    /// Called after every attempt.
    pub listener: Option<Listener>,
}

impl RetryOptions {
    /// Defaults for `group_id`: 100 ms polls, commits every 100 records, 30 s for forwards.
    pub fn new(group_id: impl Into<String>) -> Self {
        Self {
            group_id: group_id.into(),
            poll_interval: Duration::from_millis(100),
            max_batch: 100,
            produce_timeout: Duration::from_secs(30),
            consumer_properties: Vec::new(),
            producer_properties: Vec::new(),
            listener: None,
        }
    }

    /// Sets the listener.
    pub fn with_listener(mut self, listener: impl Fn(&OutcomeEvent<'_>) + Send + Sync + 'static) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// Adds a consumer property.
    pub fn consumer_property(mut self, key: &str, value: &str) -> Self {
        self.consumer_properties.push((key.to_owned(), value.to_owned()));
        self
    }
}

impl std::fmt::Debug for RetryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryOptions")
            .field("group_id", &self.group_id)
            .field("poll_interval", &self.poll_interval)
            .field("max_batch", &self.max_batch)
            .field("listener", &self.listener.is_some())
            .finish_non_exhaustive()
    }
}

/// The counters of one consumer of the ladder.
#[derive(Debug, Default)]
struct Counters {
    delivered: AtomicU64,
    retried: AtomicU64,
    dead_lettered: AtomicU64,
    waits: AtomicU64,
}

/// What one consumer of the ladder did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageStats {
    /// The topic it reads.
    pub topic: String,
    /// Records handled successfully.
    pub delivered: u64,
    /// Records that failed and went to the next retry topic.
    pub retried: u64,
    /// Records that failed and went to the dead-letter topic.
    pub dead_lettered: u64,
    /// Times it paused a partition to wait for a record's due time.
    pub waits: u64,
}

/// What all consumers of the ladder did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryStats {
    /// Per consumer, the main topic's first.
    pub stages: Vec<StageStats>,
}

impl DeliveryStats {
    /// Records handled successfully, at any attempt.
    pub fn delivered(&self) -> u64 {
        self.stages.iter().map(|s| s.delivered).sum()
    }

    /// Failed attempts that were sent to a retry topic.
    pub fn retried(&self) -> u64 {
        self.stages.iter().map(|s| s.retried).sum()
    }

    /// Records sent to the dead-letter topic.
    pub fn dead_lettered(&self) -> u64 {
        self.stages.iter().map(|s| s.dead_lettered).sum()
    }

    /// Records whose journey ended: delivered or dead-lettered.
    pub fn finished(&self) -> u64 {
        self.delivered() + self.dead_lettered()
    }
}

/// Collects delivery failures of a [`Forwarder`].
#[derive(Default)]
pub(crate) struct ForwardContext {
    failures: Mutex<Vec<String>>,
}

impl ClientContext for ForwardContext {}

impl ProducerContext for ForwardContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, m)) = result {
            self.failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(format!("{}: {e}", m.topic()));
        }
    }
}

/// An idempotent producer whose sends are confirmed together by [`Forwarder::flush`].
pub(crate) struct Forwarder {
    producer: BaseProducer<ForwardContext>,
}

impl Forwarder {
    /// A producer on `bootstrap` with `extra` librdkafka properties.
    pub(crate) fn new(bootstrap: &str, extra: &[(String, String)]) -> Result<Self, ExampleError> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .set("message.timeout.ms", "60000");
        for (k, v) in extra {
            config.set(k, v);
        }
        Ok(Self {
            producer: config.create_with_context(ForwardContext::default())?,
        })
    }

    /// Queues a record; the producer picks its partition from the key.
    pub(crate) fn send(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: OwnedHeaders,
    ) -> Result<(), ExampleError> {
        self.send_to(topic, None, key, value, headers)
    }

    /// Queues a record for `partition` (`None`: the producer picks it from the key).
    pub(crate) fn send_to(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: OwnedHeaders,
    ) -> Result<(), ExampleError> {
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic).headers(headers);
        if let Some(p) = partition {
            record = record.partition(p);
        }
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(v) = value {
            record = record.payload(v);
        }
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    self.producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(e.into()),
            }
        }
    }

    /// The partition count of `topic`.
    pub(crate) fn partitions(&self, topic: &str, timeout: Duration) -> Result<i32, ExampleError> {
        let metadata = self.producer.client().fetch_metadata(Some(topic), timeout)?;
        match metadata.topics().iter().find(|t| t.name() == topic) {
            Some(t) if t.error().is_none() && !t.partitions().is_empty() => Ok(t.partitions().len() as i32),
            _ => Err(ExampleError::Other(format!("topic {topic} not found"))),
        }
    }

    /// Waits until every queued record is acknowledged; an error when one failed or the
    /// timeout passed.
    pub(crate) fn flush(&self, timeout: Duration) -> Result<(), ExampleError> {
        let flushed = self.producer.flush(timeout);
        let failures = std::mem::take(
            &mut *self
                .producer
                .context()
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if !failures.is_empty() {
            return Err(ExampleError::Other(format!(
                "forwarding failed: {}",
                failures.join("; ")
            )));
        }
        Ok(flushed?)
    }
}

/// The consumer context of one stage: on a revocation, commits what was handled so far
/// (after its forwards were acknowledged), and tells the loop to drop waiting records.
struct StageContext {
    topic: String,
    forwarder: Arc<Forwarder>,
    produce_timeout: Duration,
    /// Handled but not yet committed: partition -> next offset.
    uncommitted: Mutex<HashMap<i32, i64>>,
    rebalanced: AtomicBool,
}

impl StageContext {
    /// Flushes the forwards, then commits the handled offsets.
    fn commit(&self, consumer: &BaseConsumer<StageContext>) -> Result<(), ExampleError> {
        let offsets = std::mem::take(&mut *self.uncommitted.lock().unwrap_or_else(PoisonError::into_inner));
        if offsets.is_empty() {
            return Ok(());
        }
        self.forwarder.flush(self.produce_timeout)?;
        let mut tpl = TopicPartitionList::with_capacity(offsets.len());
        for (p, o) in offsets {
            tpl.add_partition_offset(&self.topic, p, Offset::Offset(o))?;
        }
        consumer.commit(&tpl, CommitMode::Sync)?;
        Ok(())
    }

    fn handled(&self, partition: i32, offset: i64) {
        self.uncommitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(partition, offset + 1);
    }
}

impl ClientContext for StageContext {}

impl ConsumerContext for StageContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(_) = rebalance {
            self.rebalanced.store(true, Ordering::Relaxed);
            if let Err(e) = self.commit(consumer) {
                // The new owner repeats what was not committed: at least once.
                tracing::warn!(topic = %self.topic, error = %e, "commit on revocation failed");
            }
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.rebalanced.store(true, Ordering::Relaxed);
        if let Rebalance::Error(e) = rebalance {
            tracing::warn!(topic = %self.topic, error = %e, "rebalance error");
        }
    }
}

/// One consumer of the ladder.
struct Stage {
    index: usize,
    topic: String,
    ladder: Arc<RetryLadder>,
    handler: Arc<dyn Handler>,
    consumer: BaseConsumer<StageContext>,
    options: RetryOptions,
    counters: Arc<Counters>,
    shutdown: Arc<AtomicBool>,
    /// A record that is not due yet, per paused partition.
    waiting: HashMap<i32, RetryRecord>,
}

impl Stage {
    fn forwarder(&self) -> &Forwarder {
        &self.consumer.context().forwarder
    }

    /// Attempts `record` and forwards it down the ladder when it fails.
    fn attempt(&self, record: &RetryRecord) -> Result<(), ExampleError> {
        let result = self.handler.handle(record);
        let outcome = match &result {
            Ok(()) => {
                self.counters.delivered.fetch_add(1, Ordering::Relaxed);
                Outcome::Delivered
            }
            Err(error) => {
                let attempt = record.attempt() + 1;
                let message = error.to_string();
                let next = match error {
                    HandleError::Retriable(_) => self.ladder.next_after(self.index),
                    HandleError::Permanent(_) => None,
                };
                match next {
                    Some(step) => {
                        let due = now_ms() + step.delay.as_millis() as i64;
                        let headers = record.moved_headers(&[
                            (HEADER_ATTEMPT, attempt.to_string()),
                            (HEADER_NEXT_AT, due.to_string()),
                            (HEADER_LAST_ERROR, message),
                        ]);
                        self.forwarder().send(
                            &step.topic,
                            record.key.as_deref(),
                            record.value.as_deref(),
                            headers,
                        )?;
                        self.counters.retried.fetch_add(1, Ordering::Relaxed);
                        Outcome::Retrying {
                            topic: step.topic.clone(),
                            attempt,
                            due_at_ms: due,
                        }
                    }
                    None => {
                        let headers = record.moved_headers(&[
                            (HEADER_ATTEMPT, attempt.to_string()),
                            (HEADER_LAST_ERROR, message),
                        ]);
                        let dlq = self.ladder.dead_letter();
                        self.forwarder().send(
                            dlq,
                            record.key.as_deref(),
                            record.value.as_deref(),
                            headers,
                        )?;
                        self.counters.dead_lettered.fetch_add(1, Ordering::Relaxed);
                        Outcome::DeadLettered {
                            attempt,
                            permanent: matches!(error, HandleError::Permanent(_)),
                        }
                    }
                }
            }
        };
        if let Some(listener) = &self.options.listener {
            listener(&OutcomeEvent {
                topic: &self.topic,
                record,
                outcome,
                error: result.as_ref().err(),
            });
        }
        self.consumer.context().handled(record.partition, record.offset);
        Ok(())
    }

    fn partition_list(&self, partition: i32) -> Result<TopicPartitionList, ExampleError> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, partition, Offset::Invalid)?;
        Ok(tpl)
    }

    /// Attempts the waiting records that are due; returns when the next one is due.
    fn attempt_due(&mut self) -> Result<Option<i64>, ExampleError> {
        let now = now_ms();
        let due: Vec<i32> = self
            .waiting
            .iter()
            .filter(|(_, r)| r.due_at_ms().unwrap_or(0) <= now)
            .map(|(&p, _)| p)
            .collect();
        for p in due {
            let Some(record) = self.waiting.remove(&p) else {
                continue;
            };
            self.attempt(&record)?;
            self.consumer.context().commit(&self.consumer)?;
            // Records after it that were fetched while waiting were dropped: read on from
            // the next offset.
            self.consumer.seek(
                &self.topic,
                p,
                Offset::Offset(record.offset + 1),
                Duration::from_secs(10),
            )?;
            self.consumer.resume(&self.partition_list(p)?)?;
        }
        Ok(self.waiting.values().filter_map(RetryRecord::due_at_ms).min())
    }

    fn run(mut self) -> Result<(), ExampleError> {
        self.consumer.subscribe(&[self.topic.as_str()])?;
        let mut in_batch = 0usize;
        while !self.shutdown.load(Ordering::Relaxed) {
            if self.consumer.context().rebalanced.swap(false, Ordering::Relaxed) {
                // Waiting records were not committed: whoever owns their partitions now
                // reads them again. Partitions we keep are resumed.
                self.waiting.clear();
                let assignment = self.consumer.assignment()?;
                if assignment.count() > 0 {
                    self.consumer.resume(&assignment)?;
                }
            }
            let next_due = self.attempt_due()?;
            let mut wait = if in_batch > 0 {
                Duration::ZERO
            } else {
                self.options.poll_interval
            };
            if let Some(due) = next_due {
                wait = wait.min(Duration::from_millis((due - now_ms()).max(0) as u64));
            }
            let message = match self.consumer.poll(wait) {
                None => None,
                Some(Ok(m)) => Some(RetryRecord::from_message(&m)),
                Some(Err(e)) => {
                    tracing::warn!(topic = %self.topic, error = %e, "consumer error");
                    None
                }
            };
            let Some(record) = message else {
                // Idle: commit the batch.
                in_batch = 0;
                self.consumer.context().commit(&self.consumer)?;
                continue;
            };
            if self.waiting.contains_key(&record.partition) {
                // Fetched before the partition was paused; read again after the wait.
                continue;
            }
            if record.due_at_ms().is_some_and(|due| due > now_ms()) {
                // Not due: commit what came before it, pause its partition and keep polling
                // (the other partitions keep flowing, the group keeps us).
                self.consumer.context().commit(&self.consumer)?;
                self.consumer.pause(&self.partition_list(record.partition)?)?;
                self.counters.waits.fetch_add(1, Ordering::Relaxed);
                self.waiting.insert(record.partition, record);
                continue;
            }
            self.attempt(&record)?;
            in_batch += 1;
            if in_batch >= self.options.max_batch {
                in_batch = 0;
                self.consumer.context().commit(&self.consumer)?;
            }
        }
        let committed = self.consumer.context().commit(&self.consumer);
        self.consumer.unsubscribe();
        committed
    }
}

/// The running consumers of a ladder: one thread per topic. See the [module docs](self).
pub struct RetryConsumers {
    threads: Vec<(String, JoinHandle<Result<(), ExampleError>>)>,
    counters: Vec<(String, Arc<Counters>)>,
    shutdown: Arc<AtomicBool>,
}

impl RetryConsumers {
    /// Starts one consumer per topic of `ladder` (the main topic and each retry topic); every
    /// one hands its records to `handler`. The topics must exist.
    pub fn start(
        bootstrap: &str,
        ladder: RetryLadder,
        handler: impl Handler,
        options: RetryOptions,
    ) -> Result<Self, ExampleError> {
        let ladder = Arc::new(ladder);
        let handler: Arc<dyn Handler> = Arc::new(handler);
        let shutdown = Arc::new(AtomicBool::new(false));
        let mut stages = Vec::new();
        for index in 0..=ladder.steps().len() {
            let topic = ladder.stage_topic(index).to_owned();
            let forwarder = Arc::new(Forwarder::new(bootstrap, &options.producer_properties)?);
            let context = StageContext {
                topic: topic.clone(),
                forwarder,
                produce_timeout: options.produce_timeout,
                uncommitted: Mutex::new(HashMap::new()),
                rebalanced: AtomicBool::new(false),
            };
            let mut config = ClientConfig::new();
            config
                .set("bootstrap.servers", bootstrap)
                .set("group.id", format!("{}.{topic}", options.group_id))
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest")
                .set("fetch.wait.max.ms", "100")
                .set("session.timeout.ms", "10000")
                .set("heartbeat.interval.ms", "1000");
            for (k, v) in &options.consumer_properties {
                config.set(k, v);
            }
            let consumer: BaseConsumer<StageContext> = config.create_with_context(context)?;
            stages.push(Stage {
                index,
                topic,
                ladder: ladder.clone(),
                handler: handler.clone(),
                consumer,
                options: options.clone(),
                counters: Arc::new(Counters::default()),
                shutdown: shutdown.clone(),
                waiting: HashMap::new(),
            });
        }
        let mut this = Self {
            threads: Vec::new(),
            counters: Vec::new(),
            shutdown,
        };
        for stage in stages {
            let name = if stage.index == 0 {
                "delivery-main".to_owned()
            } else {
                format!("delivery-retry-{}", stage.index)
            };
            this.counters.push((stage.topic.clone(), stage.counters.clone()));
            let topic = stage.topic.clone();
            let thread_topic = topic.clone();
            let shutdown = this.shutdown.clone();
            let join = std::thread::Builder::new().name(name).spawn(move || {
                let result = stage.run();
                if let Err(e) = &result {
                    tracing::error!(topic = %thread_topic, error = %e, "delivery consumer failed");
                    // One failed stage stops the others: the application is unhealthy.
                    shutdown.store(true, Ordering::Relaxed);
                }
                result
            })?;
            this.threads.push((topic, join));
        }
        Ok(this)
    }

    /// What the consumers did so far.
    pub fn stats(&self) -> DeliveryStats {
        let stages = self
            .counters
            .iter()
            .map(|(topic, c)| StageStats {
                topic: topic.clone(),
                delivered: c.delivered.load(Ordering::Relaxed),
                retried: c.retried.load(Ordering::Relaxed),
                dead_lettered: c.dead_lettered.load(Ordering::Relaxed),
                waits: c.waits.load(Ordering::Relaxed),
            })
            .collect();
        DeliveryStats { stages }
    }

    /// Whether every consumer thread is still running.
    pub fn is_running(&self) -> bool {
        !self.shutdown.load(Ordering::Relaxed) && self.threads.iter().all(|(_, t)| !t.is_finished())
    }

    /// Waits until `done(stats)` holds or `timeout` passes; returns the last stats and
    /// whether it held. Stops early (false) if a consumer failed.
    pub fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&DeliveryStats) -> bool,
    ) -> (DeliveryStats, bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let stats = self.stats();
            if done(&stats) {
                return (stats, true);
            }
            if Instant::now() >= deadline || !self.is_running() {
                return (stats, false);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the consumers (each commits what it handled and leaves its group) and returns
    /// the first error any of them failed with. Waits at most `timeout` for them.
    pub fn close(mut self, timeout: Duration) -> Result<(), ExampleError> {
        self.shutdown.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + timeout;
        let mut first_error = None;
        for (topic, t) in std::mem::take(&mut self.threads) {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !t.is_finished() {
                first_error.get_or_insert(ExampleError::Other(format!(
                    "consumer of {topic} did not stop in {timeout:?}"
                )));
                continue;
            }
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert(ExampleError::Other(format!("consumer of {topic} panicked")));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for RetryConsumers {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        for (_, t) in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for RetryConsumers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryConsumers")
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_names_and_order() {
        let l = RetryLadder::new("req", &[Duration::from_millis(5), Duration::from_millis(10)]);
        assert_eq!(l.topics(), vec!["req-retry-1", "req-retry-2", "req-dlq"]);
        assert_eq!(l.replay_topic(), "req-retry-1");
        assert_eq!(l.max_attempts(), 3);
        assert_eq!(l.stage_topic(0), "req");
        assert_eq!(l.stage_topic(2), "req-retry-2");
        assert_eq!(l.next_after(0).map(|s| s.topic.as_str()), Some("req-retry-1"));
        assert_eq!(l.next_after(2), None);
        assert_eq!(RetryLadder::new("x", &[]).replay_topic(), "x");
        let p = RetryLadder::production("web_hook_requests");
        assert_eq!(p.steps()[2].delay, Duration::from_secs(3600));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("250").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("m").is_err());
        assert_eq!(parse_delays("5m, 30m,1h").unwrap().len(), 3);
    }

    #[test]
    fn moved_headers_keep_the_original_and_replace_retry_headers() {
        let r = RetryRecord {
            topic: "req-retry-1".into(),
            partition: 2,
            offset: 9,
            timestamp: None,
            key: None,
            value: None,
            headers: vec![
                ("app".into(), Some(b"x".to_vec())),
                (HEADER_ATTEMPT.into(), Some(b"1".to_vec())),
                (HEADER_ORIGINAL_TOPIC.into(), Some(b"req".to_vec())),
                (HEADER_ORIGINAL_PARTITION.into(), Some(b"0".to_vec())),
                (HEADER_ORIGINAL_OFFSET.into(), Some(b"4".to_vec())),
            ],
        };
        assert_eq!(r.attempt(), 1);
        assert_eq!(r.original_topic(), "req");
        let h = r.moved_headers(&[(HEADER_ATTEMPT, "2".into())]);
        let got: Vec<(String, String)> = h
            .iter()
            .map(|h| {
                (
                    h.key.to_owned(),
                    String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned(),
                )
            })
            .collect();
        let want = [
            ("app", "x"),
            (HEADER_ORIGINAL_TOPIC, "req"),
            (HEADER_ORIGINAL_PARTITION, "0"),
        ];
        for (k, v) in want {
            assert!(got.contains(&(k.to_owned(), v.to_owned())), "{got:?}");
        }
        assert!(got.contains(&(HEADER_ORIGINAL_OFFSET.to_owned(), "4".to_owned())));
        assert_eq!(got.iter().filter(|(k, _)| k == HEADER_ATTEMPT).count(), 1);
        assert!(got.contains(&(HEADER_ATTEMPT.to_owned(), "2".to_owned())));
    }
}
