//! The real parsers: Node.js running `parse.mjs` with Mermaid and Graphviz, installed on
//! first use, and what they read from a diagram.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

// ---------------------------------------------------------------------------------------
// The parsers

/// The directory of `parse.mjs` and its npm packages.
fn tools_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
        .join("tests/diagram-parsers")
}

/// The tools directory, once Node.js is found and the packages are installed; a clear
/// panic otherwise.
fn parsers() -> &'static Path {
    static READY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match READY.get_or_init(install) {
        Ok(dir) => dir,
        Err(e) => panic!("the diagram parsers are not available: {e}"),
    }
}

/// Checks Node.js and installs the npm packages when the installed ones are not those of
/// the lockfile (a copy of the lockfile in `node_modules` marks a complete install).
///
/// The install happens in a directory of its own and is then renamed into place, so that
/// two test processes installing at once cannot mix their files.
fn install() -> Result<PathBuf, String> {
    let dir = tools_dir();
    let out = Command::new("node").arg("--version").output().map_err(|e| {
        format!(
            "Node.js (`node`) could not be run ({e}): this test runs the real Mermaid and \
             Graphviz parsers in Node.js; install Node.js 18 or newer with npm \
             (Debian: apt-get install nodejs npm) and run it again"
        )
    })?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 18 {
        return Err(format!(
            "Node.js {version} is too old: the parsers need Node.js 18 or newer"
        ));
    }

    let lock = dir.join("package-lock.json");
    let stamp = |modules: &Path| modules.join(".streams-installed-lock.json");
    let lock_text = std::fs::read(&lock).map_err(|e| format!("{}: {e}", lock.display()))?;
    let target = dir.join("node_modules");
    if std::fs::read(stamp(&target)).ok().as_ref() == Some(&lock_text) {
        return Ok(dir);
    }

    let staging = dir.join(format!(".install-{}", std::process::id()));
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| io("creating the install directory", e))?;
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(dir.join(file), staging.join(file)).map_err(|e| io(file, e))?;
    }
    eprintln!(
        "diagram_parsers: installing the parsers (npm ci in {})",
        dir.display()
    );
    let started = std::time::Instant::now();
    let npm = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&staging)
        .output()
        .map_err(|e| format!("npm could not be run ({e}): install npm (Debian: apt-get install npm)"))?;
    if !npm.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(format!(
            "`npm ci` failed ({}): {}{}",
            npm.status,
            String::from_utf8_lossy(&npm.stdout),
            String::from_utf8_lossy(&npm.stderr)
        ));
    }
    let fresh = staging.join("node_modules");
    std::fs::write(stamp(&fresh), &lock_text).map_err(|e| io("writing the install stamp", e))?;
    if target.exists() {
        let old = dir.join(format!(".install-{}-old", std::process::id()));
        if std::fs::rename(&target, &old).is_ok() {
            let _ = std::fs::remove_dir_all(&old);
        }
    }
    let moved = std::fs::rename(&fresh, &target);
    let _ = std::fs::remove_dir_all(&staging);
    match moved {
        Ok(()) => {}
        // Another process put its install in place first: fine if it is complete.
        Err(_) if std::fs::read(stamp(&target)).ok().as_ref() == Some(&lock_text) => {}
        Err(e) => return Err(io("moving node_modules into place", e)),
    }
    eprintln!("diagram_parsers: installed in {:.1?}", started.elapsed());
    Ok(dir)
}

/// A diagram as its parser read it: vertices, edges, clusters, by the diagram's ids.
#[derive(Debug)]
pub(crate) struct Parsed {
    /// `(id, shape, label as drawn)`.
    pub(crate) vertices: Vec<(String, String, String)>,
    /// `(from, to, kind)`.
    pub(crate) edges: Vec<(String, String, String)>,
    /// `(id, title as drawn, member ids)`.
    pub(crate) clusters: Vec<(String, String, Vec<String>)>,
}

/// `text` read by the parser of `language` (`mermaid` or `dot`); `Err` with the parser's
/// message if it rejects it.
pub(crate) fn parse(language: &str, text: &str) -> Result<Parsed, String> {
    let dir = parsers();
    let mut child = Command::new("node")
        .arg("parse.mjs")
        .arg(language)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node parse.mjs");
    // parse.mjs reads all of its input before it writes anything.
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("writing the diagram to node");
    let out = child.wait_with_output().expect("node parse.mjs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {}
        Some(2) => return Err(stderr.into_owned()),
        _ => panic!("parse.mjs {language} failed ({}): {stderr}", out.status),
    }
    let json: Value = serde_json::from_slice(&out.stdout).expect("parse.mjs prints JSON");
    let s = |v: &Value| v.as_str().map(str::to_owned);
    let list = |key: &str| json[key].as_array().cloned().unwrap_or_default();
    Ok(Parsed {
        vertices: list("vertices")
            .iter()
            .map(|v| {
                let id = s(&v["id"]).expect("vertex id");
                let rendered = s(&v["rendered"]).unwrap_or_else(|| panic!("vertex {id} was not drawn"));
                (id, s(&v["shape"]).unwrap_or_default(), rendered)
            })
            .collect(),
        edges: list("edges")
            .iter()
            .map(|e| {
                let field = |k: &str| s(&e[k]).expect("edge field");
                (field("from"), field("to"), field("kind"))
            })
            .collect(),
        clusters: list("clusters")
            .iter()
            .map(|c| {
                let id = s(&c["id"]).expect("cluster id");
                let members = c["members"].as_array().cloned().unwrap_or_default();
                // Neither renderer draws an empty cluster: then its title as parsed.
                let title = s(&c["rendered"])
                    .or_else(|| members.is_empty().then(|| s(&c["label"])).flatten())
                    .unwrap_or_else(|| panic!("cluster {id} was not drawn"));
                (id, title, members.iter().filter_map(s).collect())
            })
            .collect(),
    })
}
