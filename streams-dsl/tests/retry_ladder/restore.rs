//! Waiting records restored from a retry stage's changelog by a second instance.

use std::collections::BTreeMap;

use streams_core::Headers;
use streams_core::serdes::{NullableSerde, StringSerde};
use streams_core::topology::changelog_topic;
use streams_dsl::retry::{
    HEADER_ATTEMPT, PendingKey, PendingKeySerde, PendingRecord, PendingRecordSerde, RetryOptions,
};

use crate::{APP, Harness, START, header};

/// The changelog of a retry stage's store holds each waiting record once, byte for byte,
/// and its deletion once it is handled; a second instance that restores the store from
/// that changelog (as the runtime does when a task moves or after a crash) attempts the
/// record at its due time, once.
#[test]
fn waiting_records_are_restored_from_the_changelog() {
    let first = Harness::new(&[1000, 2000], RetryOptions::new(), &[]);
    let mut app = Headers::new();
    app.add("trace", "t-r");
    first
        .driver
        .input_topic("req", StringSerde, StringSerde)
        .pipe_with_headers("down-r".into(), "v-r".into(), 5, app)
        .unwrap();
    first.pipe("flaky1-s", "v-s");
    let store = first.nodes.stages[1].store.clone().unwrap();
    assert_eq!(store.name(), "req-retry-1-pending");
    let changelog = changelog_topic(APP, store.name());
    let entries = first
        .driver
        .output_topic(&changelog, PendingKeySerde, NullableSerde(PendingRecordSerde))
        .read_records()
        .unwrap();
    let retry_records = first.read("req-retry-1");
    assert_eq!(entries.len(), 2, "one put per waiting record: {entries:?}");
    assert_eq!(retry_records.len(), 2);
    for (entry, r) in entries.iter().zip(&retry_records) {
        let pending = entry.value.as_ref().expect("a put");
        assert_eq!(entry.key.due_at_ms, START + 1000);
        assert_eq!(pending.key, r.key);
        assert_eq!(pending.value, r.value);
        assert_eq!(pending.headers, r.headers);
        assert_eq!(pending.timestamp, r.timestamp);
    }
    // The first instance dies before the records are due: nothing was attempted again.
    assert_eq!(first.calls().len(), 2);
    let restored: Vec<(PendingKey, Option<PendingRecord>)> =
        entries.into_iter().map(|e| (e.key, e.value)).collect();
    drop(first);

    let second = Harness::new(&[1000, 2000], RetryOptions::new(), &[]);
    let kv = second
        .driver
        .store(&second.nodes.stages[1].store.clone().unwrap(), 0)
        .unwrap();
    for (key, value) in &restored {
        match value {
            Some(v) => kv.put(key, v).unwrap(),
            None => {
                kv.delete(key).unwrap();
            }
        }
    }
    second.advance_to(START + 900);
    assert!(second.calls().is_empty(), "not before the due time");
    second.advance_to(START + 4000);
    assert_eq!(
        second.calls_of("down-r"),
        vec![(1, 2, START + 1000), (2, 3, START + 3000)]
    );
    assert_eq!(second.calls_of("flaky1-s"), vec![(1, 2, START + 1000)]);
    let dead = second.read("req-dlq");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].value.as_deref(), Some(&b"v-r"[..]));
    assert_eq!(header(&dead[0].headers, "trace").as_deref(), Some("t-r"));
    assert_eq!(header(&dead[0].headers, HEADER_ATTEMPT).as_deref(), Some("3"));

    // The second instance's changelog: every put is followed by its deletion.
    let log = second
        .driver
        .output_topic(&changelog, PendingKeySerde, NullableSerde(PendingRecordSerde))
        .read_records()
        .unwrap();
    let mut state: BTreeMap<PendingKey, i32> = BTreeMap::new();
    for e in &log {
        *state.entry(e.key).or_default() += if e.value.is_some() { 1 } else { -1 };
    }
    assert_eq!(state.len(), 2);
    assert!(state.values().all(|&n| n == 0), "{state:?}");
    assert_eq!(second.waiting(), 0);
}
