//! The Grafana dashboard (`docs/grafana-dashboard.json`) against a running application: every
//! panel must show data.
//!
//! `count-app` runs as a child process under `exactly_once_v2` with two stream threads,
//! `--metrics-recording-level DEBUG` and `--metrics-address` on a free port, while records
//! flow into its input (a keyed count over a cached, logged RocksDB store: store gets and
//! puts, cache flushes, commits every 100 ms). A real Prometheus (`scripts/prometheus.sh
//! ensure` finds it, or installs Debian's package) scrapes it every second from a temporary
//! directory and port of its own, and is stopped at the end, also when the test fails.
//!
//! Each panel's queries (`targets[].expr`) are evaluated with Prometheus' `/api/v1/query`,
//! the dashboard's variables substituted as Grafana does: a query variable by a value its
//! own `label_values(...)` query offers (the application's id; the value must be offered),
//! a multi-value variable with "All" by its `allValue` (`.*`), `$__rate_interval` by `1m`.
//! A panel passes when at least one of its queries returns a series with a value that is a
//! number (a histogram quantile over a window without observations is NaN, which Grafana
//! draws as nothing). Until every panel passes the test evaluates again every 2 s; after
//! [`DATA_LIMIT`] it fails with a table of every panel, query and series count. A query
//! Prometheus rejects, a panel without queries, a variable it does not know, or a
//! Prometheus that is missing or does not start fail the test at once.
//!
//! Without a broker it is skipped like the other Kafka tests, but only after Prometheus was
//! found: a machine without it fails.
//!
//! Reading the dashboard is in `dashboard`, the Prometheus of the test in `prometheus`, the
//! application and its input in `app`, evaluating the panels in `evaluation`.

use std::time::{Duration, Instant};

use serde_json::Value;
use streams_test_utils::kafka;

#[path = "grafana_dashboard/app.rs"]
mod app;
mod common;
#[path = "grafana_dashboard/dashboard.rs"]
mod dashboard;
#[path = "grafana_dashboard/evaluation.rs"]
mod evaluation;
#[path = "grafana_dashboard/prometheus.rs"]
mod prometheus;

use app::{App, Feeder};
use common::CountTopics;
use dashboard::{panels, variables};
use evaluation::Evaluation;
use prometheus::{Prometheus, free_port, get, prometheus_binary, tail};

/// The dashboard under test.
const DASHBOARD: &str = include_str!("../../docs/grafana-dashboard.json");
/// What `$__rate_interval` (and `$__interval`) become: at a 1 s scrape interval a minute
/// holds plenty of samples, and the first two already give a rate.
const RATE_INTERVAL: &str = "1m";
/// Prometheus' scrape interval.
const SCRAPE_INTERVAL: &str = "1s";
/// How long every panel has to show data once the application serves metrics.
const DATA_LIMIT: Duration = Duration::from_secs(90);
/// How long Prometheus and the application each have to start.
const START_LIMIT: Duration = Duration::from_secs(60);

/// Input keys: each is counted many times (store gets and puts of existing keys).
const KEYS: usize = 50;

#[test]
fn every_dashboard_panel_shows_data() {
    let test = "every_dashboard_panel_shows_data";
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("docs/grafana-dashboard.json is JSON");
    let panels = panels(&dashboard);
    let variables = variables(&dashboard);
    assert!(!panels.is_empty(), "the dashboard has no panel with a query");
    // Prometheus first: a machine without it fails, with or without a broker.
    let binary = prometheus_binary();
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let started = Instant::now();

    let application_id = kafka::unique_name("dashboard-app");
    let topics = CountTopics::create(&bootstrap, "dashboard", 2, false);
    let state = tempfile::tempdir().expect("a state dir");
    let metrics_address = format!("127.0.0.1:{}", free_port());
    let prometheus = Prometheus::start(&binary, &metrics_address);
    let feeder = Feeder::start(&bootstrap, &topics.input);
    let mut app = App(
        common::count_app(&bootstrap, &application_id, &topics, state.path())
            .args(["--guarantee", "exactly_once_v2", "--threads", "2"])
            .args(["--metrics-address", &metrics_address])
            .args(["--metrics-recording-level", "DEBUG"])
            .spawn()
            .expect("start count-app"),
    );

    // The application serves its metrics.
    let metrics_url = format!("http://{metrics_address}/metrics");
    let deadline = Instant::now() + START_LIMIT;
    while !matches!(get(&prometheus.agent, &metrics_url, &[]), Ok((200, _))) {
        if let Some(status) = app.0.try_wait().expect("wait for count-app") {
            panic!("count-app exited before serving its metrics: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "count-app served no metrics at {metrics_url} within {START_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let deadline = Instant::now() + DATA_LIMIT;
    let evaluation = loop {
        if let Some(status) = app.0.try_wait().expect("wait for count-app") {
            panic!("count-app exited while the dashboard was evaluated: {status}");
        }
        let evaluation = Evaluation::run(&prometheus, &panels, &variables, &application_id);
        if let Some(error) = evaluation.fatal() {
            panic!(
                "Prometheus rejects a query of the dashboard: {error}\n{}",
                evaluation.table(&panels)
            );
        }
        if evaluation.all_show_data() {
            break evaluation;
        }
        if Instant::now() >= deadline {
            panic!(
                "not every panel of docs/grafana-dashboard.json shows data after {DATA_LIMIT:?} of \
                 count-app at DEBUG under exactly_once_v2:\n{}\nPrometheus' target: {}\n\
                 Prometheus' log:\n{}",
                evaluation.table(&panels),
                prometheus.targets(),
                tail(&prometheus.log, 10)
            );
        }
        std::thread::sleep(Duration::from_secs(2));
    };
    eprint!("{}", evaluation.table(&panels));
    eprintln!(
        "{test}: every one of the {} panels shows data, {:.1?} after the start",
        panels.len(),
        started.elapsed()
    );

    // A clean stop: the end of standard input closes the application.
    drop(feeder);
    drop(app.0.stdin.take());
    let exit = common::wait_exit(&mut app.0, Duration::from_secs(30));
    assert!(
        exit.is_some_and(|s| s.success()),
        "count-app did not close cleanly within 30 s of its stdin closing: {exit:?}"
    );
}
