//! The range join of web hooks and events end to end: one request per matching hook.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;
use streams_core::{KafkaStreams, StreamsConfig};
use streams_examples::webhooks::{
    EventLog, WebHook, WebHookProducer, WebHookRequest, expected_requests, hook_key, topology,
};
use streams_test_utils::kafka::{self, ConsumeUntil};

use crate::{PARTITIONS, WAIT, fresh_topics, streams_properties, wait_processed};

#[test]
fn join_emits_one_request_per_matching_hook_on_kafka() {
    let Some(bootstrap) = kafka::require_kafka("join_emits_one_request_per_matching_hook_on_kafka") else {
        return;
    };
    let topics = fresh_topics("join");
    for t in [&topics.web_hooks, &topics.event_logs, &topics.requests] {
        kafka::create_topic(&bootstrap, t, PARTITIONS, &[]).unwrap();
    }
    let state = tempfile::tempdir().unwrap();
    let mut properties = streams_properties();
    properties.extend([
        ("application.id".to_owned(), kafka::unique_name("webhook-join")),
        ("bootstrap.servers".to_owned(), bootstrap.clone()),
        ("state.dir".to_owned(), state.path().display().to_string()),
    ]);
    let mut app = KafkaStreams::new(
        topology(&topics).unwrap(),
        StreamsConfig::from_properties(properties).unwrap(),
    )
    .unwrap();
    app.start().unwrap();

    // Users 1, 10 and 11 share the unpadded prefix "1": the padding keeps them apart.
    let mut hooks = Vec::new();
    for user in [1u64, 2, 10, 11] {
        for (n, event_id) in [(1, 100), (2, 100), (3, 200), (4, 100)] {
            let url = format!("http://example.invalid/{user}/{n}");
            hooks.push(WebHook {
                webhook_id: user * 100 + n,
                user_id: user,
                event_id,
                url,
            });
        }
    }
    let deleted = vec![(10, 1002)];
    let producer = WebHookProducer::new(&bootstrap, topics.clone()).unwrap();
    assert_eq!(producer.partitions(), PARTITIONS);
    for h in &hooks {
        producer.upsert(h).unwrap();
    }
    for &(u, id) in &deleted {
        producer.delete(u, id).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    wait_processed(&app, (hooks.len() + deleted.len()) as u64);

    let events: Vec<EventLog> = [(1, 100), (10, 100), (11, 200), (2, 300), (3, 100), (1, 200)]
        .iter()
        .enumerate()
        .map(|(seq, &(user_id, event_id))| EventLog {
            user_id,
            event_id,
            payload: json!({ "seq": seq }),
        })
        .collect();
    for e in &events {
        producer.event(e).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();

    let expected = expected_requests(&hooks, &deleted, &events);
    assert_eq!(expected.len(), 3 + 2 + 1 + 1, "{expected:?}");
    let out = kafka::consume_all(
        &bootstrap,
        &topics.requests,
        ConsumeUntil::Count(expected.len()),
        WAIT,
        false,
    )
    .unwrap();
    // Nothing more arrives.
    let out_all = kafka::consume_all(
        &bootstrap,
        &topics.requests,
        ConsumeUntil::Idle(Duration::from_secs(2)),
        WAIT,
        false,
    )
    .unwrap();
    assert_eq!(out_all.len(), out.len());
    app.close(Duration::from_secs(30));

    let mut got: Vec<(u64, usize)> = Vec::new();
    let mut ids = BTreeSet::new();
    for r in &out {
        let req: WebHookRequest = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
        assert_eq!(r.key_str().unwrap(), hook_key(req.user_id, req.webhook_id));
        let seq = req.payload["seq"].as_u64().unwrap() as usize;
        assert_eq!(events[seq].user_id, req.user_id);
        assert_eq!(events[seq].event_id, req.event_id);
        assert!(
            ids.insert(req.request_id.clone()),
            "request ids are unique: {}",
            req.request_id
        );
        got.push((req.webhook_id, seq));
    }
    got.sort_unstable();
    let mut want = expected;
    want.sort_unstable();
    assert_eq!(got, want);
}
