//! The streams group client against the real broker (Apache Kafka 4.2+ with the test
//! settings of `scripts/kafka.sh`: 10 s session timeout, 1 s heartbeat interval). Skipped
//! without `STREAMS_TEST_BOOTSTRAP` unless `STREAMS_REQUIRE_KAFKA=1`.
//!
//! A test plays the stream thread: it takes each new assignment and reports it owned at
//! once (an instant revocation).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use streams_test_utils::kafka;

use crate::model::TaskId;
use crate::runtime::streams_group::commit::{self, CommitError};
use crate::runtime::streams_group::topology::{GroupSubtopology, GroupTopology, TopicInfo};
use crate::runtime::streams_group::{MemberEvent, MemberSettings, StreamsMember, TaskAssignment};
use crate::runtime::streams_group::{describe, heartbeat, wire};

/// A fresh group (application id) and its 4-partition source topic.
fn fresh(test: &str) -> Option<(String, String, String)> {
    fresh_with(test, 4)
}

/// A fresh group and its source topic of `partitions` partitions.
pub(super) fn fresh_with(test: &str, partitions: i32) -> Option<(String, String, String)> {
    let bootstrap = kafka::require_kafka(test)?;
    let group = kafka::unique_name(test);
    let topic = format!("{group}-in");
    kafka::create_topic(&bootstrap, &topic, partitions, &[]).expect("create the source topic");
    kafka::wait_for_topic(&bootstrap, &topic, partitions as usize, Duration::from_secs(30))
        .expect("topic visible");
    Some((bootstrap, group, topic))
}

/// One stateful sub-topology (id 0) reading `topic`, with one changelog.
pub(super) fn topology(group: &str, topic: &str) -> GroupTopology {
    GroupTopology {
        epoch: 0,
        subtopologies: vec![GroupSubtopology {
            id: "0".into(),
            source_topics: vec![topic.to_owned()],
            state_changelog_topics: vec![TopicInfo {
                name: format!("{group}-counts-changelog"),
                configs: vec![("cleanup.policy".into(), "compact".into())],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

pub(super) fn settings(
    bootstrap: &str,
    group: &str,
    topic: &str,
    process: &str,
    standbys: usize,
) -> MemberSettings {
    MemberSettings {
        bootstrap: bootstrap.to_owned(),
        known: Default::default(),
        group_id: group.to_owned(),
        client_id: format!("{group}-{process}"),
        process_id: process.to_owned(),
        instance_id: None,
        rebalance_timeout: Duration::from_secs(30),
        user_endpoint: Some(("localhost".into(), 7000)),
        topology: topology(group, topic),
        thread_name: format!("{process}-StreamThread-1"),
        group_configs: if standbys > 0 {
            vec![("streams.num.standby.replicas".into(), standbys.to_string())]
        } else {
            Vec::new()
        },
        task_offsets: Default::default(),
        task_end_offsets: Default::default(),
        endpoints: Default::default(),
    }
}

pub(super) fn tasks(partitions: impl IntoIterator<Item = i32>) -> BTreeSet<TaskId> {
    partitions
        .into_iter()
        .map(|partition| TaskId {
            subtopology: 0,
            partition,
        })
        .collect()
}

/// A member played by the test: the last assignment taken, owned at once.
pub(super) struct Player {
    pub(super) member: StreamsMember,
    pub(super) owns: TaskAssignment,
    pub(super) lost: usize,
}

impl Player {
    pub(super) fn join(s: MemberSettings) -> Player {
        Player::try_join(s).expect("join")
    }

    pub(super) fn try_join(s: MemberSettings) -> Result<Player, crate::model::error::StreamsError> {
        Ok(Player {
            member: StreamsMember::join(s)?,
            owns: TaskAssignment::default(),
            lost: 0,
        })
    }

    /// Takes the events of up to `wait`; true when one arrived.
    fn step(&mut self, wait: Duration) -> bool {
        let Some(e) = self.member.poll_event().or_else(|| self.member.next_event(wait)) else {
            return false;
        };
        match e {
            MemberEvent::Assigned(a) => self.owns = a,
            MemberEvent::Lost => {
                self.owns = TaskAssignment::default();
                self.lost += 1;
            }
        }
        self.member.owned(&self.owns);
        true
    }
}

/// Steps `players` until `done` holds; panics after `timeout`. Returns the time taken.
pub(super) fn until(
    players: &mut [&mut Player],
    timeout: Duration,
    done: impl Fn(&[&mut Player]) -> bool,
) -> Duration {
    let start = Instant::now();
    while !done(players) {
        assert!(
            start.elapsed() < timeout,
            "not reached in {timeout:?}; members own {:?}",
            players.iter().map(|p| &p.owns).collect::<Vec<_>>()
        );
        for p in players.iter_mut() {
            p.step(Duration::from_millis(50));
            if let Some(e) = p.member.failure() {
                panic!("member failed: {e}");
            }
        }
    }
    start.elapsed()
}

pub(super) const SETTLE: Duration = Duration::from_secs(60);

#[test]
fn one_member_gets_every_task() {
    let Some((bootstrap, group, topic)) = fresh("sg_one_member") else {
        return;
    };
    let mut a = Player::join(settings(&bootstrap, &group, &topic, "process-a", 0));
    until(&mut [&mut a], SETTLE, |p| p[0].owns.active == tasks(0..4));
    assert!(a.owns.standby.is_empty() && a.owns.warmup.is_empty());
    let (id, epoch) = a.member.member_id_and_epoch();
    assert!(!id.is_empty() && epoch > 0, "{id} {epoch}");
    assert_eq!(a.lost, 0);
    // The coordinator describes the member with the tasks it sent it (what a member asks
    // for after a heartbeat whose answer was lost).
    let s = settings(&bootstrap, &group, &topic, "describer", 0);
    let mut conn = wire::find_coordinator(&s.known, &bootstrap, &group, "describer", Duration::from_secs(30))
        .expect("the coordinator");
    let held = describe::member_assignment(&mut conn, &group, &id)
        .expect("described")
        .expect("the member is in the group");
    assert_eq!(held.member_epoch, epoch);
    assert_eq!(heartbeat::task_set(&held.assignment[0]), tasks(0..4));
    assert!(held.assignment[1].is_empty() && held.assignment[2].is_empty());
    let nobody = describe::member_assignment(&mut conn, &group, "no-such-member").expect("described");
    assert!(nobody.is_none());
    a.member.leave(Duration::from_secs(10));
}

#[test]
fn two_members_split_hold_standbys_and_fail_over() {
    let Some((bootstrap, group, topic)) = fresh("sg_two_members") else {
        return;
    };
    let mut a = Player::join(settings(&bootstrap, &group, &topic, "process-a", 1));
    until(&mut [&mut a], SETTLE, |p| p[0].owns.active == tasks(0..4));
    let mut b = Player::join(settings(&bootstrap, &group, &topic, "process-b", 1));
    let split = until(&mut [&mut a, &mut b], SETTLE, |p| {
        let (a, b) = (&p[0].owns, &p[1].owns);
        a.active.len() == 2
            && b.active.len() == 2
            && a.active.is_disjoint(&b.active)
            && a.standby == b.active
            && b.standby == a.active
    });
    eprintln!("split 2/2 with standbys in {split:?}");

    // B crashes: no leave, no more heartbeats. A takes B's tasks after the session timeout.
    let b_active = b.owns.active.clone();
    b.member.crash();
    let failover = until(&mut [&mut a], SETTLE, |p| p[0].owns.active == tasks(0..4));
    eprintln!("failover after a crash: {failover:?} (standbys of A were {b_active:?})");
    assert!(
        failover >= Duration::from_secs(5),
        "before the session timeout: {failover:?}"
    );

    // C joins, takes two tasks, and leaves cleanly: A gets them back at once.
    let mut c = Player::join(settings(&bootstrap, &group, &topic, "process-c", 1));
    until(&mut [&mut a, &mut c], SETTLE, |p| {
        p[0].owns.active.len() == 2 && p[1].owns.active.len() == 2
    });
    c.member.leave(Duration::from_secs(10));
    let handover = until(&mut [&mut a], SETTLE, |p| p[0].owns.active == tasks(0..4));
    eprintln!("handover after a clean leave: {handover:?}");
    assert!(handover < Duration::from_secs(5), "{handover:?}");
    assert_eq!(a.lost, 0);
    a.member.leave(Duration::from_secs(10));
}

#[test]
fn commits_need_the_current_epoch() {
    let Some((bootstrap, group, topic)) = fresh("sg_commit") else {
        return;
    };
    let mut a = Player::join(settings(&bootstrap, &group, &topic, "process-a", 0));
    until(&mut [&mut a], SETTLE, |p| p[0].owns.active == tasks(0..4));
    let offsets: Vec<(String, i32, i64, String)> = (0..3)
        .map(|p| (topic.clone(), p, 10 + i64::from(p), format!("meta-{p}")))
        .collect();
    a.member
        .commit_offsets(&offsets, Duration::from_secs(10))
        .expect("commit at the current epoch");
    let committed =
        kafka::committed_offsets(&bootstrap, &group, &topic, Duration::from_secs(30)).expect("read back");
    assert_eq!(
        committed,
        vec![(0, Some(10)), (1, Some(11)), (2, Some(12)), (3, None)]
    );
    // The member reads them back itself, metadata included; partition 3 has none.
    let asked: Vec<(String, i32)> = (0..4).map(|p| (topic.clone(), p)).collect();
    let read = a
        .member
        .committed_offsets(&asked, Duration::from_secs(30))
        .expect("the member reads the committed offsets");
    let read: Vec<_> = read.into_iter().map(|((_, p), c)| (p, c)).collect();
    assert_eq!(
        read,
        vec![
            (0, Some((10, "meta-0".to_owned()))),
            (1, Some((11, "meta-1".to_owned()))),
            (2, Some((12, "meta-2".to_owned()))),
            (3, None),
        ]
    );

    let (id, epoch) = a.member.member_id_and_epoch();
    let known = wire::KnownBrokers::default();
    let mut conn = wire::find_coordinator(
        &known,
        &bootstrap,
        &group,
        "sg-commit-test",
        Duration::from_secs(10),
    )
    .expect("coordinator");
    // Any other epoch is stale for the streams group coordinator: retriable (after the next
    // heartbeat), not a loss.
    for wrong in [epoch + 5, epoch - 1] {
        let refused = commit::commit(&mut conn, &group, &id, wrong, &offsets);
        assert!(
            matches!(&refused, Err(e @ CommitError::Retriable { .. }) if e.is_retriable()),
            "epoch {wrong}: {refused:?}"
        );
    }
    let stranger = commit::commit(&mut conn, &group, "no-such-member", epoch, &offsets);
    assert!(matches!(stranger, Err(CommitError::Lost { .. })), "{stranger:?}");
    a.member.leave(Duration::from_secs(10));
}

#[test]
fn a_live_consumer_group_of_the_same_name_is_refused() {
    use rdkafka::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};

    use crate::model::error::{StreamsError, StreamsGroupFailure};

    let Some((bootstrap, group, topic)) = fresh("sg_other_type") else {
        return;
    };
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &group)
        .set("group.protocol", "consumer")
        .create()
        .expect("consumer");
    consumer.subscribe(&[&topic]).expect("subscribe");
    let deadline = Instant::now() + SETTLE;
    while consumer.assignment().map(|a| a.count()).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "the consumer got no partitions");
        let _ = consumer.poll(Duration::from_millis(100));
    }
    match StreamsMember::join(settings(&bootstrap, &group, &topic, "process-a", 0)) {
        Err(StreamsError::StreamsGroup {
            kind: StreamsGroupFailure::OtherGroupType,
            message,
            ..
        }) => eprintln!("refused: {message}"),
        Err(e) => panic!("expected OtherGroupType, got {e}"),
        Ok(_) => panic!("joined a consumer group's name as a streams group"),
    }
}

#[test]
fn a_crashed_members_tasks_go_to_their_standbys() {
    let Some((bootstrap, group, topic)) = fresh_with("sg_standby_failover", 6) else {
        return;
    };
    let mut a = Player::join(settings(&bootstrap, &group, &topic, "process-a", 1));
    let mut b = Player::join(settings(&bootstrap, &group, &topic, "process-b", 1));
    let mut c = Player::join(settings(&bootstrap, &group, &topic, "process-c", 1));
    until(&mut [&mut a, &mut b, &mut c], SETTLE, |p| {
        let all: BTreeSet<TaskId> = p.iter().flat_map(|p| p.owns.active.iter().copied()).collect();
        let standbys: BTreeSet<TaskId> = p.iter().flat_map(|p| p.owns.standby.iter().copied()).collect();
        p.iter()
            .all(|p| p.owns.active.len() == 2 && p.owns.active.is_disjoint(&p.owns.standby))
            && all == tasks(0..6)
            && standbys == tasks(0..6)
    });
    let (b_active, a_standby, c_standby) = (
        b.owns.active.clone(),
        a.owns.standby.clone(),
        c.owns.standby.clone(),
    );
    b.member.crash();
    let failover = until(&mut [&mut a, &mut c], SETTLE, |p| {
        p[0].owns.active.len() + p[1].owns.active.len() == 6
    });
    eprintln!(
        "failover of {b_active:?} in {failover:?}; standbys were A {a_standby:?}, C {c_standby:?}; \
         now A {:?}, C {:?}",
        a.owns.active, c.owns.active
    );
    // The coordinator keeps the survivors balanced (3 tasks each), so a survivor may get
    // a task whose standby is elsewhere; but of the crashed member's tasks, each survivor
    // takes those it holds standbys of first.
    for (who, took, held) in [
        ("A", &a.owns.active, &a_standby),
        ("C", &c.owns.active, &c_standby),
    ] {
        let received: BTreeSet<TaskId> = took.intersection(&b_active).copied().collect();
        let holdable = b_active.intersection(held).count();
        assert_eq!(
            received.intersection(held).count(),
            received.len().min(holdable),
            "{who} took {received:?} of {b_active:?} holding standbys {held:?}"
        );
    }
    assert!(a.owns.active.len() == 3 && c.owns.active.len() == 3);
    a.member.leave(Duration::from_secs(10));
    c.member.leave(Duration::from_secs(10));
}

/// `settings` of a static member: `group.instance.id` = `instance`.
fn static_settings(
    bootstrap: &str,
    group: &str,
    topic: &str,
    process: &str,
    instance: &str,
) -> MemberSettings {
    MemberSettings {
        instance_id: Some(instance.to_owned()),
        ..settings(bootstrap, group, topic, process, 0)
    }
}

/// Static membership (Apache Kafka 4.4+): a member with `group.instance.id` leaves with
/// epoch -2, the coordinator keeps its tasks for it, and a new member with the same id
/// takes them over within the session timeout; the other member's tasks never move. A
/// dynamic member's clean leave hands its tasks over at once instead
/// (`two_members_split_hold_standbys_and_fail_over`).
#[test]
fn a_static_member_that_leaves_and_comes_back_keeps_its_tasks() {
    use crate::model::error::{StreamsError, StreamsGroupFailure};

    let Some((bootstrap, group, topic)) = fresh("sg_static") else {
        return;
    };
    let mut a = match Player::try_join(static_settings(&bootstrap, &group, &topic, "process-a", "a-1")) {
        Ok(player) => player,
        // A broker before 4.4 (`KAFKA_VERSION=4.3.1 bash scripts/test.sh`).
        Err(StreamsError::StreamsGroup {
            kind: StreamsGroupFailure::Unsupported,
            message,
            ..
        }) if message.contains("4.4 or later") => {
            eprintln!("SKIPPED sg_static: {message}");
            return;
        }
        Err(e) => panic!("join: {e}"),
    };
    let mut b = Player::join(static_settings(&bootstrap, &group, &topic, "process-b", "b-1"));
    until(&mut [&mut a, &mut b], SETTLE, |p| {
        p[0].owns.active.len() == 2 && p[1].owns.active.len() == 2
    });
    let (a_tasks, b_tasks) = (a.owns.active.clone(), b.owns.active.clone());
    let a_id = a.member.member_id_and_epoch().0;
    a.member.leave(Duration::from_secs(10));

    // The test broker's session timeout is 10 s: for 4 s nothing may move to B.
    let away = Instant::now();
    while away.elapsed() < Duration::from_secs(4) {
        b.step(Duration::from_millis(100));
        assert_eq!(b.owns.active, b_tasks, "B's tasks changed while A was away");
        assert!(b.member.failure().is_none());
    }

    // A restarted process: a new member id, the same instance id.
    let mut a2 = Player::join(static_settings(&bootstrap, &group, &topic, "process-a2", "a-1"));
    let back = until(&mut [&mut a2, &mut b], SETTLE, |p| p[0].owns.active == a_tasks);
    eprintln!("the static member took its tasks {a_tasks:?} back {back:?} after joining");
    assert_eq!(b.owns.active, b_tasks);
    assert_eq!((a2.lost, b.lost), (0, 0));
    assert_ne!(a2.member.member_id_and_epoch().0, a_id);
    a2.member.leave(Duration::from_secs(10));
    b.member.leave(Duration::from_secs(10));
}
