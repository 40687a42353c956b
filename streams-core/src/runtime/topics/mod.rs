//! Internal topics: the changelog of every logged store, created at start with the
//! partition count of its sub-topology's source topics (`cleanup.policy=compact`); the
//! repartition topics (written by a sink and read by a source of the same topology), created
//! with the partition count of the topics upstream of them; and the partition-count checks
//! Kafka Streams makes before it runs.

pub(in crate::runtime) mod check;
pub(in crate::runtime) mod offset_metadata;
pub(in crate::runtime) mod purge;
pub(in crate::runtime) mod resets;
pub(in crate::runtime) mod start_offsets;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};

use crate::model::error::StreamsError;
use crate::runtime::client::connect::denied;
use crate::runtime::client::embedded::EmbeddedKafka;
use crate::runtime::client::errors::kafka_err;
use crate::topology::changelog_topic;
use crate::topology::{SubTopology, Topology};

/// A topic the application needs, with its partitions and configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InternalTopic {
    pub name: String,
    pub partitions: i32,
    pub config: BTreeMap<String, String>,
}

/// What the principal must be granted to describe a topic.
enum Role<'a> {
    /// A source topic the application reads.
    Source,
    /// An internal topic of the application `application_id`.
    Internal(&'a str),
}

/// The partition count of `topic`; `None` when it does not exist. A topic the principal may
/// not describe is an authorization error, not a missing topic.
fn partitions_of<C: ConsumerContext>(
    metadata_consumer: &BaseConsumer<C>,
    topic: &str,
    role: Role<'_>,
) -> Result<Option<i32>, StreamsError> {
    let md = metadata_consumer
        .fetch_metadata(Some(topic), Duration::from_secs(15))
        .map_err(|e| kafka_err(&format!("metadata of {topic}"), e))?;
    let Some(t) = md.topics().first() else {
        return Ok(None);
    };
    if t.error() == Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) {
        let grant = match role {
            Role::Source => "READ on it".to_owned(),
            Role::Internal(app) => format!(
                "CREATE, READ, WRITE and DESCRIBE on topics prefixed `{app}` (the application's internal topics)"
            ),
        };
        return Err(denied(
            format!("topic `{topic}`"),
            "describing it",
            RDKafkaErrorCode::TopicAuthorizationFailed,
            &grant,
        ));
    }
    Ok(Some(t)
        .filter(|t| t.error().is_none())
        .map(|t| t.partitions().len() as i32)
        .filter(|&n| n > 0))
}

/// The topics of the cluster whose name starts with `prefix`, with their partition counts.
pub(crate) fn list_with_prefix<C: ConsumerContext>(
    md: &BaseConsumer<C>,
    prefix: &str,
) -> Result<BTreeMap<String, i32>, StreamsError> {
    let all = md
        .fetch_metadata(None, Duration::from_secs(15))
        .map_err(|e| kafka_err("metadata of the cluster's topics", e))?;
    Ok(all
        .topics()
        .iter()
        .filter(|t| t.name().starts_with(prefix) && t.error().is_none())
        .map(|t| (t.name().to_owned(), t.partitions().len() as i32))
        .collect())
}

/// The repartition topics of `topology`: those a sink of it writes and a source of it reads.
pub(super) fn repartition_topic_names(topology: &Topology) -> BTreeSet<String> {
    let subs: Vec<&SubTopology> = topology.subtopologies().iter().filter(|s| !s.global).collect();
    repartition_topics(&subs)
}

/// The configs of a repartition topic, as Kafka Streams creates them: records are deleted
/// once committed (see `purge.rs`), not by age.
pub(super) fn repartition_topic_config() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("cleanup.policy".to_owned(), "delete".to_owned()),
        ("retention.ms".to_owned(), "-1".to_owned()),
        ("segment.bytes".to_owned(), "52428800".to_owned()),
    ])
}

/// The topics a sink of `subs` writes and a source of `subs` reads.
fn repartition_topics(subs: &[&SubTopology]) -> BTreeSet<String> {
    let read: BTreeSet<&String> = subs.iter().flat_map(|s| &s.source_topics).collect();
    subs.iter()
        .flat_map(|s| &s.sink_topics)
        .filter(|t| read.contains(t))
        .cloned()
        .collect()
}

/// A way to find a repartition topic's partition count from the counts known so far.
type CountRule<'a> = dyn Fn(&String, &BTreeMap<String, i32>) -> Option<i32> + 'a;

/// The partition count of every repartition topic, given the counts of the external
/// source topics: a repartition topic read together with external topics takes their count
/// (so the reader is co-partitioned); otherwise the largest count of the source topics of
/// the sub-topologies that write it, as in Kafka Streams. A topic read beside a resolved
/// repartition topic takes its count too (a foreign-key join's subscription and response
/// topics, whose writers read them back). Chains resolve in order.
fn repartition_counts(
    subs: &[&SubTopology],
    repartition: &BTreeSet<String>,
    external: &BTreeMap<String, i32>,
    fixed: &BTreeMap<String, i32>,
) -> Result<BTreeMap<String, i32>, StreamsError> {
    let mut counts = external.clone();
    for t in repartition {
        if let Some(&n) = fixed.get(t) {
            counts.insert(t.clone(), n);
        }
    }
    let mut pending: Vec<&String> = repartition.iter().filter(|t| !fixed.contains_key(*t)).collect();
    // The count of a resolved topic read beside `topic` by one sub-topology (an external
    // one first), which `topic` must be co-partitioned with.
    let beside = |topic: &String, counts: &BTreeMap<String, i32>| {
        let co_read = || {
            subs.iter()
                .filter(|s| s.source_topics.contains(topic))
                .flat_map(|s| &s.source_topics)
                .filter(move |t| *t != topic)
        };
        co_read()
            .find_map(|t| external.get(t).copied())
            .or_else(|| co_read().find_map(|t| counts.get(t).copied()))
    };
    // The largest count of the sources of the sub-topologies that write `topic`.
    let upstream = |topic: &String, counts: &BTreeMap<String, i32>| {
        let mut max = None;
        for sub in subs.iter().filter(|s| s.sink_topics.contains(topic)) {
            for t in &sub.source_topics {
                max = Some(max.unwrap_or(0).max(*counts.get(t)?));
            }
        }
        max
    };
    while !pending.is_empty() {
        let before = pending.len();
        // Co-partitioning first: a topic read beside a resolved one takes its count (a
        // foreign-key join's subscription and response topics, whose writers read them
        // back in a cycle, resolve only this way); then the writers' sources.
        let rules: [&CountRule<'_>; 2] = [&beside, &upstream];
        for rule in rules {
            let mut still = Vec::new();
            for topic in pending {
                match rule(topic, &counts) {
                    Some(n) => {
                        counts.insert(topic.clone(), n);
                    }
                    None => still.push(topic),
                }
            }
            pending = still;
            if pending.len() < before {
                break;
            }
        }
        if pending.len() == before {
            return Err(StreamsError::Usage(format!(
                "cannot derive the partition counts of repartition topics {pending:?}"
            )));
        }
    }
    Ok(counts)
}

/// Checks source topics and computes the internal topics the topology needs.
pub(crate) fn plan<C: ConsumerContext>(
    topology: &Topology,
    app_id: &str,
    md: &BaseConsumer<C>,
) -> Result<Vec<InternalTopic>, StreamsError> {
    let subs: Vec<&SubTopology> = topology.subtopologies().iter().filter(|s| !s.global).collect();
    let repartition = repartition_topics(&subs);
    let mut external = BTreeMap::new();
    for t in subs.iter().flat_map(|s| &s.source_topics) {
        if repartition.contains(t) || external.contains_key(t) {
            continue;
        }
        match partitions_of(md, t, Role::Source)? {
            Some(n) => external.insert(t.clone(), n),
            None => return Err(StreamsError::Usage(format!("source topic `{t}` does not exist"))),
        };
    }
    let all = repartition_counts(&subs, &repartition, &external, topology.repartition_partitions())?;
    let mut topics: Vec<InternalTopic> = repartition
        .iter()
        .filter_map(|t| {
            all.get(t).map(|&n| InternalTopic {
                name: t.clone(),
                partitions: n,
                config: repartition_topic_config(),
            })
        })
        .collect();
    for sub in &subs {
        let counts: Vec<(String, i32)> = sub
            .source_topics
            .iter()
            .filter_map(|t| all.get(t).map(|&n| (t.clone(), n)))
            .collect();
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
            topics.push(InternalTopic {
                name: changelog_topic(app_id, &store),
                partitions: n,
                config: changelog_config(topology, &store),
            });
        }
    }
    Ok(topics)
}

/// The configuration of store `store`'s changelog topic: the builder's
/// [`logging_config`](streams_state::StoreBuilder::logging_config) (a window or session
/// store's says `cleanup.policy=compact,delete` and its `retention.ms`), with
/// `cleanup.policy=compact` where the builder names no policy.
fn changelog_config(topology: &Topology, store: &str) -> BTreeMap<String, String> {
    let mut config = topology.changelog_config(store).unwrap_or_default();
    config
        .entry("cleanup.policy".into())
        .or_insert_with(|| "compact".into());
    config
}

/// The partition count of every non-global sub-topology (its source topics' count), from
/// the source topics and the internal topics of `plan`.
pub(crate) fn subtopology_partitions<C: ConsumerContext>(
    topology: &Topology,
    plan: &[InternalTopic],
    md: &BaseConsumer<C>,
) -> Result<BTreeMap<u32, i32>, StreamsError> {
    let mut out = BTreeMap::new();
    for sub in topology.subtopologies().iter().filter(|s| !s.global) {
        let Some(topic) = sub.source_topics.first() else {
            continue;
        };
        let n = match plan.iter().find(|t| t.name == *topic) {
            Some(t) => Some(t.partitions),
            None => partitions_of(md, topic, Role::Source)?,
        };
        if let Some(n) = n {
            out.insert(sub.id, n);
        }
    }
    Ok(out)
}

/// Creates the internal topics that do not exist; an existing one with another partition
/// count is an error.
pub(crate) fn ensure<C: ConsumerContext>(
    topics: &[InternalTopic],
    app_id: &str,
    md: &BaseConsumer<C>,
    admin_config: &rdkafka::ClientConfig,
    tokens: Option<&crate::config::OAuthBearerTokenProvider>,
    embedded: Option<&EmbeddedKafka>,
    replication: i32,
) -> Result<(), StreamsError> {
    let mut missing = Vec::new();
    for t in topics {
        match partitions_of(md, &t.name, Role::Internal(app_id))? {
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
    let admin: AdminClient<crate::runtime::client::connect::ConnectContext> = admin_config
        .create_with_context(crate::runtime::client::connect::ConnectContext::default())
        .map_err(|e| kafka_err("admin client", e))?;
    let admin = crate::runtime::client::oauth::Authenticated::new(admin, tokens, "admin client")?;
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
            Err((name, code @ RDKafkaErrorCode::TopicAuthorizationFailed)) => {
                return Err(denied(
                    format!("topic `{name}`"),
                    "creating it",
                    code,
                    &format!(
                        "CREATE on topics prefixed `{app_id}` (or create the internal topics beforehand)"
                    ),
                ));
            }
            Err((name, code)) => return Err(kafka_err(&format!("create topic {name}"), code)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(id: u32, sources: &[&str], sinks: &[&str]) -> SubTopology {
        SubTopology {
            id,
            nodes: Vec::new(),
            source_topics: sources.iter().map(|s| s.to_string()).collect(),
            sink_topics: sinks.iter().map(|s| s.to_string()).collect(),
            stores: Vec::new(),
            global: false,
        }
    }

    #[test]
    fn repartition_topics_take_upstream_or_co_partitioned_counts() {
        let subs = [
            sub(0, &["lines", "more"], &["r1", "out"]),
            sub(1, &["r1"], &["r2"]),
            sub(2, &["r2"], &["out2"]),
            sub(3, &["words"], &["r3"]),
            sub(4, &["r3", "users"], &[]),
        ];
        let refs: Vec<&SubTopology> = subs.iter().collect();
        let repartition = repartition_topics(&refs);
        assert_eq!(
            repartition,
            BTreeSet::from(["r1".into(), "r2".into(), "r3".into()])
        );
        let external = BTreeMap::from([
            ("lines".into(), 2),
            ("more".into(), 6),
            ("words".into(), 8),
            ("users".into(), 3),
        ]);
        let counts = repartition_counts(&refs, &repartition, &external, &BTreeMap::new()).unwrap();
        assert_eq!(counts["r1"], 6, "largest upstream count");
        assert_eq!(counts["r2"], 6, "chained");
        assert_eq!(counts["r3"], 3, "co-partitioned with the table it joins");
    }

    #[test]
    fn a_fixed_count_wins_and_flows_downstream() {
        let subs = [
            sub(0, &["lines"], &["r1"]),
            sub(1, &["r1"], &["r2"]),
            sub(2, &["r2"], &[]),
        ];
        let refs: Vec<&SubTopology> = subs.iter().collect();
        let repartition = repartition_topics(&refs);
        let external = BTreeMap::from([("lines".into(), 2)]);
        let fixed = BTreeMap::from([("r1".into(), 10)]);
        let counts = repartition_counts(&refs, &repartition, &external, &fixed).unwrap();
        assert_eq!((counts["r1"], counts["r2"]), (10, 10));
    }

    #[test]
    fn a_window_store_changelog_keeps_its_policy_and_retention() {
        use std::time::Duration;

        use streams_state::Stores;
        use streams_state::serde::{StringSerde, U64Serde};

        use crate::topology::SourceConfig;

        let mut b = Topology::builder();
        let src = b.source("in", SourceConfig::new(["in"], StringSerde, StringSerde));
        let minute = Duration::from_secs(60);
        let w = b.store(Stores::in_memory_window_store(
            "w",
            minute,
            minute,
            false,
            StringSerde,
            U64Serde,
        ));
        let kv = b.store(Stores::in_memory_kv("kv", StringSerde, U64Serde));
        let p = b.processor("p", [&src], |_| Ok(Nothing));
        b.connect(&p, &w).connect(&p, &kv);
        let t = b.build().unwrap();
        let w = changelog_config(&t, "w");
        assert_eq!(w["cleanup.policy"], "compact,delete");
        assert_eq!(w["retention.ms"], (60_000 + 86_400_000).to_string());
        assert_eq!(
            changelog_config(&t, "kv"),
            BTreeMap::from([("cleanup.policy".to_owned(), "compact".to_owned())])
        );
    }

    struct Nothing;
    impl crate::Processor<String, String> for Nothing {
        fn process(
            &mut self,
            _: &mut crate::ProcessorContext<'_, (), ()>,
            _: crate::Record<String, String>,
        ) -> crate::ProcessResult {
            Ok(())
        }
    }

    /// A foreign-key join of two tables that are themselves read from repartition topics:
    /// the subscription topic is written beside the joining table and read beside the
    /// foreign one, the response topic the other way round.
    #[test]
    fn foreign_key_join_topics_take_the_count_of_the_table_they_are_read_with() {
        let subs = [
            sub(0, &["auctions"], &["by-id"]),
            sub(1, &["people"], &["by-person"]),
            sub(2, &["by-id", "response"], &["registration", "out"]),
            sub(3, &["by-person", "registration"], &["response"]),
        ];
        let refs: Vec<&SubTopology> = subs.iter().collect();
        let repartition = repartition_topics(&refs);
        let external = BTreeMap::from([("auctions".into(), 4), ("people".into(), 2)]);
        let counts = repartition_counts(&refs, &repartition, &external, &BTreeMap::new()).unwrap();
        assert_eq!((counts["by-id"], counts["by-person"]), (4, 2));
        assert_eq!(counts["registration"], 2, "read with the foreign table");
        assert_eq!(counts["response"], 4, "read with the joining table");
    }

    #[test]
    fn a_repartition_cycle_is_an_error() {
        let subs = [sub(0, &["a"], &["b"]), sub(1, &["b"], &["a"])];
        let refs: Vec<&SubTopology> = subs.iter().collect();
        let repartition = repartition_topics(&refs);
        assert!(repartition_counts(&refs, &repartition, &BTreeMap::new(), &BTreeMap::new()).is_err());
    }
}
