//! When a member reports its task offsets: the two per-task sums of a
//! `StreamsGroupHeartbeat`, `TaskOffsets` (how much of each task's state the instance
//! holds) and `TaskEndOffsets` (where the changelogs of the tasks it follows end). The
//! coordinator keeps the last report of each in memory and reads a copy's lag as their
//! difference: the assignor ranks holders of a task's state by it, and a warm-up task
//! counts as caught up once its lag is within the group's `acceptable.recovery.lag`.
//!
//! Invariants:
//! - the two fields are reported independently, each null ("unchanged") unless it is due
//!   and differs from what was last sent;
//! - both are due with the join heartbeat (sent whatever they hold), when the owned tasks
//!   changed since the last request, once the coordinator's `TaskOffsetIntervalMs` has
//!   passed since the field was last sent, and on every heartbeat while an owned warm-up
//!   task is within the acceptable lag ("hot": the coordinator promotes it as soon as it
//!   hears so, rather than an interval later);
//! - a leaving member reports nothing;
//! - the first heartbeat after the join reports both again: Apache Kafka 4.4.0 does not
//!   keep the task offsets of the heartbeat that creates the group (the member joining a
//!   group that did not exist would otherwise be without them until they change);
//! - [`TaskReports::forget`] (a failed request, an error answer, a new coordinator, which
//!   holds no report of a member that did not heartbeat to it) makes the next request
//!   send both again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::model::TaskId;
use crate::runtime::streams_group::codec::TaskOffset;
use crate::runtime::streams_group::shared::TaskAssignment;

/// How often task offsets are reported until the coordinator says (its default).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// The lag within which a warm-up task is caught up, until the coordinator says (the
/// default of `acceptable.recovery.lag`).
const DEFAULT_ACCEPTABLE_LAG: i64 = 10_000;

/// One of the two fields: what was last sent, and when.
#[derive(Debug, Default)]
struct Field(Option<(Instant, Vec<TaskOffset>)>);

impl Field {
    /// `now`, when it is to be sent; recorded as sent then.
    fn next(
        &mut self,
        now: Vec<TaskOffset>,
        joining: bool,
        forced: bool,
        interval: Duration,
    ) -> Option<Vec<TaskOffset>> {
        let send = match &self.0 {
            _ if joining => true,
            None => true,
            Some((at, last)) => (forced || at.elapsed() >= interval) && *last != now,
        };
        if !send {
            return None;
        }
        self.0 = Some((Instant::now(), now.clone()));
        Some(now)
    }
}

/// The task-offset reporting of one member (see the module docs).
#[derive(Debug)]
pub(crate) struct TaskReports {
    /// How often the fields are reported (the coordinator's `TaskOffsetIntervalMs`).
    pub interval: Duration,
    /// The lag within which a warm-up task is caught up (the coordinator's
    /// `AcceptableRecoveryLag`).
    pub acceptable_lag: i64,
    offsets: Field,
    ends: Field,
    /// The owned tasks of the last request.
    owned: Option<TaskAssignment>,
}

impl Default for TaskReports {
    fn default() -> Self {
        Self {
            interval: DEFAULT_INTERVAL,
            acceptable_lag: DEFAULT_ACCEPTABLE_LAG,
            offsets: Field::default(),
            ends: Field::default(),
            owned: None,
        }
    }
}

impl TaskReports {
    /// The `TaskOffsets` and `TaskEndOffsets` of the next request of a member at `epoch`
    /// owning `owned`, from the current `sums` and `ends`.
    pub(crate) fn next(
        &mut self,
        epoch: i32,
        owned: &TaskAssignment,
        sums: impl FnOnce() -> BTreeMap<TaskId, i64>,
        ends: impl FnOnce() -> BTreeMap<TaskId, i64>,
    ) -> (Option<Vec<TaskOffset>>, Option<Vec<TaskOffset>>) {
        if epoch < 0 {
            return (None, None);
        }
        let joining = epoch == 0;
        let (sums, ends) = (sums(), ends());
        let moved = self.owned.as_ref() != Some(owned);
        if moved {
            self.owned = Some(owned.clone());
        }
        let hot = owned.warmup.iter().any(|t| match (sums.get(t), ends.get(t)) {
            (Some(offset), Some(end)) => end - offset <= self.acceptable_lag,
            _ => false,
        });
        let forced = moved || hot;
        (
            self.offsets.next(listed(&sums), joining, forced, self.interval),
            self.ends.next(listed(&ends), joining, forced, self.interval),
        )
    }

    /// The coordinator may hold no report of this member (see the module docs): the next
    /// request sends both fields.
    pub(crate) fn forget(&mut self) {
        self.offsets = Field::default();
        self.ends = Field::default();
        self.owned = None;
    }
}

/// `sums` as the request lists them.
fn listed(sums: &BTreeMap<TaskId, i64>) -> Vec<TaskOffset> {
    sums.iter()
        .map(|(id, offset)| TaskOffset {
            subtopology: id.subtopology.to_string(),
            partition: id.partition,
            offset: *offset,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(partition: i32) -> TaskId {
        TaskId {
            subtopology: 0,
            partition,
        }
    }

    fn sums(of: &[(i32, i64)]) -> BTreeMap<TaskId, i64> {
        of.iter().map(|&(p, o)| (task(p), o)).collect()
    }

    /// The (partition, offset) pairs of a field, `None` when it is not sent.
    fn pairs(field: Option<Vec<TaskOffset>>) -> Option<Vec<(i32, i64)>> {
        field.map(|f| f.into_iter().map(|t| (t.partition, t.offset)).collect())
    }

    fn reports() -> TaskReports {
        TaskReports {
            interval: Duration::from_millis(150),
            acceptable_lag: 100,
            ..TaskReports::default()
        }
    }

    #[test]
    fn the_two_fields_are_sent_with_the_join_then_each_only_when_it_changed() {
        let mut r = reports();
        let owned = TaskAssignment::default();
        let (o, e) = r.next(0, &owned, || sums(&[(0, 100)]), || sums(&[(0, 200)]));
        assert_eq!((pairs(o), pairs(e)), (Some(vec![(0, 100)]), Some(vec![(0, 200)])));
        // Within the interval nothing goes, changed or not.
        let (o, e) = r.next(3, &owned, || sums(&[(0, 120)]), || sums(&[(0, 200)]));
        assert_eq!((o, e), (None, None));
        std::thread::sleep(Duration::from_millis(200));
        // Only the offsets changed: only they go.
        let (o, e) = r.next(3, &owned, || sums(&[(0, 120)]), || sums(&[(0, 200)]));
        assert_eq!((pairs(o), e), (Some(vec![(0, 120)]), None));
        // Once the end's interval has passed, its change goes at once, alone.
        let (o, e) = r.next(3, &owned, || sums(&[(0, 120)]), || sums(&[(0, 220)]));
        assert_eq!((o, pairs(e)), (None, Some(vec![(0, 220)])));
        // Leaving: nothing; rejoining: both again, though unchanged.
        assert_eq!(
            r.next(-1, &owned, || sums(&[(0, 1)]), || sums(&[(0, 2)])),
            (None, None)
        );
        let (o, e) = r.next(0, &owned, || sums(&[(0, 120)]), || sums(&[(0, 220)]));
        assert!(o.is_some() && e.is_some());
    }

    #[test]
    fn a_new_assignment_or_a_forgotten_report_sends_them_before_the_interval() {
        let mut r = reports();
        r.interval = Duration::from_secs(3600);
        let mut owned = TaskAssignment::default();
        r.next(0, &owned, || sums(&[(0, 1)]), || sums(&[(0, 5)]));
        assert_eq!(
            r.next(3, &owned, || sums(&[(0, 2)]), || sums(&[(0, 6)])),
            (None, None)
        );
        owned.standby.insert(task(0));
        let (o, e) = r.next(4, &owned, || sums(&[(0, 2)]), || sums(&[(0, 6)]));
        assert_eq!((pairs(o), pairs(e)), (Some(vec![(0, 2)]), Some(vec![(0, 6)])));
        assert_eq!(
            r.next(4, &owned, || sums(&[(0, 2)]), || sums(&[(0, 6)])),
            (None, None)
        );
        r.forget();
        let (o, e) = r.next(4, &owned, || sums(&[(0, 2)]), || sums(&[(0, 6)]));
        assert!(
            o.is_some() && e.is_some(),
            "unchanged, but the coordinator may not have them"
        );
    }

    #[test]
    fn a_hot_warm_up_task_reports_every_change_without_waiting() {
        let mut r = reports();
        r.interval = Duration::from_secs(3600);
        let owned = TaskAssignment {
            warmup: [task(1)].into(),
            ..TaskAssignment::default()
        };
        let ends = || sums(&[(1, 1_000)]);
        r.next(0, &owned, || sums(&[(1, 500)]), ends);
        r.next(3, &owned, || sums(&[(1, 500)]), ends);
        // Lag 450: not hot, the change waits for the interval.
        assert_eq!(r.next(3, &owned, || sums(&[(1, 550)]), ends).0, None);
        // Lag 50: hot, sent at once; then every change, and only changes.
        assert_eq!(
            pairs(r.next(3, &owned, || sums(&[(1, 950)]), ends).0),
            Some(vec![(1, 950)])
        );
        assert_eq!(r.next(3, &owned, || sums(&[(1, 950)]), ends).0, None);
        assert_eq!(
            pairs(r.next(3, &owned, || sums(&[(1, 990)]), ends).0),
            Some(vec![(1, 990)])
        );
        // A standby within the lag is not hot: only warm-up tasks are promoted.
        let standby = TaskAssignment {
            standby: [task(1)].into(),
            ..TaskAssignment::default()
        };
        r.next(3, &standby, || sums(&[(1, 990)]), ends);
        assert_eq!(r.next(3, &standby, || sums(&[(1, 995)]), ends).0, None);
    }
}
