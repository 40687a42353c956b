//! The whole pipeline: HTTP delivery through the retry ladder to a server that fails on
//! purpose, dead letters, and their replay once the server recovers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use streams_core::State;
use streams_examples::admin::create_topics;
use streams_examples::retry::dlq::{DlqTool, ReplaySelection};
use streams_examples::retry::{HEADER_NEXT_AT, HEADER_ORIGINAL_TOPIC, RetryOptions, RetryRecord};
use streams_examples::webhooks::receiver::{Policy, ReceivedRequest, Receiver, always_ok};
use streams_examples::webhooks::{
    EventLog, PipelineConfig, WebHook, WebHookPipeline, WebHookProducer, WebHookRequest, expected_requests,
};
use streams_test_utils::kafka;

use crate::{PARTITIONS, WAIT, fresh_topics, streams_properties, wait_processed};

/// A delivery's identity: the hook and the event's `seq`.
fn delivery_id(r: &ReceivedRequest) -> (u64, u64) {
    let hook = r
        .header("x-webhook-id")
        .and_then(|h| h.parse().ok())
        .expect("x-webhook-id");
    let seq = r.json().and_then(|b| b["seq"].as_u64()).expect("seq in the body");
    (hook, seq)
}

fn request_of(r: &RetryRecord) -> WebHookRequest {
    serde_json::from_slice(r.value.as_deref().expect("a value")).expect("a WebHookRequest")
}

#[test]
fn deliveries_retry_dead_letter_and_replay_exactly_once() {
    let Some(bootstrap) = kafka::require_kafka("deliveries_retry_dead_letter_and_replay_exactly_once") else {
        return;
    };
    // /down fails every request, /flaky 30% of them (sequence numbers ending in 0, 1, 2).
    let failing: Policy = Arc::new(|path: &str, seq: u64| match path {
        "/down" => 503,
        "/flaky" if seq % 10 < 3 => 500,
        _ => 200,
    });
    let receiver = Receiver::start(failing).unwrap();
    let topics = fresh_topics("delivery");
    let state = tempfile::tempdir().unwrap();
    let delays = [
        Duration::from_millis(50),
        Duration::from_millis(100),
        Duration::from_millis(200),
    ];
    let mut config = PipelineConfig::new(kafka::unique_name("webhooks"), state.path())
        .with_topics(topics.clone())
        .with_delays(&delays);
    config.retry = RetryOptions::new().punctuate_every(Duration::from_millis(20));
    config.http_timeout = Duration::from_secs(5);
    config.streams_properties = streams_properties();
    let ladder = config.ladder.clone();
    assert_eq!(ladder.max_attempts(), 4);
    create_topics(&bootstrap, &config.all_topics(), PARTITIONS).unwrap();
    let pipeline = WebHookPipeline::start(&bootstrap, config).unwrap();
    for app in [pipeline.streams(), pipeline.delivery()] {
        assert!(app.wait_for_state(State::Running, WAIT), "{:?}", app.state());
    }

    let mut hooks = Vec::new();
    for user in 1..=6u64 {
        for (n, event_id, path) in [(1, 1, "/ok"), (2, 1, "/flaky"), (3, 1, "/down"), (4, 2, "/flaky")] {
            hooks.push(WebHook {
                webhook_id: user * 10 + n,
                user_id: user,
                event_id,
                url: receiver.url(path),
            });
        }
    }
    let producer = WebHookProducer::new(&bootstrap, topics.clone()).unwrap();
    for h in &hooks {
        producer.upsert(h).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    wait_processed(pipeline.streams(), hooks.len() as u64);
    let events: Vec<EventLog> = (0..24u64)
        .map(|seq| EventLog {
            user_id: seq % 6 + 1,
            event_id: seq % 2 + 1,
            payload: json!({ "seq": seq }),
        })
        .collect();
    for e in &events {
        producer.event(e).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();

    // Each expected delivery: (hook, event seq) -> the hook's path.
    let expected: BTreeMap<(u64, u64), String> = expected_requests(&hooks, &[], &events)
        .into_iter()
        .map(|(hook, i)| {
            let h = hooks.iter().find(|h| h.webhook_id == hook).unwrap();
            (
                (hook, i as u64),
                format!("/{}", h.url.rsplit('/').next().unwrap()),
            )
        })
        .collect();
    let n = expected.len() as u64;
    assert_eq!(n, 12 * 3 + 12);
    let (stats, done) = pipeline.wait_for(WAIT, |s| s.finished() >= n);
    assert!(done, "{n} requests expected to finish: {stats:?}");
    // Let anything extra (a duplicate) show up before counting.
    std::thread::sleep(Duration::from_millis(1000));
    let stats = pipeline.stats();
    assert_eq!(stats.finished(), n, "{stats:?}");

    let dead = DlqTool::new(&bootstrap, ladder.dead_letter()).with_group(kafka::unique_name("dlq-tool"));
    let letters = dead.list(false).unwrap();
    assert_eq!(letters.len() as u64, stats.dead_lettered());
    let mut dead_ids = BTreeSet::new();
    for d in &letters {
        let r = &d.record;
        assert!(!d.handled);
        assert_eq!(r.attempt(), ladder.max_attempts(), "{r:?}");
        assert_eq!(
            r.header_str(HEADER_ORIGINAL_TOPIC),
            Some(topics.requests.as_str())
        );
        assert!(r.last_error().is_some_and(|e| e.contains("HTTP 5")), "{r:?}");
        assert!(r.header_str(HEADER_NEXT_AT).is_none());
        let req = request_of(r);
        assert!(
            dead_ids.insert((req.webhook_id, req.payload["seq"].as_u64().unwrap())),
            "dead-lettered twice: {r:?}"
        );
    }

    let received = receiver.requests();
    let mut successes: HashMap<(u64, u64), usize> = HashMap::new();
    let mut attempts: HashMap<(u64, u64), usize> = HashMap::new();
    for r in &received {
        let id = delivery_id(r);
        assert!(expected.contains_key(&id), "unexpected request {id:?}");
        *attempts.entry(id).or_default() += 1;
        if r.succeeded() {
            *successes.entry(id).or_default() += 1;
        }
    }
    for (id, path) in &expected {
        let ok = successes.get(id).copied().unwrap_or(0);
        let tried = attempts.get(id).copied().unwrap_or(0);
        if dead_ids.contains(id) {
            assert_eq!(ok, 0, "{id:?} ({path}) both delivered and dead-lettered");
            assert_eq!(tried, 4, "{id:?} ({path}) dead-lettered after {tried} attempts");
        } else {
            assert_eq!(ok, 1, "{id:?} ({path}) delivered {ok} times");
        }
        match path.as_str() {
            "/ok" => assert_eq!(tried, 1, "{id:?}: /ok needs one attempt"),
            "/down" => assert!(dead_ids.contains(id), "{id:?}: /down must be dead-lettered"),
            _ => {}
        }
    }
    let flaky_retried = expected
        .iter()
        .filter(|(id, p)| *p == "/flaky" && attempts[*id] > 1)
        .count();
    assert!(flaky_retried > 0, "some /flaky deliveries needed a retry");
    // The retry topics were used in order: every stage saw traffic.
    assert!(
        stats
            .stages
            .iter()
            .skip(1)
            .all(|s| s.delivered + s.retried + s.dead_lettered > 0),
        "{stats:?}"
    );

    // The receiver recovers; the dead letters are replayed into the first retry topic.
    receiver.set_policy(always_ok());
    let report = dead.replay(ladder.replay_topic(), &ReplaySelection::All).unwrap();
    assert_eq!(report.replayed.len(), letters.len());
    let all_delivered = |reqs: &[ReceivedRequest]| {
        let ok: BTreeSet<(u64, u64)> = reqs.iter().filter(|r| r.succeeded()).map(delivery_id).collect();
        expected.keys().all(|id| ok.contains(id))
    };
    assert!(
        receiver.wait_for(WAIT, all_delivered),
        "replayed dead letters were not delivered"
    );
    // A second replay finds nothing: the tool tracked its offsets.
    let again = dead.replay(ladder.replay_topic(), &ReplaySelection::All).unwrap();
    assert!(again.replayed.is_empty(), "{again:?}");
    assert!(dead.list(false).unwrap().is_empty());
    std::thread::sleep(Duration::from_millis(1000));
    let mut successes: HashMap<(u64, u64), usize> = HashMap::new();
    for r in receiver.requests().iter().filter(|r| r.succeeded()) {
        *successes.entry(delivery_id(r)).or_default() += 1;
    }
    for id in expected.keys() {
        assert_eq!(
            successes.get(id),
            Some(&1),
            "{id:?} must be delivered exactly once in the end"
        );
    }
    let replayed_attempts: Vec<String> = receiver
        .requests()
        .iter()
        .filter(|r| dead_ids.contains(&delivery_id(r)) && r.succeeded())
        .filter_map(|r| r.header("x-webhook-attempt").map(str::to_owned))
        .collect();
    assert!(
        replayed_attempts.iter().all(|a| a == "1"),
        "a replay resets the attempt count: {replayed_attempts:?}"
    );
    pipeline.close(Duration::from_secs(30)).unwrap();
}
