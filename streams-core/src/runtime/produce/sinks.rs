//! The record collector of a task and the changelog sink of a store: each sends through
//! topic handles it keeps (`topic_handle.rs`), so a record's topic is never looked up by
//! name.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::Producer;
use streams_state::{ChangelogError, ChangelogSink};

use crate::engine::{RecordCollector, SendError};
use crate::model::record::OutputRef;
use crate::runtime::produce::producer::{PartitionCache, StreamProducer, Written, fails_transaction};
use crate::runtime::produce::topic_handle::{Outgoing, RecordHeaders, TopicHandle, send, unknown_topic};

/// The record collector of one task.
pub(crate) struct KafkaCollector {
    pub producer: Arc<StreamProducer>,
    pub partitions: PartitionCache,
    /// A handle per topic written so far: a task writes a handful, found by a scan; a
    /// topic name extractor may write many, found through `index` beyond [`SCANNED`].
    topics: Vec<TopicHandle>,
    index: HashMap<String, usize>,
}

/// How many topics a collector finds by a scan of its handles before it indexes them.
const SCANNED: usize = 8;

impl KafkaCollector {
    /// A collector of `producer` with no topic written yet.
    pub fn new(producer: Arc<StreamProducer>) -> Self {
        Self {
            partitions: PartitionCache::new(producer.clone()),
            producer,
            topics: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// The handle of `topic`, made on its first record.
    fn topic(&mut self, topic: &str) -> Result<&TopicHandle, KafkaError> {
        let found = if self.topics.len() <= SCANNED {
            self.topics.iter().position(|t| t.name() == topic)
        } else {
            self.index.get(topic).copied()
        };
        let at = match found {
            Some(at) => at,
            None => {
                let handle = TopicHandle::new(&self.producer, topic)
                    .ok_or_else(|| unknown_topic(&self.producer, topic))?;
                self.topics.push(handle);
                if self.topics.len() > SCANNED {
                    if self.index.is_empty() {
                        self.index.extend(
                            self.topics
                                .iter()
                                .enumerate()
                                .map(|(i, t)| (t.name().to_owned(), i)),
                        );
                    } else {
                        self.index.insert(topic.to_owned(), self.topics.len() - 1);
                    }
                }
                self.topics.len() - 1
            }
        };
        Ok(&self.topics[at])
    }
}

impl RecordCollector for KafkaCollector {
    fn send(&mut self, r: OutputRef<'_>) -> Result<(), SendError> {
        if let Some((instead, error)) = self.producer.context().skips.take(&r) {
            return self.send_instead(&r, instead, &error);
        }
        self.topic(r.topic)
            .and_then(|topic| {
                send(
                    topic,
                    Written::Output,
                    Outgoing {
                        partition: r.partition,
                        key: r.key,
                        value: r.value,
                        timestamp: r.timestamp,
                        headers: RecordHeaders::Model(r.headers),
                    },
                )
            })
            .inspect_err(|e| {
                if let Ok(mut d) = self.producer.context().state.lock() {
                    d.note_denied(r.topic, e);
                }
            })
            .map_err(|e| SendError {
                retriable: matches!(e, KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)),
                // Never dropped by `log_and_continue`: the record is not at fault, and under
                // at-least-once a fatal producer would otherwise drop every later output too.
                transaction_failed: fails_transaction(&e),
                message: e.to_string(),
                topic: r.topic.to_owned(),
            })
    }

    fn partitions(&mut self, topic: &str) -> Option<i32> {
        self.partitions.get(topic)
    }
}

impl KafkaCollector {
    /// Exactly-once: `r` failed for good in an aborted transaction (see `skips.rs`); it is
    /// dropped or its dead-letter record sent, as the production handler chose.
    fn send_instead(
        &mut self,
        r: &OutputRef<'_>,
        instead: crate::runtime::produce::skips::Instead,
        error: &str,
    ) -> Result<(), SendError> {
        match instead {
            crate::runtime::produce::skips::Instead::Drop => {
                tracing::warn!(
                    topic = r.topic,
                    error,
                    "skipping a record that cannot be produced (production handler)"
                );
                Ok(())
            }
            crate::runtime::produce::skips::Instead::DeadLetter(d) => {
                tracing::warn!(topic = r.topic, error, dlq = %d.topic, "dead-lettering a record that cannot be produced");
                self.send(d.as_output_ref())
            }
        }
    }
}

/// The changelog sink of one store of one task: writes to the store's changelog partition
/// with the timestamp of the record being processed, or, for a timestamped store, each
/// value without its leading timestamp, which becomes the record's timestamp (Kafka
/// Streams' `ChangeLoggingTimestampedKeyValueBytesStore` format; a tombstone carries the
/// processed record's), or for a versioned store each version at its own timestamp (see
/// [`SourceValues::changelog_record`](crate::topology::SourceValues::changelog_record)).
/// Records other than tombstones carry the store's changelog headers, if it has any.
pub(crate) struct KafkaChangelogSink {
    pub producer: Arc<StreamProducer>,
    pub topic: String,
    /// The changelog's handle, made on the first write.
    pub handle: Option<TopicHandle>,
    pub partition: i32,
    pub timestamp: Arc<AtomicI64>,
    pub values: crate::topology::SourceValues,
    pub headers: Option<OwnedHeaders>,
}

impl ChangelogSink for KafkaChangelogSink {
    fn send(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), ChangelogError> {
        let Some((key, value, ts)) = self
            .values
            .changelog_record(key, value, self.timestamp.load(Ordering::Relaxed))
            .map_err(|e| ChangelogError::new(format!("changelog `{}`: {e}", self.topic)))?
        else {
            return Ok(());
        };
        let failed = |e: KafkaError| ChangelogError::new(format!("changelog `{}`: {e}", self.topic));
        let topic = match &mut self.handle {
            Some(handle) => &*handle,
            unmade => &*unmade.insert(
                TopicHandle::new(&self.producer, &self.topic)
                    .ok_or_else(|| failed(unknown_topic(&self.producer, &self.topic)))?,
            ),
        };
        let headers = match (value, &self.headers) {
            (Some(_), Some(h)) => RecordHeaders::Kafka(h),
            _ => RecordHeaders::None,
        };
        let record = Outgoing {
            partition: Some(self.partition),
            key: Some(key),
            value,
            timestamp: ts,
            headers,
        };
        send(topic, Written::Changelog, record).map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use rdkafka::ClientConfig;
    use rdkafka::TopicPartitionList;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers as _, Message};
    use rdkafka::mocking::MockCluster;
    use streams_state::ChangelogSink;

    use super::*;
    use crate::model::record::Headers;
    use crate::runtime::produce::producer::{DeliveryTracker, flush};

    /// More topics than a collector scans (so some are found through its index), each
    /// written twice, and a changelog sink with headers: every record arrives once, on its
    /// topic, with its bytes and headers, and each topic has one handle.
    #[test]
    fn every_record_reaches_its_topic_through_the_topics_handle() {
        const TOPICS: usize = SCANNED + 4;
        let cluster = MockCluster::new(1).unwrap();
        for t in 0..=TOPICS {
            cluster.create_topic(&format!("t{t}"), 1, 1).unwrap();
        }
        let producer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap_servers())
            .create_with_context(DeliveryTracker::default())
            .unwrap();
        let producer: StreamProducer =
            crate::runtime::client::oauth::Authenticated::new(producer, None, "producer").unwrap();
        let producer = Arc::new(producer);
        let mut collector = KafkaCollector::new(producer.clone());
        let mut headers = Headers::new();
        headers.add("h", &b"v"[..]).add_null("n");
        let none = Headers::default();
        for round in 0..2 {
            for t in 0..TOPICS {
                let value = format!("{round}");
                collector
                    .send(OutputRef {
                        topic: &format!("t{t}"),
                        partition: Some(0),
                        key: Some(b"k"),
                        value: Some(value.as_bytes()),
                        timestamp: 1_000 + round,
                        headers: if t % 2 == 0 { &headers } else { &none },
                    })
                    .unwrap();
            }
        }
        assert_eq!(collector.topics.len(), TOPICS);
        let changelog = format!("t{TOPICS}");
        let mut sink = KafkaChangelogSink {
            producer: producer.clone(),
            topic: changelog.clone(),
            handle: None,
            partition: 0,
            timestamp: Arc::new(AtomicI64::new(7)),
            values: crate::topology::SourceValues::Plain,
            headers: crate::runtime::produce::producer::to_kafka_headers(&headers),
        };
        sink.send(b"a", Some(b"1")).unwrap();
        sink.send(b"a", None).unwrap();
        flush(&producer, Duration::from_secs(10)).unwrap();

        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap_servers())
            .set("group.id", "sinks")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        for t in 0..=TOPICS {
            tpl.add_partition_offset(&format!("t{t}"), 0, rdkafka::Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&tpl).unwrap();
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while got.len() < 2 * TOPICS + 2 && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                let m = m.unwrap();
                let header_names: Vec<(String, bool)> = m
                    .headers()
                    .map(|h| h.iter().map(|h| (h.key.to_owned(), h.value.is_some())).collect())
                    .unwrap_or_default();
                got.push((
                    m.topic().to_owned(),
                    m.offset(),
                    m.payload().map(<[u8]>::to_vec),
                    m.timestamp().to_millis(),
                    header_names,
                ));
            }
        }
        assert_eq!(got.len(), 2 * TOPICS + 2);
        let with_headers = vec![("h".to_owned(), true), ("n".to_owned(), false)];
        for t in 0..TOPICS {
            for round in 0..2_i64 {
                let want = (
                    format!("t{t}"),
                    round,
                    Some(round.to_string().into_bytes()),
                    Some(1_000 + round),
                    if t % 2 == 0 {
                        with_headers.clone()
                    } else {
                        Vec::new()
                    },
                );
                assert!(got.contains(&want), "missing {want:?} in {got:?}");
            }
        }
        assert!(got.contains(&(changelog.clone(), 0, Some(b"1".to_vec()), Some(7), with_headers)));
        // A tombstone carries no changelog headers.
        assert!(got.contains(&(changelog, 1, None, Some(7), Vec::new())));
    }
}
