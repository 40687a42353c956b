//! The web-hook delivery through an async processor, against the real broker and a local
//! receiver that takes 20 ms per request.
//!
//! - In process: 4,000 requests over 200 users at concurrency 32 are all delivered, each
//!   exactly once, each user's in sequence order (checked by the receiver on arrival), and
//!   faster than one at a time could (more than 2x the sequential bound of 50/s).
//! - Across a SIGKILL: `webhook-async-delivery run` is killed once a quarter of 6,000
//!   requests arrived and started again; every request arrives (none lost), the duplicates
//!   (deliveries in flight or uncommitted at the kill) are counted and reported, and the
//!   first arrival of each user's requests is still in sequence order.
//!
//! Fresh topics and application ids; without a broker the tests say they were skipped
//! (`scripts/test.sh` always provides one).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use streams_core::processor::AsyncOptions;
use streams_core::{KafkaStreams, StreamsConfig};
use streams_examples::webhooks::receiver::{Receiver, always_ok};
use streams_examples::webhooks::{
    AsyncHttpDelivery, async_delivery_topology, delivery_report, load_requests,
};
use streams_test_utils::kafka;

mod common;

const DELAY: Duration = Duration::from_millis(20);

fn delivery() -> Arc<AsyncHttpDelivery> {
    Arc::new(AsyncHttpDelivery::new(
        Duration::from_secs(10),
        &[Duration::from_millis(100)],
    ))
}

/// Fresh request and dead-letter topics, a receiver taking [`DELAY`] per request, and
/// `per_user` requests for each of `users` users to it: (requests, dead letters, receiver,
/// requests written).
fn loaded(bootstrap: &str, users: u64, per_user: u64) -> (String, String, Receiver, u64) {
    let requests = kafka::unique_name("async-requests");
    let dead = kafka::unique_name("async-dead");
    kafka::create_topic(bootstrap, &requests, 2, &[]).unwrap();
    kafka::create_topic(bootstrap, &dead, 1, &[]).unwrap();
    let receiver = Receiver::start(always_ok()).unwrap();
    receiver.set_delay(DELAY);
    let n = load_requests(bootstrap, &requests, users, per_user, |u| {
        receiver.url(&format!("/users/{u}"))
    })
    .unwrap();
    (requests, dead, receiver, n)
}

#[test]
fn many_users_at_once_each_in_order_each_exactly_once() {
    let Some(bootstrap) = kafka::require_kafka("webhook_async_delivery in process") else {
        return;
    };
    let (requests, dead, receiver, n) = loaded(&bootstrap, 200, 20);
    let state = tempfile::tempdir().unwrap();
    let config = StreamsConfig::from_properties([
        ("application.id", kafka::unique_name("async-delivery")),
        ("bootstrap.servers", bootstrap.clone()),
        ("state.dir", state.path().display().to_string()),
    ])
    .unwrap();
    let topology = async_delivery_topology(&requests, &dead, delivery(), AsyncOptions::new(32)).unwrap();
    let mut app = KafkaStreams::new(topology, config).unwrap();
    app.start().unwrap();
    assert!(receiver.wait_for(Duration::from_secs(60), |r| !r.is_empty()));
    let started = Instant::now();
    assert!(
        receiver.wait_for(Duration::from_secs(120), |r| r.len() as u64 >= n),
        "{} of {n} delivered",
        receiver.count()
    );
    let took = started.elapsed();
    assert!(app.close(Duration::from_secs(30)));
    let report = delivery_report(&receiver.requests());
    let rate = n as f64 / took.as_secs_f64();
    println!("{n} deliveries in {took:?} ({rate:.0}/s, one at a time would be 50/s): {report:?}");
    assert_eq!(report.distinct as u64, n);
    assert_eq!(report.duplicated, 0);
    assert_eq!(
        report.out_of_order_users, 0,
        "a user's deliveries arrived out of order"
    );
    assert!(rate > 100.0, "{rate:.0}/s: deliveries did not run concurrently");
}

#[test]
fn a_sigkill_loses_no_delivery_and_keeps_each_users_order() {
    let Some(bootstrap) = kafka::require_kafka("webhook_async_delivery sigkill") else {
        return;
    };
    let (requests, dead, receiver, n) = loaded(&bootstrap, 300, 20);
    let app_id = kafka::unique_name("async-delivery");
    let state = tempfile::tempdir().unwrap();
    let start = || {
        Command::new(env!("CARGO_BIN_EXE_webhook-async-delivery"))
            .args(["--bootstrap-servers", &bootstrap, "run"])
            .args(["--requests", &requests, "--dead-letters", &dead])
            .args(["--application-id", &app_id, "--concurrency", "16"])
            .arg("--state-dir")
            .arg(state.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut child = start();
    assert!(
        receiver.wait_for(Duration::from_secs(120), |r| r.len() as u64 >= n / 4),
        "{} of {} delivered before the kill",
        receiver.count(),
        n / 4
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let at_kill = receiver.count();
    let mut child = start();
    let delivered = receiver.wait_for(Duration::from_secs(180), |r| {
        delivery_report(r).distinct as u64 >= n
    });
    common::send_signal(&child, "TERM");
    let exit = common::wait_exit(&mut child, Duration::from_secs(60));
    let report = delivery_report(&receiver.requests());
    println!("killed after {at_kill} deliveries; after the restart: {report:?} of {n}");
    assert!(
        delivered,
        "{} of {n} delivered after the restart: lost",
        report.distinct
    );
    assert!(
        exit.is_some_and(|e| e.success()),
        "the restarted instance did not stop cleanly: {exit:?}"
    );
    assert_eq!(report.distinct as u64, n);
    assert_eq!(
        report.out_of_order_users, 0,
        "a user's first deliveries arrived out of order"
    );
}
