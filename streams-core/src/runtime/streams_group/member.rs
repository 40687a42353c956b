//! The streams group membership of one stream thread, run on its own OS thread
//! (`<thread name>-heartbeat`).
//!
//! The member joins with epoch 0 and the group topology, then heartbeats at the interval
//! the coordinator gives. Each response may carry a new *assignment* (active, standby and
//! warm-up tasks; a null list means "unchanged"); the stream thread takes it from
//! [`StreamsMember::poll_event`], reconciles (revokes what is gone, starts what is new) and
//! reports what it owns with [`StreamsMember::owned`], which triggers a heartbeat at once.
//!
//! Invariants:
//! - the member reports exactly what the thread last said it owns: a revoked task stays in
//!   the report until the thread has closed it, and the coordinator gives a task to another
//!   member only once no member reports it;
//! - the member id is generated once per member and kept across rejoins; the epoch is the
//!   last one the coordinator sent (0 while joining, -1 is sent to leave);
//! - `FENCED_MEMBER_EPOCH` / `UNKNOWN_MEMBER_ID` (the member missed its session timeout or
//!   its rebalance timeout) queue [`MemberEvent::Lost`]: the thread drops every task
//!   without committing and says so ([`StreamsMember::loss_handled`]); only then does the
//!   member rejoin, with epoch 0 and no owned tasks. A member that rejoined first would
//!   get a new epoch while its thread still ran the lost tasks, and the thread's next
//!   commit, carrying that epoch, would be accepted for tasks another member now owns;
//! - a stream thread that does not go round its loop for longer than the rebalance timeout
//!   (`max.poll.interval.ms`; stuck in user code) loses its tasks as a consumer would: the
//!   member leaves the group, so the coordinator moves them at once, and queues
//!   [`MemberEvent::Lost`]; it rejoins once the thread is back and has dropped them;
//! - a fatal error (authorization, invalid topology, a group of another type, ...) stops
//!   the heartbeat thread and is kept for [`StreamsMember::failure`]; connection losses and
//!   coordinator moves are retried (re-finding the coordinator) until the coordinator
//!   fences the member;
//! - the lock on the shared state is never held across network I/O.

use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::error::{StreamsError, StreamsGroupFailure};
use crate::runtime::streams_group::codec;
use crate::runtime::streams_group::commit::{self, CommitError};
use crate::runtime::streams_group::shared::{
    MemberEvent, MemberSettings, RETRY_BACKOFF, Shared, Stop, TaskAssignment,
};
use crate::runtime::streams_group::wire::{self, Conn};
use crate::runtime::streams_group::{fetch, group_config, heartbeat};

/// The socket timeout of the member's connections.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// A stream thread's membership in its streams group. `Send + Sync`; dropping it leaves
/// the group.
#[derive(Debug)]
pub(crate) struct StreamsMember {
    shared: Arc<Shared>,
    settings: Arc<MemberSettings>,
    member_id: String,
    commit_conn: Mutex<Option<Conn>>,
}

/// A random member id (UUID layout), from the standard library's random hasher keys.
fn new_member_id() -> String {
    let word = || {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    let (a, b) = (word(), word());
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

impl StreamsMember {
    /// Applies the group configs, joins the group (the first heartbeat answers before this
    /// returns, so a refused member fails here) and starts the heartbeat thread.
    pub(crate) fn join(settings: MemberSettings) -> Result<StreamsMember, StreamsError> {
        let mut any = settings
            .known
            .connect(&settings.bootstrap, &settings.client_id, IO_TIMEOUT)?;
        if any.version(codec::API_KEY, (0, codec::MAX_VERSION)).is_none() {
            return Err(StreamsError::StreamsGroup {
                group: settings.group_id.clone(),
                kind: StreamsGroupFailure::Unsupported,
                message: format!(
                    "broker {} does not offer StreamsGroupHeartbeat (needs Apache Kafka 4.2 or later)",
                    any.addr()
                ),
            });
        }
        group_config::apply(&mut any, &settings.group_id, &settings.group_configs)?;
        drop(any);
        let shared = Arc::new(Shared::default());
        let settings = Arc::new(settings);
        let member_id = new_member_id();
        let mut hb = heartbeat::Heartbeat::new(settings.clone(), member_id.clone());
        // The first heartbeat on the caller's thread: fatal errors surface from `join`.
        let deadline = Instant::now() + settings.rebalance_timeout.max(IO_TIMEOUT);
        loop {
            let req = hb.request(&shared.lock());
            match hb.exchange(&req) {
                Ok(resp) => {
                    hb.handle(resp, &mut shared.lock())?;
                    if shared.lock().epoch > 0 {
                        break;
                    }
                    // NOT_COORDINATOR and the like answer, but not with a membership.
                    if Instant::now() >= deadline {
                        return Err(wire::kafka(
                            format!(
                                "joining streams group `{}`: no membership within {:?}",
                                settings.group_id,
                                settings.rebalance_timeout.max(IO_TIMEOUT)
                            ),
                            true,
                        ));
                    }
                }
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    tracing::debug!(group = %settings.group_id, "join heartbeat failed, retrying: {e}");
                }
                Err(e) => return Err(e),
            }
            // Re-ask soon: the coordinator may have been loading.
            let st = shared.lock();
            let _ = shared.wake.wait_timeout(st, RETRY_BACKOFF);
        }
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name(format!("{}-heartbeat", settings.thread_name))
            .spawn(move || hb.run(&thread_shared))
            .map_err(|e| wire::kafka(format!("spawning the heartbeat thread: {e}"), false))?;
        Ok(StreamsMember {
            shared,
            settings,
            member_id,
            commit_conn: Mutex::new(None),
        })
    }

    /// The next event for the stream thread, if any (never blocks).
    pub(crate) fn poll_event(&self) -> Option<MemberEvent> {
        self.shared.lock().events.pop_front()
    }

    /// Waits up to `timeout` for the next event.
    #[cfg(test)]
    pub(crate) fn next_event(&self, timeout: Duration) -> Option<MemberEvent> {
        self.shared
            .wait_until(self.shared.lock(), Instant::now() + timeout, |st| {
                st.events.pop_front()
            })
    }

    /// The stream thread goes round its loop: it is not stuck (see the module doc).
    pub(crate) fn polled(&self) {
        self.shared.lock().last_poll = Some(Instant::now());
    }

    /// The stream thread has dropped the tasks of a [`MemberEvent::Lost`]: the member may
    /// rejoin.
    pub(crate) fn loss_handled(&self) {
        if self.shared.lock().loss_handled() {
            self.shared.wake.notify_all();
        }
    }

    /// What the stream thread owns now; reported at once, and with every later heartbeat.
    pub(crate) fn owned(&self, now: &TaskAssignment) {
        if self.shared.lock().set_owned(now) {
            self.shared.wake.notify_all();
        }
    }

    /// The connection to the group's coordinator kept in `slot` (the member's commits and
    /// offset lookups share it), found first when there is none; `timeout` bounds finding it.
    fn coordinator<'a>(
        &self,
        slot: &'a mut Option<Conn>,
        timeout: Duration,
    ) -> Result<&'a mut Conn, StreamsError> {
        if slot.is_none() {
            let s = &self.settings;
            *slot = Some(wire::find_coordinator(
                &s.known,
                &s.bootstrap,
                &s.group_id,
                &s.client_id,
                timeout,
            )?);
        }
        slot.as_mut()
            .ok_or_else(|| wire::kafka("no coordinator connection".into(), true))
    }

    /// Commits `offsets` (topic, partition, next offset, metadata) as this member at its
    /// current epoch. `timeout` bounds connecting to the coordinator and the request.
    pub(crate) fn commit_offsets(
        &self,
        offsets: &[(String, i32, i64, String)],
        timeout: Duration,
    ) -> Result<(), CommitError> {
        let (member_id, epoch) = self.member_id_and_epoch();
        let mut conn = self.commit_conn.lock().unwrap_or_else(|p| p.into_inner());
        let c = self.coordinator(&mut conn, timeout)?;
        let result = commit::commit(c, &self.settings.group_id, &member_id, epoch, offsets);
        if matches!(
            &result,
            Err(CommitError::Retriable { .. }) | Err(CommitError::Failed(_))
        ) {
            *conn = None; // the coordinator may have moved, or the connection broke
        }
        result
    }

    /// The committed offsets (and their metadata) of `partitions`, read from the group's
    /// coordinator over this member's connection, which finds the coordinator anew
    /// whenever a request goes unanswered for [`IO_TIMEOUT`] (see `fetch.rs`); tried until
    /// `timeout`.
    pub(crate) fn committed_offsets(
        &self,
        partitions: &[(String, i32)],
        timeout: Duration,
    ) -> Result<fetch::Committed, StreamsError> {
        let deadline = Instant::now() + timeout;
        let s = &self.settings;
        let mut conn = self.commit_conn.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let attempt = match self.coordinator(&mut conn, IO_TIMEOUT) {
                Ok(c) => fetch::fetch(c, &s.group_id, partitions),
                Err(e) if e.is_retriable() => Err(fetch::FetchError::Again {
                    message: e.to_string(),
                    reconnect: true,
                }),
                Err(e) => Err(fetch::FetchError::Failed(e)),
            };
            let message = match attempt {
                Ok(offsets) => return Ok(offsets),
                Err(fetch::FetchError::Failed(e)) => return Err(e),
                Err(fetch::FetchError::Again { message, reconnect }) => {
                    if reconnect {
                        *conn = None;
                    }
                    message
                }
            };
            if Instant::now() + RETRY_BACKOFF >= deadline {
                return Err(wire::kafka(
                    format!(
                        "committed offsets of group `{}`: no answer within {timeout:?}: {message}",
                        s.group_id
                    ),
                    true,
                ));
            }
            tracing::info!(group = %s.group_id, "committed offsets: {message}; asking again");
            std::thread::sleep(RETRY_BACKOFF);
        }
    }

    /// Asks the coordinator to shut the whole application down (`ShutdownApplication` in
    /// the next heartbeats); returns once a heartbeat carrying it was answered (true), or
    /// after `timeout` or when the heartbeat thread has stopped (false).
    pub(crate) fn request_application_shutdown(&self, timeout: Duration) -> bool {
        let mut st = self.shared.lock();
        st.shutdown_requested = true;
        st.owned_changed = true; // heartbeat now rather than at the next interval
        self.shared.wake.notify_all();
        self.shared
            .wait_until(st, Instant::now() + timeout, |st| {
                st.shutdown_acknowledged.then_some(())
            })
            .is_some()
    }

    /// The member id and the current member epoch (for transactional offset commits).
    pub(crate) fn member_id_and_epoch(&self) -> (String, i32) {
        (self.member_id.clone(), self.shared.lock().epoch)
    }

    /// The fatal error that stopped the heartbeat thread, if any.
    pub(crate) fn failure(&self) -> Option<StreamsError> {
        self.shared.lock().failure.as_ref().map(clone_error)
    }

    /// Leaves the group (a heartbeat with epoch -1; a static member's with epoch -2, which
    /// keeps its tasks for it until its session times out) and stops the heartbeat thread,
    /// waiting at most `timeout` for it. (The runtime's members leave when dropped.)
    #[cfg(test)]
    pub(crate) fn leave(self, timeout: Duration) {
        self.stop(Stop::Leave, timeout);
    }

    /// Stops heartbeating without leaving, as a crashed process would: the coordinator
    /// fences the member after its session timeout.
    #[cfg(test)]
    pub(crate) fn crash(self) {
        self.stop(Stop::Abandon, IO_TIMEOUT);
    }

    fn stop(&self, how: Stop, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        if st.stop.is_none() {
            st.stop = Some(how);
        }
        self.shared.wake.notify_all();
        if self
            .shared
            .wait_until(st, deadline, |st| st.exited.then_some(()))
            .is_none()
        {
            tracing::warn!(group = %self.settings.group_id, "the heartbeat thread did not stop in {timeout:?}");
        }
    }
}

impl Drop for StreamsMember {
    fn drop(&mut self) {
        self.stop(Stop::Leave, IO_TIMEOUT);
    }
}

/// A copy of a member's fatal error (the error type is not `Clone`).
fn clone_error(e: &StreamsError) -> StreamsError {
    match e {
        StreamsError::StreamsGroup { group, kind, message } => StreamsError::StreamsGroup {
            group: group.clone(),
            kind: *kind,
            message: message.clone(),
        },
        StreamsError::Authorization { resource, message } => StreamsError::Authorization {
            resource: resource.clone(),
            message: message.clone(),
        },
        StreamsError::Authentication { message } => StreamsError::Authentication {
            message: message.clone(),
        },
        StreamsError::Tls { message } => StreamsError::Tls {
            message: message.clone(),
        },
        StreamsError::Kafka { message, retriable } => StreamsError::Kafka {
            message: message.clone(),
            retriable: *retriable,
        },
        other => StreamsError::Usage(other.to_string()),
    }
}
