//! `/health/live` and `/health/ready` through a restore and a rebalance, against the real
//! broker: liveness answers 200 all along; readiness answers 503 while the instance restores
//! state or rebalances, and 200 once every task runs.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use streams_core::{KafkaStreams, State, StreamsConfig};
use streams_test_utils::kafka::{self, ProduceRecord};

mod common;

/// Entries written to the store's changelog before the first start: a fresh state
/// directory restores all of them, long enough for probes to see it.
const CHANGELOG_ENTRIES: u64 = 300_000;

fn config(bootstrap: &str, app: &str, dir: &Path) -> StreamsConfig {
    StreamsConfig::from_properties([
        ("application.id", app),
        ("bootstrap.servers", bootstrap),
        ("state.dir", &dir.display().to_string()),
        ("metrics.address", "127.0.0.1:0"),
        ("consumer.session.timeout.ms", "6000"),
        ("consumer.heartbeat.interval.ms", "500"),
    ])
    .unwrap()
}

/// What the probes answered while an instance came to `Running`.
#[derive(Default, Debug)]
struct Seen {
    live_not_ok: Vec<u16>,
    ready_503: usize,
    ready_503_while_restoring: usize,
    ready_ok_at_end: bool,
}

/// Polls `address`'s probes until readiness has answered 200 for two seconds (after having
/// answered 503 at least once, if `after_unready`), or `limit` passes. With
/// `scrape_restores`, each 503 is paired with a scrape of the restore gauge.
fn watch(address: SocketAddr, limit: Duration, scrape_restores: bool, after_unready: bool) -> Seen {
    let mut seen = Seen::default();
    let deadline = Instant::now() + limit;
    let mut ok_since: Option<Instant> = None;
    while Instant::now() < deadline {
        let (live, _) = common::http_get(address, "/health/live");
        if live != 200 {
            seen.live_not_ok.push(live);
        }
        let (ready, _) = common::http_get(address, "/health/ready");
        if ready == 200 {
            let since = *ok_since.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(2) && (!after_unready || seen.ready_503 > 0) {
                seen.ready_ok_at_end = true;
                return seen;
            }
        } else {
            ok_since = None;
            assert_eq!(ready, 503, "readiness answers 200 or 503");
            seen.ready_503 += 1;
            if scrape_restores {
                let (_, metrics) = common::http_get(address, "/metrics");
                if common::metric_sum(&metrics, "streams_task_restore_remaining_records", &[]) > 0.0 {
                    seen.ready_503_while_restoring += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    seen
}

#[test]
fn readiness_follows_restores_and_rebalances_while_liveness_stays_up() {
    let test = "readiness_follows_restores_and_rebalances_while_liveness_stays_up";
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let app_id = kafka::unique_name("probes-app");
    let input = kafka::unique_name("probes-words");
    let output = kafka::unique_name("probes-counts");
    kafka::create_topic(&bootstrap, &input, 2, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 2, &[]).unwrap();
    // The store's changelog, filled before the application ever runs.
    let changelog = format!("{app_id}-counts-changelog");
    kafka::create_topic(&bootstrap, &changelog, 2, &[("cleanup.policy", "compact")]).unwrap();
    let entries: Vec<ProduceRecord> = (0..CHANGELOG_ENTRIES)
        .map(|i| ProduceRecord::new(format!("key-{i}"), 1u64.to_be_bytes()))
        .collect();
    for chunk in entries.chunks(50_000) {
        kafka::produce(&bootstrap, &changelog, chunk, Duration::from_secs(120)).unwrap();
    }

    // A restore: liveness up, readiness 503 while the store is restored.
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = KafkaStreams::new(
        common::count_topology(&input, &output),
        config(&bootstrap, &app_id, dir_a.path()),
    )
    .unwrap();
    a.start().unwrap();
    let address_a = a.metrics_address().expect("metrics endpoint of A");
    let restore = watch(address_a, Duration::from_secs(120), true, false);
    eprintln!("{test}: restore: {restore:?}");
    assert!(
        restore.live_not_ok.is_empty(),
        "liveness failed during the restore: {restore:?}"
    );
    assert!(
        restore.ready_503_while_restoring > 0,
        "readiness never answered 503 while restore_remaining_records > 0: {restore:?}"
    );
    assert!(restore.ready_ok_at_end, "A never became ready: {restore:?}");
    assert_eq!(a.state(), State::Running);

    // A rebalance: B joins; A's readiness drops while its tasks move, then comes back.
    let mut b = KafkaStreams::new(
        common::count_topology(&input, &output),
        config(&bootstrap, &app_id, dir_b.path()),
    )
    .unwrap();
    b.start().unwrap();
    let rebalance = watch(address_a, Duration::from_secs(120), false, true);
    eprintln!("{test}: rebalance: {rebalance:?}");
    assert!(
        rebalance.live_not_ok.is_empty(),
        "liveness failed during the rebalance: {rebalance:?}"
    );
    assert!(
        rebalance.ready_503 > 0,
        "A stayed ready through the rebalance: {rebalance:?}"
    );
    assert!(
        rebalance.ready_ok_at_end,
        "A did not become ready again: {rebalance:?}"
    );
    let address_b = b.metrics_address().expect("metrics endpoint of B");
    assert!(
        watch(address_b, Duration::from_secs(120), false, false).ready_ok_at_end,
        "B ready"
    );

    assert!(b.close(Duration::from_secs(30)));
    assert!(a.close(Duration::from_secs(30)));
}
