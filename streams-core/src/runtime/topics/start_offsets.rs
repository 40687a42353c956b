//! Where newly assigned partitions start: their committed offsets, read by the runtime
//! rather than left to librdkafka.
//!
//! librdkafka (2.12) looks up the committed offsets of an assignment itself. When a
//! partition's offsets are *unstable* (an exactly-once producer that crashed left a
//! transaction with an offset commit open; the broker answers `UNSTABLE_OFFSET_COMMIT`
//! until the transaction is aborted) it retries; but if the partition is revoked and
//! assigned again while a lookup is pending, the late answer puts the partition back as
//! "no committed offset", and `auto.offset.reset` restarts it from the beginning: the whole
//! partition processed again, thousands of duplicates under exactly-once.
//!
//! So the rebalance callback asks for the committed offsets itself (`committed_offsets`
//! retries unstable answers until the broker has settled the transaction) and assigns the
//! partitions with explicit offsets.
//!
//! A partition without any commit starts at a concrete offset read here too, never at a
//! logical one: its log start offset under `auto.offset.reset=earliest`, its end (the last
//! stable offset under `read_committed`: the watermark query uses the consumer's isolation
//! level) under `latest`. librdkafka (2.12) resolves a logical offset with a ListOffsets
//! request, and when the partition's op version moves while that request is in flight (the
//! stream thread pauses the partitions of a new task at once, until its stores are
//! restored), the late answer is dropped as outdated but arms a retry timer that nothing
//! cancels. Half a second later the timer queries the logical offset again and moves the
//! fetch position there, even if the partition has since been assigned again at a
//! committed offset: a thread that kept its tasks through a rebalance delivered its
//! partitions again from offset 0, with nothing above debug level in librdkafka's log
//! ("outdated offset response: (re)starting offset query timer", then "timed offset query
//! ... in state active"). With a concrete start offset no query is made. Only
//! `auto.offset.reset=none` keeps the logical offset (librdkafka then reports the error).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use crate::model::error::StreamsError;
use crate::runtime::client::errors::kafka_err;
use crate::runtime::streams_group::StreamsMember;

/// How long the lookups of start offsets may wait: for the group's coordinator (a paused or
/// restarting coordinator answers again once it is back), for a partition's leader, and for
/// the open transaction of a crashed producer (aborted after its `transaction.timeout.ms`,
/// 10 s by default here, plus the broker's abort-check interval, 10 s). Kafka Streams'
/// `task.timeout.ms` default.
pub(crate) const COMMITTED_TIMEOUT: Duration = crate::runtime::client::errors::RECOVERY_LIMIT;

/// The longest one request of the lookup may wait: a request to a paused coordinator gets
/// no answer, and only a new request finds the coordinator once the group moved or its
/// broker is back.
const ATTEMPT: Duration = Duration::from_secs(10);

/// The pause before the lookup asks again after the group's coordinator moved.
const COORDINATOR_BACKOFF: Duration = Duration::from_millis(200);

/// The committed offsets of `partitions`; a partition-level error (still unstable when
/// the time ran out, not authorized) fails the whole lookup rather than reading as "no
/// commit". An answer that the group's coordinator moved or is loading its state (a
/// coordinator's broker paused and back: the group moved to another one and maybe back),
/// or no answer in time (the coordinator's broker paused), is asked again until `timeout`;
/// librdkafka looks the coordinator up again meanwhile.
///
/// A streams-group member (`member`) reads them itself (see `streams_group/fetch.rs`).
pub(crate) fn committed<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    member: Option<&StreamsMember>,
    partitions: &TopicPartitionList,
    timeout: Duration,
) -> Result<TopicPartitionList, StreamsError> {
    if let Some(member) = member {
        return committed_of_member(member, partitions, timeout);
    }
    let deadline = Instant::now() + timeout;
    let committed = loop {
        let left = deadline.saturating_duration_since(Instant::now()).min(ATTEMPT);
        match consumer.committed_offsets(partitions.clone(), left) {
            Ok(committed) => break committed,
            Err(e) if coordinator_moved(&e) && Instant::now() + COORDINATOR_BACKOFF < deadline => {
                tracing::debug!(error = %e, "committed offsets: the group coordinator moved; asking again");
                std::thread::sleep(COORDINATOR_BACKOFF);
            }
            Err(e) if no_answer(&e) && Instant::now() + COORDINATOR_BACKOFF < deadline => {
                tracing::info!(error = %e, "committed offsets: no answer from the group coordinator; asking again");
                std::thread::sleep(COORDINATOR_BACKOFF);
            }
            Err(e) => return Err(kafka_err("committed offsets", e)),
        }
    };
    for e in committed.elements() {
        if let Err(err) = e.error() {
            return Err(kafka_err(
                &format!("committed offset of {}-{}", e.topic(), e.partition()),
                err,
            ));
        }
    }
    Ok(committed)
}

/// [`committed`] as `member` reads them: in the layout librdkafka answers with (no offset
/// where nothing is committed).
fn committed_of_member(
    member: &StreamsMember,
    partitions: &TopicPartitionList,
    timeout: Duration,
) -> Result<TopicPartitionList, StreamsError> {
    let asked: Vec<(String, i32)> = partitions
        .elements()
        .iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
        .collect();
    let found = member.committed_offsets(&asked, timeout)?;
    let mut out = TopicPartitionList::new();
    for (topic, partition) in &asked {
        let committed = found.get(&(topic.clone(), *partition)).cloned().flatten();
        let offset = committed
            .as_ref()
            .map_or(Offset::Invalid, |(o, _)| Offset::Offset(*o));
        out.add_partition_offset(topic, *partition, offset)
            .map_err(|e| kafka_err("committed offsets", e))?;
        if let Some((_, metadata)) = committed
            && !metadata.is_empty()
            && let Some(mut e) = out.find_partition(topic, *partition)
        {
            e.set_metadata(metadata);
        }
    }
    Ok(out)
}

/// Whether `e` says the group's coordinator is elsewhere or not ready yet.
fn coordinator_moved(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::CoordinatorNotAvailable
                | RDKafkaErrorCode::CoordinatorLoadInProgress
        )
    )
}

/// Whether `e` says the request got no answer in time: librdkafka gave up on it (a request
/// to a paused broker times out after `socket.timeout.ms`, or sooner when it was queued
/// behind others), or the connection to the coordinator broke.
fn no_answer(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::TimedOutQueue
                | RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::AllBrokersDown
        )
    )
}

/// Where a partition without a committed offset starts: `auto.offset.reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResetTo {
    /// The log start offset.
    Earliest,
    /// The end of the log (the last stable offset under `read_committed`).
    Latest,
    /// No policy (`none`, or an unknown value): the logical offset, which librdkafka fails.
    Logical,
}

impl ResetTo {
    /// The policy of a consumer whose `auto.offset.reset` is `value`.
    pub(crate) fn of(value: Option<&str>) -> Self {
        match value {
            Some("earliest" | "smallest" | "beginning") => Self::Earliest,
            Some("latest" | "largest" | "end") | None => Self::Latest,
            Some(_) => Self::Logical,
        }
    }

    /// The concrete offset `topic`-`partition` starts at under this policy, or `None` for
    /// [`ResetTo::Logical`]. The lookup is retried for up to [`COMMITTED_TIMEOUT`], as the
    /// committed offsets are: right after a broker went down, the cached leader of a
    /// partition the group never committed (a repartition topic's partition no key went to,
    /// say) answers `NotLeaderForPartition`, and while it is paused it does not answer at
    /// all until librdkafka's request times out and the new leader is looked up (a thread
    /// failed after 60 s of this on a three-broker cluster with its only bootstrap broker
    /// paused).
    pub(crate) fn resolve<C: ConsumerContext>(
        self,
        consumer: &BaseConsumer<C>,
        topic: &str,
        partition: i32,
    ) -> Result<Option<i64>, StreamsError> {
        if self == Self::Logical {
            return Ok(None);
        }
        let (low, high) = crate::runtime::client::watermarks::fetch_retrying(
            consumer,
            topic,
            partition,
            COMMITTED_TIMEOUT,
            crate::runtime::client::watermarks::stop_if_denied(topic),
        )?;
        Ok(Some(if self == Self::Earliest { low } else { high }))
    }
}

/// `assigned` with each partition's committed offset (and its metadata) where it has one,
/// else where `reset(topic)` puts it.
pub(crate) fn explicit<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    member: Option<&StreamsMember>,
    assigned: &TopicPartitionList,
    reset: impl Fn(&str) -> ResetTo,
) -> Result<TopicPartitionList, StreamsError> {
    if assigned.count() == 0 {
        return Ok(assigned.clone());
    }
    let committed = committed(consumer, member, assigned, COMMITTED_TIMEOUT)?;
    let mut out = TopicPartitionList::new();
    for e in assigned.elements() {
        let found = committed.find_partition(e.topic(), e.partition());
        let offset = match found.as_ref().map(|c| c.offset()) {
            Some(Offset::Offset(o)) => Offset::Offset(o),
            _ => match reset(e.topic()).resolve(consumer, e.topic(), e.partition())? {
                Some(o) => Offset::Offset(o),
                None => e.offset(),
            },
        };
        out.add_partition_offset(e.topic(), e.partition(), offset)
            .map_err(|err| kafka_err("start offsets", err))?;
        // The commit's metadata (the stream time, see `offset_metadata.rs`) goes along.
        if let (Some(c), Some(mut o)) = (found, out.find_partition(e.topic(), e.partition()))
            && !c.metadata().is_empty()
        {
            o.set_metadata(c.metadata());
        }
    }
    tracing::info!(start = %describe(&out), "start offsets of the assigned partitions");
    Ok(out)
}

/// `topic-partition@offset` of each partition, `committed`-less ones as `reset`.
pub(crate) fn describe(tpl: &TopicPartitionList) -> String {
    let mut out = String::new();
    for e in tpl.elements() {
        if !out.is_empty() {
            out.push_str(", ");
        }
        match e.offset() {
            Offset::Offset(o) => out.push_str(&format!("{}-{}@{o}", e.topic(), e.partition())),
            _ => out.push_str(&format!("{}-{}@reset", e.topic(), e.partition())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::producer::Producer;
    use rdkafka::{Offset, TopicPartitionList};

    use super::ResetTo;
    use super::committed;
    use super::explicit;
    use super::{coordinator_moved, no_answer};
    use streams_test_utils::kafka::{self, ProduceRecord};

    /// The coordinator answers that the lookup asks again, and no answer in time (a paused
    /// coordinator); anything else fails it at once.
    #[test]
    fn only_a_moved_loading_or_silent_coordinator_is_asked_again() {
        use rdkafka::error::KafkaError;
        use rdkafka::types::RDKafkaErrorCode as C;
        for code in [
            C::NotCoordinator,
            C::CoordinatorNotAvailable,
            C::CoordinatorLoadInProgress,
        ] {
            assert!(coordinator_moved(&KafkaError::MetadataFetch(code)), "{code:?}");
        }
        for code in [
            C::OperationTimedOut,
            C::RequestTimedOut,
            C::BrokerTransportFailure,
        ] {
            assert!(no_answer(&KafkaError::MetadataFetch(code)), "{code:?}");
            assert!(!coordinator_moved(&KafkaError::MetadataFetch(code)), "{code:?}");
        }
        for code in [
            C::GroupAuthorizationFailed,
            C::UnknownTopicOrPartition,
            C::InvalidGroupId,
        ] {
            assert!(!coordinator_moved(&KafkaError::MetadataFetch(code)), "{code:?}");
            assert!(!no_answer(&KafkaError::MetadataFetch(code)), "{code:?}");
        }
    }

    /// A crashed exactly-once producer's transaction holds an offset commit open: the
    /// lookup waits until the broker settles it, and never reads it as "no commit" (which
    /// would restart the partition from the beginning).
    #[test]
    fn unstable_offsets_are_waited_for_never_read_as_missing() {
        let Some(bootstrap) = kafka::require_kafka("start_offsets") else {
            return;
        };
        let topic = kafka::unique_name("unstable");
        let group = kafka::unique_name("unstable-group");
        kafka::create_topic(&bootstrap, &topic, 1, &[]).unwrap();
        let records: Vec<ProduceRecord> = (0..100).map(|i| ProduceRecord::new("k", i.to_string())).collect();
        kafka::produce(&bootstrap, &topic, &records, Duration::from_secs(60)).unwrap();
        let consumer: BaseConsumer = kafka::consumer_config(&bootstrap, &group)
            .set("isolation.level", "read_committed")
            .create()
            .unwrap();
        let at = |offset: i64| {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&topic, 0, Offset::Offset(offset))
                .unwrap();
            tpl
        };
        consumer.commit(&at(50), CommitMode::Sync).unwrap();
        // An open transaction that commits offset 80 when it commits.
        let producer =
            kafka::transactional_producer(&bootstrap, "unstable-txn", &[("transaction.timeout.ms", "60000")])
                .unwrap();
        producer.begin_transaction().unwrap();
        let metadata = consumer.group_metadata().unwrap();
        producer
            .send_offsets_to_transaction(&at(80), &metadata, Duration::from_secs(30))
            .unwrap();

        let mut assigned = TopicPartitionList::new();
        assigned.add_partition(&topic, 0);
        assert!(
            committed(&consumer, None, &assigned, Duration::from_secs(2)).is_err(),
            "an unstable offset is an error while the transaction is open"
        );
        // Aborted while a lookup waits (or before it starts: the answer is the same).
        let aborter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            producer.abort_transaction(Duration::from_secs(30)).unwrap();
        });
        let start = explicit(&consumer, None, &assigned, |_| ResetTo::Earliest).unwrap();
        aborter.join().unwrap();
        assert_eq!(
            start.find_partition(&topic, 0).map(|e| e.offset()),
            Some(Offset::Offset(50))
        );
    }

    /// A partition without a commit starts at a concrete offset: its log start under
    /// `earliest`, its end under `latest` (librdkafka's own lookup of a logical offset can
    /// fire again later and move a running partition); only `none` keeps the logical one.
    #[test]
    fn uncommitted_partitions_start_at_a_concrete_offset() {
        let Some(bootstrap) = kafka::require_kafka("start_offsets") else {
            return;
        };
        let topic = kafka::unique_name("uncommitted");
        let group = kafka::unique_name("uncommitted-group");
        kafka::create_topic(&bootstrap, &topic, 1, &[]).unwrap();
        let records: Vec<ProduceRecord> = (0..20).map(|i| ProduceRecord::new("k", i.to_string())).collect();
        kafka::produce(&bootstrap, &topic, &records, Duration::from_secs(60)).unwrap();
        kafka::delete_records(&bootstrap, &topic, 0, 7).unwrap();
        let consumer: BaseConsumer = kafka::consumer_config(&bootstrap, &group)
            .set("isolation.level", "read_committed")
            .create()
            .unwrap();
        let mut assigned = TopicPartitionList::new();
        assigned.add_partition(&topic, 0);
        let start = explicit(&consumer, None, &assigned, |_| ResetTo::Earliest).unwrap();
        assert_eq!(
            start.find_partition(&topic, 0).map(|e| e.offset()),
            Some(Offset::Offset(7))
        );
        let start = explicit(&consumer, None, &assigned, |_| ResetTo::Latest).unwrap();
        assert_eq!(
            start.find_partition(&topic, 0).map(|e| e.offset()),
            Some(Offset::Offset(20))
        );
        let start = explicit(&consumer, None, &assigned, |_| ResetTo::Logical).unwrap();
        assert_eq!(
            start.find_partition(&topic, 0).map(|e| e.offset()),
            assigned.find_partition(&topic, 0).map(|e| e.offset())
        );
        assert_eq!(ResetTo::of(Some("earliest")), ResetTo::Earliest);
        assert_eq!(ResetTo::of(None), ResetTo::Latest);
        assert_eq!(ResetTo::of(Some("none")), ResetTo::Logical);
    }
}
