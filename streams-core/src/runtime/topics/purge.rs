//! Purging repartition topics, as Kafka Streams does: once a commit has made the offsets of a
//! repartition topic's partitions durable, the records below them are never read again (the
//! committed offsets are where any next owner starts), so they are deleted with
//! `DeleteRecords`, at most once per `repartition.purge.interval.ms` on each stream thread.
//! Repartition topics are created with `retention.ms=-1` and rely on it: their size follows
//! what is not yet processed, not what the broker's retention keeps.
//!
//! Invariants: only offsets that were committed are purged (the stream thread schedules a
//! purge after its commit succeeded), only on topics of the topology's repartition set, and
//! the thread never waits for the broker: one purger thread per application sends the
//! requests, merging those that queued up meanwhile (the highest offset per partition wins).
//! A failed purge is logged and left to the next one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::model::error::StreamsError;
use crate::runtime::client::connect::ConnectContext;
use crate::runtime::client::errors::kafka_err;

/// Offsets below which records may be deleted: (topic, partition) → offset.
type Purge = BTreeMap<(String, i32), i64>;

/// How long one `DeleteRecords` may take before the purger gives up on it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends purge requests to the application's purger thread; clones share the thread, which
/// ends once every clone is dropped.
#[derive(Clone)]
pub(crate) struct Purger {
    tx: Sender<Purge>,
}

impl Purger {
    /// Starts the purger thread of application `app_id`, with an admin client of `admin`
    /// given its OAUTHBEARER tokens by `tokens` (when the application has a provider).
    pub(crate) fn start(
        app_id: &str,
        admin: &ClientConfig,
        tokens: Option<&crate::config::OAuthBearerTokenProvider>,
    ) -> Result<Purger, StreamsError> {
        let name = "repartition purge admin client";
        let client: AdminClient<ConnectContext> = admin
            .create_with_context(ConnectContext::default())
            .map_err(|e| kafka_err(name, e))?;
        let client = crate::runtime::client::oauth::Authenticated::new(client, tokens, name)?;
        let (tx, rx) = channel();
        std::thread::Builder::new()
            .name(format!("{app_id}-purger"))
            .spawn(move || run(&client, &rx))
            .map_err(|e| StreamsError::Usage(format!("spawn the purger thread: {e}")))?;
        Ok(Purger { tx })
    }
}

/// Sends every request `rx` delivers until all senders are gone.
fn run(admin: &AdminClient<ConnectContext>, rx: &Receiver<Purge>) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::warn!(error = %e, "repartition purge: no runtime; repartition topics are not purged");
            return;
        }
    };
    let opts = AdminOptions::new().operation_timeout(Some(REQUEST_TIMEOUT));
    while let Ok(mut purge) = rx.recv() {
        // Requests that queued while the last one was in flight go together.
        for more in rx.try_iter() {
            merge(&mut purge, more);
        }
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), offset) in &purge {
            if let Err(e) = tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset)) {
                tracing::warn!(topic, partition, error = %e, "repartition purge: bad offset");
            }
        }
        let answered = rt.block_on(async {
            tokio::time::timeout(REQUEST_TIMEOUT, admin.delete_records(&tpl, &opts)).await
        });
        match answered {
            Ok(Ok(done)) => {
                for e in done.elements() {
                    match e.error() {
                        Ok(()) => {
                            tracing::trace!(topic = e.topic(), partition = e.partition(), offset = ?e.offset(), "purged")
                        }
                        // A leader moving: the next purge goes to the new one.
                        Err(err) if moving(&err) => tracing::debug!(
                            topic = e.topic(),
                            partition = e.partition(),
                            error = %err,
                            "repartition purge failed; the next commit tries again"
                        ),
                        Err(err) => tracing::warn!(
                            topic = e.topic(),
                            partition = e.partition(),
                            error = %err,
                            "repartition purge failed; the next commit tries again"
                        ),
                    }
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "repartition purge failed; the next commit tries again"),
            Err(_) => tracing::warn!("repartition purge timed out; the next commit tries again"),
        }
    }
}

/// Whether `e` says the partition's leader is moving (a broker restarting).
fn moving(e: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode::{LeaderNotAvailable, NotLeaderForPartition, RequestTimedOut};
    matches!(
        e.rdkafka_error_code(),
        Some(NotLeaderForPartition | LeaderNotAvailable | RequestTimedOut)
    )
}

/// Adds `more` to `purge`, keeping the highest offset of each partition.
fn merge(purge: &mut Purge, more: Purge) {
    for (tp, offset) in more {
        let o = purge.entry(tp).or_insert(offset);
        *o = (*o).max(offset);
    }
}

/// A stream thread's side of the purge: which topics are repartition topics, and when it
/// last asked for a purge.
pub(crate) struct PurgeSchedule {
    purger: Purger,
    topics: Arc<BTreeSet<String>>,
    interval: Duration,
    last: Instant,
}

impl PurgeSchedule {
    /// Purges `topics` through `purger`, at most once per `interval`.
    pub(crate) fn new(purger: Purger, topics: Arc<BTreeSet<String>>, interval: Duration) -> Self {
        Self {
            purger,
            topics,
            interval,
            last: Instant::now(),
        }
    }

    /// After a successful commit of `committed`: asks for its repartition topics' records
    /// below the committed offsets to be deleted, if the interval has passed.
    pub(crate) fn committed(&mut self, committed: &TopicPartitionList) {
        if self.last.elapsed() < self.interval {
            return;
        }
        let purge = of_repartition_topics(&self.topics, committed);
        if purge.is_empty() {
            return;
        }
        self.last = Instant::now();
        // The purger is gone only when the application is closing.
        let _ = self.purger.tx.send(purge);
    }
}

/// The offsets of `committed` that belong to `topics`.
fn of_repartition_topics(topics: &BTreeSet<String>, committed: &TopicPartitionList) -> Purge {
    committed
        .elements()
        .iter()
        .filter(|e| topics.contains(e.topic()))
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) if o > 0 => Some(((e.topic().to_owned(), e.partition()), o)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_committed_offsets_of_repartition_topics_are_purged() {
        let topics = BTreeSet::from(["app-by-key-repartition".to_owned()]);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("app-by-key-repartition", 0, Offset::Offset(40))
            .unwrap();
        tpl.add_partition_offset("app-by-key-repartition", 1, Offset::Offset(0))
            .unwrap();
        tpl.add_partition_offset("input", 0, Offset::Offset(7)).unwrap();
        let purge = of_repartition_topics(&topics, &tpl);
        assert_eq!(
            purge,
            Purge::from([(("app-by-key-repartition".to_owned(), 0), 40)])
        );
    }

    #[test]
    fn queued_requests_merge_to_the_highest_offset() {
        let mut purge = Purge::from([(("t".to_owned(), 0), 10), (("t".to_owned(), 1), 5)]);
        merge(
            &mut purge,
            Purge::from([(("t".to_owned(), 0), 8), (("t".to_owned(), 2), 3)]),
        );
        assert_eq!(
            purge,
            Purge::from([
                (("t".to_owned(), 0), 10),
                (("t".to_owned(), 1), 5),
                (("t".to_owned(), 2), 3)
            ])
        );
    }
}
