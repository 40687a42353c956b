//! Records walking the ladder: a success touches nothing else, failures move stage by stage
//! with increasing due times, each retry topic getting exactly the records that failed.

use streams_dsl::retry::{
    HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, HEADER_ORIGINAL_PARTITION, HEADER_ORIGINAL_TOPIC,
    Outcome, RetryOptions,
};

use crate::{Call, Harness, START, header, names};

#[test]
fn success_at_the_first_attempt_touches_nothing_else() {
    let h = Harness::new(&[1000, 2000], RetryOptions::new(), &[]);
    h.pipe("ok-1", "v");
    h.advance_to(START + 10_000);
    assert_eq!(
        h.calls(),
        vec![Call {
            key: "ok-1".into(),
            stage: 0,
            number: 1,
            at: START,
            due: None,
        }]
    );
    for t in h.ladder.topics() {
        assert!(h.read(&t).is_empty(), "{t}");
    }
    assert_eq!(h.waiting(), 0);
    assert_eq!(h.events_of("ok-1"), vec![(0, 1, Outcome::Succeeded)]);
}

#[test]
fn failures_walk_the_ladder_with_increasing_due_times() {
    // Three partitions on the main topic, two on the retry topics: stages need not be
    // co-partitioned.
    let h = Harness::new(
        &[1000, 2000, 4000],
        RetryOptions::new(),
        &[
            ("req", 3),
            ("req-retry-1", 2),
            ("req-retry-2", 2),
            ("req-retry-3", 2),
        ],
    );
    let keys = ["ok-1", "flaky1-a", "flaky2-b", "down-c", "fatal-d"];
    for k in keys {
        h.pipe(k, &format!("value of {k}"));
    }
    // The first attempts are made at once; nothing else until a delay has passed.
    assert_eq!(h.calls().len(), 5);
    h.advance_to(START + 900);
    assert_eq!(h.calls().len(), 5, "nothing is attempted before it is due");
    assert_eq!(h.waiting(), 3);
    h.advance_to(START + 20_000);

    let s = START;
    assert_eq!(h.calls_of("ok-1"), vec![(0, 1, s)]);
    assert_eq!(h.calls_of("flaky1-a"), vec![(0, 1, s), (1, 2, s + 1000)]);
    assert_eq!(
        h.calls_of("flaky2-b"),
        vec![(0, 1, s), (1, 2, s + 1000), (2, 3, s + 3000)]
    );
    assert_eq!(
        h.calls_of("down-c"),
        vec![(0, 1, s), (1, 2, s + 1000), (2, 3, s + 3000), (3, 4, s + 7000)]
    );
    assert_eq!(h.calls_of("fatal-d"), vec![(0, 1, s)]);
    assert_eq!(
        h.calls().len(),
        1 + 2 + 3 + 4 + 1,
        "no other call: {:?}",
        h.calls()
    );
    // Every retry was attempted at its due time (the clock ticks 100 ms), never before.
    for c in h.calls().iter().filter(|c| c.stage > 0) {
        assert_eq!(c.due, Some(c.at), "{c:?}");
    }

    // Where each record was read first, for the original-position headers.
    let main = h.read_by_key("req");
    let original = |k: &str| {
        let r = &main[k][0];
        (r.partition.to_string(), main[k].len())
    };
    // Each retry topic got exactly the records that failed at the stage before it, once,
    // with the due time of that stage's delay.
    let retry = |topic: &str, want: &[&str], attempt: u32, due: i64| {
        let got = h.read_by_key(topic);
        assert_eq!(
            got.keys().map(String::as_str).collect::<Vec<_>>(),
            want,
            "{topic}"
        );
        for (k, records) in &got {
            assert_eq!(records.len(), 1, "{k} in {topic} once");
            let r = &records[0];
            assert_eq!(r.value.as_deref(), Some(format!("value of {k}").as_bytes()));
            assert_eq!(r.timestamp, 42, "the record keeps its timestamp");
            let hd = &r.headers;
            assert_eq!(header(hd, HEADER_ATTEMPT), Some(attempt.to_string()));
            assert_eq!(header(hd, HEADER_NEXT_AT), Some(due.to_string()));
            assert_eq!(
                header(hd, HEADER_LAST_ERROR),
                Some(format!(
                    "HTTP {} (attempt {attempt})",
                    if k.starts_with("down") { 503 } else { 500 }
                ))
            );
            assert_eq!(header(hd, HEADER_ORIGINAL_TOPIC).as_deref(), Some("req"));
            assert_eq!(header(hd, HEADER_ORIGINAL_PARTITION), Some(original(k).0));
            assert_eq!(original(k).1, 1);
            assert_eq!(hd.len(), 6, "each retry header once: {:?}", names(hd));
        }
    };
    retry("req-retry-1", &["down-c", "flaky1-a", "flaky2-b"], 1, s + 1000);
    retry("req-retry-2", &["down-c", "flaky2-b"], 2, s + 3000);
    retry("req-retry-3", &["down-c"], 3, s + 7000);
    let dead = h.read_by_key("req-dlq");
    assert_eq!(
        dead.keys().map(String::as_str).collect::<Vec<_>>(),
        ["down-c", "fatal-d"]
    );
    assert_eq!(
        header(&dead["down-c"][0].headers, HEADER_ATTEMPT).as_deref(),
        Some("4")
    );
    assert_eq!(
        header(&dead["fatal-d"][0].headers, HEADER_ATTEMPT).as_deref(),
        Some("1")
    );
    assert_eq!(h.waiting(), 0, "handled records leave the stores");

    // The listener heard every step once.
    let retrying = |topic: &str, due: i64| Outcome::Retrying {
        topic: topic.into(),
        due_at_ms: due,
    };
    assert_eq!(
        h.events_of("down-c"),
        vec![
            (0, 1, retrying("req-retry-1", s + 1000)),
            (1, 2, Outcome::Waiting { due_at_ms: s + 1000 }),
            (1, 2, retrying("req-retry-2", s + 3000)),
            (2, 3, Outcome::Waiting { due_at_ms: s + 3000 }),
            (2, 3, retrying("req-retry-3", s + 7000)),
            (3, 4, Outcome::Waiting { due_at_ms: s + 7000 }),
            (3, 4, Outcome::DeadLettered { fatal: false }),
        ]
    );
    assert_eq!(
        h.events_of("fatal-d"),
        vec![(0, 1, Outcome::DeadLettered { fatal: true })]
    );
    assert_eq!(
        h.events_of("flaky1-a"),
        vec![
            (0, 1, retrying("req-retry-1", s + 1000)),
            (1, 2, Outcome::Waiting { due_at_ms: s + 1000 }),
            (1, 2, Outcome::Succeeded),
        ]
    );
}
