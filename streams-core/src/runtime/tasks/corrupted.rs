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

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};

use crate::engine::TaskId;
use crate::model::error::StreamsError;
use crate::runtime::client::errors::kafka_err;
use crate::runtime::tasks::TaskManager;

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
            self.settings.offset_sums.stopped(id);
            if let Err(e) = task.close(false) {
                tracing::warn!(task = %id, error = %e, "closing the corrupt task");
            }
            self.metrics.tasks_closed.inc();
        }
        self.suspended.remove(&id);
        self.backpressured.remove(&id);
        self.wipe_dir(id)?;
        // The closed task's queued positions went with it: the new one starts afresh.
        let partitions = self.task_partitions(id);
        self.rewind_to_committed(consumer, &partitions)?;
        // Created again at the next loop iteration, like a task waiting for its state
        // directory: its partitions are paused and the records fetched meanwhile held.
        consumer.pause(&partitions).map_err(|e| kafka_err("pause", e))?;
        self.waiting.insert(id, Vec::new());
        Ok(())
    }
}
