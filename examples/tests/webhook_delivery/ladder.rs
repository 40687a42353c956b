//! The retry ladder's timing on the broker: a retry waits for its delay without holding up
//! live traffic, and a waiting retry survives a restart through its store's changelog.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use streams_core::serdes::StringSerde;
use streams_core::{KafkaStreams, State, StreamsConfig, Topology};
use streams_dsl::retry::retry_topology;
use streams_examples::retry::{Attempt, DeliveryCounters, RetryError, RetryLadder, RetryOptions};
use streams_test_utils::kafka::{self, ProduceRecord};

use crate::{POLL_MS, WAIT, streams_properties};

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
