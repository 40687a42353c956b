//! Task offsets (`TaskOffsets` and `TaskEndOffsets` of KIP-1071) against the real broker:
//! Apache Kafka 4.4's sticky assignor gives a task that has no previous owner to the member
//! that reports holding its state, so an application restarted as a whole (new member ids)
//! gets each task back where its stores are; the coordinator holds both reports of each
//! member, as it describes them. Skipped without `STREAMS_TEST_BOOTSTRAP` unless
//! `STREAMS_REQUIRE_KAFKA=1`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::kafka_tests::{Player, SETTLE, fresh_with, settings, tasks, until};
use crate::model::TaskId;
use crate::runtime::streams_group::{MemberSettings, TaskOffsetSource, describe, wire};

/// A member of `group` that reports holding the state of `holds` (partitions of
/// subtopology 0), in a group whose first assignment waits `delay_ms` for more members.
fn holding(bootstrap: &str, group: &str, topic: &str, process: &str, holds: [i32; 2]) -> MemberSettings {
    let sums: BTreeMap<TaskId, i64> = holds
        .iter()
        .map(|&partition| {
            (
                TaskId {
                    subtopology: 0,
                    partition,
                },
                1_000,
            )
        })
        .collect();
    MemberSettings {
        group_configs: vec![("streams.initial.rebalance.delay.ms".into(), "3000".into())],
        task_offsets: TaskOffsetSource(Arc::new(move || sums.clone())),
        endpoints: Default::default(),
        ..settings(bootstrap, group, topic, process, 0)
    }
}

#[test]
fn tasks_without_an_owner_go_to_the_member_that_holds_their_state() {
    // Both ways round: the assignment follows the reports, not an order of the members.
    for (round, (a_holds, b_holds)) in [([1, 3], [0, 2]), ([0, 2], [1, 3])].into_iter().enumerate() {
        let Some((bootstrap, group, topic)) = fresh_with(&format!("sg_task_offsets_{round}"), 4) else {
            return;
        };
        // The group's first assignment waits 3 s: both members are in it by then.
        let mut a = Player::join(holding(&bootstrap, &group, &topic, "process-a", a_holds));
        let mut b = Player::join(holding(&bootstrap, &group, &topic, "process-b", b_holds));
        until(&mut [&mut a, &mut b], SETTLE, |p| {
            p[0].owns.active.len() == 2 && p[1].owns.active.len() == 2
        });
        assert_eq!(a.owns.active, tasks(a_holds), "round {round}: A's tasks");
        assert_eq!(b.owns.active, tasks(b_holds), "round {round}: B's tasks");
        a.member.leave(std::time::Duration::from_secs(10));
        b.member.leave(std::time::Duration::from_secs(10));
    }
}

/// Task `partition` of subtopology 0.
fn task(partition: i32) -> TaskId {
    TaskId {
        subtopology: 0,
        partition,
    }
}

#[test]
fn the_coordinator_holds_the_offsets_and_end_offsets_a_member_reports() {
    let Some((bootstrap, group, topic)) = fresh_with("sg_task_end_offsets", 4) else {
        return;
    };
    // The member holds the state of tasks 0 and 1 and follows the changelog of task 1.
    let ends = Arc::new(Mutex::new(BTreeMap::from([(task(1), 90)])));
    let source = ends.clone();
    let mut a = Player::join(MemberSettings {
        group_configs: vec![("streams.task.offset.interval.ms".into(), "15000".into())],
        task_offsets: TaskOffsetSource(Arc::new(|| BTreeMap::from([(task(0), 40), (task(1), 10)]))),
        task_end_offsets: TaskOffsetSource(Arc::new(move || source.lock().unwrap().clone())),
        ..settings(&bootstrap, &group, &topic, "process-a", 0)
    });
    until(&mut [&mut a], SETTLE, |p| p[0].owns.active == tasks(0..4));
    let (id, _) = a.member.member_id_and_epoch();
    let s = settings(&bootstrap, &group, &topic, "describer", 0);
    let mut conn = wire::find_coordinator(&s.known, &bootstrap, &group, "describer", Duration::from_secs(30))
        .expect("the coordinator");
    let mut described = || {
        describe::member_assignment(&mut conn, &group, &id)
            .expect("described")
            .expect("the member is in the group")
            .task_offsets
    };
    let reported = |offsets: &[(i32, i64)]| -> Vec<(String, i32, i64)> {
        offsets.iter().map(|&(p, o)| ("0".to_owned(), p, o)).collect()
    };
    // The member creates the group, whose coordinator keeps the join's report only from
    // the heartbeat after it (see `task_reports.rs`).
    let joined = [reported(&[(0, 40), (1, 10)]), reported(&[(1, 90)])];
    let start = Instant::now();
    while described() != joined {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the report never arrived: {:?}",
            described()
        );
        // The coordinator's state, polled: no event tells when it changed.
        std::thread::sleep(Duration::from_millis(200));
    }
    // A changed end goes with a heartbeat once the coordinator's interval (15 s, its
    // least) has passed.
    ends.lock().unwrap().insert(task(1), 95);
    let start = Instant::now();
    loop {
        let now = described();
        if now[1] == reported(&[(1, 95)]) {
            assert_eq!(now[0], reported(&[(0, 40), (1, 10)]), "the offsets stay");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(45),
            "the new end never arrived: {now:?}"
        );
        // The coordinator's state, polled: no event tells when it changed.
        std::thread::sleep(Duration::from_millis(200));
    }
    a.member.leave(Duration::from_secs(10));
}
