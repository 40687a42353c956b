//! A consumer group's committed offsets: [`committed_offsets`], and [`CommittedReader`]
//! for reading them again and again.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::client_config::consumer_config;
use super::error::TestResult;
use super::topics::topic_partitions;

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
