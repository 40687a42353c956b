//! Dead letters: a fatal failure at once, an exhausted ladder at its end, each with the
//! original bytes and every header.

use streams_core::Headers;
use streams_core::serdes::StringSerde;
use streams_dsl::retry::{
    HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, HEADER_ORIGINAL_OFFSET, HEADER_ORIGINAL_PARTITION,
    HEADER_ORIGINAL_TOPIC, HEADER_REPLAYED_FROM, Outcome, RetryOptions,
};

use crate::{Harness, START, header, names, raw};

#[test]
fn a_fatal_failure_is_dead_lettered_at_once_with_the_original_bytes() {
    let h = Harness::new(&[1000], RetryOptions::new(), &[]);
    let mut app = Headers::new();
    app.add("trace", "t-1");
    h.driver
        .input_topic("req", StringSerde, StringSerde)
        .pipe_with_headers("fatal-x".into(), "payload".into(), 7, app)
        .unwrap();
    // A value the serde cannot read is fatal too, and its bytes are kept as they were.
    let bad_utf8: &[u8] = &[0xC3, 0x28];
    h.driver
        .input_topic("req", raw(), raw())
        .pipe_raw(Some(b"undecodable"), Some(bad_utf8), 8)
        .unwrap();
    h.advance_to(START + 5000);
    assert_eq!(h.calls_of("fatal-x"), vec![(0, 1, START)]);
    assert!(h.calls_of("undecodable").is_empty(), "the handler never sees it");
    assert!(h.read("req-retry-1").is_empty());
    let dead = h.read_by_key("req-dlq");
    assert_eq!(dead.len(), 2);
    let x = &dead["fatal-x"][0];
    assert_eq!(x.value.as_deref(), Some(&b"payload"[..]));
    assert_eq!(x.timestamp, 7);
    assert_eq!(
        names(&x.headers),
        [
            "trace",
            HEADER_ORIGINAL_TOPIC,
            HEADER_ORIGINAL_PARTITION,
            HEADER_ORIGINAL_OFFSET,
            HEADER_ATTEMPT,
            HEADER_LAST_ERROR
        ]
    );
    assert_eq!(header(&x.headers, "trace").as_deref(), Some("t-1"));
    assert_eq!(header(&x.headers, HEADER_ATTEMPT).as_deref(), Some("1"));
    assert_eq!(
        header(&x.headers, HEADER_LAST_ERROR).as_deref(),
        Some("fatal: bad request")
    );
    let u = &dead["undecodable"][0];
    assert_eq!(u.value.as_deref(), Some(bad_utf8));
    assert!(
        header(&u.headers, HEADER_LAST_ERROR).is_some_and(|e| e.starts_with("fatal: undecodable value")),
        "{:?}",
        u.headers
    );
    assert_eq!(
        h.events_of("undecodable"),
        vec![(0, 1, Outcome::DeadLettered { fatal: true })]
    );
}

#[test]
fn exhausting_the_ladder_dead_letters_the_original_bytes_and_every_header() {
    let h = Harness::new(&[1000, 2000], RetryOptions::new(), &[]);
    let mut app = Headers::new();
    app.add("trace", "t-9").add_null("empty").add("trace", "t-10");
    h.driver
        .input_topic("req", StringSerde, StringSerde)
        .pipe_with_headers("down-z".into(), "a\0b".into(), 99, app.clone())
        .unwrap();
    h.advance_to(START + 10_000);
    assert_eq!(
        h.calls_of("down-z"),
        vec![(0, 1, START), (1, 2, START + 1000), (2, 3, START + 3000)]
    );
    let dead = h.read("req-dlq");
    assert_eq!(dead.len(), 1);
    let d = &dead[0];
    assert_eq!(d.key.as_deref(), Some(&b"down-z"[..]));
    assert_eq!(d.value.as_deref(), Some(&b"a\0b"[..]));
    assert_eq!(d.timestamp, 99);
    let mut want = app;
    want.add(HEADER_ORIGINAL_TOPIC, "req")
        .add(HEADER_ORIGINAL_PARTITION, "0")
        .add(HEADER_ORIGINAL_OFFSET, "0")
        .add(HEADER_ATTEMPT, "3")
        .add(HEADER_LAST_ERROR, "HTTP 503 (attempt 3)");
    assert_eq!(
        d.headers, want,
        "application headers first, in order, then the retry headers once"
    );
    assert!(header(&d.headers, HEADER_NEXT_AT).is_none());
    assert!(header(&d.headers, HEADER_REPLAYED_FROM).is_none());
    assert_eq!(h.waiting(), 0);
}
