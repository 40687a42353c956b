//! Reading a topic back without joining a group: [`consume_all`] and the
//! [`ConsumedRecord`]s it returns.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::client_config::consumer_config;
use super::error::{TestResult, timeout_error};
use super::naming::unique_name;
use super::topics::topic_partitions;

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

/// The consumer's `isolation.level`: `read_committed` when `read_committed`, else
/// `read_uncommitted`.
pub fn isolation_level(read_committed: bool) -> &'static str {
    if read_committed {
        "read_committed"
    } else {
        "read_uncommitted"
    }
}

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
    let isolation = isolation_level(read_committed);
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

/// What `topic` holds now: [`consume_all`] until the end of every partition is reached
/// (`ConsumeUntil::Idle(Duration::ZERO)`), within `timeout`.
pub fn read_to_end(
    bootstrap: &str,
    topic: &str,
    timeout: Duration,
    read_committed: bool,
) -> TestResult<Vec<ConsumedRecord>> {
    consume_all(
        bootstrap,
        topic,
        ConsumeUntil::Idle(Duration::ZERO),
        timeout,
        read_committed,
    )
}
