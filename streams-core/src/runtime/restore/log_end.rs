//! Where a changelog partition starts and ends, as its *current* leader says.
//!
//! A broker that was paused (`SIGSTOP`, a long GC pause, a frozen VM) and resumes still
//! believes it leads the partitions it led: until it has caught up with the cluster's
//! metadata it answers metadata requests with its old view and `ListOffsets` with its old
//! log end. A client that learns the partition's leader from that broker (its only
//! bootstrap broker, say) gets an end offset from before every write made while it was
//! paused. A restoration that stopped there would miss committed writes, and the task,
//! starting at the group's committed offsets, would never process them again: counts
//! emitted twice and short at the end, seen on a three-broker cluster under exactly-once.
//!
//! So the restoration asks every broker it knows for the partition's leader and its leader
//! epoch (KIP-320), takes the newest epoch, and asks that leader for the offsets with that
//! epoch as the current one: a stale leader refuses such a request (`FENCED_LEADER_EPOCH`)
//! rather than answering from its old log. A broker that does not answer within
//! [`TIMEOUT`] is left out; an answer from at least one is needed.
//!
//! A broker that let a lookup wait out [`TIMEOUT`] (paused, most likely) is not asked
//! again for [`QUIET_FOR`], unless no other broker is left to ask: otherwise every store a
//! restoration starts would wait [`TIMEOUT`] for it again. Leaving it out is safe: a
//! paused broker's view is the stale one this lookup guards against, the other brokers
//! learn the newest leader epoch from the controller, and the leader asked for the offsets
//! refuses an epoch that is not its current one.
//!
//! The partitions of one lookup go together ([`LogEnds::watermarks_of`]): one metadata
//! request per broker for all of them, then two offset requests per leader, so a task with
//! many logged stores costs a few round trips, not a few per store.
//!
//! Connections are kept between lookups, one per broker ([`LogEnds::on_conn`]): a
//! restoration of many stores, over TLS and SASL most of all, would otherwise open (and
//! authenticate) a connection to every broker for each store. A kept connection that fails
//! quickly (the broker closed it while idle) is replaced once; one that waited out
//! [`TIMEOUT`] is not, so a paused broker still costs one timeout per lookup at most.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::model::error::StreamsError;
use crate::runtime::streams_group::commit::error_name;
use crate::runtime::streams_group::wire::{Conn, KnownBrokers, kafka};

/// How long one broker may take to connect and answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// How long a broker that waited out [`TIMEOUT`] is left out of lookups.
const QUIET_FOR: Duration = Duration::from_secs(30);

/// `ListOffsets` timestamps: the log start and the high watermark.
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

/// Looks up changelog offsets through the cluster's brokers (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct LogEnds {
    known: Arc<KnownBrokers>,
    bootstrap: String,
    client_id: String,
    /// The brokers that waited out a lookup, and until when they are left out.
    quiet: Arc<Mutex<HashMap<String, Instant>>>,
    /// The connections kept between lookups, by broker address (taken out while in use).
    idle: Arc<Mutex<HashMap<String, Conn>>>,
    /// How many connections lookups have opened.
    opened: Arc<AtomicUsize>,
}

/// One broker's view of a partition: its leader's address and leader epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LeaderView {
    leader: String,
    epoch: i32,
}

impl LogEnds {
    /// Looks offsets up through `bootstrap` and the brokers learned from it.
    pub(crate) fn new(known: Arc<KnownBrokers>, bootstrap: String, client_id: String) -> Self {
        LogEnds {
            known,
            bootstrap,
            client_id,
            quiet: Arc::default(),
            idle: Arc::default(),
            opened: Arc::default(),
        }
    }

    /// The log start offset and the high watermark of `topic`-`partition`, from the leader
    /// with the newest leader epoch any broker reports.
    #[cfg(test)]
    pub(crate) fn watermarks(&self, topic: &str, partition: i32) -> Result<(i64, i64), StreamsError> {
        self.watermarks_of(&[(topic, partition)])
            .pop()
            .unwrap_or_else(|| Err(kafka("no answer".into(), true)))
    }

    /// [`watermarks`](Self::watermarks) of each of `partitions` (topic, partition), in
    /// their order: one metadata request per broker for all of them, then two offset
    /// requests per leader.
    pub(crate) fn watermarks_of(&self, partitions: &[(&str, i32)]) -> Vec<Result<(i64, i64), StreamsError>> {
        if partitions.is_empty() {
            return Vec::new();
        }
        if !self.known.has_learned() {
            // Learn the cluster's brokers (DescribeCluster through one of them); without
            // an answer, the bootstrap list (the runtime's has every broker of the cluster
            // at start) is asked.
            if let Err(e) = self.known.connect(&self.bootstrap, &self.client_id, TIMEOUT) {
                tracing::debug!(error = %e, "learning the cluster's brokers");
            }
        }
        let addrs = self.known.addresses(&self.bootstrap);
        let addrs = to_ask(addrs, &self.quiet_brokers(), Instant::now());
        type Views = Result<Vec<Result<LeaderView, StreamsError>>, StreamsError>;
        let views: Vec<(Views, Duration)> = std::thread::scope(|s| {
            let asks: Vec<_> = addrs
                .iter()
                .map(|addr| {
                    s.spawn(move || {
                        let started = Instant::now();
                        let views = self.on_conn(addr, |conn| leader_views(conn, partitions));
                        (views, started.elapsed())
                    })
                })
                .collect();
            asks.into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        let panicked = kafka("a metadata lookup panicked".into(), true);
                        (Err(panicked), Duration::ZERO)
                    })
                })
                .collect()
        });
        self.note_quiet(&addrs, &views);
        // Per partition, the newest view any broker gave; then the partitions by leader.
        let mut out: Vec<Result<(i64, i64), StreamsError>> = Vec::with_capacity(partitions.len());
        let mut by_leader: HashMap<String, Vec<(usize, i32)>> = HashMap::new();
        for i in 0..partitions.len() {
            let seen = views.iter().map(|(v, _)| match v {
                Ok(per_partition) => per_partition[i].as_ref().cloned().map_err(again),
                Err(e) => Err(again(e)),
            });
            match newest(seen.collect()) {
                Ok(best) => {
                    by_leader.entry(best.leader).or_default().push((i, best.epoch));
                    out.push(Err(kafka("not looked up".into(), true)));
                }
                Err(e) => out.push(Err(e)),
            }
        }
        for (leader, led) in by_leader {
            let asked: Vec<(&str, i32, i32)> = led
                .iter()
                .map(|&(i, epoch)| (partitions[i].0, partitions[i].1, epoch))
                .collect();
            let answer = self.on_conn(&leader, |conn| {
                let low = match list_offsets(conn, &asked, EARLIEST)? {
                    Ok(low) => low,
                    Err(e) => return Ok(Err(e)),
                };
                let high = list_offsets(conn, &asked, LATEST)?;
                Ok(high.map(|high| low.into_iter().zip(high).collect::<Vec<_>>()))
            });
            for (k, &(i, _)) in led.iter().enumerate() {
                out[i] = match &answer {
                    Ok(both) => match &both[k] {
                        (Ok(low), Ok(high)) => Ok((*low, *high)),
                        (Err(e), _) | (_, Err(e)) => Err(again(e)),
                    },
                    Err(e) => Err(again(e)),
                };
            }
        }
        out
    }

    /// Runs `f` on a connection to `addr`: the one kept from an earlier lookup, else a new
    /// one, kept again once the broker answered (an error answer included). A kept
    /// connection that fails before [`TIMEOUT`] (closed by the broker while idle, most
    /// likely) is dropped and `f` runs once more on a new one; `f` only reads, so running it
    /// twice is harmless.
    fn on_conn<T>(&self, addr: &str, f: impl Fn(&mut Conn) -> Answered<T>) -> Result<T, StreamsError> {
        let kept = self.idle_conns().remove(addr);
        if let Some(mut conn) = kept {
            let started = Instant::now();
            match f(&mut conn) {
                Ok(answer) => {
                    self.idle_conns().insert(addr.to_owned(), conn);
                    return answer;
                }
                Err(e) if started.elapsed() >= TIMEOUT => return Err(e),
                Err(e) => {
                    tracing::debug!(broker = addr, error = %e, "a kept connection failed; connecting again")
                }
            }
        }
        let mut conn = self.known.connect_to(addr, &self.client_id, TIMEOUT)?;
        self.opened.fetch_add(1, Ordering::Relaxed);
        let answer = f(&mut conn)?;
        self.idle_conns().insert(addr.to_owned(), conn);
        answer
    }

    fn idle_conns(&self) -> std::sync::MutexGuard<'_, HashMap<String, Conn>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn quiet_brokers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.quiet.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Leaves out, for [`QUIET_FOR`], each broker whose lookup failed after waiting out
    /// [`TIMEOUT`]; a broker that answered is asked again at once.
    fn note_quiet<T>(&self, addrs: &[String], views: &[(Result<T, StreamsError>, Duration)]) {
        let mut quiet = self.quiet_brokers();
        for (addr, (view, took)) in addrs.iter().zip(views) {
            match view {
                Err(e) if *took >= TIMEOUT => {
                    tracing::info!(broker = %addr, error = %e, "a broker did not answer a changelog offset lookup; leaving it out for {QUIET_FOR:?}");
                    quiet.insert(addr.clone(), Instant::now() + QUIET_FOR);
                }
                Ok(_) => {
                    quiet.remove(addr);
                }
                Err(_) => {}
            }
        }
    }
}

/// The same failure again, for another partition it stands for (errors are not `Clone`).
fn again(e: &StreamsError) -> StreamsError {
    match e {
        StreamsError::Kafka { message, retriable } => kafka(message.clone(), *retriable),
        other => kafka(other.to_string(), other.is_retriable()),
    }
}

/// What a broker answered (inside: its answer, possibly an error), or how the connection
/// failed (outside).
type Answered<T> = Result<Result<T, StreamsError>, StreamsError>;

/// The leader and leader epoch of each of `partitions` as the broker on `conn` sees them,
/// from one metadata request.
fn leader_views(
    conn: &mut Conn,
    partitions: &[(&str, i32)],
) -> Answered<Vec<Result<LeaderView, StreamsError>>> {
    let addr = conn.addr().to_owned();
    let Some(version) = conn.version(3, (9, 9)) else {
        return Ok(Err(kafka(format!("{addr} does not offer Metadata v9"), false)));
    };
    let mut topics: Vec<&str> = partitions.iter().map(|(t, _)| *t).collect();
    topics.sort_unstable();
    topics.dedup();
    let mut req = MetadataRequest::default();
    req.topics = Some(
        topics
            .into_iter()
            .map(|topic| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(TopicName(StrBytes::from_string(topic.to_owned())));
                t
            })
            .collect(),
    );
    let resp = conn.send(&req, version)?;
    Ok(Ok(partitions
        .iter()
        .map(|&(topic, partition)| view_of(&addr, &resp, topic, partition))
        .collect()))
}

/// The leader view of `topic`-`partition` in `resp`, the metadata from `addr`.
fn view_of(
    addr: &str,
    resp: &MetadataResponse,
    topic: &str,
    partition: i32,
) -> Result<LeaderView, StreamsError> {
    let p = resp
        .topics
        .iter()
        .filter(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
        .ok_or_else(|| kafka(format!("{addr} knows no partition {topic}-{partition}"), true))?;
    if p.error_code != 0 || p.leader_id.0 < 0 {
        return Err(kafka(
            format!(
                "{addr}: {topic}-{partition} has no leader ({})",
                error_name(p.error_code)
            ),
            true,
        ));
    }
    let leader = resp
        .brokers
        .iter()
        .find(|b| b.node_id == p.leader_id)
        .map(|b| format!("{}:{}", b.host.as_str(), b.port))
        .ok_or_else(|| {
            kafka(
                format!("{addr}: the leader of {topic}-{partition} is not listed"),
                true,
            )
        })?;
    Ok(LeaderView {
        leader,
        epoch: p.leader_epoch,
    })
}

/// The brokers of `addrs` to ask at `now`: those not left out by `quiet`, or all of them when
/// that leaves none.
fn to_ask(addrs: Vec<String>, quiet: &HashMap<String, Instant>, now: Instant) -> Vec<String> {
    let awake: Vec<String> = addrs
        .iter()
        .filter(|a| quiet.get(*a).is_none_or(|until| *until <= now))
        .cloned()
        .collect();
    if awake.is_empty() { addrs } else { awake }
}

/// The view with the newest leader epoch; the first error when no broker answered.
fn newest(views: Vec<Result<LeaderView, StreamsError>>) -> Result<LeaderView, StreamsError> {
    let mut first_error = None;
    let mut best: Option<LeaderView> = None;
    for v in views {
        match v {
            Ok(v) if best.as_ref().is_none_or(|b| v.epoch > b.epoch) => best = Some(v),
            Ok(_) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    best.ok_or_else(|| first_error.unwrap_or_else(|| kafka("no broker known".into(), true)))
}

/// The offset at `timestamp` (`EARLIEST`, `LATEST`) of each of `asked` (topic, partition,
/// leader epoch) from the leader on `conn`, which must be at that leader epoch for each, in
/// one request.
fn list_offsets(
    conn: &mut Conn,
    asked: &[(&str, i32, i32)],
    timestamp: i64,
) -> Answered<Vec<Result<i64, StreamsError>>> {
    let Some(version) = conn.version(2, (6, 9)) else {
        return Ok(Err(kafka(
            format!("{} does not offer ListOffsets v6", conn.addr()),
            false,
        )));
    };
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for &(topic, partition, epoch) in asked {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = partition;
        p.current_leader_epoch = epoch;
        p.timestamp = timestamp;
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(p),
            None => {
                let mut t = ListOffsetsTopic::default();
                t.name = TopicName(StrBytes::from_string(topic.to_owned()));
                t.partitions = vec![p];
                topics.push(t);
            }
        }
    }
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.isolation_level = 0; // read_uncommitted: the high watermark
    req.topics = topics;
    let resp = conn.send(&req, version)?;
    let addr = conn.addr();
    let offset = |&(topic, partition, epoch): &(&str, i32, i32)| {
        let Some(p) = resp
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
        else {
            return Err(kafka(
                format!("ListOffsets from {addr}: no {topic}-{partition}"),
                true,
            ));
        };
        if p.error_code != 0 {
            return Err(kafka(
                format!(
                    "ListOffsets of {topic}-{partition} at leader epoch {epoch} from {addr}: {}",
                    error_name(p.error_code)
                ),
                true,
            ));
        }
        Ok(p.offset)
    };
    Ok(Ok(asked.iter().map(offset).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(leader: &str, epoch: i32) -> Result<LeaderView, StreamsError> {
        Ok(LeaderView {
            leader: leader.into(),
            epoch,
        })
    }

    #[test]
    fn the_newest_leader_epoch_wins_over_a_stale_leader_that_answered_first() {
        let stale = view("b1:9092", 7);
        let current = view("b2:9092", 8);
        let silent = Err(kafka("b3: timed out".into(), true));
        assert_eq!(
            newest(vec![stale, silent, current]).unwrap(),
            view("b2:9092", 8).unwrap()
        );
    }

    /// Against the real broker: the offsets equal librdkafka's `read_uncommitted`
    /// watermarks, an open transaction's records included.
    #[test]
    fn the_leaders_offsets_include_an_open_transaction() {
        use rdkafka::ClientConfig;
        use rdkafka::consumer::{BaseConsumer, Consumer};
        use rdkafka::producer::Producer;
        use streams_test_utils::kafka;

        use crate::runtime::restore::tests::send;

        let Some(bootstrap) = kafka::require_kafka("log_end") else {
            return;
        };
        let topic = kafka::unique_name("log-end");
        kafka::create_topic(&bootstrap, &topic, 2, &[]).unwrap();
        let producer = kafka::transactional_producer(&bootstrap, "log-end-txn", &[]).unwrap();
        let timeout = Duration::from_secs(30);
        producer.begin_transaction().unwrap();
        send(&producer, &topic, 0..100, "k");
        producer.commit_transaction(timeout).unwrap();
        producer.begin_transaction().unwrap();
        send(&producer, &topic, 0..50, "o");

        let ends = LogEnds::new(
            Arc::new(KnownBrokers::default()),
            bootstrap.clone(),
            "log-end-test".into(),
        );
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("isolation.level", "read_uncommitted")
            .create()
            .unwrap();
        let (low, high) = ends.watermarks(&topic, 0).expect("the leader's offsets");
        assert_eq!(
            (low, high),
            consumer.fetch_watermarks(&topic, 0, timeout).unwrap()
        );
        assert_eq!((low, high), (0, 151), "100 records, their commit marker, 50 open");
        assert_eq!(ends.watermarks(&topic, 1).unwrap(), (0, 0));
        assert!(ends.watermarks(&topic, 7).is_err(), "no such partition");
        assert_eq!(
            ends.opened.load(Ordering::Relaxed),
            1,
            "one broker: one connection for every lookup, an error answer included"
        );
        // A kept connection the broker closed: the lookup connects again and answers.
        let addr = ends.idle_conns().keys().next().cloned().unwrap();
        let broken = ends.on_conn(&addr, |_| -> Answered<()> { Err(kafka("closed".into(), true)) });
        assert!(broken.is_err(), "a new connection that fails fails the lookup");
        assert_eq!(ends.opened.load(Ordering::Relaxed), 2);
        assert!(ends.idle_conns().is_empty(), "a failed connection is not kept");
        assert_eq!(ends.watermarks(&topic, 0).unwrap(), (0, 151));
        assert_eq!(ends.opened.load(Ordering::Relaxed), 3);
        let calls = std::cell::Cell::new(0);
        let answer = ends.on_conn(&addr, |conn| {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                return Err(kafka("closed while idle".into(), true));
            }
            let latest = list_offsets(conn, &[(topic.as_str(), 0, -1)], LATEST)?;
            Ok(latest
                .map(|mut per_partition| per_partition.remove(0))
                .and_then(|r| r))
        });
        assert_eq!(answer.unwrap(), 151);
        assert_eq!(ends.opened.load(Ordering::Relaxed), 4, "replaced once");
        assert_eq!(ends.watermarks(&topic, 0).unwrap(), (0, 151));
        assert_eq!(ends.opened.load(Ordering::Relaxed), 4, "and kept");
        // Several partitions, of two topics, in one lookup: each answered in its place, a
        // missing one failing alone, on the kept connection.
        let other = kafka::unique_name("log-end-other");
        kafka::create_topic(&bootstrap, &other, 1, &[]).unwrap();
        send(&producer, &other, 0..7, "x");
        let many = ends.watermarks_of(&[(&topic, 1), (&other, 0), (&topic, 7), (&topic, 0)]);
        assert_eq!(many.len(), 4);
        assert_eq!(many[0].as_ref().ok(), Some(&(0, 0)));
        assert_eq!(
            many[1].as_ref().ok(),
            Some(&(0, 7)),
            "7 records of the open transaction"
        );
        assert!(many[2].is_err(), "no such partition: {:?}", many[2]);
        assert_eq!(many[3].as_ref().ok(), Some(&(0, 151)));
        assert_eq!(ends.opened.load(Ordering::Relaxed), 4, "no new connection");
        producer.abort_transaction(timeout).unwrap();
    }

    #[test]
    fn brokers_left_out_are_asked_again_once_their_time_is_up_or_none_is_left() {
        let addrs = || vec!["b1:9092".to_owned(), "b2:9092".to_owned(), "b3:9092".to_owned()];
        let now = Instant::now();
        let mut quiet = HashMap::from([("b2:9092".to_owned(), now + QUIET_FOR)]);
        assert_eq!(to_ask(addrs(), &quiet, now), ["b1:9092", "b3:9092"]);
        assert_eq!(
            to_ask(addrs(), &quiet, now + QUIET_FOR),
            addrs(),
            "its time is up"
        );
        quiet.insert("b1:9092".into(), now + QUIET_FOR);
        quiet.insert("b3:9092".into(), now + QUIET_FOR);
        assert_eq!(
            to_ask(addrs(), &quiet, now),
            addrs(),
            "none left: every broker is asked"
        );
    }

    #[test]
    fn a_broker_that_waited_out_the_timeout_is_left_out_and_one_that_answers_is_back() {
        let ends = LogEnds::new(Arc::new(KnownBrokers::default()), "b1:9092".into(), "t".into());
        let addrs = vec!["b1:9092".to_owned(), "b2:9092".to_owned(), "b3:9092".to_owned()];
        let silent = || (Err(kafka("timed out".into(), true)), TIMEOUT);
        let refused = || (Err(kafka("refused".into(), true)), Duration::from_millis(1));
        ends.note_quiet(
            &addrs,
            &[silent(), refused(), (view("b1:9092", 3), Duration::ZERO)],
        );
        assert_eq!(ends.quiet_brokers().keys().collect::<Vec<_>>(), ["b1:9092"]);
        let asked = to_ask(addrs.clone(), &ends.quiet_brokers(), Instant::now());
        assert_eq!(
            asked,
            ["b2:9092", "b3:9092"],
            "a refused connection costs nothing to retry"
        );
        ends.note_quiet(&addrs[..1], &[(view("b1:9092", 4), Duration::ZERO)]);
        assert!(
            ends.quiet_brokers().is_empty(),
            "it answered: asked again at once"
        );
    }

    #[test]
    fn without_any_answer_the_first_error_is_returned() {
        let e = newest(vec![
            Err(kafka("b1: refused".into(), true)),
            Err(kafka("b2".into(), true)),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("b1: refused"), "{e}");
    }
}
