//! Task offsets (`TaskOffsets` of KIP-1071) against the real broker: Apache Kafka 4.4's
//! sticky assignor gives a task that has no previous owner to the member that reports
//! holding its state, so an application restarted as a whole (new member ids) gets each
//! task back where its stores are. Skipped without `STREAMS_TEST_BOOTSTRAP` unless
//! `STREAMS_REQUIRE_KAFKA=1`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::kafka_tests::{Player, SETTLE, fresh_with, settings, tasks, until};
use crate::model::TaskId;
use crate::runtime::streams_group::{MemberSettings, TaskOffsetSource};

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
