//! Helpers for tests that talk to a Kafka broker: finding the broker, fresh names, and
//! synchronous, time-bounded topic creation, producing and consuming.
//!
//! The test broker is described by two environment variables, both set by `scripts/test.sh`
//! (see `docs/kafka-for-tests.md`):
//!
//! - [`BOOTSTRAP_ENV`] (`STREAMS_TEST_BOOTSTRAP`): the bootstrap servers, e.g. `127.0.0.1:9092`.
//! - [`REQUIRE_KAFKA_ENV`] (`STREAMS_REQUIRE_KAFKA`): when `1`, a Kafka test without a broker
//!   fails instead of being skipped, so a CI run can never pass by skipping everything.
//!
//! Every Kafka test starts with [`require_kafka`]:
//!
//! ```no_run
//! use std::time::Duration;
//! use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};
//!
//! let Some(bootstrap) = kafka::require_kafka("my_kafka_test") else {
//!     return Ok(());
//! };
//! let topic = kafka::unique_name("my-topic");
//! kafka::create_topic(&bootstrap, &topic, 1, &[])?;
//! kafka::produce(&bootstrap, &topic, &[ProduceRecord::new("k", "v")], Duration::from_secs(30))?;
//! let records = kafka::consume_all(
//!     &bootstrap,
//!     &topic,
//!     ConsumeUntil::Count(1),
//!     Duration::from_secs(30),
//!     false,
//! )?;
//! assert_eq!(records[0].value.as_deref(), Some(&b"v"[..]));
//! # Ok::<(), streams_test_utils::kafka::TestKafkaError>(())
//! ```
//!
//! Every function here is bounded in time: a dead or unreachable broker makes it return a
//! [`TestKafkaError`] after its timeout, never hang. The functions block the calling thread,
//! so call them from synchronous tests (or from `spawn_blocking` in async ones).
//!
//! The helpers work against librdkafka's in-process mock cluster
//! ([`rdkafka::mocking::MockCluster`]) too, except [`create_topic`]: the mock does not serve
//! the CreateTopics admin request, use `MockCluster::create_topic` there.

pub mod acl;
pub mod secure;

use std::future::Future;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaErrorCode;

/// Environment variable holding the test broker's bootstrap servers (`host:port[,host:port]`).
pub const BOOTSTRAP_ENV: &str = "STREAMS_TEST_BOOTSTRAP";

/// Environment variable that, when `1` (or `true`/`yes`), makes a Kafka test without a broker
/// fail instead of skipping.
pub const REQUIRE_KAFKA_ENV: &str = "STREAMS_REQUIRE_KAFKA";

/// A generous default bound for one helper call against a healthy local broker.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Kafka's limit on the length of a topic name.
const MAX_TOPIC_NAME_LEN: usize = 249;

/// Extra time given to a future whose client-side request timeout is already set, before
/// [`block_on_timeout`] gives up on it.
const GRACE: Duration = Duration::from_secs(5);

/// How long one metadata request may take inside the polling loops below.
const METADATA_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What went wrong in a test helper.
#[derive(Debug, thiserror::Error)]
pub enum TestKafkaError {
    /// The Kafka client reported an error.
    #[error("kafka client error: {0}")]
    Kafka(#[from] KafkaError),
    /// An operation did not finish within its time bound.
    #[error("timed out after {after:?}: {what}")]
    Timeout {
        /// What was being waited for, with the progress made.
        what: String,
        /// The bound that ran out.
        after: Duration,
    },
    /// The broker answered, but with a failure.
    #[error("{what}: {detail}")]
    Failed {
        /// The operation that failed.
        what: String,
        /// The broker's or client's explanation.
        detail: String,
    },
}

/// Result of the helpers in this module.
pub type TestResult<T> = Result<T, TestKafkaError>;

fn timeout_error(what: impl Into<String>, after: Duration) -> TestKafkaError {
    TestKafkaError::Timeout {
        what: what.into(),
        after,
    }
}

/// The test broker's bootstrap servers from [`BOOTSTRAP_ENV`], if set and not blank.
pub fn kafka_bootstrap() -> Option<String> {
    std::env::var(BOOTSTRAP_ENV)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Whether [`REQUIRE_KAFKA_ENV`] asks for Kafka tests to fail rather than skip without a broker.
pub fn kafka_required() -> bool {
    std::env::var(REQUIRE_KAFKA_ENV)
        .map(|v| {
            let v = v.trim();
            v == "1" || v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("yes")
        })
        .unwrap_or(false)
}

/// The first line of every test that needs a real broker.
///
/// Returns the bootstrap servers when [`BOOTSTRAP_ENV`] is set. Otherwise it prints
/// `SKIPPED <test>: no Kafka broker (...)` to stderr (past the test harness's output
/// capture, so it shows in every run) and returns `None`, so the test can
/// `return` early: `let Some(bootstrap) = require_kafka("name") else { return; };`.
///
/// # Panics
///
/// When no broker is configured but [`REQUIRE_KAFKA_ENV`] is `1`: there the test must fail
/// rather than pass silently.
pub fn require_kafka(test: &str) -> Option<String> {
    if let Some(bootstrap) = kafka_bootstrap() {
        return Some(bootstrap);
    }
    if kafka_required() {
        panic!(
            "{test}: {REQUIRE_KAFKA_ENV}=1 but {BOOTSTRAP_ENV} is not set, so there is no Kafka \
             broker to test against (run `bash scripts/test.sh`, or `bash scripts/kafka.sh start` \
             and export {BOOTSTRAP_ENV}=127.0.0.1:9092)"
        );
    }
    // Written to the real stderr rather than with `eprintln!`, which the test harness
    // captures and only shows for failing tests: a skip must be visible in every run.
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(
        stderr,
        "SKIPPED {test}: no Kafka broker (set {BOOTSTRAP_ENV} or run scripts/test.sh)"
    );
    None
}

/// The start of the minute `minutes_ago` minutes before now, in epoch milliseconds: a record
/// timestamp for tests of windowed state.
///
/// Use recent timestamps with a real broker: it deletes a segment whose newest record is
/// older than the topic's `retention.ms`, and a window store's changelog (`compact,delete`,
/// retention + 1 day) is trimmed by the log cleaner while the test runs when its records
/// carry timestamps from years ago.
pub fn recent_minute(minutes_ago: i64) -> i64 {
    const MINUTE: i64 = 60_000;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    now - now.rem_euclid(MINUTE) - minutes_ago * MINUTE
}

/// A name no other test (in this or any other process) uses: `prefix-pid-nanos-counter`.
///
/// Use it for topics, consumer groups, application and transactional ids so tests sharing
/// one broker never see each other's data. Characters Kafka does not allow in topic names
/// are replaced by `_`, and the result is at most 249 characters long.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let suffix = format!("-{}-{nanos}-{n}", std::process::id());
    let prefix: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TOPIC_NAME_LEN.saturating_sub(suffix.len()))
        .collect();
    format!("{prefix}{suffix}")
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` on the current thread until it completes or `timeout` passes (`None`).
///
/// A minimal executor for futures that other threads complete, such as rdkafka's admin
/// and `FutureProducer` futures. It does not drive tokio resources (timers, sockets), and
/// it works inside or outside a tokio runtime alike (it only blocks the calling thread).
pub fn block_on_timeout<F: Future>(future: F, timeout: Duration) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let deadline = Instant::now() + timeout;
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return Some(output);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout(deadline - now);
    }
}

/// Client settings shared by the test clients: quick reconnects, bounded socket waits.
fn base_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("socket.timeout.ms", "10000")
        .set("reconnect.backoff.ms", "50")
        .set("reconnect.backoff.max.ms", "1000")
        .set("retry.backoff.ms", "50");
    config
}

/// Producer settings for tests: idempotent (so `acks=all`), no batching delay, keys placed
/// by murmur2 (as Java producers and the runtime place them), and a
/// delivery timeout of [`DEFAULT_TIMEOUT`]. Add `transactional.id` for a transactional producer.
pub fn producer_config(bootstrap: &str) -> ClientConfig {
    let mut config = base_config(bootstrap);
    config
        .set("enable.idempotence", "true")
        .set("linger.ms", "0")
        // Keys placed as Java producers and the runtime's sinks place them, so topics
        // written by tests are co-partitioned with the application's own topics.
        .set("partitioner", "murmur2_random")
        .set("message.timeout.ms", DEFAULT_TIMEOUT.as_millis().to_string());
    config
}

/// Consumer settings for tests: the given group, no auto commit, reading from the earliest
/// offset, and the classic group protocol with a 6 s session timeout and 500 ms heartbeats,
/// so groups form and notice a dead member quickly. Fetches return after at most 100 ms.
pub fn consumer_config(bootstrap: &str, group_id: &str) -> ClientConfig {
    let mut config = base_config(bootstrap);
    config
        .set("group.id", group_id)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("fetch.wait.max.ms", "100")
        .set("topic.metadata.refresh.interval.ms", "2000");
    config
}

/// Deletes the records of `topic`-`partition` before offset `before` (`DeleteRecords`): the
/// partition's log start offset becomes `before`, as after retention. A compacted topic
/// refuses it. Bounded by [`DEFAULT_TIMEOUT`].
pub fn delete_records(bootstrap: &str, topic: &str, partition: i32, before: i64) -> TestResult<()> {
    let what = format!("deleting the records of {topic}-{partition} before {before}");
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap).create()?;
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, rdkafka::Offset::Offset(before))?;
    let options = AdminOptions::new().request_timeout(Some(DEFAULT_TIMEOUT));
    let result = block_on_timeout(admin.delete_records(&tpl, &options), DEFAULT_TIMEOUT + GRACE)
        .ok_or_else(|| timeout_error(what.clone(), DEFAULT_TIMEOUT + GRACE))?
        .map_err(|e| TestKafkaError::Failed {
            what: what.clone(),
            detail: e.to_string(),
        })?;
    for e in result.elements() {
        if let Err(err) = e.error() {
            return Err(TestKafkaError::Failed {
                what,
                detail: err.to_string(),
            });
        }
    }
    Ok(())
}

/// Creates `name` with `partitions` partitions, the broker's default replication factor and
/// the given topic configs, then waits until every partition has a leader.
///
/// Bounded by [`DEFAULT_TIMEOUT`]. An existing topic of that name is an error: use
/// [`unique_name`]. Does not work on librdkafka's mock cluster (use `MockCluster::create_topic`).
pub fn create_topic(bootstrap: &str, name: &str, partitions: i32, config: &[(&str, &str)]) -> TestResult<()> {
    let what = format!("creating topic {name} ({partitions} partitions)");
    let started = Instant::now();
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap).create()?;
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(-1));
    for (key, value) in config {
        topic = topic.set(key, value);
    }
    let options = AdminOptions::new()
        .request_timeout(Some(DEFAULT_TIMEOUT))
        .operation_timeout(Some(DEFAULT_TIMEOUT));
    let results = block_on_timeout(admin.create_topics([&topic], &options), DEFAULT_TIMEOUT + GRACE)
        .ok_or_else(|| timeout_error(what.clone(), DEFAULT_TIMEOUT + GRACE))?
        .map_err(|e| TestKafkaError::Failed {
            what: what.clone(),
            detail: e.to_string(),
        })?;
    for result in results {
        if let Err((topic, code)) = result {
            return Err(TestKafkaError::Failed {
                what: format!("creating topic {topic}"),
                detail: format!("{code:?}: {code}"),
            });
        }
    }
    let remaining = DEFAULT_TIMEOUT.saturating_sub(started.elapsed());
    wait_for_topic(bootstrap, name, partitions.max(0) as usize, remaining.max(GRACE))
}

/// Waits until the broker's metadata lists `topic` with at least `partitions` partitions,
/// each with a leader; returns the partition count.
fn topic_partitions<C: rdkafka::consumer::ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partitions: usize,
    deadline: Instant,
    timeout: Duration,
) -> TestResult<usize> {
    loop {
        let request_timeout = deadline
            .saturating_duration_since(Instant::now())
            .min(METADATA_REQUEST_TIMEOUT)
            .max(Duration::from_millis(100));
        let last = match consumer.fetch_metadata(Some(topic), request_timeout) {
            Ok(metadata) => match metadata.topics().iter().find(|t| t.name() == topic) {
                Some(t) if t.error().is_some() => {
                    format!("topic error {:?}", t.error().map(RDKafkaErrorCode::from))
                }
                Some(t) => {
                    let led = t.partitions().iter().filter(|p| p.leader() >= 0).count();
                    if t.partitions().len() >= partitions.max(1) && led == t.partitions().len() {
                        return Ok(t.partitions().len());
                    }
                    format!("{} partitions, {led} with a leader", t.partitions().len())
                }
                None => "topic not in metadata".to_owned(),
            },
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(timeout_error(
                format!("waiting for topic {topic} ({partitions} partitions with leaders; last: {last})"),
                timeout,
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until `topic` exists with at least `partitions` partitions, each with a leader.
///
/// Useful for topics created by someone else (an application, or auto-creation).
pub fn wait_for_topic(bootstrap: &str, topic: &str, partitions: usize, timeout: Duration) -> TestResult<()> {
    let consumer: BaseConsumer = base_config(bootstrap).create()?;
    topic_partitions(&consumer, topic, partitions, Instant::now() + timeout, timeout).map(|_| ())
}

/// One record for [`produce`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProduceRecord {
    /// The key, or `None` for a keyless record.
    pub key: Option<Vec<u8>>,
    /// The value, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// The partition, or `None` to let the default partitioner choose.
    pub partition: Option<i32>,
    /// The timestamp in milliseconds since the epoch, or `None` for the producer's clock.
    pub timestamp: Option<i64>,
    /// Headers in order; a header value may be null.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl ProduceRecord {
    /// A record with a key and a value.
    pub fn new(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Self {
        Self {
            key: Some(key.as_ref().to_vec()),
            value: Some(value.as_ref().to_vec()),
            ..Self::default()
        }
    }

    /// A record with a value and no key.
    pub fn keyless(value: impl AsRef<[u8]>) -> Self {
        Self {
            value: Some(value.as_ref().to_vec()),
            ..Self::default()
        }
    }

    /// A tombstone: a key and a null value.
    pub fn tombstone(key: impl AsRef<[u8]>) -> Self {
        Self {
            key: Some(key.as_ref().to_vec()),
            ..Self::default()
        }
    }

    /// Sends the record to the given partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the record's timestamp (milliseconds since the epoch).
    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    /// Appends a header.
    pub fn with_header(mut self, key: impl Into<String>, value: Option<&[u8]>) -> Self {
        self.headers.push((key.into(), value.map(<[u8]>::to_vec)));
        self
    }
}

/// Collects the delivery report of each record, by its index in the batch.
struct DeliveryCollector {
    reports: Mutex<Vec<DeliveryReport>>,
}

/// One record's delivery: `(partition, offset)` or the error, `None` while pending.
type DeliveryReport = Option<Result<(i32, i64), String>>;

impl ClientContext for DeliveryCollector {}

impl ProducerContext for DeliveryCollector {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, index: usize) {
        let report = match result {
            Ok(message) => Ok((message.partition(), message.offset())),
            Err((error, _)) => Err(error.to_string()),
        };
        let mut reports = self.reports.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = reports.get_mut(index) {
            *slot = Some(report);
        }
    }
}

fn owned_headers(headers: &[(String, Option<Vec<u8>>)]) -> Option<OwnedHeaders> {
    if headers.is_empty() {
        return None;
    }
    let mut owned = OwnedHeaders::new_with_capacity(headers.len());
    for (key, value) in headers {
        owned = owned.insert(Header {
            key,
            value: value.as_deref(),
        });
    }
    Some(owned)
}

/// Produces `records` to `topic` with an idempotent producer ([`producer_config`]) and waits
/// for every delivery report; returns each record's `(partition, offset)`, in order.
///
/// Fails when any record is not acknowledged within `timeout`.
pub fn produce(
    bootstrap: &str,
    topic: &str,
    records: &[ProduceRecord],
    timeout: Duration,
) -> TestResult<Vec<(i32, i64)>> {
    let deadline = Instant::now() + timeout;
    let mut config = producer_config(bootstrap);
    config.set("message.timeout.ms", timeout.as_millis().max(1).to_string());
    let context = DeliveryCollector {
        reports: Mutex::new(vec![None; records.len()]),
    };
    let producer: BaseProducer<DeliveryCollector> = config.create_with_context(context)?;
    for (index, record) in records.iter().enumerate() {
        let mut base = BaseRecord::with_opaque_to(topic, index);
        if let Some(key) = &record.key {
            base = base.key(key.as_slice());
        }
        if let Some(value) = &record.value {
            base = base.payload(value.as_slice());
        }
        if let Some(partition) = record.partition {
            base = base.partition(partition);
        }
        if let Some(timestamp) = record.timestamp {
            base = base.timestamp(timestamp);
        }
        if let Some(headers) = owned_headers(&record.headers) {
            base = base.headers(headers);
        }
        loop {
            match producer.send(base) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), returned)) => {
                    if Instant::now() >= deadline {
                        return Err(timeout_error(
                            format!("producing to {topic}: local queue stayed full"),
                            timeout,
                        ));
                    }
                    base = returned;
                    producer.poll(Duration::from_millis(50));
                }
                Err((error, _)) => return Err(error.into()),
            }
        }
    }
    let remaining = deadline.saturating_duration_since(Instant::now());
    let flushed = producer.flush(remaining);
    let reports = std::mem::take(
        &mut *producer
            .context()
            .reports
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    let mut offsets = Vec::with_capacity(reports.len());
    for (index, report) in reports.into_iter().enumerate() {
        match report {
            Some(Ok(position)) => offsets.push(position),
            Some(Err(error)) => {
                return Err(TestKafkaError::Failed {
                    what: format!("producing record {index} to {topic}"),
                    detail: error,
                });
            }
            None => {
                let detail = flushed
                    .as_ref()
                    .err()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                return Err(timeout_error(
                    format!("producing to {topic}: record {index} was not acknowledged ({detail})"),
                    timeout,
                ));
            }
        }
    }
    Ok(offsets)
}

/// A record read by [`consume_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    /// The key, if any.
    pub key: Option<Vec<u8>>,
    /// The value, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// The partition it was read from.
    pub partition: i32,
    /// Its offset in that partition.
    pub offset: i64,
    /// Its timestamp in milliseconds since the epoch, if it has one.
    pub timestamp: Option<i64>,
    /// Its headers, in order.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl ConsumedRecord {
    /// The key as UTF-8 text (lossy), for readable assertions.
    pub fn key_str(&self) -> Option<String> {
        self.key
            .as_deref()
            .map(|k| String::from_utf8_lossy(k).into_owned())
    }

    /// The value as UTF-8 text (lossy), for readable assertions.
    pub fn value_str(&self) -> Option<String> {
        self.value
            .as_deref()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The value of the first header named `name`, as UTF-8 text (lossy).
    pub fn header_str(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }
}

/// The context of [`consume_all`]'s consumer: the end-of-partition events it asks for
/// are how it stops, not errors; other client errors are transient (librdkafka retries).
struct ReaderContext;

impl rdkafka::ClientContext for ReaderContext {
    fn error(&self, error: KafkaError, reason: &str) {
        if !matches!(
            error,
            KafkaError::Global(rdkafka::types::RDKafkaErrorCode::PartitionEOF)
        ) {
            tracing::warn!(error = %error, "test reader: {reason}");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for ReaderContext {}

/// When [`consume_all`] stops reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeUntil {
    /// After this many records; fewer by the timeout is an error.
    Count(usize),
    /// Once every partition has been read to its end (for `read_committed`, to the last
    /// stable offset) and then no record arrived for this long. `Idle(Duration::ZERO)` stops as
    /// soon as the end of every partition is reached.
    Idle(Duration),
}

/// Reads `topic` from the beginning of every partition, without joining a group (nothing
/// is committed), until `until` is met; `timeout` bounds the whole call, including waiting
/// for the topic to appear.
///
/// With `read_committed` it reads with `isolation.level=read_committed`: records of open or
/// aborted transactions are not returned. Records come in per-partition offset order.
pub fn consume_all(
    bootstrap: &str,
    topic: &str,
    until: ConsumeUntil,
    timeout: Duration,
    read_committed: bool,
) -> TestResult<Vec<ConsumedRecord>> {
    let deadline = Instant::now() + timeout;
    let isolation = if read_committed {
        "read_committed"
    } else {
        "read_uncommitted"
    };
    let mut config = consumer_config(bootstrap, &unique_name("streams-test-reader"));
    config
        .set("isolation.level", isolation)
        .set("enable.partition.eof", "true");
    let consumer: BaseConsumer<ReaderContext> = config.create_with_context(ReaderContext)?;
    let partitions = topic_partitions(&consumer, topic, 1, deadline, timeout)?;
    let partitions = i32::try_from(partitions).unwrap_or(i32::MAX);
    let mut assignment = TopicPartitionList::with_capacity(partitions.max(0) as usize);
    for partition in 0..partitions {
        assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;

    let mut records = Vec::new();
    let mut at_end = vec![false; partitions.max(0) as usize];
    let mut last_activity = Instant::now();
    loop {
        if let ConsumeUntil::Count(n) = until
            && records.len() >= n
        {
            return Ok(records);
        }
        if let ConsumeUntil::Idle(idle) = until
            && at_end.iter().all(|&end| end)
            && last_activity.elapsed() >= idle
        {
            return Ok(records);
        }
        let now = Instant::now();
        if now >= deadline {
            let wanted = match until {
                ConsumeUntil::Count(n) => format!("{n} records"),
                ConsumeUntil::Idle(_) => format!(
                    "the end of all partitions ({} of {} reached)",
                    at_end.iter().filter(|&&end| end).count(),
                    at_end.len()
                ),
            };
            return Err(timeout_error(
                format!(
                    "reading {wanted} from {topic} ({isolation}); got {} records",
                    records.len()
                ),
                timeout,
            ));
        }
        let wait = (deadline - now).min(Duration::from_millis(100));
        match consumer.poll(wait) {
            None => {}
            Some(Ok(message)) => {
                let headers = message
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|header| (header.key.to_owned(), header.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some(end) = usize::try_from(message.partition())
                    .ok()
                    .and_then(|p| at_end.get_mut(p))
                {
                    *end = false;
                }
                records.push(ConsumedRecord {
                    key: message.key().map(<[u8]>::to_vec),
                    value: message.payload().map(<[u8]>::to_vec),
                    partition: message.partition(),
                    offset: message.offset(),
                    timestamp: message.timestamp().to_millis(),
                    headers,
                });
                last_activity = Instant::now();
            }
            Some(Err(KafkaError::PartitionEOF(partition))) => {
                if let Some(end) = usize::try_from(partition).ok().and_then(|p| at_end.get_mut(p)) {
                    *end = true;
                }
                last_activity = last_activity.max(Instant::now());
            }
            // Transient errors (a broker going away, a leader moving) are retried by the
            // client; a broker that stays away ends the loop at the deadline.
            Some(Err(_)) => {}
        }
    }
}

/// The offsets `group_id` has committed for each partition of `topic` (`None` where it has
/// committed nothing), in partition order.
pub fn committed_offsets(
    bootstrap: &str,
    group_id: &str,
    topic: &str,
    timeout: Duration,
) -> TestResult<Vec<(i32, Option<i64>)>> {
    CommittedReader::new(bootstrap, group_id, topic).read(timeout)
}

/// Reads a group's committed offsets of one topic again and again through one client, as a
/// test waiting for a group to commit does every few hundred milliseconds: a client made
/// for each read costs the cluster new connections and a metadata round each time, and
/// on a cluster busy recovering from a fault such reads can time out while the group
/// commits. A failed read drops the client; the next read makes a new one.
pub struct CommittedReader {
    bootstrap: String,
    group_id: String,
    topic: String,
    /// The client and the topic's partition count, once known.
    client: Option<(BaseConsumer, i32)>,
}

impl CommittedReader {
    /// A reader of `group_id`'s committed offsets of `topic`; connects at the first read.
    pub fn new(bootstrap: &str, group_id: &str, topic: &str) -> Self {
        Self {
            bootstrap: bootstrap.to_owned(),
            group_id: group_id.to_owned(),
            topic: topic.to_owned(),
            client: None,
        }
    }

    /// The offsets committed for each partition (`None` where nothing is), in partition
    /// order; the whole read takes at most about `timeout`.
    pub fn read(&mut self, timeout: Duration) -> TestResult<Vec<(i32, Option<i64>)>> {
        let read = self.read_with_client(timeout);
        if read.is_err() {
            self.client = None;
        }
        read
    }

    fn read_with_client(&mut self, timeout: Duration) -> TestResult<Vec<(i32, Option<i64>)>> {
        let deadline = Instant::now() + timeout;
        let (consumer, partitions) = match self.client.take() {
            Some(client) => client,
            None => {
                // `read_committed` (librdkafka's default) asks the broker for stable offsets,
                // which it refuses (UNSTABLE_OFFSET_COMMIT, retried until the timeout) while
                // any requested partition has a transactional offset commit pending: under
                // exactly-once on a loaded cluster, nearly always. A read that ignores the
                // pending commits still returns only offsets of committed transactions.
                let consumer: BaseConsumer = consumer_config(&self.bootstrap, &self.group_id)
                    .set("isolation.level", "read_uncommitted")
                    .create()?;
                let partitions = topic_partitions(&consumer, &self.topic, 1, deadline, timeout)?;
                (consumer, i32::try_from(partitions).unwrap_or(i32::MAX))
            }
        };
        let consumer = &self.client.insert((consumer, partitions)).0;
        let mut request = TopicPartitionList::new();
        request.add_partition_range(&self.topic, 0, partitions - 1);
        let remaining = deadline.saturating_duration_since(Instant::now());
        let committed = consumer.committed_offsets(request, remaining.max(Duration::from_millis(100)))?;
        let mut offsets: Vec<(i32, Option<i64>)> = committed
            .elements_for_topic(&self.topic)
            .iter()
            .map(|e| match e.offset() {
                Offset::Offset(offset) => (e.partition(), Some(offset)),
                _ => (e.partition(), None),
            })
            .collect();
        offsets.sort_unstable();
        Ok(offsets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_differ_and_are_valid_topic_names() {
        let a = unique_name("orders in/€");
        let b = unique_name("orders in/€");
        assert_ne!(a, b);
        assert!(a.starts_with("orders_in__-"), "{a}");
        assert!(
            a.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        );
        let long = unique_name(&"x".repeat(400));
        assert_eq!(long.len(), MAX_TOPIC_NAME_LEN);
    }

    #[test]
    fn block_on_timeout_returns_ready_value_and_times_out_on_pending() {
        assert_eq!(block_on_timeout(async { 7 }, Duration::from_millis(10)), Some(7));
        let started = Instant::now();
        let pending = block_on_timeout(std::future::pending::<()>(), Duration::from_millis(50));
        assert_eq!(pending, None);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn block_on_timeout_is_woken_by_another_thread() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        struct Recv(std::sync::mpsc::Receiver<()>, Arc<Mutex<Option<Waker>>>);
        impl Future for Recv {
            type Output = ();
            fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
                *self.1.lock().unwrap_or_else(PoisonError::into_inner) = Some(cx.waker().clone());
                match self.0.try_recv() {
                    Ok(()) => Poll::Ready(()),
                    Err(_) => Poll::Pending,
                }
            }
        }
        let slot = Arc::new(Mutex::new(None::<Waker>));
        let waker_slot = Arc::clone(&slot);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(()).ok();
            if let Some(w) = waker_slot.lock().unwrap_or_else(PoisonError::into_inner).take() {
                w.wake();
            }
        });
        assert_eq!(
            block_on_timeout(Recv(rx, slot), Duration::from_secs(10)),
            Some(())
        );
        sender.join().ok();
    }

    #[test]
    fn produce_record_builders() {
        let r = ProduceRecord::new("k", "v")
            .with_partition(2)
            .with_timestamp(5)
            .with_header("h", Some(b"x"));
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(r.partition, Some(2));
        assert_eq!(r.headers, vec![("h".to_owned(), Some(b"x".to_vec()))]);
        assert_eq!(ProduceRecord::tombstone("k").value, None);
        assert_eq!(ProduceRecord::keyless("v").key, None);
    }
}
