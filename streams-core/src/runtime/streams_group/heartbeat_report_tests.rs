//! What the heartbeat reports of the instance's task offsets and end offsets, request by
//! request (`task_reports.rs` holds the rules; these tests drive them through the
//! heartbeat's own requests and answers).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::tests::{GOOD, error_response, settings};
use super::*;
use crate::runtime::streams_group::TaskOffsetSource;

/// Task 3 of subtopology 0.
const TASK: TaskId = TaskId {
    subtopology: 0,
    partition: 3,
};

/// Task offsets: all of them with the join heartbeat, then only when the interval has
/// passed and they changed; never with a leave heartbeat.
#[test]
fn task_offsets_go_with_the_join_then_only_when_changed_after_the_interval() {
    let held = Arc::new(Mutex::new(BTreeMap::from([(TASK, 258)])));
    let source = held.clone();
    let mut s = (*settings("127.0.0.1:1")).clone();
    s.task_offsets = TaskOffsetSource(Arc::new(move || source.lock().unwrap().clone()));
    let mut hb = Heartbeat::new(Arc::new(s), "member".into());
    hb.reports.get_mut().interval = Duration::from_millis(200);
    let mut st = State::default();
    let reported = |req: HeartbeatRequest| {
        req.task_offsets.map(|o| {
            o.into_iter()
                .map(|t| (t.subtopology, t.partition, t.offset))
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(reported(hb.request(&st)), Some(vec![("0".into(), 3, 258)]));
    st.epoch = 5;
    assert_eq!(reported(hb.request(&st)), None, "within the interval");
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(reported(hb.request(&st)), None, "unchanged");
    held.lock().unwrap().insert(
        TaskId {
            subtopology: 1,
            partition: 0,
        },
        7,
    );
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(
        reported(hb.request(&st)),
        Some(vec![("0".into(), 3, 258), ("1".into(), 0, 7)])
    );
    st.epoch = -1;
    assert_eq!(reported(hb.request(&st)), None, "leaving");
    // A rejoin reports everything again.
    st.epoch = 0;
    assert!(reported(hb.request(&st)).is_some());
}

/// Both fields go again with the first heartbeat after the join (Apache Kafka 4.4.0 does not
/// keep the report of the heartbeat that creates a group) and after an error answer (the
/// coordinator may have moved, and the new one holds no report of this member).
#[test]
fn task_offsets_go_again_after_the_join_and_after_an_error_answer() {
    let mut s = (*settings("127.0.0.1:1")).clone();
    s.task_offsets = TaskOffsetSource(Arc::new(|| BTreeMap::from([(TASK, 258)])));
    s.task_end_offsets = TaskOffsetSource(Arc::new(|| BTreeMap::from([(TASK, 300)])));
    let mut hb = Heartbeat::new(Arc::new(s), "member".into());
    let mut st = State::default();
    let sent = |hb: &Heartbeat, st: &State| {
        let r = hb.request(st);
        (r.task_offsets.is_some(), r.task_end_offsets.is_some())
    };
    assert_eq!(sent(&hb, &st), (true, true), "the join");
    let joined = HeartbeatResponse::decode(GOOD).expect("decodes");
    hb.handle(joined, &mut st).expect("joined");
    assert_eq!(st.epoch, 1);
    assert_eq!(sent(&hb, &st), (true, true), "the first heartbeat after the join");
    assert_eq!(sent(&hb, &st), (false, false), "unchanged, within the interval");
    // NOT_COORDINATOR: retriable, on the coordinator found next.
    let moved = HeartbeatResponse::decode(error_response(16)).expect("decodes");
    hb.handle(moved, &mut st).expect("retriable");
    assert_eq!(sent(&hb, &st), (true, true), "after an error answer");
}
