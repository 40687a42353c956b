//! Internal topics: the changelog of every logged store, created at start with the
//! partition count of its sub-topology's source topics (`cleanup.policy=compact`), and the
//! partition-count checks Kafka Streams makes before it runs.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::embedded::EmbeddedKafka;
use super::restore::{changelog_topic, kafka_err};
use crate::error::StreamsError;
use crate::topology::Topology;

/// A topic the application needs, with its partitions and configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InternalTopic {
    pub name: String,
    pub partitions: i32,
    pub config: BTreeMap<String, String>,
}

fn partitions_of(metadata_consumer: &BaseConsumer, topic: &str) -> Result<Option<i32>, StreamsError> {
    let md = metadata_consumer
        .fetch_metadata(Some(topic), Duration::from_secs(15))
        .map_err(|e| kafka_err(&format!("metadata of {topic}"), e))?;
    Ok(md
        .topics()
        .first()
        .filter(|t| t.error().is_none())
        .map(|t| t.partitions().len() as i32)
        .filter(|&n| n > 0))
}

/// Checks source topics and computes the internal topics the topology needs.
pub(crate) fn plan(
    topology: &Topology,
    app_id: &str,
    md: &BaseConsumer,
) -> Result<Vec<InternalTopic>, StreamsError> {
    let mut topics = Vec::new();
    for sub in topology.subtopologies().iter().filter(|s| !s.global) {
        let mut counts = Vec::new();
        for t in &sub.source_topics {
            match partitions_of(md, t)? {
                Some(n) => counts.push((t.clone(), n)),
                None => return Err(StreamsError::Usage(format!("source topic `{t}` does not exist"))),
            }
        }
        let Some(&(_, n)) = counts.first() else { continue };
        if counts.iter().any(|(_, c)| *c != n) {
            return Err(StreamsError::Usage(format!(
                "source topics of sub-topology {} are not co-partitioned: {counts:?}",
                sub.id
            )));
        }
        for (s, store) in topology.logged_stores() {
            if s != sub.id {
                continue;
            }
            let mut config = topology.changelog_config(&store).unwrap_or_default();
            config
                .entry("cleanup.policy".into())
                .or_insert_with(|| "compact".into());
            topics.push(InternalTopic {
                name: changelog_topic(app_id, &store),
                partitions: n,
                config,
            });
        }
    }
    Ok(topics)
}

/// Creates the internal topics that do not exist; an existing one with another partition
/// count is an error.
pub(crate) fn ensure(
    topics: &[InternalTopic],
    md: &BaseConsumer,
    admin_config: &rdkafka::ClientConfig,
    embedded: Option<&EmbeddedKafka>,
    replication: i32,
) -> Result<(), StreamsError> {
    let mut missing = Vec::new();
    for t in topics {
        match partitions_of(md, &t.name)? {
            Some(n) if n == t.partitions => {}
            Some(n) => {
                return Err(StreamsError::Usage(format!(
                    "internal topic `{}` has {n} partitions, expected {}",
                    t.name, t.partitions
                )));
            }
            None => missing.push(t),
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    if let Some(e) = embedded {
        for t in missing {
            e.create_topic(&t.name, t.partitions)?;
        }
        return Ok(());
    }
    let admin: AdminClient<DefaultClientContext> =
        admin_config.create().map_err(|e| kafka_err("admin client", e))?;
    let new: Vec<NewTopic<'_>> = missing
        .iter()
        .map(|t| {
            let repl = if replication > 0 {
                TopicReplication::Fixed(replication)
            } else {
                TopicReplication::Fixed(-1)
            };
            t.config
                .iter()
                .fold(NewTopic::new(&t.name, t.partitions, repl), |nt, (k, v)| {
                    nt.set(k, v)
                })
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StreamsError::Usage(format!("runtime: {e}")))?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = rt
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(45), admin.create_topics(&new, &opts)).await
        })
        .map_err(|_| kafka_err("create internal topics", "timed out"))?
        .map_err(|e| kafka_err("create internal topics", e))?;
    for r in results {
        match r {
            Ok(name) => tracing::info!(topic = %name, "created internal topic"),
            Err((name, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {
                tracing::debug!(topic = %name, "internal topic exists")
            }
            Err((name, code)) => return Err(kafka_err(&format!("create topic {name}"), code)),
        }
    }
    Ok(())
}
