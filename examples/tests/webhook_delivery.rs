//! The web-hook example against the real broker (skipped without one, see
//! `streams_test_utils::kafka::require_kafka`): the range join end to end, HTTP delivery
//! through the framework's retry ladder (`streams_dsl::retry`, a second streams
//! application) with a millisecond ladder to a local server that fails on purpose, the
//! dead-letter topic and its tool, a retry waiting for its delay while live traffic flows,
//! and a waiting retry surviving a restart through its store's changelog.
//!
//! Every test uses fresh topics, groups and application ids, and every wait is bounded.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use streams_core::serdes::StringSerde;
use streams_core::{KafkaStreams, State, StreamsConfig, Topology};
use streams_dsl::retry::retry_topology;
use streams_examples::admin::create_topics;
use streams_examples::retry::dlq::{DlqTool, ReplaySelection};
use streams_examples::retry::{
    Attempt, DeliveryCounters, HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, HEADER_ORIGINAL_TOPIC,
    HEADER_REPLAYED_FROM, RetryError, RetryLadder, RetryOptions, RetryRecord, production_ladder,
};
use streams_examples::webhooks::receiver::{Policy, ReceivedRequest, Receiver, always_ok};
use streams_examples::webhooks::{
    EventLog, PipelineConfig, WEB_HOOK_REQUESTS, WebHook, WebHookPipeline, WebHookProducer, WebHookRequest,
    WebHookTopics, delivery_topology, expected_requests, hook_key, topology,
};
use streams_test_utils::kafka::{self, ConsumeUntil, ProduceRecord};

const PARTITIONS: i32 = 3;
const WAIT: Duration = Duration::from_secs(90);

/// Fresh topic names for one test.
fn fresh_topics(test: &str) -> WebHookTopics {
    WebHookTopics::with_suffix(&format!("-{}", kafka::unique_name(test)))
}

/// The runtime's `poll.ms` in these tests: the task's wall clock, which due times count
/// from, is read once per pass of the stream thread's loop, so it can lag the real time by
/// about this (plus a commit).
const POLL_MS: u64 = 50;

/// Settings so groups form quickly on the test broker, and commits come often.
fn streams_properties() -> Vec<(String, String)> {
    [
        ("consumer.session.timeout.ms", "6000"),
        ("consumer.heartbeat.interval.ms", "500"),
        ("commit.interval.ms", "500"),
        ("poll.ms", &POLL_MS.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Starts `topology` as application `application_id` with its state in `state_dir`, and
/// waits until it runs.
fn start_app(
    bootstrap: &str,
    topology: Topology,
    application_id: &str,
    state_dir: &std::path::Path,
) -> KafkaStreams {
    let mut properties = streams_properties();
    properties.extend([
        ("application.id".to_owned(), application_id.to_owned()),
        ("bootstrap.servers".to_owned(), bootstrap.to_owned()),
        ("state.dir".to_owned(), state_dir.display().to_string()),
    ]);
    let mut app = KafkaStreams::new(topology, StreamsConfig::from_properties(properties).unwrap()).unwrap();
    app.start().unwrap();
    assert!(
        app.wait_for_state(State::Running, WAIT),
        "{application_id} is {:?}",
        app.state()
    );
    app
}

/// Waits until the join processed `n` records.
fn wait_processed(streams: &KafkaStreams, n: u64) {
    let deadline = Instant::now() + WAIT;
    while streams.processed_records() < n {
        assert!(
            Instant::now() < deadline,
            "the join processed {} of {n} records",
            streams.processed_records()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

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

/// One handler call: (instance, key, attempt number, stage, when).
type Call = (&'static str, String, u32, usize, Instant);

/// A handler that logs every call as made by `instance`, and fails the first attempt of
/// the keys `fail_first` accepts.
fn logging_handler(
    instance: &'static str,
    log: Arc<Mutex<Vec<Call>>>,
    fail_first: fn(&str) -> bool,
) -> impl Fn(&Attempt<'_, String, String>) -> Result<(), RetryError> + Send + Sync + 'static {
    move |a| {
        let key = a.key().clone();
        log.lock()
            .unwrap()
            .push((instance, key.clone(), a.number(), a.stage(), Instant::now()));
        if fail_first(&key) && a.number() == 1 {
            Err(RetryError::retriable("first attempt fails"))
        } else {
            Ok(())
        }
    }
}

/// Options counting the ladder's outcomes into `counters`, punctuating every 50 ms.
fn counted(counters: &DeliveryCounters) -> RetryOptions {
    let counters = counters.clone();
    RetryOptions::new()
        .punctuate_every(Duration::from_millis(50))
        .listener(move |e| counters.record(e))
}

#[test]
fn retries_wait_for_their_delay_without_blocking_live_traffic() {
    let Some(bootstrap) = kafka::require_kafka("retries_wait_for_their_delay_without_blocking_live_traffic")
    else {
        return;
    };
    let main = kafka::unique_name("live");
    let delay = Duration::from_secs(2);
    let ladder = RetryLadder::new(main.clone(), &[delay]);
    kafka::create_topic(&bootstrap, &main, 2, &[]).unwrap();
    for t in ladder.topics() {
        kafka::create_topic(&bootstrap, &t, 2, &[]).unwrap();
    }
    // "slow" fails its first attempt; every attempt is logged with its time.
    let log: Arc<Mutex<Vec<Call>>> = Arc::default();
    let counters = DeliveryCounters::new(&ladder);
    let topology = retry_topology(
        &ladder,
        StringSerde,
        StringSerde,
        logging_handler("a", log.clone(), |k| k == "slow"),
        &counted(&counters),
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut app = start_app(
        &bootstrap,
        topology,
        &kafka::unique_name("live-app"),
        state.path(),
    );
    let mut records = vec![ProduceRecord::new("slow", "x")];
    records.extend((0..50).map(|i| ProduceRecord::new(format!("live-{i}"), "x")));
    kafka::produce(&bootstrap, &main, &records, Duration::from_secs(30)).unwrap();

    let (stats, done) = counters.wait_for(WAIT, || app.state() == State::Running, |s| s.delivered() >= 51);
    assert!(done, "{stats:?}");
    // Anything extra (a repeated attempt) would show up by now.
    std::thread::sleep(Duration::from_millis(500));
    let log = log.lock().unwrap().clone();
    // Each record's attempts, by identity: the live ones once at the main topic, "slow"
    // twice, once per stage.
    let mut attempts: BTreeMap<String, Vec<(u32, usize)>> = BTreeMap::new();
    for (_, key, number, stage, _) in &log {
        attempts.entry(key.clone()).or_default().push((*number, *stage));
    }
    assert_eq!(attempts.len(), 51, "{attempts:?}");
    for i in 0..50 {
        assert_eq!(attempts[&format!("live-{i}")], [(1, 0)], "live-{i}");
    }
    assert_eq!(attempts["slow"], [(1, 0), (2, 1)]);
    let at = |key: &str, number: u32| {
        log.iter()
            .find(|(_, k, n, _, _)| k == key && *n == number)
            .map(|c| c.4)
            .unwrap()
    };
    let (first, retry) = (at("slow", 1), at("slow", 2));
    let last_live = log
        .iter()
        .filter(|c| c.1.starts_with("live-"))
        .map(|c| c.4)
        .max()
        .unwrap();
    assert!(last_live < retry, "live traffic finished while the retry waited");
    // The due time counts from the task's wall clock at the failure, read once per loop:
    // it may lag the real failure by about poll.ms and a commit (see streams_dsl::retry).
    let lag = Duration::from_millis(POLL_MS + 200);
    assert!(
        retry.duration_since(first) + lag >= delay,
        "retried after {:?}",
        retry - first
    );
    assert!(
        retry.duration_since(first) < delay + Duration::from_secs(5),
        "retried late: after {:?}",
        retry - first
    );
    let stats = counters.stats();
    assert_eq!(
        (
            stats.stages[0].delivered,
            stats.stages[0].retried,
            stats.stages[0].dead_lettered
        ),
        (50, 1, 0),
        "{stats:?}"
    );
    assert_eq!(
        (
            stats.stages[1].waits,
            stats.stages[1].delivered,
            stats.stages[1].retried
        ),
        (1, 1, 0),
        "the retry waited in the store once, then was delivered: {stats:?}"
    );
    // Closing while nothing waits is prompt.
    let closing = Instant::now();
    assert!(app.close(Duration::from_secs(30)));
    assert!(closing.elapsed() < Duration::from_secs(15));
}

/// A record waiting in a retry stage's store when its instance stops is attempted at its
/// due time by the next instance, which starts with an empty state directory and so can
/// only have it from the store's changelog: the retry topic's offset was committed with
/// the store, so the next instance does not read the record again.
#[test]
fn a_waiting_retry_survives_a_restart_through_its_changelog() {
    let Some(bootstrap) = kafka::require_kafka("a_waiting_retry_survives_a_restart_through_its_changelog")
    else {
        return;
    };
    let main = kafka::unique_name("restart");
    let delay = Duration::from_secs(6);
    let ladder = RetryLadder::new(main.clone(), &[delay]);
    for t in std::iter::once(main.clone()).chain(ladder.topics()) {
        kafka::create_topic(&bootstrap, &t, 2, &[]).unwrap();
    }
    let application_id = kafka::unique_name("restart-app");
    let log: Arc<Mutex<Vec<Call>>> = Arc::default();
    let fail_first: fn(&str) -> bool = |k| k.starts_with("retry-");
    let instance = |name: &'static str, counters: &DeliveryCounters| {
        retry_topology(
            &ladder,
            StringSerde,
            StringSerde,
            logging_handler(name, log.clone(), fail_first),
            &counted(counters),
        )
        .unwrap()
    };

    let first_counters = DeliveryCounters::new(&ladder);
    let first_state = tempfile::tempdir().unwrap();
    let mut first = start_app(
        &bootstrap,
        instance("first", &first_counters),
        &application_id,
        first_state.path(),
    );
    let records: Vec<ProduceRecord> = (0..4)
        .map(|i| ProduceRecord::new(format!("retry-{i}"), "x"))
        .collect();
    kafka::produce(&bootstrap, &main, &records, Duration::from_secs(30)).unwrap();
    let (stats, stored) = first_counters.wait_for(
        WAIT,
        || first.state() == State::Running,
        |s| s.stages[1].waits >= 4,
    );
    assert!(stored, "{stats:?}");
    let produced = Instant::now();
    assert!(first.close(Duration::from_secs(30)));
    assert!(
        produced.elapsed() < delay / 2,
        "the first instance must stop well before the retries are due"
    );
    drop(first_state);

    let second_counters = DeliveryCounters::new(&ladder);
    let second_state = tempfile::tempdir().unwrap();
    let mut second = start_app(
        &bootstrap,
        instance("second", &second_counters),
        &application_id,
        second_state.path(),
    );
    let (stats, done) =
        second_counters.wait_for(WAIT, || second.state() == State::Running, |s| s.delivered() >= 4);
    assert!(done, "{stats:?}");
    std::thread::sleep(Duration::from_millis(1000));
    assert!(second.close(Duration::from_secs(30)));

    let log = log.lock().unwrap().clone();
    for i in 0..4 {
        let key = format!("retry-{i}");
        let calls: Vec<(&str, u32, usize)> = log
            .iter()
            .filter(|c| c.1 == key)
            .map(|c| (c.0, c.2, c.3))
            .collect();
        assert_eq!(calls, [("first", 1, 0), ("second", 2, 1)], "{key}");
        let first_at = log.iter().find(|c| c.1 == key && c.2 == 1).unwrap().4;
        let retry_at = log.iter().find(|c| c.1 == key && c.2 == 2).unwrap().4;
        assert!(
            retry_at.duration_since(first_at) + Duration::from_millis(POLL_MS + 200) >= delay,
            "{key} retried after {:?}",
            retry_at - first_at
        );
    }
    let stats = second_counters.stats();
    assert_eq!(
        (
            stats.stages[0].delivered + stats.stages[0].retried,
            stats.stages[1].waits
        ),
        (0, 0),
        "the second instance read nothing again: {stats:?}"
    );
    assert_eq!(stats.stages[1].delivered, 4, "{stats:?}");
}

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

/// docs/examples.md shows the join's and the delivery's topologies exactly as
/// `describe()` prints them.
#[test]
fn docs_show_the_current_webhook_topology() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/examples.md")).unwrap();
    let join = topology(&WebHookTopics::default())
        .unwrap()
        .describe()
        .to_string();
    assert!(
        docs.contains(join.trim_end()),
        "update docs/examples.md with:\n{join}"
    );
    let delivery = delivery_topology(
        &production_ladder(WEB_HOOK_REQUESTS),
        Duration::from_secs(10),
        &RetryOptions::new(),
    )
    .unwrap()
    .describe()
    .to_string();
    assert!(
        docs.contains(delivery.trim_end()),
        "update docs/examples.md with:\n{delivery}"
    );
}
