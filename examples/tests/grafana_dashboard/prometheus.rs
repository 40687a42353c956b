//! The Prometheus of the test: found or installed, started on a port of its own scraping
//! the application, and its HTTP API.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{SCRAPE_INTERVAL, START_LIMIT};

/// A port free now on 127.0.0.1.
pub(crate) fn free_port() -> u16 {
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
pub(crate) fn get(agent: &ureq::Agent, url: &str, query: &[(&str, &str)]) -> Result<(u16, String), String> {
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
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The Prometheus binary, from `scripts/prometheus.sh ensure` (which installs Debian's
/// package where none is found). Fails the test when there is none.
pub(crate) fn prometheus_binary() -> PathBuf {
    let script = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../scripts/prometheus.sh");
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
pub(crate) struct Prometheus {
    child: Child,
    url: String,
    pub(crate) log: PathBuf,
    pub(crate) agent: ureq::Agent,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts `binary` scraping `target` (`host:port`, path `/metrics`) every second, and
    /// waits until it is ready. Fails the test when it exits or is not ready in time.
    pub(crate) fn start(binary: &Path, target: &str) -> Self {
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
    pub(crate) fn query(&self, expr: &str) -> Result<Answer, String> {
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
    pub(crate) fn label_values(&self, label: &str, selector: Option<&str>) -> Result<Vec<String>, String> {
        let query: Vec<(&str, &str)> = selector.map(|s| ("match[]", s)).into_iter().collect();
        let data = self.api(&format!("label/{label}/values"), &query)?;
        Ok(data
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default())
    }

    /// The scrape target's health and last error, for failure messages.
    pub(crate) fn targets(&self) -> String {
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

/// What an instant query returned.
#[derive(Debug)]
pub(crate) struct Answer {
    /// Series returned.
    pub(crate) series: usize,
    /// Series whose value is a number (not NaN).
    pub(crate) numbers: usize,
    /// The largest of those values.
    pub(crate) max: Option<f64>,
}
