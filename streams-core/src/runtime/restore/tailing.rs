//! A standby task's reading of its changelogs, in steps the state updater (`updater.rs`)
//! runs between (and after) the steps of the tasks it restores.
//!
//! A standby holds the same stores as the active task would; [`Tailing`] reads every
//! changelog partition of them at once with the restore consumer and applies the records
//! through `KeyValueStore::restore_batch`, as restoration does. It never finishes: once at
//! the end it keeps following the changelogs.
//!
//! Invariants:
//! - Each store starts after its checkpoint (the changelog offset its data contains) or, without
//!   one, at the start of the partition; a position out of the log (records deleted before
//!   the store saw them) is a gap, reported as [`TailStep::Corrupted`], never skipped.
//! - After every step the records read are applied, and a store whose position moved has its
//!   checkpoint set to the position's predecessor (transaction markers and aborted records
//!   take offsets too); a store's data and checkpoint therefore move together, and a
//!   promotion restores only what follows.
//! - Stores restored from a source topic (`use_source_topic_as_changelog`) are not tailed: the
//!   active task restores them only up to the group's committed offset, which moves while
//!   the standby runs; their standby would have to re-read that offset all the time. They
//!   are restored at promotion.
//! - Under exactly-once the restore consumer reads `read_committed`: a standby applies only
//!   committed records, straight to the committed data below a transactional store's overlay.

use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};
use streams_state::{ChangelogRecord, KeyValueStore};

use crate::engine::TaskStore;
use crate::model::error::StreamsError;
use crate::runtime::client::errors::kafka_err;
use crate::runtime::restore::changelog_record;
use crate::runtime::restore::held::ChangelogLag;
use crate::runtime::topics::resets::AssignedConsumer;

/// How many records of one store are applied at once, at most.
const BATCH: usize = 10_000;
/// The longest a standby step waits for records at a time.
const SLICE: Duration = Duration::from_millis(10);
/// A standby step ends once no record came for this long after a first one.
const QUIET: Duration = Duration::from_millis(100);

/// What one [`Tailing::step`] ended with.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TailStep {
    /// Applied what arrived; the standby goes on.
    Applied,
    /// A changelog has a gap the stores cannot cross: wipe the standby and start over.
    Corrupted { reason: String },
}

/// One tailed store: its changelog partition and where it stands.
struct Part {
    index: usize,
    topic: String,
    /// The next offset to read; `None` before the first record of a store without
    /// checkpoint (it starts at the log start).
    position: Option<i64>,
    /// The offset the store's checkpoint says it contains.
    checkpointed: Option<i64>,
    /// How the store holds the changelog's records (see `changelog_record`).
    values: crate::topology::SourceValues,
    batch: Vec<ChangelogRecord>,
    /// The partition's log start offset, when known.
    log_start: Option<i64>,
    /// The partition's end offset (high watermark) of the last fetch response.
    end: Option<i64>,
}

impl Part {
    /// Where the store stands: before its first record, at the partition's log start.
    fn lag(&self) -> ChangelogLag {
        ChangelogLag::at(self.position.or(self.log_start), self.end)
    }
}

/// The reading of one standby task's changelog partitions.
pub(crate) struct Tailing {
    partition: i32,
    parts: Vec<Part>,
    /// Records applied so far, all stores.
    pub applied: u64,
}

impl Tailing {
    /// The tailing of the logged stores of the task of changelog partition `partition`,
    /// from their checkpoints. Stores restored from a source topic are left out (see the
    /// module docs).
    pub fn new(partition: i32, stores: &[TaskStore]) -> Result<Self, StreamsError> {
        let mut parts = Vec::new();
        for (index, s) in stores.iter().enumerate() {
            let Some(topic) = s.changelog.clone() else {
                continue;
            };
            if s.from_source.is_some() {
                tracing::info!(
                    partition,
                    store = %s.name,
                    topic = %topic,
                    "standby: a store restored from a source topic is not kept warm; it is restored at promotion"
                );
                continue;
            }
            let checkpoint = s.store.checkpoint()?;
            parts.push(Part {
                index,
                topic,
                position: checkpoint.map(|c| c + 1),
                checkpointed: checkpoint,
                values: s.values,
                batch: Vec::new(),
                log_start: None,
                end: None,
            });
        }
        Ok(Self {
            partition,
            parts,
            applied: 0,
        })
    }

    /// Adds every tailed partition, where it stands, to `tpl`. A store without checkpoint
    /// starts at the partition's log start, resolved here to a concrete offset: assigned at
    /// `Beginning`, the consumer would ask for it anew at every assignment.
    fn add_to(
        &mut self,
        consumer: &AssignedConsumer,
        tpl: &mut TopicPartitionList,
    ) -> Result<(), StreamsError> {
        for p in &mut self.parts {
            if p.position.is_none()
                && let Ok((low, _)) = crate::runtime::client::watermarks::fetch(
                    consumer,
                    &p.topic,
                    self.partition,
                    Duration::from_secs(5),
                )
            {
                p.position = Some(low);
            }
            let offset = p.position.map_or(Offset::Beginning, Offset::Offset);
            tpl.add_partition_offset(&p.topic, self.partition, offset)
                .map_err(|e| kafka_err("standby assignment", e))?;
        }
        Ok(())
    }

    /// Takes `m` if it is a record of one of this standby's changelog partitions (applying a
    /// full batch); `false` when it is another's.
    fn take(&mut self, m: &BorrowedMessage<'_>, stores: &mut [TaskStore]) -> Result<bool, StreamsError> {
        if m.partition() != self.partition {
            return Ok(false);
        }
        let Some(p) = self.parts.iter_mut().find(|p| p.topic == m.topic()) else {
            return Ok(false);
        };
        if p.position.is_some_and(|pos| m.offset() < pos) {
            return Ok(true);
        }
        p.position = Some(m.offset() + 1);
        p.batch.push(changelog_record(m, p.values));
        if p.batch.len() >= BATCH {
            self.applied += apply(stores, p)?;
        }
        Ok(true)
    }

    /// Why this standby cannot go on, when a position lies before its changelog's log start
    /// (records deleted before the standby saw them).
    fn gap(&self, consumer: &AssignedConsumer) -> Option<String> {
        self.parts.iter().find_map(|p| {
            let (low, _) = crate::runtime::client::watermarks::fetch(
                consumer,
                &p.topic,
                self.partition,
                Duration::from_secs(5),
            )
            .ok()?;
            p.position.filter(|&pos| pos < low).map(|pos| {
                format!(
                    "a standby position ({pos}) is no longer in the changelog ({} partition {}, which starts \
                     at {low}): records were deleted before the standby saw them",
                    p.topic, self.partition
                )
            })
        })
    }

    /// Moves positions over offsets that hold no record the consumer returns (transaction
    /// markers, aborted records under `read_committed`). Only a store that has a position
    /// moves: before its first record (a store without checkpoint), the consumer may still
    /// report where an earlier assignment of the partition stood (a standby since wiped).
    fn skip_markers(&mut self, consumer: &AssignedConsumer) {
        let Ok(pos) = consumer.position() else {
            return;
        };
        for p in &mut self.parts {
            if let Some(Offset::Offset(o)) = pos.find_partition(&p.topic, self.partition).map(|e| e.offset())
                && p.position.is_some_and(|cur| o > cur)
            {
                tracing::debug!(topic = %p.topic, partition = self.partition, from = ?p.position, to = o, "standby position moved over offsets without records");
                p.position = Some(o);
            }
        }
    }

    /// The offset sum of the checkpoints of `stores` kept on disk (see `offset_sums`).
    pub fn offset_sum(&self, stores: &[TaskStore]) -> i64 {
        super::offset_sums::sum_of(self.on_disk(stores).map(|p| p.checkpointed))
    }

    /// The parts of the stores kept on disk: those the offset sums count.
    fn on_disk<'a>(&'a self, stores: &'a [TaskStore]) -> impl Iterator<Item = &'a Part> + 'a {
        self.parts.iter().filter(|p| stores[p.index].store.persistent())
    }

    /// The changelog end offsets of the stores [`offset_sum`](Self::offset_sum) counts,
    /// summed, by the watermarks of the last fetch responses: how far the sum has to go.
    /// `None` while an end is unknown, or when no store is counted (a sum of nothing would
    /// make the task look caught up).
    pub fn end_sum(&mut self, stores: &[TaskStore], consumer: &AssignedConsumer) -> Option<i64> {
        self.refresh_watermarks(consumer);
        let mut counted = self.on_disk(stores).peekable();
        counted.peek()?;
        counted.map(|p| p.end.map(|e| e.max(0))).sum()
    }

    /// Applies what was read and writes the checkpoint of each store whose position moved.
    pub fn checkpoint(&mut self, stores: &mut [TaskStore]) -> Result<(), StreamsError> {
        for p in &mut self.parts {
            self.applied += apply(stores, p)?;
            if let Some(pos) = p.position
                && p.checkpointed.is_none_or(|c| c < pos - 1)
            {
                stores[p.index].store.write_checkpoint(Some(pos - 1))?;
                p.checkpointed = Some(pos - 1);
            }
        }
        Ok(())
    }

    /// Changelog end offsets minus the positions, summed, by the watermarks of the last
    /// fetch responses. `None` while an end offset is unknown.
    pub fn lag(&mut self, consumer: &AssignedConsumer) -> Option<i64> {
        self.refresh_watermarks(consumer);
        self.parts.iter().map(|p| p.lag().offset_lag).sum()
    }

    /// Where store `index` stands against its changelog's end (by the watermarks of the
    /// last fetch responses, as [`lag`](Self::lag)); a store not followed (not logged, or
    /// restored from a source topic at promotion) has nothing known.
    pub fn store_lag(&mut self, index: usize, consumer: &AssignedConsumer) -> ChangelogLag {
        self.refresh_watermarks(consumer);
        match self.parts.iter().find(|p| p.index == index) {
            Some(p) => p.lag(),
            None => ChangelogLag::at(None, None),
        }
    }

    /// Takes the watermarks the restore consumer's last fetch responses carried for each
    /// changelog partition (librdkafka's cache: no request). Asking the broker instead
    /// (`ListOffsets`) waits behind the connection's pending long-poll fetch, up to
    /// `fetch.wait.max.ms` for each partition, on every refresh of an idle standby. A
    /// partition not fetched yet keeps what was known.
    fn refresh_watermarks(&mut self, consumer: &AssignedConsumer) {
        for p in &mut self.parts {
            if let Some((low, high)) =
                crate::runtime::client::watermarks::cached(consumer, &p.topic, self.partition)
            {
                p.log_start = low.or(p.log_start);
                p.end = Some(high);
            }
        }
    }
}

/// Assigns the restore consumer every partition of every standby of `tails`, each where it
/// stands. On failure, the index of the standby at fault.
pub(crate) fn assign_all(
    consumer: &AssignedConsumer,
    tails: &mut [(&mut Tailing, &mut Vec<TaskStore>)],
) -> Result<(), (Option<usize>, StreamsError)> {
    let mut tpl = TopicPartitionList::new();
    for (i, (tail, _)) in tails.iter_mut().enumerate() {
        tail.add_to(consumer, &mut tpl).map_err(|e| (Some(i), e))?;
    }
    consumer
        .assign(&tpl)
        .map_err(|e| (None, kafka_err("standby assignment", e)))
}

/// Reads for every standby of `tails` at once, from the assignment of [`assign_all`], for
/// up to `budget` (less when nothing arrives for 100 ms after a first record; before it,
/// the fetch that follows an assignment may take longer), then applies and checkpoints what
/// each read. One outcome per standby, in order. It also ends, within [`SLICE`], once
/// `interrupted` (a query waits for the updater), after at least one poll.
pub(crate) fn step_all(
    consumer: &AssignedConsumer,
    tails: &mut [(&mut Tailing, &mut Vec<TaskStore>)],
    budget: Duration,
    interrupted: &dyn Fn() -> bool,
) -> Vec<Result<TailStep, StreamsError>> {
    let mut out: Vec<Result<TailStep, StreamsError>> = tails.iter().map(|_| Ok(TailStep::Applied)).collect();
    let deadline = Instant::now() + budget;
    // When the last record arrived.
    let mut received: Option<Instant> = None;
    let mut gap = false;
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        match consumer.poll((deadline - now).min(SLICE)) {
            Some(Ok(m)) => {
                received = Some(Instant::now());
                for (i, (tail, stores)) in tails.iter_mut().enumerate() {
                    match tail.take(&m, stores) {
                        Ok(false) => continue,
                        Ok(true) => {}
                        Err(e) => out[i] = Err(e),
                    }
                    break;
                }
            }
            Some(Err(KafkaError::MessageConsumption(RDKafkaErrorCode::AutoOffsetReset))) => {
                gap = true;
                break;
            }
            Some(Err(e)) => {
                let topics: Vec<String> = tails
                    .iter()
                    .flat_map(|(t, _)| t.parts.iter().map(|p| format!("`{}`", p.topic)))
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if let Some(denied) = consumer.context().denied(&e, &topics.join(", "), "READ on it") {
                    // The thread fails with it: the first standby carries it.
                    if let Some(first) = out.first_mut() {
                        *first = Err(denied);
                    }
                    return out;
                }
                // Transient (a broker restarting): librdkafka reconnects by itself; the
                // next step reads on, and the lag metric shows a standby that falls behind.
                tracing::debug!(error = %e, "standby consumer");
                break;
            }
            None if received.is_some_and(|at| at.elapsed() >= QUIET) => break,
            None => {}
        }
        // After the poll, not before it: queries back to back still let every step read.
        if interrupted() {
            break;
        }
    }
    for (i, (tail, stores)) in tails.iter_mut().enumerate() {
        if out[i].is_err() {
            continue;
        }
        if gap && let Some(reason) = tail.gap(consumer) {
            out[i] = Ok(TailStep::Corrupted { reason });
            continue;
        }
        if !tail.parts.is_empty() {
            tail.skip_markers(consumer);
        }
        if let Err(e) = tail.checkpoint(stores) {
            out[i] = Err(e);
        }
    }
    out
}

/// Applies the records read of `p` to its store; returns how many.
fn apply(stores: &mut [TaskStore], p: &mut Part) -> Result<u64, StreamsError> {
    if p.batch.is_empty() {
        return Ok(0);
    }
    let n = p.batch.len() as u64;
    super::with_stream_time(&*stores[p.index].store, p.values, &mut p.batch)?;
    stores[p.index].store.restore_batch(&p.batch)?;
    p.batch.clear();
    Ok(n)
}
