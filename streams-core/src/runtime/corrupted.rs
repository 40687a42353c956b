//! A store found corrupt while its task runs (a checksum mismatch in a RocksDB block read
//! for a `get` or a range) is rebuilt from its changelog instead of failing the thread on
//! every read, as Kafka Streams does for a `TaskCorruptedException`.
//!
//! - At-least-once: the task alone is closed dirty, its state directory is wiped, its input
//!   partitions are rewound to the committed offsets, and it is created again (restored
//!   from the changelog by the state updater, its partitions paused meanwhile). The
//!   records it processed since the last commit are processed again; other tasks go on.
//! - Exactly-once: the thread's open transaction holds writes of the failed record, so it
//!   is aborted and every task of the thread is re-created from its changelog (as after a
//!   failed commit, see `recover.rs`); the corrupt task's directory is wiped first.

use std::time::Duration;

use rdkafka::Offset;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use streams_state::StoreError;

use super::restore::kafka_err;
use super::tasks::TaskManager;
use crate::engine::TaskId;
use crate::model::error::StreamsError;

/// The message of the corrupt store behind `e`, if a store's files were found corrupt.
pub(crate) fn corruption(e: &StreamsError) -> Option<String> {
    e.corrupt_store().map(ToString::to_string)
}

impl TaskManager {
    /// Rebuilds task `id`, whose store was found corrupt (`what` says how), from its
    /// changelog: see the module docs.
    pub(crate) fn recover_corrupted<C: ConsumerContext>(
        &mut self,
        id: TaskId,
        what: &str,
        consumer: &BaseConsumer<C>,
    ) -> Result<(), StreamsError> {
        tracing::warn!(task = %id, error = what, "a store of the task is corrupt: wiping its local state and restoring it from the changelog");
        self.metrics.tasks_corrupted.inc();
        if self.settings.eos {
            self.abort_and_recreate(consumer, Some(id))?;
            return Ok(());
        }
        if let Some(mut task) = self.tasks.remove(&id) {
            if let Err(e) = task.close(false) {
                tracing::warn!(task = %id, error = %e, "closing the corrupt task");
            }
            self.metrics.tasks_closed.inc();
        }
        self.suspended.remove(&id);
        self.backpressured.remove(&id);
        self.wipe_dir(id)?;
        let partitions = self.task_partitions(id);
        let committed =
            super::start_offsets::committed(consumer, &partitions, super::start_offsets::LOOKUP_TIMEOUT)?;
        for e in committed.elements() {
            let to = match e.offset() {
                Offset::Offset(o) => Offset::Offset(o),
                _ => match self.settings.reset.resolve(consumer, e.topic(), e.partition())? {
                    Some(o) => Offset::Offset(o),
                    None => Offset::End,
                },
            };
            consumer
                .seek(e.topic(), e.partition(), to, Duration::from_secs(30))
                .map_err(|err| kafka_err(&format!("rewind {}-{}", e.topic(), e.partition()), err))?;
            self.forget_position(e.topic(), e.partition());
        }
        // Created again at the next loop iteration, like a task waiting for its state
        // directory: its partitions are paused and the records fetched meanwhile held.
        consumer.pause(&partitions).map_err(|e| kafka_err("pause", e))?;
        self.waiting.insert(id, Vec::new());
        Ok(())
    }

    /// Removes the state directory of task `id` (closed).
    pub(super) fn wipe_dir(&self, id: TaskId) -> Result<(), StreamsError> {
        let dir = self.task_dir(id);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| {
                StreamsError::Store(StoreError::Io {
                    store: id.to_string(),
                    path: dir.clone(),
                    source: e,
                })
            })?;
        }
        Ok(())
    }
}
