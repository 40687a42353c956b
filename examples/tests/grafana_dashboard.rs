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

use std::fmt::Write as _;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use streams_test_utils::kafka::{self, ProduceRecord};

mod common;

use common::CountTopics;

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
/// How [`substitute`] says a variable is left.
const UNKNOWN_VARIABLE: &str = "unknown variable";
/// Input keys: each is counted many times (store gets and puts of existing keys).
const KEYS: usize = 50;

/// One panel of the dashboard with its queries, as written (variables not substituted).
#[derive(Debug)]
struct Panel {
    title: String,
    exprs: Vec<String>,
}

/// Every panel but rows and text panels (which show no query), nested panels included, in
/// dashboard order. A panel of another type without a query fails the test.
fn panels(dashboard: &Value) -> Vec<Panel> {
    fn walk(list: &[Value], out: &mut Vec<Panel>) {
        for p in list {
            let kind = p["type"].as_str().unwrap_or_default();
            let title = p["title"].as_str().unwrap_or_default().to_owned();
            if let Some(nested) = p["panels"].as_array() {
                walk(nested, out);
            }
            if matches!(kind, "row" | "text") {
                continue;
            }
            let exprs: Vec<String> = p["targets"]
                .as_array()
                .map(|targets| {
                    targets
                        .iter()
                        .filter_map(|t| t["expr"].as_str())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            assert!(
                !exprs.is_empty(),
                "panel {title:?} ({kind}) has no PromQL query (targets[].expr): it can never show data"
            );
            out.push(Panel { title, exprs });
        }
    }
    let mut out = Vec::new();
    walk(
        dashboard["panels"]
            .as_array()
            .expect("the dashboard has a panels array"),
        &mut out,
    );
    out
}

/// A query variable of the dashboard: `label_values(<selector>, <label>)`.
#[derive(Debug)]
struct Variable {
    name: String,
    label: String,
    /// The series selector, variables not substituted; `None` for `label_values(<label>)`.
    selector: Option<String>,
    /// What "All" stands for, where the variable offers it.
    all_value: Option<String>,
}

/// The dashboard's template variables that queries can use. Data-source variables are left
/// out (they pick Prometheus, not a value); any type other than `query` fails the test, so
/// a variable added later gets a substitution here.
fn variables(dashboard: &Value) -> Vec<Variable> {
    let list = dashboard["templating"]["list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for v in list {
        let name = v["name"].as_str().expect("a variable has a name").to_owned();
        match v["type"].as_str().unwrap_or_default() {
            "datasource" => continue,
            "query" => {}
            other => panic!("variable {name}: type {other:?} is not substituted by this test yet"),
        }
        let definition = v["definition"]
            .as_str()
            .or_else(|| v["query"]["query"].as_str())
            .or_else(|| v["query"].as_str())
            .unwrap_or_default()
            .trim();
        let args = definition
            .strip_prefix("label_values(")
            .and_then(|rest| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable {name}: {definition:?} is not label_values(...)"));
        let (selector, label) = match args.rsplit_once(',') {
            Some((selector, label)) => (Some(selector.trim().to_owned()), label.trim().to_owned()),
            None => (None, args.trim().to_owned()),
        };
        let all_value = (v["includeAll"].as_bool() == Some(true))
            .then(|| v["allValue"].as_str().map(str::to_owned))
            .flatten();
        out.push(Variable {
            name,
            label,
            selector,
            all_value,
        });
    }
    out
}

/// `text` with each `$name` and `${name}` of `values` replaced; fails on a variable left.
fn substitute(text: &str, values: &[(String, String)]) -> Result<String, String> {
    let mut sorted: Vec<&(String, String)> = values.iter().collect();
    // Longer names first, so `$a` never eats the start of `$ab`.
    sorted.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    let mut out = text.to_owned();
    for (name, value) in sorted {
        out = out.replace(&format!("${{{name}}}"), value);
        out = out.replace(&format!("${name}"), value);
    }
    match out.find('$') {
        Some(at) => Err(format!("{UNKNOWN_VARIABLE} at {:?} in {text:?}", &out[at..])),
        None => Ok(out),
    }
}

/// A port free now on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .http_status_as_error(false)
            .build(),
    )
}

/// GET `url` with `query`: the status and the body, or why there was no answer.
fn get(agent: &ureq::Agent, url: &str, query: &[(&str, &str)]) -> Result<(u16, String), String> {
    let mut request = agent.get(url);
    for (k, v) in query {
        request = request.query(*k, *v);
    }
    let mut response = request.call().map_err(|e| format!("GET {url}: {e}"))?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("GET {url}: reading the body: {e}"))?;
    Ok((status, body))
}

/// The last `lines` lines of the file at `path` (for failure messages).
fn tail(path: &Path, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The Prometheus binary, from `scripts/prometheus.sh ensure` (which installs Debian's
/// package where none is found). Fails the test when there is none.
fn prometheus_binary() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/prometheus.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg("ensure")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run bash {}: {e}", script.display()));
    let path = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned();
    assert!(
        out.status.success() && !path.is_empty(),
        "no Prometheus to evaluate the dashboard's queries with: `bash {} ensure` failed ({}; its \
         message is above). The dashboard test needs a real PromQL engine: install Debian's \
         `prometheus` package, or set PROMETHEUS_BIN to a Prometheus 2.x binary.",
        script.display(),
        out.status
    );
    PathBuf::from(path)
}

/// A Prometheus of this test: its own temp dir (config, data, log) and port; stopped when
/// dropped.
struct Prometheus {
    child: Child,
    url: String,
    log: PathBuf,
    agent: ureq::Agent,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts `binary` scraping `target` (`host:port`, path `/metrics`) every second, and
    /// waits until it is ready. Fails the test when it exits or is not ready in time.
    fn start(binary: &Path, target: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("grafana-dashboard-prometheus-")
            .tempdir()
            .expect("a temp dir for Prometheus");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: {SCRAPE_INTERVAL}\n  scrape_timeout: {SCRAPE_INTERVAL}\n\
                 scrape_configs:\n  - job_name: streams\n    metrics_path: /metrics\n    \
                 static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("write the Prometheus config");
        let log = dir.path().join("prometheus.log");
        let log_file = std::fs::File::create(&log).expect("create the Prometheus log");
        let address = format!("127.0.0.1:{}", free_port());
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("clone the log file"))
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("start Prometheus ({}): {e}", binary.display()));
        let mut prometheus = Self {
            child,
            url: format!("http://{address}"),
            log,
            agent: agent(),
            _dir: dir,
        };
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if let Some(status) = prometheus.child.try_wait().expect("wait for Prometheus") {
                panic!(
                    "Prometheus exited at start ({status}); its log:\n{}",
                    tail(&prometheus.log, 30)
                );
            }
            if let Ok((200, _)) = get(&prometheus.agent, &format!("{}/-/ready", prometheus.url), &[]) {
                return prometheus;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus was not ready within {START_LIMIT:?}; its log:\n{}",
                tail(&prometheus.log, 30)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `/api/v1/...` with `query`: the `data` of a successful answer, or Prometheus' error.
    fn api(&self, path: &str, query: &[(&str, &str)]) -> Result<Value, String> {
        let (status, body) = get(&self.agent, &format!("{}/api/v1/{path}", self.url), query)?;
        let answer: Value =
            serde_json::from_str(&body).map_err(|e| format!("HTTP {status}, not JSON ({e}): {body}"))?;
        if answer["status"] == "success" {
            Ok(answer["data"].clone())
        } else {
            Err(format!(
                "{}: {}",
                answer["errorType"].as_str().unwrap_or("error"),
                answer["error"].as_str().unwrap_or(&body)
            ))
        }
    }

    /// The instant query `expr` now.
    fn query(&self, expr: &str) -> Result<Answer, String> {
        let data = self.api("query", &[("query", expr)])?;
        let result = match data["resultType"].as_str() {
            Some("vector" | "matrix") => data["result"].as_array().cloned().unwrap_or_default(),
            Some("scalar") => vec![serde_json::json!({ "value": data["result"] })],
            other => return Err(format!("unexpected result type {other:?}")),
        };
        let numbers: Vec<f64> = result
            .iter()
            .filter_map(|s| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()))
            .filter(|v| !v.is_nan())
            .collect();
        Ok(Answer {
            series: result.len(),
            numbers: numbers.len(),
            max: numbers.into_iter().reduce(f64::max),
        })
    }

    /// The values of `label` on the series `selector` matches (Grafana's `label_values`).
    fn label_values(&self, label: &str, selector: Option<&str>) -> Result<Vec<String>, String> {
        let query: Vec<(&str, &str)> = selector.map(|s| ("match[]", s)).into_iter().collect();
        let data = self.api(&format!("label/{label}/values"), &query)?;
        Ok(data
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default())
    }

    /// The scrape target's health and last error, for failure messages.
    fn targets(&self) -> String {
        match self.api("targets", &[]) {
            Ok(data) => data["activeTargets"]
                .as_array()
                .map(|targets| {
                    targets
                        .iter()
                        .map(|t| format!("{} {} {}", t["scrapeUrl"], t["health"], t["lastError"]))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default(),
            Err(e) => e,
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The application under test; killed when dropped unless it was stopped.
struct App(Child);

impl Drop for App {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Records keep flowing into the input until dropped: a first batch, then a few hundred
/// every half second, so every rate over the last minute moves.
struct Feeder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Feeder {
    fn start(bootstrap: &str, topic: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (bootstrap, topic, flag) = (bootstrap.to_owned(), topic.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut seq = 0usize;
            let mut batch = 5_000;
            while !flag.load(Ordering::Relaxed) {
                let records: Vec<ProduceRecord> = (seq..seq + batch)
                    .map(|i| ProduceRecord::new(format!("k{:02}", i % KEYS), i.to_string()))
                    .collect();
                seq += batch;
                kafka::produce(&bootstrap, &topic, &records, Duration::from_secs(30))
                    .expect("feed the input");
                batch = 300;
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What an instant query returned.
#[derive(Debug)]
struct Answer {
    /// Series returned.
    series: usize,
    /// Series whose value is a number (not NaN).
    numbers: usize,
    /// The largest of those values.
    max: Option<f64>,
}

/// One evaluation of every panel.
struct Evaluation {
    /// Variable name and the value it stood for, or why it has none yet.
    variables: Vec<(String, Result<String, String>)>,
    /// Per panel: per query, the query as sent and its answer or the error.
    panels: Vec<Vec<(String, Result<Answer, String>)>>,
}

impl Evaluation {
    fn run(prometheus: &Prometheus, panels: &[Panel], variables: &[Variable], application_id: &str) -> Self {
        let mut values: Vec<(String, String)> = vec![
            ("__rate_interval".into(), RATE_INTERVAL.into()),
            ("__interval".into(), RATE_INTERVAL.into()),
        ];
        let mut resolved = Vec::new();
        for v in variables {
            let value = v
                .selector
                .as_deref()
                .map(|s| substitute(s, &values))
                .transpose()
                .and_then(|selector| prometheus.label_values(&v.label, selector.as_deref()))
                .and_then(|offered| {
                    if offered.is_empty() {
                        return Err("its query offers no value yet".into());
                    }
                    Ok(match &v.all_value {
                        Some(all) => all.clone(),
                        // This Prometheus scrapes only the application under test.
                        None if offered.iter().any(|o| o == application_id) => application_id.to_owned(),
                        None => offered[0].clone(),
                    })
                });
            if let Ok(value) = &value {
                values.push((v.name.clone(), value.clone()));
            }
            resolved.push((v.name.clone(), value));
        }
        let panels = panels
            .iter()
            .map(|p| {
                p.exprs
                    .iter()
                    .map(|e| match substitute(e, &values) {
                        Ok(q) => {
                            let r = prometheus.query(&q);
                            (q, r)
                        }
                        Err(why) => (e.clone(), Err(why)),
                    })
                    .collect()
            })
            .collect();
        Self {
            variables: resolved,
            panels,
        }
    }

    /// Whether panel `i` shows data: one of its queries returned a number.
    fn shows_data(&self, i: usize) -> bool {
        self.panels[i]
            .iter()
            .any(|(_, r)| matches!(r, Ok(a) if a.numbers > 0))
    }

    /// Why this evaluation can never pass however long the test waits: a query that
    /// Prometheus rejects, or one with a variable the dashboard does not define. (While a
    /// variable has no value yet, the queries using it wait with it.)
    fn fatal(&self) -> Option<String> {
        let pending = self.variables.iter().any(|(_, v)| v.is_err());
        self.panels.iter().flatten().find_map(|(q, r)| match r {
            Err(e) if pending && e.starts_with(UNKNOWN_VARIABLE) => None,
            Err(e) => Some(format!("{q}: {e}")),
            Ok(_) => None,
        })
    }

    fn all_show_data(&self) -> bool {
        (0..self.panels.len()).all(|i| self.shows_data(i))
    }

    /// The table: each panel, each of its queries with the series it returned.
    fn table(&self, panels: &[Panel]) -> String {
        let mut out = String::new();
        for (name, value) in &self.variables {
            let _ = writeln!(
                out,
                "variable ${name} = {}",
                match value {
                    Ok(v) => v.clone(),
                    Err(e) => format!("(none: {e})"),
                }
            );
        }
        let width = panels.iter().map(|p| p.title.len()).max().unwrap_or(0);
        let _ = writeln!(
            out,
            "{:<4} {:<width$}  {:>7}  {:>10}  query",
            "", "panel", "series", "max"
        );
        for (i, (panel, queries)) in panels.iter().zip(&self.panels).enumerate() {
            let mark = if self.shows_data(i) { "ok" } else { "NO" };
            for (n, (query, result)) in queries.iter().enumerate() {
                let title = if n == 0 { panel.title.as_str() } else { "" };
                let (series, max) = match result {
                    Ok(a) if a.series == a.numbers => (format!("{}", a.series), a.max),
                    Ok(a) => (format!("{}/{}", a.numbers, a.series), a.max),
                    Err(_) => ("error".into(), None),
                };
                let max = match max {
                    None => "-".into(),
                    Some(m) if m == 0.0 || m.abs() >= 0.01 => format!("{m:.3}"),
                    Some(m) => format!("{m:.2e}"),
                };
                let mark = if n == 0 { mark } else { "" };
                let _ = write!(out, "{mark:<4} {title:<width$}  {series:>7}  {max:>10}  {query}");
                if let Err(e) = result {
                    let _ = write!(out, "  ({e})");
                }
                out.push('\n');
            }
        }
        let shown = (0..self.panels.len()).filter(|&i| self.shows_data(i)).count();
        let _ = writeln!(
            out,
            "{shown} of {} panels show data (series: returned, or with a number/returned where \
             some are NaN; max: the largest value)",
            self.panels.len()
        );
        out
    }
}

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
