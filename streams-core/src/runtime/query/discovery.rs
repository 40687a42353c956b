//! Which instance hosts which task, from one of two sources:
//!
//! - **The streams group's endpoint map** (`group.protocol=streams`). The group coordinator
//!   knows every member's `application.server` and tasks and sends the map with the
//!   heartbeats (`streams_group/endpoints.rs`). Other instances are listed from the latest
//!   map, by endpoint (the map names no process ids), and this one from its live state.
//!   Members without `application.server` are not in the map. No topic is involved.
//! - **The instances topic** (the classic and consumer protocols, whose coordinators know
//!   nothing of tasks): every instance announces its endpoint (`application.server`) and its
//!   tasks on a compacted internal topic, `<application.id>-instances`, and reads everyone's
//!   announcements from it, as follows.
//!
//! - **What is announced.** The record's key is the instance's process id; its value lists
//!   the endpoint and the tasks the instance hosts (running, restoring or waiting for a
//!   state directory), each with the wall-clock time the instance began hosting it. An
//!   instance announces after its stream threads' tasks change (they report them at most a
//!   second apart, and at the end of each rebalance) and every 5 s; a clean close writes a
//!   tombstone.
//! - **Who owns a task.** During a hand-over, or after an instance died without its
//!   tombstone, two announcements may name the same task: the later claim (by the time its
//!   instance began hosting it) wins. An instance that owns no task and has not announced
//!   for 15 s is not listed.
//! - **Limits.** Claims are ordered by wall clocks: instances whose clocks differ by more
//!   than the time between two hand-overs of one task may disagree about its owner for a
//!   while.
//!
//! Either way an answer is a hint, checked where it matters: a query for one partition fails
//! with the retriable [`QueryError::NotHosted`](super::QueryError::NotHosted) on an
//! instance that does not host it.
//!
//! The stream threads only write their task sets into [`Hosting`] (a lock once a second
//! per thread, never per record); this module's own thread does all the Kafka I/O of the
//! instances topic.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use crate::model::TaskId;
use crate::model::error::StreamsError;
use crate::runtime::client::oauth::Authenticated;
use crate::runtime::streams_group::endpoints::GroupEndpoints;

/// How often an instance announces itself even when nothing changed.
const REFRESH: Duration = Duration::from_secs(5);
/// An instance that owns no task and was silent this long is not listed.
const SILENT: i64 = 15_000;

/// The name of the application's instances topic.
pub(crate) fn instances_topic(application_id: &str) -> String {
    format!("{application_id}-instances")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The tasks this instance hosts, by stream thread, each with the time hosting began, and
/// the standby tasks it keeps.
#[derive(Default)]
pub(crate) struct Hosting {
    threads: Mutex<BTreeMap<String, Hosted>>,
    version: AtomicU64,
}

#[derive(Default)]
struct Hosted {
    tasks: BTreeMap<TaskId, i64>,
    standbys: BTreeSet<TaskId>,
}

impl Hosting {
    /// `thread` hosts exactly `tasks` now, and keeps `standbys`.
    pub fn set(&self, thread: &str, tasks: impl IntoIterator<Item = TaskId>, standbys: BTreeSet<TaskId>) {
        let Ok(mut threads) = self.threads.lock() else {
            return;
        };
        let old = threads.remove(thread).unwrap_or_default();
        let now = now_ms();
        let new: BTreeMap<TaskId, i64> = tasks
            .into_iter()
            .map(|t| (t, old.tasks.get(&t).copied().unwrap_or(now)))
            .collect();
        if !new.keys().eq(old.tasks.keys()) || standbys != old.standbys {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
        threads.insert(thread.to_owned(), Hosted { tasks: new, standbys });
    }

    /// `thread` has ended.
    pub fn remove(&self, thread: &str) {
        if let Ok(mut threads) = self.threads.lock()
            && threads
                .remove(thread)
                .is_some_and(|t| !t.tasks.is_empty() || !t.standbys.is_empty())
        {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Every standby task of the instance.
    pub fn standbys(&self) -> BTreeSet<TaskId> {
        self.threads
            .lock()
            .map(|t| t.values().flat_map(|h| h.standbys.iter().copied()).collect())
            .unwrap_or_default()
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Every hosted task with the time hosting began.
    pub fn snapshot(&self) -> BTreeMap<TaskId, i64> {
        let mut all = BTreeMap::new();
        if let Ok(threads) = self.threads.lock() {
            for hosted in threads.values() {
                for (t, since) in &hosted.tasks {
                    let e = all.entry(*t).or_insert(*since);
                    *e = (*e).max(*since);
                }
            }
        }
        all
    }
}

/// One instance's announcement, as written to the instances topic (JSON).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Announcement {
    pub process_id: String,
    pub endpoint: Option<String>,
    /// `(sub-topology, partition, hosted since)`.
    pub tasks: Vec<(u32, i32, i64)>,
    /// The standby tasks it keeps, `(sub-topology, partition)` (absent from announcements
    /// of versions before standbys were announced).
    #[serde(default)]
    pub standbys: Vec<(u32, i32)>,
    pub time_ms: i64,
}

impl Announcement {
    fn local(process_id: &str, endpoint: Option<&str>, hosting: &Hosting) -> Self {
        Self {
            process_id: process_id.to_owned(),
            endpoint: endpoint.map(str::to_owned),
            tasks: hosting
                .snapshot()
                .into_iter()
                .map(|(t, since)| (t.subtopology, t.partition, since))
                .collect(),
            standbys: hosting
                .standbys()
                .into_iter()
                .map(|t| (t.subtopology, t.partition))
                .collect(),
            time_ms: now_ms(),
        }
    }
}

/// An instance and the tasks it owns, after resolving competing claims, and the standby
/// tasks it keeps (of tasks it does not own).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resolved {
    /// `None` for an instance known from the group's endpoint map.
    pub process_id: Option<String>,
    pub endpoint: Option<String>,
    pub tasks: BTreeSet<TaskId>,
    pub standbys: BTreeSet<TaskId>,
}

/// Resolves `announcements` (one per instance): each task goes to its latest claim (the
/// larger process id on a tie); instances that own nothing and were silent for
/// [`SILENT`] at `now` are left out, unless `keep` names them.
pub(crate) fn resolve(announcements: &[Announcement], now: i64, keep: &str) -> Vec<Resolved> {
    let mut owner: BTreeMap<TaskId, (i64, &str)> = BTreeMap::new();
    for a in announcements {
        for &(subtopology, partition, since) in &a.tasks {
            let id = TaskId {
                subtopology,
                partition,
            };
            let claim = (since, a.process_id.as_str());
            let e = owner.entry(id).or_insert(claim);
            if claim > *e {
                *e = claim;
            }
        }
    }
    let owned_by = |process_id: &str| -> BTreeSet<TaskId> {
        owner
            .iter()
            .filter(|(_, (_, p))| *p == process_id)
            .map(|(t, _)| *t)
            .collect()
    };
    announcements
        .iter()
        .map(|a| {
            let tasks = owned_by(&a.process_id);
            let standbys = a
                .standbys
                .iter()
                .map(|&(subtopology, partition)| TaskId {
                    subtopology,
                    partition,
                })
                .filter(|t| !tasks.contains(t))
                .collect();
            Resolved {
                process_id: Some(a.process_id.clone()),
                endpoint: a.endpoint.clone(),
                tasks,
                standbys,
            }
        })
        .zip(announcements)
        .filter(|(r, a)| !r.tasks.is_empty() || now - a.time_ms < SILENT || a.process_id == keep)
        .map(|(r, _)| r)
        .collect()
}

/// What the discovery thread, the streams-group members and the application share.
pub(crate) struct Directory {
    process_id: String,
    endpoint: Option<String>,
    hosting: Arc<Hosting>,
    /// The latest announcement of every other instance, by process id.
    others: Mutex<BTreeMap<String, Announcement>>,
    /// The endpoint map the streams-group members receive.
    group: Arc<GroupEndpoints>,
    /// Whether the instances come from `group` rather than from announcements.
    from_group: AtomicBool,
}

impl Directory {
    pub fn new(process_id: &str, endpoint: Option<&str>, hosting: Arc<Hosting>) -> Self {
        Self {
            process_id: process_id.to_owned(),
            endpoint: endpoint.map(str::to_owned),
            hosting,
            others: Mutex::new(BTreeMap::new()),
            group: Arc::default(),
            from_group: AtomicBool::new(false),
        }
    }

    /// Lists the other instances from the streams group's endpoint map from now on.
    pub fn follow_group(&self) {
        self.from_group.store(true, Ordering::Release);
    }

    /// Where the streams-group members leave the endpoint maps they receive.
    pub fn group_endpoints(&self) -> &Arc<GroupEndpoints> {
        &self.group
    }

    /// Every known instance (this one from its live state) with the tasks it owns.
    pub fn instances(&self) -> Vec<Resolved> {
        if self.from_group.load(Ordering::Acquire) {
            return self.group_instances();
        }
        let mut all: Vec<Announcement> = self
            .others
            .lock()
            .map(|o| o.values().cloned().collect())
            .unwrap_or_default();
        all.push(Announcement::local(
            &self.process_id,
            self.endpoint.as_deref(),
            &self.hosting,
        ));
        resolve(&all, now_ms(), &self.process_id)
    }

    /// This instance from its live state, then every other endpoint of the group's map.
    fn group_instances(&self) -> Vec<Resolved> {
        let this = Announcement::local(&self.process_id, self.endpoint.as_deref(), &self.hosting);
        let others = self.group.hosts().unwrap_or_default().into_iter();
        resolve(&[this], now_ms(), &self.process_id)
            .into_iter()
            .chain(
                others
                    .filter(|(endpoint, _)| Some(endpoint) != self.endpoint.as_ref())
                    .map(|(endpoint, t)| Resolved {
                        process_id: None,
                        endpoint: Some(endpoint),
                        tasks: t.active,
                        standbys: t.standby,
                    }),
            )
            .collect()
    }

    pub fn process_id(&self) -> &str {
        &self.process_id
    }

    /// This instance's tasks, which its stream threads keep up to date.
    pub fn hosting(&self) -> &Arc<Hosting> {
        &self.hosting
    }

    fn apply(&self, key: &[u8], value: Option<&[u8]>) {
        let Ok(id) = std::str::from_utf8(key) else { return };
        if id == self.process_id {
            return;
        }
        let Ok(mut others) = self.others.lock() else {
            return;
        };
        match value.map(serde_json::from_slice::<Announcement>) {
            None => {
                others.remove(id);
            }
            Some(Ok(a)) => {
                others.insert(id.to_owned(), a);
            }
            Some(Err(e)) => tracing::warn!(instance = id, error = %e, "unreadable announcement, ignored"),
        }
    }
}

/// The thread that announces this instance and reads the others' announcements.
pub(crate) struct Discovery {
    stop: Arc<AtomicBool>,
    join: Option<JoinHandle<()>>,
}

impl Discovery {
    /// Starts announcing on `topic` with clients made from `producer` and `consumer`.
    pub fn start(
        directory: Arc<Directory>,
        topic: String,
        producer: &ClientConfig,
        consumer: &ClientConfig,
        tokens: Option<&crate::config::OAuthBearerTokenProvider>,
    ) -> Result<Self, StreamsError> {
        let err =
            |what: &str, e: rdkafka::error::KafkaError| crate::runtime::client::errors::kafka_err(what, e);
        let producer: BaseProducer = producer.create().map_err(|e| err("instances producer", e))?;
        let producer = Authenticated::new(producer, tokens, "instances producer")?;
        let consumer: BaseConsumer = consumer.create().map_err(|e| err("instances consumer", e))?;
        let consumer = Authenticated::new(consumer, tokens, "instances consumer")?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Beginning)
            .map_err(|e| err("instances consumer", e))?;
        consumer.assign(&tpl).map_err(|e| err("instances consumer", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let join = std::thread::Builder::new()
            .name("streams-discovery".into())
            .spawn(move || run(&directory, &topic, &producer, &consumer, &stopping))
            .map_err(|e| StreamsError::Usage(format!("spawn discovery thread: {e}")))?;
        Ok(Self {
            stop,
            join: Some(join),
        })
    }

    /// Writes this instance's tombstone and stops (waits at most about 5 s).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(
    directory: &Directory,
    topic: &str,
    producer: &BaseProducer,
    consumer: &BaseConsumer,
    stop: &AtomicBool,
) {
    let mut announced: Option<(u64, Instant)> = None;
    while !stop.load(Ordering::Relaxed) {
        let mut wait = Duration::from_millis(100);
        while let Some(m) = consumer.poll(wait) {
            wait = Duration::ZERO;
            match m {
                Ok(m) => {
                    if let Some(key) = m.key() {
                        directory.apply(key, m.payload());
                    }
                }
                Err(e) => tracing::warn!(error = %e, topic, "reading instance announcements"),
            }
        }
        let version = directory.hosting.version();
        let due = announced.is_none_or(|(v, at)| v != version || at.elapsed() >= REFRESH);
        if due {
            let a = Announcement::local(
                &directory.process_id,
                directory.endpoint.as_deref(),
                &directory.hosting,
            );
            let value = serde_json::to_vec(&a).unwrap_or_default();
            let record = BaseRecord::to(topic).key(&directory.process_id).payload(&value);
            match producer.send(record) {
                Ok(()) => announced = Some((version, Instant::now())),
                Err((e, _)) => tracing::warn!(error = %e, topic, "announcing this instance"),
            }
        }
        producer.poll(Duration::ZERO);
    }
    let tombstone: BaseRecord<'_, str, [u8]> = BaseRecord::to(topic).key(&directory.process_id);
    if let Err((e, _)) = producer.send(tombstone) {
        tracing::warn!(error = %e, topic, "withdrawing this instance");
    }
    if let Err(e) = producer.flush(Duration::from_secs(5)) {
        tracing::warn!(error = %e, topic, "withdrawing this instance");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(id: &str, tasks: &[(i32, i64)], time_ms: i64) -> Announcement {
        Announcement {
            process_id: id.into(),
            endpoint: Some(format!("{id}:1")),
            tasks: tasks.iter().map(|&(p, s)| (0, p, s)).collect(),
            standbys: Vec::new(),
            time_ms,
        }
    }

    fn parts(r: &Resolved) -> Vec<i32> {
        r.tasks.iter().map(|t| t.partition).collect()
    }

    #[test]
    fn the_latest_claim_of_a_task_wins() {
        // b died holding 0 and 1; a took 1 over later, c took 0 over later.
        let all = [
            a("a", &[(1, 200), (2, 10)], 1_000),
            a("b", &[(0, 5), (1, 5)], 100),
            a("c", &[(0, 300)], 1_000),
        ];
        let r = resolve(&all, 1_000, "a");
        assert_eq!(
            r.len(),
            3,
            "b was heard from less than 15 s ago: listed, owning nothing"
        );
        assert_eq!(parts(&r[0]), [1, 2]);
        assert!(r[1].tasks.is_empty());
        assert_eq!(parts(&r[2]), [0]);
        let r = resolve(&all, 100 + SILENT, "a");
        assert_eq!(
            r.iter()
                .map(|r| r.process_id.as_deref().unwrap())
                .collect::<Vec<_>>(),
            ["a", "c"]
        );
    }

    #[test]
    fn hosting_keeps_the_time_a_task_was_first_hosted() {
        let h = Hosting::default();
        let t = |p| TaskId {
            subtopology: 0,
            partition: p,
        };
        h.set("t1", [t(0), t(1)], BTreeSet::new());
        let v = h.version();
        let first = h.snapshot();
        h.set("t1", [t(1), t(0)], BTreeSet::new());
        assert_eq!(h.version(), v, "the same tasks: nothing to announce");
        assert_eq!(h.snapshot(), first);
        h.set("t1", [t(1)], BTreeSet::new());
        assert_ne!(h.version(), v);
        assert_eq!(h.snapshot().get(&t(1)), first.get(&t(1)));
        let v = h.version();
        h.set("t1", [t(1)], BTreeSet::from([t(2)]));
        assert_ne!(h.version(), v, "a new standby is announced");
        assert_eq!(h.standbys(), BTreeSet::from([t(2)]));
        h.remove("t1");
        assert!(h.snapshot().is_empty() && h.standbys().is_empty());
    }

    #[test]
    fn standbys_are_listed_beside_the_owner() {
        let mut b = a("b", &[(1, 10)], 1_000);
        // A standby of a task b itself owns (an announcement caught mid-promotion) is not
        // listed as one.
        b.standbys = vec![(0, 0), (0, 1)];
        let all = [a("a", &[(0, 10)], 1_000), b];
        let r = resolve(&all, 1_000, "a");
        assert_eq!(parts(&r[0]), [0]);
        assert_eq!(r[1].standbys.iter().map(|t| t.partition).collect::<Vec<_>>(), [0]);
        // An announcement of an instance that did not announce standbys reads as none.
        let old = br#"{"process_id":"c","endpoint":null,"tasks":[[0,2,5]],"time_ms":7}"#;
        let parsed: Announcement = serde_json::from_slice(old).unwrap();
        assert!(parsed.standbys.is_empty());
    }
}
