//! Helpers shared by the tests against a real registry: the registry's URL, clients, unique
//! names, and Confluent's Python client as the reference (`confluent_crosscheck.py`).

#![allow(dead_code)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use streams_serde_registry::SchemaRegistryClient;

pub fn required() -> bool {
    std::env::var("STREAMS_REQUIRE_SCHEMA_REGISTRY").is_ok_and(|v| v == "1")
}

/// The registry's URL, or `None` (after a message) when the test is to be skipped.
pub fn registry(test: &str) -> Option<String> {
    match std::env::var("STREAMS_TEST_SCHEMA_REGISTRY") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                !required(),
                "{test}: STREAMS_REQUIRE_SCHEMA_REGISTRY=1 but STREAMS_TEST_SCHEMA_REGISTRY is not set \
                 (start one with: bash scripts/schema-registry.sh start)"
            );
            eprintln!(
                "{test}: skipped: STREAMS_TEST_SCHEMA_REGISTRY is not set (bash scripts/schema-registry.sh start, \
                 then STREAMS_TEST_SCHEMA_REGISTRY=<the URL it prints>)"
            );
            None
        }
    }
}

pub fn client(url: &str) -> SchemaRegistryClient {
    SchemaRegistryClient::from_properties([("schema.registry.url", url)]).expect("client")
}

/// A topic name no other test (or earlier run against the same registry) uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn workspace_root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
        .join("..")
}

/// The interpreter of the Python environment `scripts/schema-registry.sh python` makes, or
/// `None` (after a message) when it cannot be had and the registry is not required.
pub fn python(test: &str) -> Option<PathBuf> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = PYTHON.get_or_init(|| {
        let out = Command::new("bash")
            .arg(workspace_root().join("scripts/schema-registry.sh"))
            .arg("python")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run scripts/schema-registry.sh: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout.lines().rev().find_map(|l| l.strip_prefix("python at ")) {
            Some(p) if out.status.success() => Ok(PathBuf::from(p.trim())),
            _ => Err(format!(
                "scripts/schema-registry.sh python failed: {}{}",
                stdout,
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    });
    match found {
        Ok(p) => Some(p.clone()),
        Err(e) => {
            assert!(
                !required(),
                "{test}: STREAMS_REQUIRE_SCHEMA_REGISTRY=1 but no Python client: {e}"
            );
            eprintln!("{test}: skipped: {e}");
            None
        }
    }
}

pub fn run_python(python: &PathBuf, request: serde_json::Value) -> serde_json::Value {
    let script = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("tests/confluent_crosscheck.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(request.to_string().as_bytes())
        .expect("write request");
    let out = child.wait_with_output().expect("python");
    assert!(
        out.status.success(),
        "confluent_crosscheck.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python answer")
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

pub fn frames(answer: &serde_json::Value) -> Vec<Vec<u8>> {
    answer["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .map(|f| unhex(f.as_str().expect("hex string")))
        .collect()
}
