//! The stream thread's producer: the record collector of its tasks and the changelog sink
//! of their stores.
//!
//! Sends are asynchronous; the producer's own thread reports deliveries to
//! [`DeliveryTracker`], which keeps the first error and the last offset written to each
//! changelog partition (the offsets that at-least-once checkpoints record). The tracker's
//! lock is taken on the producer's delivery thread and at commit, never on the processing
//! path.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{DeliveryResult, Producer, ProducerContext, ThreadedProducer};

use crate::model::record::{Headers, RawRecord};

/// What the producer's deliveries reported.
#[derive(Default)]
pub(crate) struct Deliveries {
    /// The first failed delivery of an output record since the last commit (unless the
    /// failed records are kept for the dead-letter topic).
    pub error: Option<String>,
    /// The first failed changelog write since the last commit: always fatal, since the
    /// store would otherwise hold state its changelog lacks.
    pub changelog_error: Option<String>,
    /// Output records that failed, with the error, kept for the dead-letter topic.
    pub failed_records: Vec<(RawRecord, String)>,
    /// The last offset written to each changelog partition.
    pub changelog_offsets: HashMap<(String, i32), i64>,
    /// Records that failed to produce, for metrics.
    pub failed: u64,
    /// The first record the principal was not authorized to write: its topic and the
    /// error. Always fatal, whatever the production handler says (retrying cannot help).
    pub denied: Option<(String, RDKafkaErrorCode)>,
    /// Exactly-once: the first record that failed for a passing reason (a broker down, a
    /// timeout). Its transaction is aborted and processed again; no handler is asked.
    pub transient: Option<String>,
    /// Exactly-once: output records an abort purged (never refused), up to
    /// [`PURGED_KEPT`]. A transaction can fail for a record before its delivery does (the
    /// coordinator refuses to add a deleted topic's partition to it): the recovery then
    /// looks for the cause among these (`txn_failure.rs`).
    pub purged: Vec<RawRecord>,
}

/// How many purged output records [`Deliveries::purged`] keeps; the records of a still
/// missing topic beyond it fail the next transaction and are found then.
const PURGED_KEPT: usize = 10_000;

/// The failures [`Deliveries`] gathered since they were last taken.
pub(crate) struct Failures {
    pub error: Option<String>,
    pub changelog_error: Option<String>,
    pub failed_records: Vec<(RawRecord, String)>,
    pub denied: Option<(String, RDKafkaErrorCode)>,
    pub transient: Option<String>,
    pub purged: Vec<RawRecord>,
}

impl Deliveries {
    /// Takes the failures gathered so far; the next ones start afresh.
    pub fn take_failures(&mut self) -> Failures {
        Failures {
            error: self.error.take(),
            changelog_error: self.changelog_error.take(),
            failed_records: std::mem::take(&mut self.failed_records),
            denied: self.denied.take(),
            transient: self.transient.take(),
            purged: std::mem::take(&mut self.purged),
        }
    }

    /// Notes a refusal of `topic` when `e` is an authorization error; returns whether it was.
    pub fn note_denied(&mut self, topic: &str, e: &KafkaError) -> bool {
        match e.rdkafka_error_code() {
            Some(code) if crate::runtime::client::connect::is_authorization(code) => {
                self.denied.get_or_insert_with(|| (topic.to_owned(), code));
                true
            }
            _ => false,
        }
    }
}

/// The producer context: tracks deliveries.
#[derive(Clone, Default)]
pub(crate) struct DeliveryTracker {
    pub state: Arc<Mutex<Deliveries>>,
    /// Keep failed output records (the production handler is `dead_letter_queue`, or the
    /// producer is transactional: see `skips.rs`).
    pub keep_failed: bool,
    /// Nanoseconds sends waited for room in the producer's full queue, in all.
    pub queue_full_nanos: Arc<AtomicU64>,
    /// The producer is transactional (exactly-once).
    pub transactional: bool,
    /// Exactly-once: the open transaction can no longer commit (a record of it failed, or
    /// a send found the transaction in its error state). Either guarantee: the producer
    /// raised a fatal error and sends nothing more. The tasks then restart from the last
    /// commit (`recover.rs`). Read after each record processed; set on the producer's
    /// thread or by a send.
    pub txn_failed: Arc<AtomicBool>,
    /// Exactly-once: failed records to skip or dead-letter when they are sent again.
    pub skips: Arc<crate::runtime::produce::skips::Skips>,
}

impl DeliveryTracker {
    /// Notes a send that failed with `e`: under exactly-once, a send that
    /// [fails the transaction](fails_transaction); under at-least-once, a producer that
    /// raised a fatal error.
    pub(crate) fn note_send_error(&self, e: &KafkaError) {
        let failed = if self.transactional {
            fails_transaction(e)
        } else {
            is_fatal_send(e)
        };
        if failed {
            self.txn_failed.store(true, Ordering::Release);
        }
    }
}

/// Whether a refused send says the open transaction has failed rather than the record:
/// "Erroneous state" (an earlier record failed it; the cause comes with a delivery report)
/// or "Fatal" (the producer raised a fatal error, such as an out-of-order sequence number
/// after a broker dropped a connection mid-batch, and can no longer be used). Either way
/// the transaction is aborted, or the producer made again, and its input processed again;
/// the record goes to no handler.
pub(crate) fn fails_transaction(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::State | RDKafkaErrorCode::Fatal)
    )
}

/// Whether a send or delivery failed because the producer raised a fatal error (it refuses
/// every send from then on), or because that error purged the record from its queue.
fn is_fatal_send(e: &KafkaError) -> bool {
    e.rdkafka_error_code() == Some(RDKafkaErrorCode::Fatal)
}

/// Whether a delivery error is the record's own fault or the topic's, so that sending it
/// again cannot succeed: the production handler decides. Any other error (a timeout, a
/// broker going away, a leader moving) passes: under exactly-once the transaction is
/// aborted and its input processed again, and no record is skipped for it.
pub(crate) fn is_permanent(e: &KafkaError) -> bool {
    use RDKafkaErrorCode as C;
    e.rdkafka_error_code().is_some_and(|c| {
        matches!(
            c,
            C::MessageSizeTooLarge
                | C::MessageBatchTooLarge
                | C::InvalidMessageSize
                | C::InvalidMessage
                | C::InvalidRecord
                | C::UnknownTopicOrPartition
                | C::UnknownTopic
                | C::UnknownPartition
                | C::PolicyViolation
                | C::InvalidTimestamp
                | C::InvalidRequiredAcks
        ) || crate::runtime::client::connect::is_authorization(c)
    })
}

/// Whether a delivery error only says that an abort purged the record (it was never
/// refused: the transaction it belonged to is gone).
fn is_purge(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight)
    )
}

impl ClientContext for DeliveryTracker {
    /// librdkafka's log lines go to `tracing`, as the consumers' do.
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        crate::runtime::client::client_log::forward_log("producer", level, fac, message);
    }

    /// Client-level errors are transient (librdkafka retries); failed deliveries are
    /// reported through [`ProducerContext::delivery`].
    fn error(&self, error: KafkaError, reason: &str) {
        let reason = crate::runtime::client::redact::redact(reason);
        tracing::warn!(error = %error, "kafka producer: {reason}");
    }
}

/// What a produced record is, carried to its delivery report (a user topic may well end in
/// `-changelog`: the name says nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// An output record of a sink (or a dead-letter record).
    Output,
    /// A store's changelog record.
    Changelog,
}

impl Written {
    pub(crate) fn opaque(self) -> usize {
        match self {
            Self::Output => 0,
            Self::Changelog => 1,
        }
    }
}

impl ProducerContext for DeliveryTracker {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: usize) {
        let changelog = opaque == Written::Changelog.opaque();
        let Ok(mut d) = self.state.lock() else {
            return;
        };
        match result {
            Ok(m) if changelog => {
                let e = d
                    .changelog_offsets
                    .entry((m.topic().to_owned(), m.partition()))
                    .or_insert(-1);
                *e = (*e).max(m.offset());
            }
            Ok(_) => {}
            // An aborted transaction's records, purged: nothing to report or retry (the
            // tasks process their input again), and no cause for a dead-letter record; the
            // output ones are kept in case the abort's cause was their topic.
            Err((e, m)) if self.transactional && is_purge(e) => {
                if !changelog && self.keep_failed && d.purged.len() < PURGED_KEPT {
                    d.purged.push(failed_record(m));
                }
            }
            // At-least-once: a producer that raised a fatal error failed or purged its
            // queued records; they are not at fault, and their inputs, never committed,
            // are processed again once a new producer is made.
            Err((e, m)) if !self.transactional && (is_fatal_send(e) || is_purge(e)) => {
                self.txn_failed.store(true, Ordering::Release);
                d.failed += 1;
                d.transient
                    .get_or_insert_with(|| format!("{}-{}: {e}", m.topic(), m.partition()));
            }
            Err((e, m)) if self.transactional && !is_permanent(e) => {
                self.txn_failed.store(true, Ordering::Release);
                d.failed += 1;
                d.transient
                    .get_or_insert_with(|| format!("{}-{}: {e}", m.topic(), m.partition()));
            }
            Err((e, m)) => {
                if self.transactional {
                    self.txn_failed.store(true, Ordering::Release);
                }
                d.failed += 1;
                d.note_denied(m.topic(), e);
                let message = format!("{}-{}: {e}", m.topic(), m.partition());
                if changelog {
                    d.changelog_error.get_or_insert(message);
                } else if self.keep_failed {
                    d.failed_records.push((failed_record(m), e.to_string()));
                } else {
                    d.error.get_or_insert(message);
                }
            }
        }
    }
}

/// A record the producer failed to deliver, as the dead-letter topic gets it: its bytes,
/// headers and destination (offset -1: it was never written).
fn failed_record(m: &rdkafka::message::BorrowedMessage<'_>) -> RawRecord {
    let mut r = crate::runtime::client::consumed::to_raw(
        m,
        &mut crate::runtime::client::consumed::TopicNames::default(),
    );
    r.offset = -1;
    r
}

/// The thread's producer, shared by its tasks' collectors and changelog sinks.
pub(crate) type StreamProducer =
    crate::runtime::client::oauth::Authenticated<ThreadedProducer<DeliveryTracker>>;

/// Waits until every record sent so far is acknowledged or has failed, its delivery report
/// handled, or `timeout` passes.
///
/// Not `Producer::flush`: rust-rdkafka's flush polls the delivery-report queue from the
/// calling thread in slices of 100 ms, while the `ThreadedProducer`'s own thread serves
/// that queue; the caller then sleeps through whole slices, and every at-least-once commit
/// took at least 100 ms. Here a zero-timeout flush sends lingering batches at once, then
/// the in-flight count (messages not yet acknowledged, or whose report is not yet handled)
/// is watched until it reaches zero.
pub(crate) fn flush(producer: &StreamProducer, timeout: Duration) -> KafkaResult<()> {
    let started = Instant::now();
    match producer.flush(Duration::ZERO) {
        Ok(()) => return Ok(()),
        Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut)) => {}
        Err(e) => return Err(e),
    }
    let mut pause = Duration::from_micros(100);
    while producer.in_flight_count() > 0 {
        let elapsed = started.elapsed();
        if elapsed >= timeout {
            return Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut));
        }
        std::thread::sleep(pause.min(timeout - elapsed));
        pause = (pause * 2).min(Duration::from_millis(2));
    }
    Ok(())
}

pub(crate) fn to_kafka_headers(h: &Headers) -> Option<OwnedHeaders> {
    if h.is_empty() {
        return None;
    }
    let mut out = OwnedHeaders::new_with_capacity(h.len());
    for (key, value) in h.iter() {
        out = out.insert(Header { key, value });
    }
    Some(out)
}

/// Partition counts of output topics, looked up once per topic. A failed lookup (the topic
/// does not exist yet, the broker did not answer) is remembered for [`MISS_RETRY`], so a
/// missing topic costs one metadata request per interval, not one per record; meanwhile
/// records go out without a partition and the producer's partitioner places them.
pub(crate) struct PartitionCache {
    lookup: PartitionLookup,
    counts: HashMap<String, i32>,
    misses: HashMap<String, Instant>,
}

/// Asks the cluster for a topic's partition count.
type PartitionLookup = Box<dyn FnMut(&str) -> Option<i32>>;

/// How long a failed partition-count lookup is remembered.
pub(crate) const MISS_RETRY: Duration = Duration::from_secs(5);

impl PartitionCache {
    pub fn new(producer: Arc<StreamProducer>) -> Self {
        Self::with_lookup(Box::new(move |topic| {
            producer
                .client()
                .fetch_metadata(Some(topic), Duration::from_secs(10))
                .ok()
                .and_then(|m| m.topics().first().map(|t| t.partitions().len() as i32))
                .filter(|&n| n > 0)
        }))
    }

    fn with_lookup(lookup: PartitionLookup) -> Self {
        Self {
            lookup,
            counts: HashMap::new(),
            misses: HashMap::new(),
        }
    }

    pub fn get(&mut self, topic: &str) -> Option<i32> {
        // The clock is read only on a miss: this runs for every record sent.
        if let Some(&n) = self.counts.get(topic) {
            return Some(n);
        }
        self.get_at(topic, Instant::now())
    }

    fn get_at(&mut self, topic: &str, now: Instant) -> Option<i32> {
        if let Some(&n) = self.counts.get(topic) {
            return Some(n);
        }
        if self
            .misses
            .get(topic)
            .is_some_and(|&at| now.saturating_duration_since(at) < MISS_RETRY)
        {
            return None;
        }
        match (self.lookup)(topic) {
            Some(n) => {
                self.misses.remove(topic);
                self.counts.insert(topic.to_owned(), n);
                Some(n)
            }
            None => {
                self.misses.insert(topic.to_owned(), now);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::*;

    #[test]
    fn a_missing_topic_is_looked_up_once_per_interval() {
        let calls = Rc::new(Cell::new(0));
        let exists = Rc::new(Cell::new(false));
        let (c, e) = (calls.clone(), exists.clone());
        let mut cache = PartitionCache::with_lookup(Box::new(move |_| {
            c.set(c.get() + 1);
            e.get().then_some(6)
        }));
        let start = Instant::now();
        for i in 0..1000 {
            assert_eq!(cache.get_at("missing", start + Duration::from_micros(i)), None);
        }
        assert_eq!(calls.get(), 1, "one lookup while the miss is fresh");
        exists.set(true);
        assert_eq!(cache.get_at("missing", start + MISS_RETRY / 2), None);
        assert_eq!(calls.get(), 1);
        assert_eq!(cache.get_at("missing", start + MISS_RETRY), Some(6));
        assert_eq!(calls.get(), 2);
        for _ in 0..10 {
            assert_eq!(cache.get_at("missing", start), Some(6));
        }
        assert_eq!(calls.get(), 2, "an answer is kept");
    }
}
