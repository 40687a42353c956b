//! What a state updater lends to code run on its thread ([`StateUpdater::visit`]): every
//! task whose stores it holds (restoring tasks and standbys), with where each store stands
//! against its changelog. Interactive queries of stale stores read them this way
//! (`query/stale.rs`), so the updater itself knows nothing of queries.
//!
//! A visit runs between two of the updater's steps (each at most its step budget), never
//! during one: a store is seen as far as the updater has applied its changelog.
//!
//! [`StateUpdater::visit`]: super::updater::StateUpdater::visit

use crate::engine::TaskStore;
use crate::model::TaskId;

/// How far one store is behind its changelog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChangelogLag {
    /// The next offset the store will apply, when known.
    pub position: Option<i64>,
    /// The changelog's end offset when last asked, when known.
    pub end: Option<i64>,
    /// Records not applied yet, when known.
    pub offset_lag: Option<i64>,
}

impl ChangelogLag {
    /// A store at `position` of a changelog ending at `end`.
    pub fn at(position: Option<i64>, end: Option<i64>) -> Self {
        let offset_lag = match (position, end) {
            (Some(p), Some(e)) => Some((e - p).max(0)),
            _ => None,
        };
        Self {
            position,
            end,
            offset_lag,
        }
    }

    /// A store known to have applied its whole changelog, offsets not kept.
    pub fn caught_up() -> Self {
        Self {
            position: None,
            end: None,
            offset_lag: Some(0),
        }
    }
}

/// One task whose stores the updater holds.
pub(crate) struct HeldTask<'a> {
    pub id: TaskId,
    /// A standby (else an active task restoring).
    pub standby: bool,
    pub stores: &'a mut [TaskStore],
    /// Where the store of a given index stands.
    pub lag: Box<dyn FnMut(usize) -> ChangelogLag + 'a>,
}

impl<'a> HeldTask<'a> {
    pub fn new(
        id: TaskId,
        standby: bool,
        stores: &'a mut [TaskStore],
        lag: Box<dyn FnMut(usize) -> ChangelogLag + 'a>,
    ) -> Self {
        Self {
            id,
            standby,
            stores,
            lag,
        }
    }
}

/// Code run on the updater's thread with the tasks it holds.
pub(crate) type Visit = Box<dyn for<'a> FnOnce(Vec<HeldTask<'a>>) + Send>;
