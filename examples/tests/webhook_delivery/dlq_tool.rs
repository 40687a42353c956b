//! The dead-letter tool: listing, replaying selected offsets once, and purging.

use std::time::Duration;

use streams_examples::retry::dlq::{DlqTool, ReplaySelection};
use streams_examples::retry::{
    HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, HEADER_ORIGINAL_TOPIC, HEADER_REPLAYED_FROM,
    RetryLadder,
};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

use crate::WAIT;

#[test]
fn dlq_tool_lists_purges_and_replays_selected_offsets() {
    let Some(bootstrap) = kafka::require_kafka("dlq_tool_lists_purges_and_replays_selected_offsets") else {
        return;
    };
    let main = kafka::unique_name("dlqtool");
    let ladder = RetryLadder::new(main.clone(), &[Duration::from_millis(10)]);
    for t in ladder.topics() {
        kafka::create_topic(&bootstrap, &t, 2, &[]).unwrap();
    }
    let dead = |partition: i32, i: usize| {
        ProduceRecord::new(format!("k{i}"), format!("v{i}"))
            .with_partition(partition)
            .with_header("app", Some(b"kept"))
            .with_header(HEADER_ATTEMPT, Some(b"2"))
            .with_header(HEADER_LAST_ERROR, Some(b"HTTP 503"))
            .with_header(HEADER_ORIGINAL_TOPIC, Some(main.as_bytes()))
    };
    // Partition 0: offsets 0..4; partition 1: offsets 0..2.
    let records: Vec<ProduceRecord> = (0..4)
        .map(|i| dead(0, i))
        .chain((4..6).map(|i| dead(1, i)))
        .collect();
    kafka::produce(
        &bootstrap,
        ladder.dead_letter(),
        &records,
        Duration::from_secs(30),
    )
    .unwrap();
    let tool =
        DlqTool::new(&bootstrap, ladder.dead_letter()).with_group(kafka::unique_name("dlq-tool-group"));

    let listed = tool.list(false).unwrap();
    assert_eq!(listed.len(), 6);
    assert_eq!(listed[0].record.header_str("app"), Some("kept"));

    let report = tool
        .replay(
            ladder.replay_topic(),
            &ReplaySelection::Offsets(vec![(0, 1), (1, 0), (5, 5), (0, 9)]),
        )
        .unwrap();
    assert_eq!(report.replayed, vec![(0, 1), (1, 0)]);
    assert_eq!(report.not_found, vec![(5, 5), (0, 9)]);
    let out = kafka::consume_all(
        &bootstrap,
        ladder.replay_topic(),
        ConsumeUntil::Count(2),
        WAIT,
        false,
    )
    .unwrap();
    let mut keys: Vec<String> = out.iter().map(|r| r.key_str().unwrap()).collect();
    keys.sort();
    assert_eq!(keys, vec!["k1", "k4"]);
    for r in &out {
        let header = |name: &str| {
            r.headers
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.as_deref())
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        assert_eq!(header(HEADER_ATTEMPT).as_deref(), Some("0"), "{r:?}");
        assert_eq!(header("app").as_deref(), Some("kept"));
        assert_eq!(header(HEADER_LAST_ERROR).as_deref(), Some("HTTP 503"));
        assert_eq!(header(HEADER_ORIGINAL_TOPIC).as_deref(), Some(main.as_str()));
        assert!(header(HEADER_NEXT_AT).is_some());
        assert!(header(HEADER_REPLAYED_FROM).is_some_and(|f| f.starts_with(ladder.dead_letter())));
        assert_eq!(r.headers.iter().filter(|(k, _)| k == HEADER_ATTEMPT).count(), 1);
    }

    let pending: Vec<(i32, i64)> = tool
        .list(false)
        .unwrap()
        .iter()
        .map(|d| (d.record.partition, d.record.offset))
        .collect();
    assert_eq!(pending, vec![(0, 0), (0, 2), (0, 3), (1, 1)]);
    let all = tool.list(true).unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(all.iter().filter(|d| d.handled).count(), 2);

    // The same selection again: nothing is replayed twice.
    let again = tool
        .replay(
            ladder.replay_topic(),
            &ReplaySelection::Offsets(vec![(0, 1), (1, 0)]),
        )
        .unwrap();
    assert!(again.replayed.is_empty());
    assert_eq!(again.already_handled, vec![(0, 1), (1, 0)]);
    // Replaying offset 0 of partition 0 moves its committed offset past 0 and 1.
    assert_eq!(
        tool.replay(ladder.replay_topic(), &ReplaySelection::Offsets(vec![(0, 0)]))
            .unwrap()
            .replayed,
        vec![(0, 0)]
    );
    let committed =
        kafka::committed_offsets(&bootstrap, tool.group_id(), ladder.dead_letter(), WAIT).unwrap();
    assert_eq!(committed[0], (0, Some(2)));

    assert_eq!(tool.purge().unwrap(), 3);
    assert!(tool.list(false).unwrap().is_empty());
    assert!(
        tool.replay(ladder.replay_topic(), &ReplaySelection::All)
            .unwrap()
            .replayed
            .is_empty()
    );

    // A new dead letter after the purge is pending, and replayed once.
    kafka::produce(
        &bootstrap,
        ladder.dead_letter(),
        &[dead(1, 6)],
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(tool.list(false).unwrap().len(), 1);
    assert_eq!(
        tool.replay(ladder.replay_topic(), &ReplaySelection::All)
            .unwrap()
            .replayed,
        vec![(1, 2)]
    );
    assert!(
        tool.replay(ladder.replay_topic(), &ReplaySelection::All)
            .unwrap()
            .replayed
            .is_empty()
    );
    let out = kafka::consume_all(
        &bootstrap,
        ladder.replay_topic(),
        ConsumeUntil::Idle(Duration::from_millis(500)),
        WAIT,
        false,
    )
    .unwrap();
    assert_eq!(out.len(), 4, "k1, k4, k0, k6");
}
