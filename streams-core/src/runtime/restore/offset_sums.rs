//! How much of each task's state this instance holds, as one number per task: the sum,
//! over the task's persistent stores, of the changelog offset each store's checkpoint
//! reaches. The streams group member reports these sums (`TaskOffsets` of KIP-1071), so
//! the coordinator gives a task whose owner is gone to the member that holds most of its
//! state: a standby, or an instance that restarted with the task's stores on disk.
//!
//! Invariants:
//! - one [`OffsetSums`] per instance, shared by its stream threads (which record active
//!   tasks at their checkpoints), their state updaters (standbys) and their members (which
//!   read [`OffsetSums::snapshot`]);
//! - a sum is also kept in `<task dir>/.offset-sum` (decimal text), written at most every
//!   [`WRITE_EVERY`] per task and at once when the task closes, so an instance that
//!   restarts reports the tasks it finds on disk ([`OffsetSums::load`]); a task whose
//!   directory is wiped is forgotten;
//! - sums are hints for the assignor: a missing or stale file costs a restoration, never
//!   correctness, so file errors are only logged;
//! - beside its sum, a task whose changelogs the state updater follows (a standby or
//!   warm-up task) has an *end sum*: the same stores' changelog end offsets, summed
//!   (`TaskEndOffsets` of KIP-1071), so the coordinator can tell how far behind the copy is
//!   (end sum minus sum). It is kept in memory only, set while the updater follows the
//!   task and cleared when it stops ([`OffsetSums::record_end`]): an end read long ago
//!   would make a copy look caught up when it is not;
//! - the sums of *running* active tasks (from creation until closed) are kept and written
//!   but not reported ([`OffsetSums::started`], [`OffsetSums::stopped`]): a running task is
//!   caught up by definition, and Kafka Streams' client leaves them out too, so that a
//!   reported active task means one still restoring.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::TaskId;

/// The file in a task's directory.
pub(crate) const FILE: &str = ".offset-sum";

/// How often a task's file is rewritten while the task runs.
pub(crate) const WRITE_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy)]
struct Entry {
    sum: i64,
    /// The sum last written to the file, and when.
    written: Option<(i64, Instant)>,
    /// The end sum while the state updater follows the task's changelogs.
    end: Option<i64>,
}

/// The offset sums of the tasks whose state this instance holds.
#[derive(Debug)]
pub(crate) struct OffsetSums {
    /// `<state.dir>/<application.id>`.
    app_dir: PathBuf,
    held: Mutex<Held>,
}

/// The sums, and which of their tasks run.
#[derive(Debug, Default)]
struct Held {
    tasks: BTreeMap<TaskId, Entry>,
    running: BTreeSet<TaskId>,
}

impl OffsetSums {
    /// The sums of the tasks found on disk under `app_dir` (`<state.dir>/<application.id>`).
    pub(crate) fn load(app_dir: &Path) -> OffsetSums {
        let mut tasks = BTreeMap::new();
        for entry in std::fs::read_dir(app_dir).into_iter().flatten().flatten() {
            let Some(id) = entry.file_name().to_str().and_then(task_of_dir) else {
                continue;
            };
            let file = entry.path().join(FILE);
            match std::fs::read_to_string(&file).map(|s| s.trim().parse::<i64>()) {
                Ok(Ok(sum)) => {
                    tasks.insert(
                        id,
                        Entry {
                            sum,
                            written: None,
                            end: None,
                        },
                    );
                }
                Ok(Err(_)) => tracing::debug!(file = %file.display(), "unreadable offset sum"),
                Err(_) => {} // a task directory without stores on disk
            }
        }
        OffsetSums {
            app_dir: app_dir.to_owned(),
            held: Mutex::new(Held {
                tasks,
                running: BTreeSet::new(),
            }),
        }
    }

    /// Task `id`'s stores reach offset sum `sum`; the file is rewritten when it changed and
    /// [`WRITE_EVERY`] has passed since, or when `closing`.
    pub(crate) fn record(&self, id: TaskId, sum: i64, closing: bool) {
        let write = {
            let mut held = self.lock();
            let e = held.tasks.entry(id).or_insert(Entry {
                sum,
                written: None,
                end: None,
            });
            e.sum = sum;
            let due = match e.written {
                None => true,
                Some((written, at)) => written != sum && (closing || at.elapsed() >= WRITE_EVERY),
            };
            if due {
                e.written = Some((sum, Instant::now()));
            }
            due
        };
        if write {
            self.write(id, sum);
        }
    }

    /// Task `id`'s changelogs end at offsets summing to `end` (`None`: not followed, or an
    /// end not known). Only a task with a sum takes one: record the sum first.
    pub(crate) fn record_end(&self, id: TaskId, end: Option<i64>) {
        if let Some(e) = self.lock().tasks.get_mut(&id) {
            e.end = end;
        }
    }

    /// Task `id`'s state directory was wiped.
    pub(crate) fn forget(&self, id: TaskId) {
        let mut held = self.lock();
        held.tasks.remove(&id);
        held.running.remove(&id);
    }

    /// Task `id` runs as an active task here: its sum is no longer reported.
    pub(crate) fn started(&self, id: TaskId) {
        self.lock().running.insert(id);
    }

    /// Active task `id` closed: its sum is reported again.
    pub(crate) fn stopped(&self, id: TaskId) {
        self.lock().running.remove(&id);
    }

    /// The sum of every task whose state is held, but not running as an active task.
    pub(crate) fn snapshot(&self) -> BTreeMap<TaskId, i64> {
        let held = self.lock();
        held.tasks
            .iter()
            .filter(|(id, _)| !held.running.contains(id))
            .map(|(id, e)| (*id, e.sum))
            .collect()
    }

    /// Every end sum known (see [`record_end`](Self::record_end)).
    pub(crate) fn end_snapshot(&self) -> BTreeMap<TaskId, i64> {
        self.lock()
            .tasks
            .iter()
            .filter_map(|(id, e)| Some((*id, e.end?)))
            .collect()
    }

    fn write(&self, id: TaskId, sum: i64) {
        let dir = self.app_dir.join(id.to_string());
        let (tmp, file) = (dir.join(".offset-sum.tmp"), dir.join(FILE));
        let result = std::fs::write(&tmp, sum.to_string()).and_then(|()| std::fs::rename(&tmp, &file));
        if let Err(e) = result {
            tracing::debug!(task = %id, error = %e, "writing the task's offset sum");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The task of a state directory named `<subtopology>_<partition>`.
fn task_of_dir(name: &str) -> Option<TaskId> {
    let (sub, partition) = name.split_once('_')?;
    Some(TaskId {
        subtopology: sub.parse().ok()?,
        partition: partition.parse().ok()?,
    })
}

/// The offset sum of stores whose checkpoints are `offsets` (`None`: no checkpoint, which
/// counts as nothing held).
pub(crate) fn sum_of(offsets: impl IntoIterator<Item = Option<i64>>) -> i64 {
    offsets.into_iter().flatten().map(|o| o.max(0)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(subtopology: u32, partition: i32) -> TaskId {
        TaskId {
            subtopology,
            partition,
        }
    }

    #[test]
    fn sums_survive_a_restart_through_the_task_directories() {
        let dir = tempfile::tempdir().unwrap();
        for t in ["0_1", "1_0", "global", "0_x", "0_2"] {
            std::fs::create_dir(dir.path().join(t)).unwrap();
        }
        let sums = OffsetSums::load(dir.path());
        assert!(sums.snapshot().is_empty());
        sums.record(task(0, 1), 41, false);
        sums.record(task(1, 0), 7, false);
        // Within WRITE_EVERY a changed sum stays in memory only, until the task closes.
        sums.record(task(0, 1), 42, false);
        assert_eq!(sums.snapshot()[&task(0, 1)], 42);
        assert_eq!(OffsetSums::load(dir.path()).snapshot()[&task(0, 1)], 41);
        sums.record(task(0, 1), 43, true);
        std::fs::write(dir.path().join("0_x").join(FILE), "5").unwrap();
        std::fs::write(dir.path().join("0_2").join(FILE), "not a number").unwrap();
        let again = OffsetSums::load(dir.path());
        assert_eq!(
            again.snapshot(),
            BTreeMap::from([(task(0, 1), 43), (task(1, 0), 7)])
        );
        again.forget(task(1, 0));
        assert_eq!(again.snapshot().len(), 1);
    }

    #[test]
    fn end_sums_are_kept_while_followed_and_never_reach_the_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("0_1")).unwrap();
        let sums = OffsetSums::load(dir.path());
        sums.record_end(task(0, 1), Some(90));
        assert!(sums.end_snapshot().is_empty(), "no sum, no end");
        sums.record(task(0, 1), 40, false);
        sums.record_end(task(0, 1), Some(90));
        sums.record(task(0, 1), 41, false);
        assert_eq!(sums.end_snapshot(), BTreeMap::from([(task(0, 1), 90)]));
        sums.record(task(0, 1), 42, true);
        assert!(OffsetSums::load(dir.path()).end_snapshot().is_empty());
        sums.record_end(task(0, 1), None);
        assert!(sums.end_snapshot().is_empty());
        assert_eq!(sums.snapshot()[&task(0, 1)], 42, "the sum stays");
        sums.record_end(task(0, 1), Some(95));
        sums.forget(task(0, 1));
        assert!(sums.end_snapshot().is_empty());
    }

    #[test]
    fn the_sums_of_running_tasks_are_kept_but_not_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("0_1")).unwrap();
        let sums = OffsetSums::load(dir.path());
        sums.record(task(0, 1), 10, false);
        sums.started(task(0, 1));
        sums.started(task(0, 2)); // no state: nothing to leave out
        sums.record(task(0, 1), 12, false);
        assert!(sums.snapshot().is_empty(), "running");
        sums.record(task(0, 1), 13, true);
        assert_eq!(
            OffsetSums::load(dir.path()).snapshot()[&task(0, 1)],
            13,
            "still written"
        );
        sums.stopped(task(0, 1));
        assert_eq!(sums.snapshot(), BTreeMap::from([(task(0, 1), 13)]));
        sums.started(task(0, 1));
        sums.forget(task(0, 1));
        sums.record(task(0, 1), 0, false);
        assert_eq!(sums.snapshot().len(), 1, "a wiped task starts anew, not running");
    }

    #[test]
    fn stores_without_checkpoint_count_as_nothing() {
        assert_eq!(sum_of([Some(10), None, Some(5)]), 15);
        assert_eq!(sum_of([None, None]), 0);
        assert_eq!(sum_of([Some(-1)]), 0);
    }
}
