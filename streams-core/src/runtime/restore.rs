//! Restoring a task's logged stores from their changelog partitions before the task
//! processes a record.
//!
//! Each store resumes after its checkpoint (the changelog offset its local data already
//! contains) or, without one, from the start of the partition; it reads up to the end
//! offset found when restoration began, in batches applied through
//! `KeyValueStore::restore_batch` (RocksDB: one write batch each, WAL off).
//!
//! A gap is corrupted state, never skipped: when the checkpoint lies before the
//! changelog's log start (retention or `DeleteRecords` removed records the store never
//! saw), or the restore position falls out of the log while reading (the restore consumer
//! runs with `auto.offset.reset=error`), restoration stops with [`Restored::Corrupted`];
//! the task manager then wipes the task's state and restores from the earliest offset, as
//! Kafka Streams does for a `TaskCorruptedException`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};
use streams_state::ChangelogRecord;

use super::resets::AssignedConsumer;
use crate::error::StreamsError;
use crate::task::Task;

/// How a task's restoration ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Restored {
    /// Every logged store is up to date; this many records were applied.
    Done(u64),
    /// The changelog of `topic` has a gap the store cannot cross: wipe and restore again.
    Corrupted {
        store: String,
        topic: String,
        reason: String,
    },
}

/// How many records one restore batch holds.
const BATCH: usize = 10_000;
/// How long restoration may go without progress before it fails.
const STALL: Duration = Duration::from_secs(60);

/// The changelog topic of `store` in application `app_id`.
pub fn changelog_topic(app_id: &str, store: &str) -> String {
    format!("{app_id}-{store}-changelog")
}

pub(crate) fn kafka_err(context: &str, e: impl std::fmt::Display) -> StreamsError {
    StreamsError::Kafka {
        message: format!("{context}: {e}"),
        retriable: true,
    }
}

/// Progress of one restoration, for logs and metrics.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RestoreProgress {
    pub restored: u64,
    pub remaining: u64,
}

/// Restores every logged store of `task`.
pub(crate) fn restore_task(
    consumer: &AssignedConsumer,
    task: &Task,
    app_id: &str,
    on_progress: &mut dyn FnMut(RestoreProgress),
) -> Result<Restored, StreamsError> {
    let result = restore_stores(consumer, task, app_id, on_progress);
    let unassigned = consumer.unassign().map_err(|e| kafka_err("restore unassign", e));
    let restored = result?;
    unassigned?;
    Ok(restored)
}

fn restore_stores(
    consumer: &AssignedConsumer,
    task: &Task,
    app_id: &str,
    on_progress: &mut dyn FnMut(RestoreProgress),
) -> Result<Restored, StreamsError> {
    let mut total = 0;
    let partition = task.id().partition;
    for slot in task.stores() {
        if slot.builder.logging_config().is_none() || slot.global {
            continue;
        }
        let topic = changelog_topic(app_id, &slot.name);
        let (low, high) = consumer
            .fetch_watermarks(&topic, partition, Duration::from_secs(30))
            .map_err(|e| kafka_err(&format!("watermarks of {topic}-{partition}"), e))?;
        let mut store = slot
            .store
            .try_borrow_mut()
            .map_err(|_| StreamsError::Usage("store borrowed".into()))?;
        let checkpoint = store.checkpoint()?;
        if let Some(c) = checkpoint
            && c + 1 < low
        {
            return Ok(Restored::Corrupted {
                store: slot.name.clone(),
                topic: format!("{topic}-{partition}"),
                reason: format!(
                    "the store holds the changelog up to offset {c}, but the changelog now starts at {low}: \
                     offsets {}..{low} were deleted before the store saw them",
                    c + 1
                ),
            });
        }
        let start = checkpoint.map_or(low, |c| c + 1);
        if start >= high {
            continue;
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, partition, Offset::Offset(start))
            .map_err(|e| kafka_err("restore assignment", e))?;
        consumer
            .assign(&tpl)
            .map_err(|e| kafka_err("restore assignment", e))?;
        let started = Instant::now();
        let mut last_progress = Instant::now();
        let mut batch: Vec<ChangelogRecord> = Vec::with_capacity(BATCH);
        let mut position = start;
        tracing::info!(task = %task.id(), store = %slot.name, from = start, to = high, "restoring");
        while position < high {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    position = m.offset() + 1;
                    batch.push(ChangelogRecord {
                        key: Bytes::copy_from_slice(m.key().unwrap_or_default()),
                        value: m.payload().map(Bytes::copy_from_slice),
                        offset: m.offset(),
                    });
                    last_progress = Instant::now();
                }
                Some(Err(KafkaError::MessageConsumption(RDKafkaErrorCode::AutoOffsetReset))) => {
                    return Ok(Restored::Corrupted {
                        store: slot.name.clone(),
                        topic: format!("{topic}-{partition}"),
                        reason: format!(
                            "offset {position} is no longer in the changelog (deleted while restoring)"
                        ),
                    });
                }
                Some(Err(e)) => {
                    // Transient (a broker restarting): librdkafka reconnects by itself; a
                    // lasting failure ends in the stall error below.
                    if last_progress.elapsed() > STALL {
                        return Err(kafka_err(&format!("restoring {topic}-{partition}"), e));
                    }
                    tracing::debug!(error = %e, "restore consumer");
                    std::thread::sleep(Duration::from_millis(100));
                }
                None => {
                    // Transaction markers take offsets but are never returned: ask where
                    // the consumer stands.
                    if let Ok(pos) = consumer.position()
                        && let Some(Offset::Offset(p)) =
                            pos.find_partition(&topic, partition).map(|e| e.offset())
                    {
                        position = position.max(p);
                    }
                    if last_progress.elapsed() > STALL {
                        return Err(kafka_err(
                            &format!("restoring {topic}-{partition}"),
                            format!("no progress at offset {position} of {high} for {STALL:?}"),
                        ));
                    }
                }
            }
            if batch.len() >= BATCH || (position >= high && !batch.is_empty()) {
                store.restore_batch(&batch)?;
                total += batch.len() as u64;
                batch.clear();
                on_progress(RestoreProgress {
                    restored: total,
                    remaining: (high - position).max(0) as u64,
                });
            }
        }
        if !batch.is_empty() {
            store.restore_batch(&batch)?;
            total += batch.len() as u64;
        }
        // The data now contains everything up to the end offset (markers included).
        store.write_checkpoint(Some(high - 1))?;
        tracing::info!(task = %task.id(), store = %slot.name, records = total, elapsed = ?started.elapsed(), "restored");
    }
    Ok(Restored::Done(total))
}
