//! The dead-letter topic's tool (the `dlq-tool` binary): list what is dead-lettered,
//! purge it, or replay it into the first retry topic once the cause is fixed.
//!
//! The tool tracks what it has handled in its own consumer group (by default
//! `<dead-letter topic>.dlq-tool`), so a replay is never repeated: per partition, the
//! committed offset is the first record not handled yet, and the commit's metadata lists
//! the records after it that were replayed one by one (`replayed:5,9`). A record is
//! *handled* once it was replayed or purged.
//!
//! - [`DlqTool::list`]: the records not handled yet (or all of them), with key, value and
//!   headers.
//! - [`DlqTool::purge`]: skips everything: commits the end of every partition.
//! - [`DlqTool::replay`]: re-publishes all pending records, or the selected offsets, into
//!   the ladder's first retry topic with the attempt count reset to 0 and due at once, then
//!   records them as handled. The original topic, partition, offset and last error stay in
//!   the headers, plus [`super::HEADER_REPLAYED_FROM`].
//!
//! Run one instance of the tool at a time per group.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::{
    Forwarder, HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, HEADER_REPLAYED_FROM, RetryRecord, now_ms,
};
use crate::ExampleError;

/// The prefix of the commit metadata listing the offsets replayed one by one.
const METADATA_PREFIX: &str = "replayed:";
/// Kafka's default `offset.metadata.max.bytes` is 4096.
const METADATA_MAX: usize = 4000;

/// The tool's default consumer group for `dead_letter_topic`.
pub fn default_group(dead_letter_topic: &str) -> String {
    format!("{dead_letter_topic}.dlq-tool")
}

/// The first retry topic of the ladder whose dead-letter topic is `dead_letter_topic`
/// (`<main>-dlq` -> `<main>-retry-1`, the names [`RetryLadder::new`](super::RetryLadder::new)
/// gives), or `None` for another name.
pub fn default_replay_topic(dead_letter_topic: &str) -> Option<String> {
    dead_letter_topic
        .strip_suffix("-dlq")
        .filter(|m| !m.is_empty())
        .map(|m| format!("{m}-retry-1"))
}

/// Parses `P:O,P:O,...` (partition:offset pairs).
pub fn parse_offsets(text: &str) -> Result<Vec<(i32, i64)>, ExampleError> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|pair| {
            let bad = || ExampleError::Other(format!("not PARTITION:OFFSET: {pair:?}"));
            let (p, o) = pair.trim().split_once(':').ok_or_else(bad)?;
            Ok((
                p.trim().parse().map_err(|_| bad())?,
                o.trim().parse().map_err(|_| bad())?,
            ))
        })
        .collect()
}

/// A record of the dead-letter topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The record, as read.
    pub record: RetryRecord,
    /// Whether the tool already replayed or purged it.
    pub handled: bool,
}

/// What to replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplaySelection {
    /// Every record not handled yet.
    All,
    /// These `(partition, offset)` records.
    Offsets(Vec<(i32, i64)>),
}

/// What a replay did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// The records re-published, as `(partition, offset)` in the dead-letter topic.
    pub replayed: Vec<(i32, i64)>,
    /// Selected records skipped because they were already replayed or purged.
    pub already_handled: Vec<(i32, i64)>,
    /// Selected records that do not exist (no such partition, or outside the partition's
    /// offsets, or a gap).
    pub not_found: Vec<(i32, i64)>,
}

/// The tool's view of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PartitionState {
    /// The first offset still stored.
    low: i64,
    /// The offset the next record will get.
    high: i64,
    /// The first offset not handled yet (the committed offset, at least `low`).
    committed: i64,
    /// Offsets at or after `committed` handled one by one.
    done: BTreeSet<i64>,
}

impl PartitionState {
    fn is_handled(&self, offset: i64) -> bool {
        offset < self.committed || self.done.contains(&offset)
    }

    /// Moves `committed` past handled offsets.
    fn normalize(&mut self) {
        while self.done.remove(&self.committed) {
            self.committed += 1;
        }
        let committed = self.committed;
        self.done.retain(|&o| o >= committed);
    }

    fn metadata(&self) -> String {
        if self.done.is_empty() {
            return String::new();
        }
        let list: Vec<String> = self.done.iter().map(i64::to_string).collect();
        format!("{METADATA_PREFIX}{}", list.join(","))
    }
}

fn parse_metadata(metadata: &str) -> BTreeSet<i64> {
    metadata
        .strip_prefix(METADATA_PREFIX)
        .map(|list| list.split(',').filter_map(|o| o.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// The dead-letter tool for one dead-letter topic. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct DlqTool {
    bootstrap: String,
    topic: String,
    group_id: String,
    timeout: Duration,
}

impl DlqTool {
    /// The tool for `dead_letter_topic`, tracking its progress in [`default_group`].
    pub fn new(bootstrap: impl Into<String>, dead_letter_topic: impl Into<String>) -> Self {
        let topic = dead_letter_topic.into();
        Self {
            bootstrap: bootstrap.into(),
            group_id: default_group(&topic),
            topic,
            timeout: Duration::from_secs(30),
        }
    }

    /// Tracks progress in `group_id` instead.
    pub fn with_group(mut self, group_id: impl Into<String>) -> Self {
        self.group_id = group_id.into();
        self
    }

    /// Bounds each operation's reads and writes (default 30 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The consumer group the tool commits to.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    fn consumer(&self) -> Result<BaseConsumer, ExampleError> {
        Ok(ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", &self.group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "100")
            .create()?)
    }

    /// Whether the dead-letter topic exists (a ladder creates it before its first dead
    /// letter; [`DlqTool::list`] and the others fail on a topic that does not exist).
    pub fn topic_exists(&self) -> Result<bool, ExampleError> {
        let consumer = self.consumer()?;
        let metadata = consumer.fetch_metadata(Some(&self.topic), self.timeout)?;
        Ok(metadata
            .topics()
            .iter()
            .any(|t| t.name() == self.topic && t.error().is_none() && !t.partitions().is_empty()))
    }

    /// Each partition's watermarks and the tool's progress.
    fn states(&self, consumer: &BaseConsumer) -> Result<BTreeMap<i32, PartitionState>, ExampleError> {
        let metadata = consumer.fetch_metadata(Some(&self.topic), self.timeout)?;
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .find(|t| t.name() == self.topic && t.error().is_none())
            .map(|t| t.partitions().iter().map(|p| p.id()).collect())
            .unwrap_or_default();
        if partitions.is_empty() {
            return Err(ExampleError::Other(format!("topic {} not found", self.topic)));
        }
        let mut request = TopicPartitionList::new();
        for &p in &partitions {
            request.add_partition(&self.topic, p);
        }
        let committed = consumer.committed_offsets(request, self.timeout)?;
        let mut states = BTreeMap::new();
        for p in partitions {
            let (low, high) = consumer.fetch_watermarks(&self.topic, p, self.timeout)?;
            let (offset, done) = match committed.find_partition(&self.topic, p) {
                Some(e) => match e.offset() {
                    Offset::Offset(o) => (o, parse_metadata(e.metadata())),
                    _ => (low, BTreeSet::new()),
                },
                None => (low, BTreeSet::new()),
            };
            let mut state = PartitionState {
                low,
                high,
                committed: offset.max(low),
                done,
            };
            state.normalize();
            states.insert(p, state);
        }
        Ok(states)
    }

    /// Reads every record from each partition's `committed` offset to its `high`
    /// watermark (as of `states`).
    fn read_pending(
        &self,
        consumer: &BaseConsumer,
        states: &BTreeMap<i32, PartitionState>,
    ) -> Result<Vec<RetryRecord>, ExampleError> {
        self.read_from(consumer, states, |s| s.committed)
    }

    fn read_from(
        &self,
        consumer: &BaseConsumer,
        states: &BTreeMap<i32, PartitionState>,
        start: impl Fn(&PartitionState) -> i64,
    ) -> Result<Vec<RetryRecord>, ExampleError> {
        let mut assignment = TopicPartitionList::new();
        let mut open: BTreeSet<i32> = BTreeSet::new();
        for (&p, s) in states {
            let from = start(s).max(s.low);
            if from < s.high {
                assignment.add_partition_offset(&self.topic, p, Offset::Offset(from))?;
                open.insert(p);
            }
        }
        let mut records = Vec::new();
        if open.is_empty() {
            return Ok(records);
        }
        consumer.assign(&assignment)?;
        let deadline = Instant::now() + self.timeout;
        while !open.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return Err(ExampleError::Other(format!(
                    "reading {}: partitions {open:?} not read to their end within {:?}",
                    self.topic, self.timeout
                )));
            }
            match consumer.poll((deadline - now).min(Duration::from_millis(200))) {
                // Nothing came: a partition whose position reached its end is read (its last
                // offsets may hold no record to return, e.g. a transaction marker).
                None => {
                    let position = consumer.position()?;
                    open.retain(|&p| {
                        let high = states.get(&p).map_or(0, |s| s.high);
                        !matches!(
                            position.find_partition(&self.topic, p).map(|e| e.offset()),
                            Some(Offset::Offset(o)) if o >= high
                        )
                    });
                }
                Some(Ok(m)) => {
                    let record = RetryRecord::from_message(&m);
                    let high = states.get(&record.partition).map_or(0, |s| s.high);
                    if record.offset >= high - 1 {
                        open.remove(&record.partition);
                    }
                    if record.offset < high {
                        records.push(record);
                    }
                }
                Some(Err(e)) => tracing::warn!(topic = %self.topic, error = %e, "dlq read error"),
            }
        }
        consumer.unassign()?;
        Ok(records)
    }

    fn commit(
        &self,
        consumer: &BaseConsumer,
        states: &BTreeMap<i32, PartitionState>,
    ) -> Result<(), ExampleError> {
        let mut tpl = TopicPartitionList::new();
        for (&p, s) in states {
            let metadata = s.metadata();
            if metadata.len() > METADATA_MAX {
                return Err(ExampleError::Other(format!(
                    "partition {p}: too many records replayed one by one ({}) to track; replay --all or purge",
                    s.done.len()
                )));
            }
            tpl.add_partition_offset(&self.topic, p, Offset::Offset(s.committed))?;
            if let Some(mut e) = tpl.find_partition(&self.topic, p) {
                e.set_metadata(metadata);
            }
        }
        consumer.commit(&tpl, CommitMode::Sync)?;
        Ok(())
    }

    /// The records not handled yet, in partition and offset order; with `include_handled`,
    /// every stored record, each marked.
    pub fn list(&self, include_handled: bool) -> Result<Vec<DeadLetter>, ExampleError> {
        let consumer = self.consumer()?;
        let states = self.states(&consumer)?;
        let records = if include_handled {
            self.read_from(&consumer, &states, |s| s.low)?
        } else {
            self.read_pending(&consumer, &states)?
        };
        let mut out: Vec<DeadLetter> = records
            .into_iter()
            .map(|record| {
                let handled = states
                    .get(&record.partition)
                    .is_some_and(|s| s.is_handled(record.offset));
                DeadLetter { record, handled }
            })
            .filter(|d| include_handled || !d.handled)
            .collect();
        out.sort_by_key(|d| (d.record.partition, d.record.offset));
        Ok(out)
    }

    /// Skips every record stored now: commits the end of each partition. Returns how many
    /// records were pending.
    pub fn purge(&self) -> Result<u64, ExampleError> {
        let consumer = self.consumer()?;
        let mut states = self.states(&consumer)?;
        let mut skipped = 0;
        for s in states.values_mut() {
            skipped +=
                (s.high - s.committed).max(0) as u64 - s.done.range(s.committed..s.high).count() as u64;
            s.committed = s.high.max(s.committed);
            s.done.clear();
        }
        self.commit(&consumer, &states)?;
        Ok(skipped)
    }

    /// Re-publishes the selected records into `target_topic` (the ladder's
    /// [`replay_topic`](super::RetryLadder::replay_topic)) with the attempt count reset to 0
    /// and due at once, waits for the writes to be acknowledged, then records them as
    /// handled. Records already handled are not replayed again.
    pub fn replay(
        &self,
        target_topic: &str,
        selection: &ReplaySelection,
    ) -> Result<ReplayReport, ExampleError> {
        let consumer = self.consumer()?;
        let mut states = self.states(&consumer)?;
        let mut report = ReplayReport::default();
        let wanted: Option<BTreeSet<(i32, i64)>> = match selection {
            ReplaySelection::All => None,
            ReplaySelection::Offsets(list) => {
                let mut wanted = BTreeSet::new();
                for &(p, o) in list {
                    match states.get(&p) {
                        Some(s) if s.is_handled(o) => report.already_handled.push((p, o)),
                        Some(s) if o >= s.low && o < s.high => {
                            wanted.insert((p, o));
                        }
                        _ => report.not_found.push((p, o)),
                    }
                }
                Some(wanted)
            }
        };
        let to_read: BTreeMap<i32, PartitionState> = match &wanted {
            None => states.clone(),
            Some(w) => states
                .iter()
                .filter(|(p, _)| w.iter().any(|(wp, _)| wp == *p))
                .map(|(p, s)| (*p, s.clone()))
                .collect(),
        };
        let mut selected: Vec<RetryRecord> = if to_read.is_empty() {
            Vec::new()
        } else {
            self.read_pending(&consumer, &to_read)?
        };
        selected.retain(|r| {
            let pending = states.get(&r.partition).is_some_and(|s| !s.is_handled(r.offset));
            pending
                && wanted
                    .as_ref()
                    .is_none_or(|w| w.contains(&(r.partition, r.offset)))
        });
        selected.sort_by_key(|r| (r.partition, r.offset));
        if let Some(w) = &wanted {
            // Selected offsets that were not read (a gap, e.g. a transaction marker).
            for &(p, o) in w {
                if !selected.iter().any(|r| r.partition == p && r.offset == o) {
                    report.not_found.push((p, o));
                }
            }
        }
        let forwarder = Forwarder::new(&self.bootstrap, &[])?;
        for r in &selected {
            let mut extra = vec![
                (HEADER_ATTEMPT, "0".to_owned()),
                (HEADER_NEXT_AT, now_ms().to_string()),
                (
                    HEADER_REPLAYED_FROM,
                    format!("{}/{}/{}", r.topic, r.partition, r.offset),
                ),
            ];
            if let Some(e) = r.last_error() {
                extra.push((HEADER_LAST_ERROR, e.to_owned()));
            }
            forwarder.send(
                target_topic,
                r.key.as_deref(),
                r.value.as_deref(),
                r.moved_headers(&extra),
            )?;
        }
        // Only records known to be in the retry topic count as handled.
        forwarder.flush(self.timeout)?;
        for r in &selected {
            report.replayed.push((r.partition, r.offset));
        }
        match &wanted {
            None => {
                for (p, s) in &mut states {
                    if to_read.contains_key(p) {
                        s.committed = s.high.max(s.committed);
                        s.done.clear();
                    }
                }
            }
            Some(_) => {
                for &(p, o) in &report.replayed {
                    if let Some(s) = states.get_mut(&p) {
                        s.done.insert(o);
                        s.normalize();
                    }
                }
            }
        }
        if !report.replayed.is_empty() || wanted.is_none() {
            self.commit(&consumer, &states)?;
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_parse() {
        assert_eq!(parse_offsets("0:5, 1:7").unwrap(), vec![(0, 5), (1, 7)]);
        assert!(parse_offsets("0-5").is_err());
        assert!(parse_offsets("a:1").is_err());
        assert_eq!(parse_offsets("").unwrap(), vec![]);
        assert_eq!(default_replay_topic("req-dlq").as_deref(), Some("req-retry-1"));
        assert_eq!(default_replay_topic("dead"), None);
    }

    #[test]
    fn progress_normalizes_and_round_trips_through_metadata() {
        let mut s = PartitionState {
            low: 0,
            high: 10,
            committed: 2,
            done: [2, 3, 5, 1].into(),
        };
        s.normalize();
        assert_eq!(s.committed, 4);
        assert_eq!(s.done, [5].into());
        assert!(s.is_handled(3) && s.is_handled(5) && !s.is_handled(4) && !s.is_handled(6));
        assert_eq!(s.metadata(), "replayed:5");
        assert_eq!(parse_metadata(&s.metadata()), s.done);
        assert_eq!(parse_metadata(""), BTreeSet::new());
    }
}
