//! The heartbeat against a scripted broker on a local socket: a response that does not
//! decode (here a hostile length) is a failed request — retriable, the connection dropped —
//! and the member heartbeats on, rather than the thread panicking or stopping.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::*;
use crate::runtime::streams_group::shared::Shared;
use crate::runtime::streams_group::topology::GroupTopology;

/// A heartbeat response: member epoch 1, interval 50 ms, empty assignment, endpoint
/// information epoch 42.
#[rustfmt::skip]
pub(super) const GOOD: &[u8] = &[
    0, 0, 0, 0, 0, 0, 0x00, 0x02, b'm', // ThrottleTimeMs, ErrorCode, ErrorMessage, MemberId
    0, 0, 0, 1, 0, 0, 0, 50,            // MemberEpoch 1, HeartbeatIntervalMs 50
    0, 0, 0, 0, 0, 0, 0, 0,             // AcceptableRecoveryLag, TaskOffsetIntervalMs
    0x00, 0x01, 0x01, 0x01,             // Status null; Active, Standby, Warmup tasks empty
    0, 0, 0, 42,                        // EndpointInformationEpoch 42
    0x00, 0x00,                         // PartitionsByUserEndpoint null; no tags
];

/// A heartbeat response whose MemberId claims 0x7ffffffe bytes.
const HOSTILE: &[u8] = &[0, 0, 0, 0, 0, 0, 0x00, 0xff, 0xff, 0xff, 0xff, 0x07, 0, 0];

/// A request: (API key, correlation id, body), or `None` when the client hung up.
fn read_request(s: &mut TcpStream) -> Option<(i16, i32, Vec<u8>)> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).ok()?;
    let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut frame).ok()?;
    // Request header v2: key, version, correlation id, client id (i16 length), no tags.
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let corr = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let client = i16::from_be_bytes([frame[8], frame[9]]).max(0) as usize;
    Some((key, corr, frame[10 + client + 1..].to_vec()))
}

fn write_response(s: &mut TcpStream, corr: i32, header_tags: bool, body: &[u8]) {
    let mut frame = corr.to_be_bytes().to_vec();
    if header_tags {
        frame.push(0);
    }
    frame.extend_from_slice(body);
    let mut out = (frame.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&frame);
    let _ = s.write_all(&out);
}

/// A broker that answers ApiVersions and FindCoordinator (itself), and each heartbeat
/// with the next of `script` (the last one again when it runs out). Heartbeat request
/// bodies go to the receiver.
fn broker(script: Vec<&'static [u8]>) -> (String, mpsc::Receiver<Vec<u8>>) {
    broker_describing(script, None)
}

/// [`broker`], answering `StreamsGroupDescribe` with `describe` (hanging up without it).
fn broker_describing(
    script: Vec<&'static [u8]>,
    describe: Option<Vec<u8>>,
) -> (String, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut next = 0;
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            while let Some((key, corr, body)) = read_request(&mut s) {
                let resp: Vec<u8> = match key {
                    // ApiVersions v3: 18 0-3, 10 0-6, 88 0-0, 89 0-0; response header v0.
                    18 => {
                        let mut b = vec![0, 0, 0x05];
                        for (k, max) in [(18u8, 3u8), (10, 6), (88, 0), (89, 0)] {
                            b.extend_from_slice(&[0, k, 0, 0, 0, max, 0]);
                        }
                        b.extend_from_slice(&[0, 0, 0, 0, 0]);
                        write_response(&mut s, corr, false, &b);
                        continue;
                    }
                    // FindCoordinator v6: this broker.
                    10 => {
                        let mut b = vec![0, 0, 0, 0, 0x02, 0x02, b'g', 0, 0, 0, 1];
                        b.push(10);
                        b.extend_from_slice(b"127.0.0.1");
                        b.extend_from_slice(&i32::from(port).to_be_bytes());
                        b.extend_from_slice(&[0, 0, 0x00, 0, 0]);
                        b
                    }
                    88 => {
                        let _ = tx.send(body);
                        let r = script[next.min(script.len() - 1)];
                        next += 1;
                        r.to_vec()
                    }
                    89 => match &describe {
                        Some(d) => d.clone(),
                        None => return,
                    },
                    _ => return,
                };
                write_response(&mut s, corr, true, &resp);
            }
        }
    });
    (format!("127.0.0.1:{port}"), rx)
}

pub(super) fn settings(bootstrap: &str) -> Arc<MemberSettings> {
    Arc::new(MemberSettings {
        bootstrap: bootstrap.to_owned(),
        known: Default::default(),
        group_id: "g".into(),
        client_id: "c".into(),
        process_id: "p".into(),
        instance_id: None,
        rebalance_timeout: Duration::from_secs(10),
        user_endpoint: None,
        topology: GroupTopology {
            epoch: 0,
            subtopologies: vec![],
        },
        thread_name: "t".into(),
        group_configs: vec![],
        task_offsets: Default::default(),
        task_end_offsets: Default::default(),
        endpoints: Default::default(),
    })
}

#[test]
fn an_undecodable_response_is_a_retriable_failure_on_a_dropped_connection() {
    let (addr, _seen) = broker(vec![HOSTILE, GOOD]);
    let mut hb = Heartbeat::new(settings(&addr), "member".into());
    let mut st = State::default();
    assert_eq!(
        hb.request(&st).endpoint_information_epoch,
        -1,
        "the first request asks for the endpoint map whatever the group's epoch"
    );
    let e = hb.exchange(&hb.request(&st)).expect_err("does not decode");
    assert!(e.is_retriable(), "{e}");
    assert!(e.to_string().contains("length 2147483646"), "{e}");
    assert!(hb.conn.is_none(), "the connection is dropped");
    // The next heartbeat finds the coordinator again and succeeds.
    let resp = hb.exchange(&hb.request(&st)).expect("decodes");
    assert_eq!(resp.endpoint_information_epoch, 42);
    hb.handle(resp, &mut st).expect("applied");
    assert_eq!(st.epoch, 1);
    // The epoch goes back to the coordinator, so the endpoint map comes only on a change.
    assert_eq!(hb.request(&st).endpoint_information_epoch, 42);
}

#[test]
fn the_heartbeat_thread_survives_an_undecodable_response() {
    let (addr, seen) = broker(vec![HOSTILE, GOOD]);
    let hb = Heartbeat::new(settings(&addr), "member".into());
    let shared = Arc::new(Shared::default());
    let thread_shared = shared.clone();
    let thread = std::thread::spawn(move || hb.run(&thread_shared));
    let deadline = Instant::now() + Duration::from_secs(20);
    while shared.lock().epoch != 1 {
        assert!(
            Instant::now() < deadline,
            "no successful heartbeat after the hostile one"
        );
        assert!(
            !shared.lock().exited,
            "the thread stopped: {:?}",
            shared.lock().failure
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    shared.lock().stop = Some(Stop::Abandon);
    shared.wake.notify_all();
    thread.join().expect("the heartbeat thread did not panic");
    let st = shared.lock();
    assert!(st.exited && st.failure.is_none(), "{:?}", st.failure);
    // Two heartbeats at least: the hostile answer, then the good one.
    assert!(seen.try_iter().count() >= 2);
}

/// A heartbeat response with error `code`, member epoch 0 and no assignment.
pub(super) fn error_response(code: i16) -> &'static [u8] {
    let [hi, lo] = code.to_be_bytes();
    #[rustfmt::skip]
    let bytes = vec![
        0, 0, 0, 0, hi, lo, 0x00, 0x02, b'm', // ThrottleTimeMs, ErrorCode, ErrorMessage, MemberId
        0, 0, 0, 0, 0, 0, 0, 50,              // MemberEpoch 0, HeartbeatIntervalMs 50
        0, 0, 0, 0, 0, 0, 0, 0,               // AcceptableRecoveryLag, TaskOffsetIntervalMs
        0x00, 0x00, 0x00, 0x00,               // Status, Active, Standby, Warmup tasks null
        0, 0, 0, 0,                           // EndpointInformationEpoch
        0x00, 0x00,                           // PartitionsByUserEndpoint null; no tags
    ];
    Box::leak(bytes.into_boxed_slice())
}

/// FENCED_MEMBER_EPOCH.
const FENCED: i16 = 110;

/// A fenced member that owned tasks does not rejoin until its stream thread has dropped
/// them: a rejoin would give it a fresh epoch, under which the thread could still commit
/// the lost tasks' offsets.
#[test]
fn a_fenced_member_rejoins_only_after_its_thread_dropped_the_lost_tasks() {
    let (addr, seen) = broker(vec![error_response(FENCED), GOOD]);
    let hb = Heartbeat::new(settings(&addr), "member".into());
    let shared = Arc::new(Shared::default());
    {
        let mut st = shared.lock();
        st.epoch = 3;
        st.owned.active.insert(TaskId {
            subtopology: 0,
            partition: 1,
        });
    }
    let thread_shared = shared.clone();
    let thread = std::thread::spawn(move || hb.run(&thread_shared));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !shared.lock().loss_pending {
        assert!(Instant::now() < deadline, "not fenced");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(shared.lock().events.front(), Some(&MemberEvent::Lost));
    let fenced_at = seen.try_iter().count();
    assert_eq!(fenced_at, 1, "one heartbeat: the fenced one");
    // Many heartbeat intervals (50 ms) pass: no rejoin while the loss is not handled.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        seen.try_iter().count(),
        0,
        "rejoined before the thread dropped its tasks"
    );
    assert_eq!(shared.lock().epoch, 0);
    // The thread drops its tasks: the member rejoins at once.
    {
        let mut st = shared.lock();
        st.events.clear();
        st.loss_pending = false;
        shared.wake.notify_all();
    }
    while shared.lock().epoch != 1 {
        assert!(Instant::now() < deadline, "no rejoin after the loss was handled");
        std::thread::sleep(Duration::from_millis(10));
    }
    shared.lock().stop = Some(Stop::Abandon);
    shared.wake.notify_all();
    thread.join().expect("no panic");
}

#[test]
fn group_statuses_that_no_rebalance_fixes_fail_the_member() {
    let status = |code: i8| GroupStatus {
        code,
        detail: format!("status {code}"),
    };
    for (code, kind) in [
        (1, StreamsGroupFailure::MissingSourceTopics),
        (2, StreamsGroupFailure::IncorrectlyPartitioned),
        (4, StreamsGroupFailure::ShutdownRequested),
    ] {
        match status_failure("g", [&status(0), &status(code)]) {
            Some(StreamsError::StreamsGroup { kind: k, message, .. }) => {
                assert_eq!(k, kind);
                assert_eq!(message, format!("status {code}"));
            }
            other => panic!("status {code}: {other:?}"),
        }
    }
    for code in [0, 3, 5] {
        assert!(
            status_failure("g", [&status(code)]).is_none(),
            "status {code} only waits"
        );
    }
}

/// NOT_COORDINATOR: a join whose coordinator never takes the member (every heartbeat
/// answered "not the coordinator") gives up after the rebalance timeout (at least the
/// I/O timeout, 10 s) with a retriable error, rather than retrying forever.
#[test]
fn a_join_the_coordinator_never_answers_ends_at_its_deadline() {
    const NOT_COORDINATOR: i16 = 16;
    let (addr, seen) = broker(vec![error_response(NOT_COORDINATOR)]);
    let mut settings = Arc::try_unwrap(settings(&addr)).unwrap_or_else(|_| panic!("one owner"));
    settings.rebalance_timeout = Duration::from_secs(2);
    let began = Instant::now();
    let e = match crate::runtime::streams_group::member::StreamsMember::join(settings) {
        Ok(_) => panic!("joined a group whose coordinator never answered"),
        Err(e) => e,
    };
    let took = began.elapsed();
    assert!(e.to_string().contains("no membership within 10s"), "{e}");
    assert!(e.is_retriable(), "{e}");
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(60)).contains(&took),
        "gave up after {took:?}"
    );
    assert!(seen.try_iter().count() >= 2, "the join asked again");
}

/// A stream thread stuck (in user code) for longer than the rebalance timeout loses its
/// tasks: the member leaves the group rather than heartbeating on for them.
#[test]
fn a_member_whose_thread_does_not_poll_leaves_and_loses_its_tasks() {
    let (addr, seen) = broker(vec![GOOD]);
    let mut s = (*settings(&addr)).clone();
    s.rebalance_timeout = Duration::from_millis(300);
    let hb = Heartbeat::new(Arc::new(s), "member".into());
    let shared = Arc::new(Shared::default());
    let thread_shared = shared.clone();
    let thread = std::thread::spawn(move || hb.run(&thread_shared));
    let deadline = Instant::now() + Duration::from_secs(20);
    while shared.lock().epoch != 1 {
        assert!(Instant::now() < deadline, "not joined");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The thread polls for a while: the member stays.
    for _ in 0..10 {
        shared.lock().last_poll = Some(Instant::now());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!shared.lock().loss_pending, "left while the thread polled");
    // Then it stops polling.
    while !shared.lock().loss_pending {
        assert!(Instant::now() < deadline, "a stuck thread kept its tasks");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(shared.lock().events.front(), Some(&MemberEvent::Lost));
    let sent = seen.try_iter().count();
    assert!(sent >= 2, "joined, then left: {sent} requests");
    shared.lock().stop = Some(Stop::Abandon);
    shared.wake.notify_all();
    thread.join().expect("no panic");
}

/// UNKNOWN_SERVER_ERROR.
const SERVER_ERROR: i16 = -1;

/// A coordinator that throws on a new group's first heartbeats answers
/// UNKNOWN_SERVER_ERROR: the member joins once it answers, and fails only when the errors
/// last past the grace period.
#[test]
fn unknown_server_errors_fail_the_member_only_when_they_last() {
    let (addr, _seen) = broker(vec![
        error_response(SERVER_ERROR),
        error_response(SERVER_ERROR),
        GOOD,
    ]);
    let mut hb = Heartbeat::new(settings(&addr), "member".into());
    let mut st = State::default();
    for _ in 0..2 {
        let resp = hb.exchange(&hb.request(&st)).expect("answered");
        assert_eq!(hb.handle(resp, &mut st).expect("retried"), RETRY_BACKOFF);
        assert_eq!(st.epoch, 0);
    }
    let resp = hb.exchange(&hb.request(&st)).expect("answered");
    hb.handle(resp, &mut st).expect("joined");
    assert_eq!(st.epoch, 1);

    // Errors that outlast the grace fail it, naming the error.
    let (addr, _seen) = broker(vec![error_response(SERVER_ERROR)]);
    let mut hb = Heartbeat::new(settings(&addr), "member".into());
    hb.server_error_grace = Duration::from_millis(100);
    let mut st = State::default();
    let resp = hb.exchange(&hb.request(&st)).expect("answered");
    hb.handle(resp, &mut st).expect("retried at first");
    std::thread::sleep(Duration::from_millis(150));
    let resp = hb.exchange(&hb.request(&st)).expect("answered");
    let e = hb
        .handle(resp, &mut st)
        .expect_err("fails once the grace is over");
    assert!(
        matches!(
            e,
            StreamsError::StreamsGroup {
                kind: StreamsGroupFailure::Protocol,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("UnknownServerError (-1)"), "{e}");
}

/// A fenced member rejoins owning nothing, even when its stream thread reported an
/// assignment it had taken just before the loss: the coordinator refuses a join that
/// reports tasks, and a later heartbeat must not report tasks the thread dropped.
#[test]
fn a_member_rejoins_owning_nothing_even_if_the_thread_reported_tasks_after_the_loss() {
    let task = |partition| TaskId {
        subtopology: 0,
        partition,
    };
    let hb = Heartbeat::new(settings("127.0.0.1:1"), "member".into());
    let mut st = State::default();
    let old = TaskAssignment {
        active: [task(0), task(1)].into(),
        standby: [task(2)].into(),
        warmup: BTreeSet::new(),
    };
    st.epoch = 4;
    assert!(st.set_owned(&old));
    let req = hb.request(&st);
    assert_eq!(
        req.active_tasks.as_ref().map(|l| l[0].partitions.clone()),
        Some(vec![0, 1])
    );
    // Fenced: the thread, still applying the assignment it took before, reports it again.
    st.lose();
    st.epoch = 0;
    assert!(!st.set_owned(&old), "a report during a pending loss is ignored");
    assert!(st.owned.active.is_empty());
    // Whatever is recorded, a join request carries empty task lists.
    st.owned = old.clone();
    let join = hb.request(&st);
    for list in [&join.active_tasks, &join.standby_tasks, &join.warmup_tasks] {
        assert_eq!(list.as_ref().map(Vec::len), Some(0), "{join:?}");
    }
    // The thread dropped the tasks: it owns nothing until it applies a new assignment.
    assert!(st.loss_handled());
    assert!(st.owned.active.is_empty() && st.owned.standby.is_empty());
    assert!(!st.loss_handled(), "handled once");
    st.epoch = 5;
    assert!(st.set_owned(&old), "a new assignment is reported again");
}

/// A group status that holds is logged again once it has lasted `STATUS_LASTING`; a change
/// starts the count anew, and an empty status stops it.
#[test]
fn a_status_that_lasts_is_noted_once() {
    let mut hb = Heartbeat::new(settings("127.0.0.1:1"), "member".into());
    let mut st = State::default();
    let delayed = || HeartbeatResponse {
        member_epoch: 1,
        status: Some(vec![crate::runtime::streams_group::codec::GroupStatus {
            code: 5,
            detail: "Assignment delayed".into(),
        }]),
        ..HeartbeatResponse::default()
    };
    hb.handle(delayed(), &mut st).unwrap();
    assert!(matches!(hb.status_since, Some((_, false))));
    // Unchanged, or not sent again (null): the same condition, still not lasting.
    hb.handle(
        HeartbeatResponse {
            member_epoch: 1,
            ..HeartbeatResponse::default()
        },
        &mut st,
    )
    .unwrap();
    hb.handle(delayed(), &mut st).unwrap();
    assert!(matches!(hb.status_since, Some((_, false))));
    // It has held for longer than STATUS_LASTING: noted once.
    hb.status_since = Some((Instant::now() - STATUS_LASTING, false));
    hb.handle(delayed(), &mut st).unwrap();
    assert!(matches!(hb.status_since, Some((_, true))));
    // Cleared: nothing holds.
    let cleared = HeartbeatResponse {
        member_epoch: 1,
        status: Some(Vec::new()),
        ..HeartbeatResponse::default()
    };
    hb.handle(cleared, &mut st).unwrap();
    assert_eq!(hb.status_since, None);
}

/// GOOD with the tasks null: the assignment is unchanged.
#[rustfmt::skip]
const UNCHANGED: &[u8] = &[
    0, 0, 0, 0, 0, 0, 0x00, 0x02, b'm',
    0, 0, 0, 1, 0, 0, 0, 50,
    0, 0, 0, 0, 0, 0, 0, 0,
    0x00, 0x00, 0x00, 0x00,             // Status null; Active, Standby, Warmup tasks null
    0, 0, 0, 42,
    0x00, 0x00,
];

#[test]
fn after_a_lost_answer_the_member_takes_the_tasks_the_coordinator_holds_for_it() {
    // The coordinator holds active tasks 0_0, 0_2, 1_1 and standby 0_1 for "member" at epoch 1.
    let body = describe::KAFKA_RESPONSE.to_vec();
    let (addr, _seen) = broker_describing(vec![GOOD, HOSTILE, UNCHANGED], Some(body));
    let mut hb = Heartbeat::new(settings(&addr), "member".into());
    let shared = Shared::default();
    let join = hb.exchange(&hb.request(&shared.lock())).expect("joined");
    hb.handle(join, &mut shared.lock()).expect("applied");
    shared.lock().events.clear();
    // An answer with the tasks unchanged asks nothing more.
    assert!(!hb.unsure);
    // A heartbeat whose answer is lost (here: does not decode), then one answered "unchanged".
    hb.exchange(&hb.request(&shared.lock())).expect_err("lost");
    assert!(hb.unsure, "a failed heartbeat leaves the assignment unsure");
    let resp = hb.exchange(&hb.request(&shared.lock())).expect("answered");
    hb.handle(resp, &mut shared.lock()).expect("applied");
    assert!(
        shared.lock().events.is_empty(),
        "nothing new said by the heartbeat"
    );
    hb.confirm_assignment(&shared);
    assert!(!hb.unsure);
    let task = |subtopology, partition| TaskId {
        subtopology,
        partition,
    };
    let expected = TaskAssignment {
        active: [task(0, 0), task(0, 2), task(1, 1)].into(),
        standby: [task(0, 1)].into(),
        ..Default::default()
    };
    assert_eq!(
        shared.lock().events.iter().collect::<Vec<_>>(),
        vec![&MemberEvent::Assigned(expected.clone())],
        "the tasks the coordinator holds for the member reach its thread"
    );
    // Asked again, the same assignment is not handed over twice.
    hb.unsure = true;
    shared.lock().events.clear();
    hb.confirm_assignment(&shared);
    assert!(shared.lock().events.is_empty());
    assert_eq!(hb.target, expected);
}
