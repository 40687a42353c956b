//! When a waiting record is attempted: in due order within the punctuation's bounds, and at
//! once without a due time (a replay, which starts the count over).

use std::sync::atomic::Ordering;
use std::time::Duration;

use streams_core::Headers;
use streams_core::serdes::StringSerde;
use streams_dsl::retry::{
    HEADER_ATTEMPT, HEADER_NEXT_AT, HEADER_ORIGINAL_OFFSET, HEADER_ORIGINAL_PARTITION, HEADER_ORIGINAL_TOPIC,
    HEADER_REPLAYED_FROM, RetryOptions,
};

use crate::{Call, Harness, START, header};

#[test]
fn due_records_are_attempted_in_due_order_within_the_bounds() {
    // One partition; at most two records per punctuation.
    let h = Harness::new(
        &[1000],
        RetryOptions::new().max_records_per_punctuation(2).in_memory(),
        &[],
    );
    let retry = h.driver.input_topic("req-retry-1", StringSerde, StringSerde);
    // Piped out of order: (key, due).
    let records = [
        ("ok-a", START + 500),
        ("ok-b", START + 300),
        ("ok-c", START + 400),
        ("ok-d", START + 300),
        ("ok-e", START + 100),
        ("ok-late", START + 5000),
    ];
    for (k, due) in records {
        let mut hd = Headers::new();
        hd.add(HEADER_ATTEMPT, "1").add(HEADER_NEXT_AT, due.to_string());
        retry.pipe_with_headers(k.into(), "v".into(), 0, hd).unwrap();
    }
    assert!(h.calls().is_empty(), "storing is not attempting");
    // The clock jumps past five due times at once: two per punctuation, earliest first
    // (ties by offset: b was piped before d).
    h.clock.store(START + 600, Ordering::SeqCst);
    h.driver.advance_wall_clock(Duration::from_millis(600)).unwrap();
    let order = |calls: Vec<Call>| calls.into_iter().map(|c| c.key).collect::<Vec<_>>();
    assert_eq!(order(h.calls()), ["ok-e", "ok-b"]);
    h.advance_to(START + 700);
    assert_eq!(order(h.calls()), ["ok-e", "ok-b", "ok-d", "ok-c"]);
    h.advance_to(START + 800);
    assert_eq!(order(h.calls()), ["ok-e", "ok-b", "ok-d", "ok-c", "ok-a"]);
    h.advance_to(START + 4900);
    assert_eq!(h.calls().len(), 5, "ok-late is not due");
    h.advance_to(START + 5000);
    assert_eq!(
        order(h.calls()),
        ["ok-e", "ok-b", "ok-d", "ok-c", "ok-a", "ok-late"]
    );
    for c in h.calls() {
        assert_eq!(c.number, 2);
        assert!(c.at >= c.due.unwrap(), "{c:?} attempted before its due time");
    }
}

#[test]
fn a_time_bound_of_zero_attempts_one_record_per_punctuation() {
    let h = Harness::new(
        &[1000],
        RetryOptions::new().max_punctuation_time(Duration::ZERO),
        &[],
    );
    for k in ["ok-1", "ok-2", "ok-3"] {
        let mut hd = Headers::new();
        hd.add(HEADER_NEXT_AT, START.to_string());
        h.driver
            .input_topic("req-retry-1", StringSerde, StringSerde)
            .pipe_with_headers(k.into(), "v".into(), 0, hd)
            .unwrap();
    }
    for (t, n) in [
        (START + 100, 1),
        (START + 200, 2),
        (START + 300, 3),
        (START + 400, 3),
    ] {
        h.advance_to(t);
        assert_eq!(h.calls().len(), n, "at {t}");
    }
}

#[test]
fn a_record_without_a_due_time_is_due_at_once_and_a_replay_starts_over() {
    let h = Harness::new(&[1000, 2000], RetryOptions::new(), &[]);
    // As the dead-letter tool replays: attempt 0, due now, replayed-from.
    let mut hd = Headers::new();
    hd.add(HEADER_ATTEMPT, "0")
        .add(HEADER_ORIGINAL_TOPIC, "req")
        .add(HEADER_ORIGINAL_PARTITION, "0")
        .add(HEADER_ORIGINAL_OFFSET, "17")
        .add(HEADER_REPLAYED_FROM, "req-dlq/0/3");
    let retry = h.driver.input_topic("req-retry-1", StringSerde, StringSerde);
    retry
        .pipe_with_headers("flaky1-r".into(), "v".into(), 0, hd)
        .unwrap();
    retry.pipe("ok-no-header".into(), "v".into()).unwrap();
    h.advance_to(START + 100);
    assert_eq!(h.calls_of("flaky1-r"), vec![(1, 1, START + 100)]);
    assert_eq!(h.calls_of("ok-no-header"), vec![(1, 1, START + 100)]);
    // The replayed record failed again: it moves on from retry 1 to retry 2, keeping its
    // original position, without the replay marker.
    let next = h.read("req-retry-2");
    assert_eq!(next.len(), 1);
    let hd = &next[0].headers;
    assert_eq!(header(hd, HEADER_ATTEMPT).as_deref(), Some("1"));
    assert_eq!(header(hd, HEADER_ORIGINAL_OFFSET).as_deref(), Some("17"));
    assert_eq!(header(hd, HEADER_NEXT_AT), Some((START + 100 + 2000).to_string()));
    assert!(header(hd, HEADER_REPLAYED_FROM).is_none());
    h.advance_to(START + 2100);
    assert_eq!(
        h.calls_of("flaky1-r"),
        vec![(1, 1, START + 100), (2, 2, START + 2100)]
    );
}
