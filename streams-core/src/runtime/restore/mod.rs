//! Restoring a task's logged stores from their changelog partitions, in steps the state
//! updater (`updater.rs`) runs on its own thread.
//!
//! Each store resumes after its checkpoint (the changelog offset its local data already
//! contains) or, without one, from the start of the partition; it reads up to the end
//! offset found when its restoration began, in batches applied through
//! `KeyValueStore::restore_batch` (RocksDB: one write batch each, WAL off). After the last
//! batch the store's checkpoint is the end offset.
//!
//! Under exactly-once the end offset is the changelog's *high watermark*, looked up by a
//! `read_uncommitted` client ([`RestoreConsumers::ends`]), while the records are read
//! `read_committed`: the restoration then ends only once every transaction that wrote below
//! that offset has ended. The last stable offset would not do: a transaction's commit
//! markers reach its partitions one by one, so right after the previous owner's last
//! transaction committed, the group's offsets (whose marker came first) can already include
//! it while the changelog's last stable offset still stops before it; a store restored to
//! that offset misses the transaction's writes, and the task, starting at the committed
//! offsets, never processes them again (counts emitted twice, one short at the end, seen
//! with a group coordinator paused on a three-broker cluster).
//!
//! A [`Restoration`] does at most a time budget of work per [`Restoration::step`], so the
//! updater answers its stream thread (a task revoked while restoring) and takes turns
//! between the tasks it restores between steps. A
//! restoration given up half-way applies what it read and checkpoints that position, so the
//! next restoration of the task resumes there.
//!
//! A store restored from a source topic (its changelog) stops at the group's committed
//! offset of that topic (`TaskStore::restore_until`) instead of the end: the task itself
//! processes the records after it.
//!
//! A gap is corrupted state, never skipped: when the checkpoint lies before the
//! changelog's log start (retention or `DeleteRecords` removed records the store never
//! saw), or the restore position falls out of the log while reading (the restore consumer
//! runs with `auto.offset.reset=error`), the step returns [`Step::Corrupted`]; the task
//! manager then wipes the task's state and restores from the earliest offset, as Kafka
//! Streams does for a `TaskCorruptedException`.

pub(in crate::runtime) mod held;
mod jobs;
pub(in crate::runtime) mod log_end;
pub(in crate::runtime) mod offset_sums;
mod records;
mod standby_reader;
pub(in crate::runtime) mod tailing;
pub(in crate::runtime) mod updater;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};
use streams_state::{ChangelogRecord, KeyValueStore};

use crate::engine::TaskStore;
use crate::model::error::StreamsError;
use crate::runtime::client::errors::kafka_err;
use crate::runtime::topics::resets::AssignedConsumer;
use crate::topology::SourceValues;
pub(crate) use records::{changelog_record, with_stream_time};
pub(crate) use standby_reader::StandbyReader;

/// The clients of a restoration: `reader` reads the changelogs (`read_committed` under
/// exactly-once); `log_ends`, where the cluster can be reached with the runtime's own
/// client, looks up where they start and end at their current leaders (`log_end.rs`);
/// otherwise `ends`, under exactly-once only, looks it up with `read_uncommitted`, so that
/// the end includes transactions not yet marked (see the module docs). Standby tasks read
/// with `standby` (`standby_reader.rs`).
pub(crate) struct RestoreConsumers {
    pub reader: AssignedConsumer,
    pub ends: Option<AssignedConsumer>,
    pub log_ends: Option<log_end::LogEnds>,
    pub standby: StandbyReader,
}

impl RestoreConsumers {
    /// The client whose watermarks give the end of a restoration.
    fn ends(&self) -> &AssignedConsumer {
        self.ends.as_ref().unwrap_or(&self.reader)
    }

    /// The consumer whose cached watermarks tell the standbys' lags (the reader until the
    /// standbys' own was made: a partition it never fetched keeps what was known).
    pub(crate) fn standby_watermarks(&self) -> &AssignedConsumer {
        self.standby.made().unwrap_or(&self.reader)
    }
}

/// How many records one restore batch holds.
const BATCH: usize = 10_000;
/// How long restoration may go without progress before it fails: a broker down, or under
/// exactly-once an open transaction below the end offset (a previous owner's, which its
/// coordinator aborts after `transaction.timeout.ms`), as Kafka Streams' `task.timeout.ms`.
const STALL: Duration = crate::runtime::client::errors::RECOVERY_LIMIT;

/// What one [`Restoration::step`] ended with.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Every logged store is up to date; this many records were applied in all.
    Done(u64),
    /// The budget ran out; more to do.
    Pending,
    /// The changelog of `topic` has a gap the store cannot cross: wipe and restore again.
    Corrupted {
        store: String,
        topic: String,
        reason: String,
    },
}

/// The store being read: its index, its changelog partition and where it stands.
struct Active {
    index: usize,
    topic: String,
    high: i64,
    position: i64,
    restored: u64,
    /// How the store holds the topic's records (see [`changelog_record`]).
    values: SourceValues,
    /// The changelog is a source topic: its records without a key are skipped, as the
    /// store's processor dropped them.
    from_source: bool,
    started: Instant,
    last_progress: Instant,
    batch: Vec<ChangelogRecord>,
    /// Time spent writing batches to the store (the rest of a restoration's time is reading).
    applying: Duration,
    /// Polls that returned nothing: waits for the broker.
    empty_polls: u32,
}

/// The restoration of one task's logged stores, one store at a time.
pub(crate) struct Restoration {
    partition: i32,
    /// Indexes of the stores to restore that were not started yet.
    todo: VecDeque<usize>,
    active: Option<Active>,
    /// Where the changelog partition of each store still to start begins and ends (by
    /// store index), from the leaders, looked up for all of them together when the first
    /// store starts (`log_end.rs`); a store missing here (its lookup failed) asks the consumer.
    ends: Option<HashMap<usize, (i64, i64)>>,
    /// Records applied so far, all stores.
    pub restored: u64,
}

impl Restoration {
    /// The restoration of the stores of the task of changelog partition `partition`.
    pub fn new(partition: i32, stores: &[TaskStore]) -> Self {
        Self {
            partition,
            todo: stores
                .iter()
                .enumerate()
                .filter(|(_, s)| s.changelog.is_some())
                .map(|(i, _)| i)
                .collect(),
            active: None,
            ends: None,
            restored: 0,
        }
    }

    /// Records of the store being read that are still to come.
    pub fn remaining(&self) -> u64 {
        self.active
            .as_ref()
            .map_or(0, |a| u64::try_from(a.high - a.position).unwrap_or(0))
    }

    /// Where store `index` stands: (next offset, changelog end) while it is read; nothing
    /// known while it waits for its turn; caught up once it was read (or is not logged).
    pub fn store_lag(&self, index: usize) -> held::ChangelogLag {
        match &self.active {
            Some(a) if a.index == index => held::ChangelogLag::at(Some(a.position), Some(a.high)),
            _ if self.todo.contains(&index) => held::ChangelogLag::at(None, None),
            _ => held::ChangelogLag::caught_up(),
        }
    }

    /// Restores for up to `budget` (at least one poll). The restore consumer is assigned the
    /// changelog partition being read, and nothing once the task is done.
    pub fn step(
        &mut self,
        consumers: &RestoreConsumers,
        stores: &mut [TaskStore],
        budget: Duration,
    ) -> Result<Step, StreamsError> {
        let consumer = &consumers.reader;
        let deadline = Instant::now() + budget;
        loop {
            if self.active.is_none() {
                let Some(index) = self.todo.pop_front() else {
                    consumer
                        .unassign()
                        .map_err(|e| kafka_err("restore unassign", e))?;
                    return Ok(Step::Done(self.restored));
                };
                match self.start(consumers, stores, index)? {
                    Ok(Some(active)) => self.active = Some(active),
                    Ok(None) => continue,
                    Err(corrupted) => return Ok(corrupted),
                }
            }
            let partition = self.partition;
            let Some(a) = self.active.as_mut() else {
                continue;
            };
            while a.position < a.high {
                let now = Instant::now();
                if now >= deadline {
                    return Ok(Step::Pending);
                }
                match consumer.poll((deadline - now).min(Duration::from_millis(100))) {
                    // Only the partition being read is assigned; anything else would be a
                    // leftover of an earlier assignment and must not reach this store.
                    Some(Ok(m)) if m.partition() != partition || m.topic() != a.topic => {
                        tracing::debug!(
                            topic = m.topic(),
                            partition = m.partition(),
                            "restore: record of another partition skipped"
                        );
                    }
                    Some(Ok(m)) if a.from_source && m.key().is_none() => {
                        a.position = m.offset() + 1;
                        a.last_progress = Instant::now();
                    }
                    Some(Ok(m)) => {
                        a.position = m.offset() + 1;
                        a.batch.push(changelog_record(&m, a.values));
                        a.last_progress = Instant::now();
                    }
                    Some(Err(KafkaError::MessageConsumption(RDKafkaErrorCode::AutoOffsetReset))) => {
                        let _ = consumer.unassign();
                        let reason = format!(
                            "offset {} is no longer in the changelog (deleted while restoring)",
                            a.position
                        );
                        let topic = format!("{}-{partition}", a.topic);
                        let store = stores[a.index].name.clone();
                        self.active = None;
                        return Ok(Step::Corrupted { store, topic, reason });
                    }
                    Some(Err(e))
                        if let Some(denied) =
                            consumer
                                .context()
                                .denied(&e, &format!("`{}`", a.topic), "READ on it") =>
                    {
                        return Err(denied);
                    }
                    Some(Err(e)) => {
                        // Transient (a broker restarting): librdkafka reconnects by itself; a
                        // lasting failure ends in the stall error below.
                        if a.last_progress.elapsed() > STALL {
                            return Err(kafka_err(&format!("restoring {}-{partition}", a.topic), e));
                        }
                        tracing::debug!(error = %e, "restore consumer");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    None => {
                        a.empty_polls += 1;
                        // Transaction markers take offsets but are never returned: ask where
                        // the consumer stands.
                        if let Ok(pos) = consumer.position()
                            && let Some(Offset::Offset(p)) =
                                pos.find_partition(&a.topic, partition).map(|e| e.offset())
                        {
                            a.position = a.position.max(p);
                        }
                        if a.last_progress.elapsed() > STALL {
                            return Err(kafka_err(
                                &format!("restoring {}-{partition}", a.topic),
                                format!("no progress at offset {} of {} for {STALL:?}", a.position, a.high),
                            ));
                        }
                    }
                }
                if a.batch.len() >= BATCH {
                    self.restored += apply(stores, a)?;
                }
            }
            self.restored += apply(stores, a)?;
            let s = &mut stores[a.index];
            // The data now contains everything up to the end offset (markers included).
            s.store.write_checkpoint(Some(a.high - 1))?;
            tracing::info!(
                partition,
                store = %s.name,
                records = a.restored,
                elapsed = ?a.started.elapsed(),
                applying = ?a.applying,
                empty_polls = a.empty_polls,
                "store restored"
            );
            self.active = None;
        }
    }

    /// Starts store `index`: its watermarks, checkpoint and first offset. `Ok(None)` when it
    /// is up to date; `Err(step)` when its changelog has a gap.
    fn start(
        &mut self,
        consumers: &RestoreConsumers,
        stores: &[TaskStore],
        index: usize,
    ) -> Result<Result<Option<Active>, Step>, StreamsError> {
        let consumer = &consumers.reader;
        let partition = self.partition;
        let s = &stores[index];
        let Some(topic) = s.changelog.clone() else {
            return Ok(Ok(None));
        };
        let from_leaders = consumers.log_ends.as_ref().and_then(|l| {
            let ends = self.ends.get_or_insert_with(|| {
                let todo: Vec<usize> = std::iter::once(index).chain(self.todo.iter().copied()).collect();
                leader_ends(l, stores, partition, &todo)
            });
            // Every store of the task was asked in that one lookup: one missing there failed
            // (logged by `leader_ends`), and asking the leaders again alone would only wait
            // for the same failure; the consumer's lookup below retries on its own.
            ends.remove(&index)
        });
        let (low, high) = match from_leaders {
            Some(w) => w,
            None => watermarks(consumers.ends(), &topic, partition)?,
        };
        // A source topic used as changelog is restored up to the committed offset only: the
        // task processes what follows.
        let high = s.restore_until.map_or(high, |until| high.min(until));
        let checkpoint = s.store.checkpoint()?;
        if let Some(c) = checkpoint
            && c + 1 < low
        {
            return Ok(Err(Step::Corrupted {
                store: s.name.clone(),
                topic: format!("{topic}-{partition}"),
                reason: format!(
                    "the store holds the changelog up to offset {c}, but the changelog now starts at {low}: \
                     offsets {}..{low} were deleted before the store saw them",
                    c + 1
                ),
            }));
        }
        let start = checkpoint.map_or(low, |c| c + 1);
        if start >= high {
            return Ok(Ok(None));
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, partition, Offset::Offset(start))
            .map_err(|e| kafka_err("restore assignment", e))?;
        consumer
            .assign(&tpl)
            .map_err(|e| kafka_err("restore assignment", e))?;
        tracing::info!(partition, store = %s.name, from = start, to = high, "restoring store");
        Ok(Ok(Some(Active {
            index,
            topic,
            high,
            position: start,
            restored: 0,
            values: s.values,
            from_source: s.from_source.is_some(),
            started: Instant::now(),
            last_progress: Instant::now(),
            batch: Vec::with_capacity(BATCH.min(usize::try_from(high - start).unwrap_or(BATCH))),
            applying: Duration::ZERO,
            empty_polls: 0,
        })))
    }

    /// Assigns the restore consumer the partition being read again, where it stands (after
    /// the consumer served another task's restoration).
    pub fn resume(&self, consumer: &AssignedConsumer) -> Result<(), StreamsError> {
        let Some(a) = &self.active else {
            return Ok(());
        };
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&a.topic, self.partition, Offset::Offset(a.position))
            .map_err(|e| kafka_err("restore assignment", e))?;
        consumer
            .assign(&tpl)
            .map_err(|e| kafka_err("restore assignment", e))
    }

    /// Gives up (the task was revoked, or the application closes): applies what was read
    /// and checkpoints that position, so a later restoration resumes there.
    pub fn abandon(
        &mut self,
        consumer: &AssignedConsumer,
        stores: &mut [TaskStore],
    ) -> Result<(), StreamsError> {
        let Some(mut a) = self.active.take() else {
            return Ok(());
        };
        let _ = consumer.unassign();
        self.restored += apply(stores, &mut a)?;
        if a.restored > 0 {
            stores[a.index].store.write_checkpoint(Some(a.position - 1))?;
        }
        Ok(())
    }
}

/// The changelog offsets (log start, high watermark) of stores `todo` of a task of
/// `partition`, from the leaders in one lookup, by store index; those without an answer
/// are left out.
fn leader_ends(
    log_ends: &log_end::LogEnds,
    stores: &[TaskStore],
    partition: i32,
    todo: &[usize],
) -> HashMap<usize, (i64, i64)> {
    let logged: Vec<(usize, &str)> = todo
        .iter()
        .filter_map(|&i| Some((i, stores.get(i)?.changelog.as_deref()?)))
        .collect();
    let asked: Vec<(&str, i32)> = logged.iter().map(|&(_, topic)| (topic, partition)).collect();
    let answers = log_ends.watermarks_of(&asked);
    logged
        .iter()
        .zip(answers)
        .filter_map(|(&(i, topic), answer)| {
            answer
                .inspect_err(
                    |e| tracing::debug!(%topic, partition, error = %e, "changelog offsets from the leaders"),
                )
                .ok()
                .map(|ends| (i, ends))
        })
        .collect()
}

/// The watermarks of `topic`-`partition`. A partition just created may have no leader
/// for a moment (`NotLeaderForPartition`, `LeaderNotAvailable`, `UnknownTopicOrPartition`),
/// and a broker may be restarting or paused: errors are retried for up to
/// [`RECOVERY_LIMIT`](crate::runtime::client::errors::RECOVERY_LIMIT) (Kafka Streams' `task.timeout.ms`
/// default), except refused authorization.
fn watermarks(consumer: &AssignedConsumer, topic: &str, partition: i32) -> Result<(i64, i64), StreamsError> {
    crate::runtime::client::watermarks::fetch_retrying(
        consumer,
        topic,
        partition,
        crate::runtime::client::errors::RECOVERY_LIMIT,
        |e| {
            if let Some(denied) = consumer
                .context()
                .denied(e, &format!("`{topic}`"), "DESCRIBE on it")
            {
                return Some(denied);
            }
            let count = partition_count(consumer, topic)?;
            (partition >= count).then(|| StreamsError::Kafka {
                message: format!(
                    "changelog `{topic}` has {count} partitions, but a task needs its partition \
                     {partition}: partitions were added to a source topic after the \
                     application created its changelogs, and the keys of that topic no \
                     longer go to the tasks that hold their state. Kafka Streams stops \
                     here too; to go on, reset the application (its state and changelogs \
                     made again from the input) or run a new application id"
                ),
                retriable: false,
            })
        },
    )
}

/// The partition count of `topic` as the cluster lists it now; `None` when that is not known
/// (no answer, the topic missing or in error).
fn partition_count(consumer: &AssignedConsumer, topic: &str) -> Option<i32> {
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .ok()?;
    let t = md.topics().first()?;
    (t.error().is_none() && !t.partitions().is_empty()).then(|| t.partitions().len() as i32)
}

/// Applies the records read so far to the store being restored; returns how many.
fn apply(stores: &mut [TaskStore], a: &mut Active) -> Result<u64, StreamsError> {
    if a.batch.is_empty() {
        return Ok(0);
    }
    let n = a.batch.len() as u64;
    let started = Instant::now();
    with_stream_time(&*stores[a.index].store, a.values, &mut a.batch)?;
    stores[a.index].store.restore_batch(&a.batch)?;
    a.applying += started.elapsed();
    a.restored += n;
    a.batch.clear();
    Ok(n)
}

#[cfg(test)]
mod tests;
