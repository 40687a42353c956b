//! What a stream thread and its state updater (`updater.rs`) hand each other: the stores
//! of a task to restore or to keep as a standby, a standby to promote, and the updater's
//! reports.

use prometheus::{IntCounter, IntGauge};

use crate::engine::TaskStore;
use crate::metrics::handles::StandbyMetrics;
use crate::model::TaskId;
use crate::model::error::StreamsError;

/// The stores of one task to restore.
pub(crate) struct RestoreJob {
    pub id: TaskId,
    /// Which hand-over of the task this is (see `creation.rs`).
    pub seq: u64,
    pub stores: Vec<TaskStore>,
    /// The task's `restore_records` counter and `restore_remaining` gauge.
    pub gauges: Option<(IntCounter, IntGauge)>,
}

/// The stores of one standby task to keep warm.
pub(crate) struct StandbyJob {
    pub id: TaskId,
    /// Which hand-over of the task this is (shares the numbering of [`RestoreJob`]).
    pub seq: u64,
    pub stores: Vec<TaskStore>,
    pub metrics: StandbyMetrics,
}

/// A standby to turn into a restoring task ([`StateUpdater::promote`](super::updater::StateUpdater::promote)).
pub(crate) struct Promotion {
    pub id: TaskId,
    /// The sequence number of the restoring task's hand-over.
    pub seq: u64,
    /// The restoring task's `restore_records` counter and `restore_remaining` gauge.
    pub gauges: Option<(IntCounter, IntGauge)>,
    /// Where the stores restored from a source topic stop, by store name.
    pub bounds: Vec<(String, i64)>,
}

/// What the updater reports back.
pub(crate) enum Event {
    /// Every store of the task is up to date; `records` were applied.
    Restored { job: RestoreJob, records: u64 },
    /// A changelog of the task has a gap, or its local files are corrupt (`topic` empty):
    /// wipe its state and hand it over again.
    Corrupted {
        job: RestoreJob,
        store: String,
        topic: String,
        reason: String,
    },
    /// A standby's changelog has a gap, or its local files are corrupt: wipe its state and
    /// hand it over again.
    StandbyCorrupted { job: StandbyJob, reason: String },
    /// Restoring (or keeping the standby of) the task failed; the stream thread fails with it.
    Failed {
        id: TaskId,
        seq: u64,
        error: StreamsError,
    },
}
