//! Topic administration: creating a topic, waiting for one to be ready, deleting records.

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;

use super::blocking::{DEFAULT_TIMEOUT, GRACE, block_on_timeout};
use super::client_config::base_config;
use super::error::{TestKafkaError, TestResult, timeout_error};

/// How long one metadata request may take inside the polling loops below.
const METADATA_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

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
/// [`unique_name`](super::unique_name). Does not work on librdkafka's mock cluster (use `MockCluster::create_topic`).
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
pub(super) fn topic_partitions<C: rdkafka::consumer::ConsumerContext>(
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

/// The low and high watermarks of `topic`-`partition`: the log start offset (where the
/// records deleted by retention or `DeleteRecords` end) and the offset the next record gets.
/// Bounded by [`DEFAULT_TIMEOUT`].
pub fn watermarks(bootstrap: &str, topic: &str, partition: i32) -> TestResult<(i64, i64)> {
    offsets_as(bootstrap, topic, partition, false)
}

/// The last stable offset of `topic`-`partition`: where a `read_committed` reader stops,
/// before the first record of a transaction still open (the high watermark where none
/// is). Bounded by [`DEFAULT_TIMEOUT`].
pub fn last_stable_offset(bootstrap: &str, topic: &str, partition: i32) -> TestResult<i64> {
    offsets_as(bootstrap, topic, partition, true).map(|(_, stable)| stable)
}

/// The log start offset and the latest offset of `topic`-`partition` as a reader sees
/// them: the broker answers the last stable offset to a `read_committed` client
/// (librdkafka's default), the high watermark to a `read_uncommitted` one.
fn offsets_as(bootstrap: &str, topic: &str, partition: i32, read_committed: bool) -> TestResult<(i64, i64)> {
    let consumer: BaseConsumer = base_config(bootstrap)
        .set("isolation.level", super::consume::isolation_level(read_committed))
        .create()?;
    consumer
        .fetch_watermarks(topic, partition, DEFAULT_TIMEOUT)
        .map_err(|e| TestKafkaError::Failed {
            what: format!("reading the offsets of {topic}-{partition}"),
            detail: e.to_string(),
        })
}

/// The names of the topics on the cluster that start with `prefix` (an application's
/// internal topics, for `<application.id>-`), sorted. Bounded by [`DEFAULT_TIMEOUT`].
pub fn topics_with_prefix(bootstrap: &str, prefix: &str) -> TestResult<Vec<String>> {
    let consumer: BaseConsumer = base_config(bootstrap).create()?;
    let metadata = consumer
        .fetch_metadata(None, DEFAULT_TIMEOUT)
        .map_err(|e| TestKafkaError::Failed {
            what: "reading the cluster's topics".to_owned(),
            detail: e.to_string(),
        })?;
    let mut topics: Vec<String> = metadata
        .topics()
        .iter()
        .map(|t| t.name().to_owned())
        .filter(|t| t.starts_with(prefix))
        .collect();
    topics.sort();
    Ok(topics)
}
