//! What a streams-group member's handle (`member.rs`, used by the stream thread) and its
//! heartbeat thread (`heartbeat.rs`) share: the member's settings, the assignment and events
//! the heartbeat thread receives, and the state both sides change under one lock (never
//! held across network I/O).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::model::TaskId;
use crate::model::error::StreamsError;
use crate::runtime::streams_group::endpoints::GroupEndpoints;
use crate::runtime::streams_group::topology::GroupTopology;
use crate::runtime::streams_group::wire;

/// The wait before retrying after a connection failure or a coordinator move.
pub(in crate::runtime::streams_group) const RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// Per-task offset sums the member's instance reports to the coordinator (see
/// `restore/offset_sums.rs`): how much of each task's state it holds (`TaskOffsets`), or
/// where the changelogs of the tasks it follows end (`TaskEndOffsets`).
#[derive(Clone)]
pub(crate) struct TaskOffsetSource(pub Arc<dyn Fn() -> BTreeMap<TaskId, i64> + Send + Sync>);

impl TaskOffsetSource {
    /// The current sums.
    pub(crate) fn get(&self) -> BTreeMap<TaskId, i64> {
        (self.0)()
    }
}

impl Default for TaskOffsetSource {
    /// No task's state held.
    fn default() -> Self {
        TaskOffsetSource(Arc::new(BTreeMap::new))
    }
}

impl std::fmt::Debug for TaskOffsetSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskOffsetSource")
    }
}

/// What a stream thread's member needs to join.
#[derive(Debug, Clone)]
pub(crate) struct MemberSettings {
    /// `bootstrap.servers`.
    pub bootstrap: String,
    /// The brokers learned since (shared by the member's connections).
    pub known: Arc<wire::KnownBrokers>,
    /// The group: the `application.id`.
    pub group_id: String,
    /// The client id sent with every request.
    pub client_id: String,
    /// The instance's process id (a UUID text, one per `KafkaStreams`).
    pub process_id: String,
    /// `group.instance.id` of this member (static membership, Apache Kafka 4.4+): it leaves
    /// with epoch -2, so the coordinator keeps its tasks for it until its session times out,
    /// and a member joining with the same id within that time takes them over unchanged.
    pub instance_id: Option<String>,
    /// How long the coordinator waits for the member to revoke tasks
    /// (`max.poll.interval.ms`).
    pub rebalance_timeout: Duration,
    /// `application.server` as (host, port), for interactive queries.
    pub user_endpoint: Option<(String, u16)>,
    /// The topology sent on join.
    pub topology: GroupTopology,
    /// The stream thread's name; the heartbeat thread is `<thread_name>-heartbeat`.
    pub thread_name: String,
    /// Group configs set before joining (see [`group_config::group_configs_of`]).
    pub group_configs: Vec<(String, String)>,
    /// How much of each task's state the instance holds.
    pub task_offsets: TaskOffsetSource,
    /// Where the changelogs of the standby and warm-up tasks the instance follows end.
    pub task_end_offsets: TaskOffsetSource,
    /// Where the member leaves the endpoint maps it receives (shared by the instance's
    /// members).
    pub endpoints: Arc<GroupEndpoints>,
}

/// The tasks a member is assigned, or owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TaskAssignment {
    pub active: BTreeSet<TaskId>,
    pub standby: BTreeSet<TaskId>,
    pub warmup: BTreeSet<TaskId>,
}

/// What the member tells its stream thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MemberEvent {
    /// A new target assignment: the whole set.
    Assigned(TaskAssignment),
    /// Fenced or timed out: drop every task without committing; the member rejoins.
    Lost,
}

/// How the heartbeat thread is to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Send a leave heartbeat (epoch -1; -2 for a static member), then exit.
    Leave,
    /// Exit without a word (a crash, for tests).
    #[cfg_attr(not(test), allow(dead_code))]
    Abandon,
}

/// The state the handle and the heartbeat thread share.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// The current member epoch.
    pub epoch: i32,
    /// What the stream thread owns.
    pub owned: TaskAssignment,
    /// `owned` changed since the last heartbeat.
    pub owned_changed: bool,
    /// Events not yet polled.
    pub events: VecDeque<MemberEvent>,
    /// The tasks were lost and the stream thread has not yet dropped them: the member
    /// does not rejoin meanwhile.
    pub loss_pending: bool,
    /// When the stream thread last went round its loop (`None` before the first time).
    pub last_poll: Option<Instant>,
    /// The fatal error that stopped the heartbeat thread.
    pub failure: Option<StreamsError>,
    /// Set by the handle to stop the heartbeat thread.
    pub stop: Option<Stop>,
    /// The heartbeat thread has exited.
    pub exited: bool,
    /// The member asks the coordinator to shut the whole application down (a thread's
    /// `ThreadFailureResponse::ShutdownApplication`), with every heartbeat from now on.
    pub shutdown_requested: bool,
    /// The coordinator answered a heartbeat that carried the request.
    pub shutdown_acknowledged: bool,
}

impl State {
    /// The tasks are lost: the thread is told so and owns nothing from now on (pending
    /// assignments are stale).
    pub(in crate::runtime::streams_group) fn lose(&mut self) {
        self.owned = TaskAssignment::default();
        self.owned_changed = false;
        self.events.clear();
        self.events.push_back(MemberEvent::Lost);
        self.loss_pending = true;
    }

    /// The stream thread owns `now`; returns whether that changed what the member reports.
    /// Ignored while a loss is pending: the thread may have applied an assignment it took
    /// before the loss, and is about to drop every task anyway.
    pub(in crate::runtime::streams_group) fn set_owned(&mut self, now: &TaskAssignment) -> bool {
        if self.loss_pending || self.owned == *now {
            return false;
        }
        self.owned = now.clone();
        self.owned_changed = true;
        true
    }

    /// The stream thread has dropped the lost tasks: it owns nothing, and the member may
    /// rejoin. Returns whether a loss was pending.
    pub(in crate::runtime::streams_group) fn loss_handled(&mut self) -> bool {
        if !self.loss_pending {
            return false;
        }
        self.loss_pending = false;
        self.owned = TaskAssignment::default();
        self.owned_changed = false;
        true
    }
}

/// The state behind a lock, and the condition variable that wakes the heartbeat thread
/// (owned tasks changed, stop) and the handle (the thread exited).
#[derive(Debug, Default)]
pub(crate) struct Shared {
    state: Mutex<State>,
    pub wake: Condvar,
}

impl Shared {
    pub(in crate::runtime::streams_group) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits on `st` until `done` gives a value, the heartbeat thread has exited (and
    /// `done` gives none) or `deadline` passes; `done` is asked first and after every wake.
    pub(in crate::runtime::streams_group) fn wait_until<T>(
        &self,
        mut st: MutexGuard<'_, State>,
        deadline: Instant,
        mut done: impl FnMut(&mut State) -> Option<T>,
    ) -> Option<T> {
        loop {
            if let Some(v) = done(&mut st) {
                return Some(v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || st.exited {
                return None;
            }
            st = self
                .wake
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}
