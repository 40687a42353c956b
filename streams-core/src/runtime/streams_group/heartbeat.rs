//! The heartbeat loop of a streams group member: builds each `StreamsGroupHeartbeat`,
//! sends it to the coordinator and applies the response to the shared member state.
//!
//! Invariants:
//! - a join heartbeat (epoch 0) carries everything the coordinator needs of a new member
//!   (topology, process id, rebalance timeout, user endpoint, empty owned tasks); later
//!   ones carry the epoch and the owned tasks (always the full sets, so a lost request
//!   loses nothing) and leave the rest null ("unchanged");
//! - the assignment is delivered to the stream thread only when it differs from the last
//!   one delivered; after a loss the next one is delivered whatever it is;
//! - the connection is dropped on any I/O error, undecodable response or coordinator move
//!   and found again before the next heartbeat (a retriable failure: the loop backs off and
//!   heartbeats again; the thread never panics on what the broker sends);
//! - every request carries the last `EndpointInformationEpoch` the coordinator sent, so the
//!   endpoint map comes only when it changed; it is left in the instance's
//!   [`GroupEndpoints`](super::endpoints::GroupEndpoints) for interactive queries;
//! - task offsets and end offsets are reported as `task_reports.rs` says; a failed
//!   request or an error answer makes the next request report them again.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::model::TaskId;
use crate::model::error::{StreamsError, StreamsGroupFailure};
use crate::runtime::streams_group::codec::{self, GroupStatus, HeartbeatRequest, HeartbeatResponse, TaskIds};
use crate::runtime::streams_group::describe;
pub(crate) use crate::runtime::streams_group::failures::{fatal, status_failure};
use crate::runtime::streams_group::shared::{
    MemberEvent, MemberSettings, RETRY_BACKOFF, Shared, State, Stop, TaskAssignment,
};
use crate::runtime::streams_group::task_reports::TaskReports;
use crate::runtime::streams_group::wire::{self, Conn};

/// The socket timeout of heartbeat connections.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// One member's heartbeat logic; owned by the heartbeat thread (by `join` until then).
pub(crate) struct Heartbeat {
    settings: Arc<MemberSettings>,
    member_id: String,
    conn: Option<Conn>,
    /// The coordinator's heartbeat interval.
    interval: Duration,
    /// The assignment as the coordinator last sent it.
    target: TaskAssignment,
    /// The assignment last handed to the stream thread.
    delivered: Option<TaskAssignment>,
    /// The group status last logged.
    status: Option<Vec<GroupStatus>>,
    /// Since when that status has held (unset while it is empty), and whether its lasting
    /// was logged: a condition such as a delayed assignment that never clears leaves the
    /// member waiting with nothing else in its log.
    status_since: Option<(Instant, bool)>,
    /// Since when the group's status reports a fatal condition (see [`status_failure`]).
    failing_status_since: Option<Instant>,
    /// Since when every heartbeat has been answered UNKNOWN_SERVER_ERROR.
    server_error_since: Option<Instant>,
    /// How long UNKNOWN_SERVER_ERROR answers may last before the member fails.
    pub(crate) server_error_grace: Duration,
    /// The endpoint information epoch the coordinator last sent (-1 before the first, so
    /// the first response carries the map whatever the group's epoch is).
    endpoint_epoch: i32,
    /// The task offsets reporting (a request is built from `&self`).
    reports: RefCell<TaskReports>,
    /// A heartbeat of the member failed since its assignment was last known for sure: the
    /// coordinator may have changed the tasks in an answer that never arrived (see
    /// [`describe`]).
    unsure: bool,
}

impl Heartbeat {
    /// The heartbeat logic of member `member_id`.
    pub(crate) fn new(settings: Arc<MemberSettings>, member_id: String) -> Self {
        Heartbeat {
            settings,
            member_id,
            conn: None,
            interval: Duration::from_secs(1),
            target: TaskAssignment::default(),
            delivered: None,
            status: None,
            status_since: None,
            failing_status_since: None,
            server_error_since: None,
            server_error_grace: SERVER_ERROR_GRACE,
            endpoint_epoch: -1,
            reports: RefCell::default(),
            unsure: false,
        }
    }

    /// The next heartbeat for the member in state `st`.
    pub(crate) fn request(&self, st: &State) -> HeartbeatRequest {
        let s = &self.settings;
        // A (re-)joining member owns nothing: the coordinator refuses a join that reports
        // tasks (INVALID_REQUEST, "ActiveTasks must be empty when (re-)joining").
        let owned = if st.epoch == 0 {
            &TaskAssignment::default()
        } else {
            &st.owned
        };
        let (task_offsets, task_end_offsets) = self.reports.borrow_mut().next(
            st.epoch,
            owned,
            || s.task_offsets.get(),
            || s.task_end_offsets.get(),
        );
        let mut req = HeartbeatRequest {
            group_id: s.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: st.epoch,
            endpoint_information_epoch: self.endpoint_epoch,
            instance_id: s.instance_id.clone(),
            rebalance_timeout_ms: -1,
            active_tasks: Some(task_lists(&owned.active)),
            standby_tasks: Some(task_lists(&owned.standby)),
            warmup_tasks: Some(task_lists(&owned.warmup)),
            task_offsets,
            task_end_offsets,
            shutdown_application: st.shutdown_requested,
            ..Default::default()
        };
        if st.epoch == 0 {
            req.topology = Some(s.topology.clone());
            req.process_id = Some(s.process_id.clone());
            req.rebalance_timeout_ms = i32::try_from(s.rebalance_timeout.as_millis()).unwrap_or(i32::MAX);
            req.user_endpoint = s.user_endpoint.clone();
            req.client_tags = Some(Vec::new());
        }
        req
    }

    /// Sends `req` to the coordinator (found first when not connected).
    pub(crate) fn exchange(&mut self, req: &HeartbeatRequest) -> Result<HeartbeatResponse, StreamsError> {
        let s = &self.settings;
        let conn = match &mut self.conn {
            Some(c) => c,
            None => self.conn.insert(wire::find_coordinator(
                &s.known,
                &s.bootstrap,
                &s.group_id,
                &s.client_id,
                IO_TIMEOUT,
            )?),
        };
        let version = conn
            .version(codec::API_KEY, (0, codec::MAX_VERSION))
            .ok_or_else(|| {
                fatal(
                    &s.group_id,
                    35,
                    Some("the coordinator does not offer StreamsGroupHeartbeat"),
                )
                .unwrap_or_else(|| wire::kafka("no StreamsGroupHeartbeat".into(), false))
            })?;
        // Flexible versions: request header v2, response header v1. A response that does not
        // decode is a failed request: retriable, on a new connection.
        let result = conn
            .round_trip(codec::API_KEY, version, 2, 1, &req.encode())
            .and_then(|body| {
                HeartbeatResponse::decode(&body).map_err(|e| {
                    wire::kafka(
                        format!("StreamsGroupHeartbeat v{version} from {}: {e}", conn.addr()),
                        true,
                    )
                })
            });
        if result.is_err() {
            self.conn = None;
            // The coordinator may have acted on it: a join is answered with the whole
            // assignment anyway, a heartbeat only when its tasks changed.
            self.unsure |= req.member_epoch > 0;
            // The report may not have arrived: the next request makes it again.
            self.reports.get_mut().forget();
        }
        result
    }

    /// Applies `resp` to `st`; returns when to heartbeat next, or the fatal error.
    pub(crate) fn handle(
        &mut self,
        resp: HeartbeatResponse,
        st: &mut State,
    ) -> Result<Duration, StreamsError> {
        let group = &self.settings.group_id;
        if resp.error_code != 0 {
            // Not taken, or by a coordinator that is not (or no longer) the group's.
            self.reports.get_mut().forget();
        }
        match resp.error_code {
            0 => self.server_error_since = None,
            // UNKNOWN_SERVER_ERROR: an exception in the coordinator. Apache Kafka 4.3 throws
            // one for a new group's first heartbeats while the group is being set up (a
            // member's endpoint not yet in the group's endpoint map): only one that lasts
            // fails the member.
            -1 if self.server_error_since.get_or_insert_with(Instant::now).elapsed()
                < self.server_error_grace =>
            {
                tracing::warn!(group = %group, member = %self.member_id, "heartbeat: {}; retrying", codec_error(&resp));
                return Ok(RETRY_BACKOFF);
            }
            // UNRELEASED_INSTANCE_ID: a static member joins while the member that held its
            // `group.instance.id` before (a crashed run of it) is still in the group; the
            // coordinator releases the id when that member's session times out.
            111 if st.epoch == 0 => {
                tracing::warn!(
                    group = %group,
                    instance = self.settings.instance_id.as_deref().unwrap_or(""),
                    "{}; waiting for the earlier member's session to time out",
                    codec_error(&resp)
                );
                return Ok(UNRELEASED_BACKOFF);
            }
            // FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID: rejoin with nothing.
            110 | 25 => {
                tracing::warn!(
                    group = %group,
                    member = %self.member_id,
                    epoch = st.epoch,
                    "streams group member fenced ({}): its tasks are lost, rejoining",
                    codec_error(&resp)
                );
                if st.epoch > 0 || !st.owned.active.is_empty() {
                    st.lose();
                }
                st.epoch = 0;
                self.target = TaskAssignment::default();
                self.delivered = None;
                return Ok(Duration::ZERO);
            }
            code => {
                return match fatal(group, code, resp.error_message.as_deref()) {
                    Some(e) => Err(e),
                    None => {
                        tracing::debug!(group = %group, "heartbeat: {}; finding the coordinator again", codec_error(&resp));
                        self.conn = None;
                        Ok(RETRY_BACKOFF)
                    }
                };
            }
        }
        if st.epoch != resp.member_epoch {
            tracing::debug!(group = %group, member = %self.member_id, epoch = resp.member_epoch, "member epoch");
        }
        if st.epoch == 0 && resp.member_epoch > 0 {
            // Joined. The report of the join may not have been kept (see `task_reports.rs`).
            self.reports.get_mut().forget();
        }
        st.epoch = resp.member_epoch;
        self.endpoint_epoch = resp.endpoint_information_epoch;
        if let Some(map) = &resp.partitions_by_endpoint {
            self.settings.endpoints.offer(map, &self.settings.topology);
        }
        if resp.heartbeat_interval_ms > 0 {
            self.interval = Duration::from_millis(resp.heartbeat_interval_ms as u64);
        }
        let reports = self.reports.get_mut();
        if resp.task_offset_interval_ms > 0 {
            reports.interval = Duration::from_millis(resp.task_offset_interval_ms as u64);
        }
        if resp.acceptable_recovery_lag >= 0 {
            reports.acceptable_lag = i64::from(resp.acceptable_recovery_lag);
        }
        if resp.status.is_some() && resp.status != self.status {
            for s in resp.status.iter().flatten() {
                tracing::warn!(group = %group, code = s.code, "streams group status: {}", s.detail);
            }
            if let Some((since, true)) = self.status_since {
                tracing::info!(group = %group, "the streams group status that lasted {:?} has changed", since.elapsed());
            }
            self.status = resp.status.clone();
            let empty = self.status.as_ref().is_none_or(Vec::is_empty);
            self.status_since = (!empty).then(|| (Instant::now(), false));
        }
        if let Some((since, logged @ false)) = &mut self.status_since
            && since.elapsed() >= STATUS_LASTING
        {
            *logged = true;
            for s in self.status.iter().flatten() {
                tracing::warn!(group = %group, member = %self.member_id, code = s.code, "streams group status unchanged for {:?}: {}", since.elapsed(), s.detail);
            }
        }
        match status_failure(group, resp.status.iter().flatten()) {
            // A topic just created or repartitioned may reach the coordinator's metadata a
            // moment late: only a condition that lasts fails the member.
            Some(e) => {
                let since = *self.failing_status_since.get_or_insert_with(Instant::now);
                let shutdown = matches!(
                    e,
                    StreamsError::StreamsGroup {
                        kind: StreamsGroupFailure::ShutdownRequested,
                        ..
                    }
                );
                if shutdown || since.elapsed() >= STATUS_GRACE {
                    return Err(e);
                }
            }
            None => self.failing_status_since = None,
        }
        let mut changed = false;
        for (list, set) in [
            (&resp.active_tasks, &mut self.target.active),
            (&resp.standby_tasks, &mut self.target.standby),
            (&resp.warmup_tasks, &mut self.target.warmup),
        ] {
            if let Some(list) = list {
                *set = task_set(list);
                changed = true;
            }
        }
        if changed {
            // The answer carries the tasks: whatever an earlier lost one said, this is it.
            self.unsure = false;
            self.deliver(st);
        }
        Ok(self.interval)
    }

    /// Hands the target assignment to the stream thread, unless it was the last handed.
    fn deliver(&mut self, st: &mut State) {
        if self.delivered.as_ref() == Some(&self.target) {
            return;
        }
        tracing::info!(
            group = %self.settings.group_id,
            member = %self.member_id,
            epoch = st.epoch,
            active = ?self.target.active,
            standby = ?self.target.standby,
            warmup = ?self.target.warmup,
            "new streams group assignment"
        );
        st.events.retain(|e| !matches!(e, MemberEvent::Assigned(_)));
        st.events.push_back(MemberEvent::Assigned(self.target.clone()));
        self.delivered = Some(self.target.clone());
    }

    /// After a failed heartbeat, asks the coordinator for the member's assignment once
    /// (`StreamsGroupDescribe`) and takes it when it differs from the one the member has: the
    /// answer that carried it was lost. Kept for the next heartbeat when the coordinator
    /// cannot be asked now; given up (logged) when it refuses to be asked.
    fn confirm_assignment(&mut self, shared: &Shared) {
        let s = &self.settings;
        let Some(conn) = &mut self.conn else { return };
        if conn.version(describe::API_KEY, (0, 0)).is_none() {
            self.unsure = false;
            return;
        }
        let described = describe::member_assignment(conn, &s.group_id, &self.member_id);
        let member = match described {
            Ok(m) => m,
            Err(e) if e.is_retriable() => {
                tracing::debug!(group = %s.group_id, "asking for the member's assignment: {e}; again after the next heartbeat");
                self.conn = None;
                return;
            }
            Err(e) => {
                tracing::warn!(group = %s.group_id, member = %self.member_id, "cannot check the member's assignment after a failed heartbeat: {e}");
                self.unsure = false;
                return;
            }
        };
        self.unsure = false;
        let mut st = shared.lock();
        let Some(m) = member.filter(|m| m.member_epoch == st.epoch) else {
            return; // left, fenced or moved on since: the heartbeats say what follows
        };
        let [active, standby, warmup] = m.assignment.map(|lists| task_set(&lists));
        let held = TaskAssignment {
            active,
            standby,
            warmup,
        };
        if held == self.target {
            tracing::debug!(group = %s.group_id, member = %self.member_id, "after a failed heartbeat: the coordinator holds the assignment the member has");
        } else {
            tracing::warn!(
                group = %s.group_id,
                member = %self.member_id,
                epoch = st.epoch,
                "the coordinator holds an assignment this member was never sent (a heartbeat's \
                 answer was lost): taking it"
            );
            self.target = held;
            self.deliver(&mut st);
            drop(st);
            shared.wake.notify_all();
        }
    }

    /// The heartbeat thread's loop, until the handle stops it or a fatal error.
    pub(crate) fn run(mut self, shared: &Shared) {
        let mut next = Instant::now() + self.interval;
        loop {
            let req = {
                let mut st = shared.lock();
                while st.stop.is_none() && !(st.owned_changed && st.epoch > 0) {
                    let left = next.saturating_duration_since(Instant::now());
                    if st.loss_pending {
                        // No rejoin before the stream thread has dropped the lost tasks.
                        st = shared.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                        next = Instant::now();
                        continue;
                    }
                    if left.is_zero() {
                        break;
                    }
                    st = shared
                        .wake
                        .wait_timeout(st, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                if let Some(how) = st.stop {
                    let epoch = st.epoch;
                    drop(st);
                    if how == Stop::Leave && epoch > 0 {
                        self.leave();
                    }
                    let mut st = shared.lock();
                    st.exited = true;
                    shared.wake.notify_all();
                    return;
                }
                if st.epoch > 0
                    && st
                        .last_poll
                        .is_some_and(|t| t.elapsed() > self.settings.rebalance_timeout)
                {
                    tracing::warn!(
                        group = %self.settings.group_id,
                        member = %self.member_id,
                        "the stream thread has not polled for longer than max.poll.interval.ms ({:?}): \
                         leaving the group, its tasks are lost",
                        self.settings.rebalance_timeout
                    );
                    st.lose();
                    st.epoch = 0;
                    self.target = TaskAssignment::default();
                    self.delivered = None;
                    shared.wake.notify_all();
                    drop(st);
                    self.leave();
                    next = Instant::now() + self.interval;
                    continue;
                }
                st.owned_changed = false;
                self.request(&st)
            };
            let delay = match self.exchange(&req) {
                Ok(resp) => {
                    let mut st = shared.lock();
                    if req.shutdown_application && resp.error_code == 0 {
                        st.shutdown_acknowledged = true;
                    }
                    let answered = resp.error_code == 0;
                    let d = self.handle(resp, &mut st);
                    drop(st);
                    shared.wake.notify_all(); // events for a waiting handle
                    if answered && d.is_ok() && self.unsure {
                        self.confirm_assignment(shared);
                    }
                    d
                }
                Err(e) if e.is_retriable() => {
                    tracing::debug!(group = %self.settings.group_id, "heartbeat failed, retrying: {e}");
                    Ok(RETRY_BACKOFF)
                }
                Err(e) => Err(e),
            };
            match delay {
                Ok(d) => next = Instant::now() + d,
                Err(e) => {
                    tracing::error!(group = %self.settings.group_id, "streams group member failed: {e}");
                    if e.is_shutdown_requested() {
                        // The application stops: leave at once, so that the group is empty
                        // (and can start again) without waiting for the session timeout.
                        self.leave();
                    }
                    let mut st = shared.lock();
                    st.failure = Some(e);
                    st.exited = true;
                    shared.wake.notify_all();
                    return;
                }
            }
        }
    }

    /// Sends the leave heartbeat: epoch -1, or -2 for a static member (the coordinator
    /// keeps its tasks for it until its session times out); errors are logged only.
    fn leave(&mut self) {
        let instance_id = self.settings.instance_id.clone();
        let req = HeartbeatRequest {
            group_id: self.settings.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: if instance_id.is_some() { -2 } else { -1 },
            instance_id,
            rebalance_timeout_ms: -1,
            ..Default::default()
        };
        match self.exchange(&req) {
            Ok(r) if r.error_code == 0 => {
                tracing::info!(
                    group = %self.settings.group_id,
                    member = %self.member_id,
                    instance = self.settings.instance_id.as_deref().unwrap_or(""),
                    "left the streams group"
                );
            }
            Ok(r) => {
                tracing::warn!(group = %self.settings.group_id, "leaving the group: {}", codec_error(&r))
            }
            Err(e) => tracing::warn!(group = %self.settings.group_id, "leaving the group: {e}"),
        }
    }
}

/// The error of a response, named.
fn codec_error(r: &HeartbeatResponse) -> String {
    format!(
        "{} {}",
        crate::runtime::streams_group::commit::error_name(r.error_code),
        r.error_message.as_deref().unwrap_or("")
    )
}

/// Our task ids from the coordinator's lists (a sub-topology id that is not ours is logged
/// and skipped).
pub(crate) fn task_set(lists: &[TaskIds]) -> BTreeSet<TaskId> {
    let mut out = BTreeSet::new();
    for l in lists {
        let Ok(subtopology) = l.subtopology.parse::<u32>() else {
            tracing::warn!(subtopology = %l.subtopology, "the coordinator named a sub-topology we do not have");
            continue;
        };
        out.extend(l.partitions.iter().map(|&partition| TaskId {
            subtopology,
            partition,
        }));
    }
    out
}

/// The coordinator's lists for our task ids.
pub(crate) fn task_lists(set: &BTreeSet<TaskId>) -> Vec<TaskIds> {
    let mut out: Vec<TaskIds> = Vec::new();
    for t in set {
        let id = t.subtopology.to_string();
        match out.last_mut() {
            Some(last) if last.subtopology == id => last.partitions.push(t.partition),
            _ => out.push(TaskIds {
                subtopology: id,
                partitions: vec![t.partition],
            }),
        }
    }
    out
}

/// How long a group status may hold before it is logged again, as lasting.
const STATUS_LASTING: Duration = Duration::from_secs(30);

/// How long a fatal group status may last before the member fails.
const STATUS_GRACE: Duration = Duration::from_secs(10);

/// The wait before a static member asks again to join while its `group.instance.id` is
/// still held by an earlier member.
const UNRELEASED_BACKOFF: Duration = Duration::from_secs(1);

/// How long heartbeats may be answered UNKNOWN_SERVER_ERROR before the member fails.
const SERVER_ERROR_GRACE: Duration = Duration::from_secs(10);

#[cfg(test)]
#[path = "heartbeat_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "heartbeat_report_tests.rs"]
mod report_tests;
