//! Committing a thread's tasks: flush the stores and caches, then under at-least-once wait
//! for every produce acknowledgement, write the checkpoints and commit the input offsets;
//! under exactly-once add the offsets to the transaction (while the stores flush, see
//! `commit_eos.rs`), wait for its records and commit it, after which the stores apply what
//! they held with their checkpoints.
//!
//! Offsets go to the group the thread is in: its consumer's group (classic and consumer
//! protocols), or under the streams protocol its group member, with the member's id and
//! epoch (`OffsetCommit`, or the transaction's offsets through `txn_offsets.rs`), so a member
//! that lost its tasks cannot commit them. A commit that fails under at-least-once is
//! retried at the next one for up to [`COMMIT_RETRY_LIMIT`]; under exactly-once the
//! transaction is aborted and the tasks re-created from their changelogs (`recover.rs`).

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

use crate::metrics::handles::CommitPhase;
use crate::model::TaskId;
use crate::model::error::StreamsError;
use crate::runtime::client::errors::kafka_err;
use crate::runtime::tasks::TaskManager;

/// The offsets of `tpl` as (topic, partition, offset, metadata).
fn offsets_of(tpl: &TopicPartitionList) -> Vec<(String, i32, i64, String)> {
    tpl.elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.topic().to_owned(), e.partition(), o, e.metadata().to_owned())),
            _ => None,
        })
        .collect()
}

impl TaskManager {
    pub fn begin_transaction(&mut self) -> Result<(), StreamsError> {
        if self.settings.eos && !self.in_transaction {
            let mut since = Instant::now();
            self.producer
                .begin_transaction()
                .map_err(|e| kafka_err("begin transaction", e))?;
            self.metrics.lap(CommitPhase::BeginTransaction, &mut since);
            self.in_transaction = true;
        }
        Ok(())
    }

    /// Commits every task: flushes stores and caches, then (at-least-once) waits for the
    /// producer, writes checkpoints and commits offsets, or (exactly-once) commits the
    /// transaction with the offsets in it (`commit_eos.rs`).
    pub fn commit<C: ConsumerContext>(&mut self, consumer: &BaseConsumer<C>) -> Result<bool, StreamsError> {
        if !self.dirty {
            return Ok(false);
        }
        let mut since = Instant::now();
        let tpl = if self.settings.eos {
            // The flush processes no input: the offsets are final before it.
            let tpl = self.offsets_to_commit()?;
            tracing::debug!(offsets = %crate::runtime::topics::start_offsets::describe(&tpl), "committing");
            if !self.commit_transaction_with(consumer, &tpl, &mut since)? {
                return Ok(false);
            }
            tpl
        } else {
            match self.commit_at_least_once(consumer, &mut since)? {
                Some(tpl) => tpl,
                None => return Ok(false),
            }
        };
        if let Some(purge) = &mut self.settings.purge {
            purge.committed(&tpl);
        }
        self.commit_failing_since = None;
        self.dirty = false;
        Ok(true)
    }

    /// The input offsets of every task, each with the task's stream time and processor
    /// metadata, as Kafka Streams commits them.
    fn offsets_to_commit(&self) -> Result<TopicPartitionList, StreamsError> {
        let mut tpl = TopicPartitionList::new();
        for task in self.tasks.values() {
            let metadata = crate::runtime::topics::offset_metadata::encode(
                task.stream_time(),
                &task.processor_metadata(),
            );
            for (t, p, o) in task.committable_offsets() {
                tpl.add_partition_offset(&t, p, Offset::Offset(o))
                    .map_err(|e| kafka_err("offsets", e))?;
                if let (Some(m), Some(mut e)) = (&metadata, tpl.find_partition(&t, p)) {
                    e.set_metadata(m);
                }
            }
        }
        Ok(tpl)
    }

    /// The at-least-once part of [`commit`](Self::commit): the offsets committed, or `None`
    /// when nothing was (retried at the next commit, or the tasks are being re-created).
    fn commit_at_least_once<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        since: &mut Instant,
    ) -> Result<Option<TopicPartitionList>, StreamsError> {
        let flushed = self.flush_tasks(consumer);
        if self.transaction_failed() {
            // The producer raised a fatal error (or the flush's changelog writes found it):
            // records since the last commit may be lost, so nothing is committed.
            if let Err(e) = &flushed {
                tracing::debug!(error = %e, "flushing after the producer failed");
            }
            self.recover_failed_transaction(consumer)?;
            return Ok(None);
        }
        flushed?;
        self.metrics.lap(CommitPhase::FlushStores, since);
        // After the flush: a task rebuilt there commits what it has now.
        let tpl = self.offsets_to_commit()?;
        tracing::debug!(offsets = %crate::runtime::topics::start_offsets::describe(&tpl), "committing");
        let timeout = Duration::from_secs(60);
        let flushed = crate::runtime::produce::producer::flush(&self.producer, timeout);
        if self.transaction_failed() {
            // The producer raised a fatal error: records since the last commit may be
            // lost, so nothing is committed; a new producer processes them again.
            self.recover_failed_transaction(consumer)?;
            return Ok(None);
        }
        if let Err(e) = flushed {
            return self.commit_failed("flush producer", e).map(|_| None);
        }
        self.metrics.lap(CommitPhase::FlushProducer, since);
        self.check_deliveries()?;
        let corrupt = self.write_checkpoints()?;
        if tpl.count() > 0 {
            let committed =
                match &self.member {
                    // A member that lost its tasks learns it from its heartbeat too, and
                    // the loop then drops them; until then this is retried as any failure.
                    Some(member) => member.commit_offsets(&offsets_of(&tpl), timeout).map_err(|e| {
                        match e.is_retriable() {
                            true => e.to_string(),
                            false => format!("{e} (the group membership is lost)"),
                        }
                    }),
                    None => consumer.commit(&tpl, CommitMode::Sync).map_err(|e| e.to_string()),
                };
            if let Err(e) = committed {
                return self.commit_failed("commit offsets", e).map(|_| None);
            }
        }
        self.metrics.lap(CommitPhase::CommitOffsets, since);
        // Their changelog writes were delivered and their offsets are committed: they
        // are rebuilt from there.
        for (id, what) in corrupt {
            self.recover_corrupted(id, &what, consumer)?;
        }
        Ok(Some(tpl))
    }

    /// Flushes every task's stores under at-least-once. A store found corrupt has its task
    /// rebuilt (see `corrupted.rs`) and the other tasks are flushed and committed on.
    fn flush_tasks<C: ConsumerContext>(&mut self, consumer: &BaseConsumer<C>) -> Result<(), StreamsError> {
        while let Some((id, what)) = self.flush_until_corrupt()? {
            self.recover_corrupted(id, &what, consumer)?;
        }
        Ok(())
    }

    /// Flushes every task's caches and stores; the first store found corrupt stops it and
    /// is returned with how it is corrupt (under exactly-once the transaction is then
    /// aborted, so the others need no flush; at-least-once rebuilds it and flushes again).
    pub(super) fn flush_until_corrupt(&mut self) -> Result<Option<(TaskId, String)>, StreamsError> {
        for (id, task) in &mut self.tasks {
            if let Err(e) = task.flush() {
                let what = crate::runtime::tasks::corrupted::corruption(&e).ok_or(e)?;
                return Ok(Some((*id, what)));
            }
        }
        Ok(None)
    }

    /// An at-least-once commit failed (a broker restarting, a coordinator moving, a
    /// rebalance): nothing is lost, the next commit retries and records since the last
    /// commit may be processed again. Only after [`COMMIT_RETRY_LIMIT`] of failures in a
    /// row is it an error.
    fn commit_failed(&mut self, what: &str, e: impl std::fmt::Display) -> Result<bool, StreamsError> {
        let since = *self
            .commit_failing_since
            .get_or_insert_with(std::time::Instant::now);
        if since.elapsed() > COMMIT_RETRY_LIMIT {
            return Err(StreamsError::Kafka {
                message: format!("{what}: {e} (commits failing for {:?})", since.elapsed()),
                retriable: false,
            });
        }
        tracing::warn!(error = %e, "{what} failed; retrying at the next commit");
        Ok(false)
    }
}

/// How long at-least-once commits may fail in a row before the thread fails (Kafka
/// Streams' `task.timeout.ms` default).
const COMMIT_RETRY_LIMIT: Duration = Duration::from_secs(300);
