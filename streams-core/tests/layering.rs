//! The crate's layers point one way: each folder of `src/` uses only the layers listed
//! before it. This test reads every `crate::` path in `src/` (outside comments and test
//! modules) and fails on any against the grain, naming the file and line.
//!
//! It also holds every Rust file of the workspace to at most 600 lines: a file past that is
//! two concerns and becomes two files.
//!
//! Run it alone with `cargo test -p streams-core --test layering`.

mod source_scan;

use source_scan::{rust_files, skip_item};

/// The layers, lowest first, and the top-level modules of each. A module may use its own
/// layer's module and the modules of lower layers; two modules of one layer may not use
/// each other.
const LAYERS: &[(&str, &[&str])] = &[
    ("model", &["model"]),
    ("config", &["config"]),
    ("api", &["processor"]),
    ("topology", &["topology"]),
    ("engine", &["engine"]),
    ("observers", &["metrics"]),
    ("hosts", &["runtime"]),
];

/// Modules outside the layers: they may use any layer, and no layer may use them. None
/// today: the test kit is a crate of its own (streams-test-utils).
const OUTSIDE: &[&str] = &[];

#[derive(Debug, PartialEq)]
struct Use {
    line: usize,
    module: String,
}

/// The top-level modules named by `crate::` paths in `source`, skipping comments and
/// `#[cfg(test)]` modules. A path to an item of the crate root (`crate::Foo`) is reported
/// as module `Foo`, which no layer holds: inside the crate, name the defining module.
fn crate_uses(source: &str) -> Vec<Use> {
    let lines: Vec<&str> = source.lines().collect();
    let mut uses = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if line.starts_with("#[cfg(test)]") {
            i = skip_item(&lines, i + 1);
            continue;
        }
        if !line.starts_with("//") {
            let code = line.split(" //").next().unwrap_or(line);
            for module in modules_in(code, &lines[i + 1..]) {
                uses.push(Use { line: i + 1, module });
            }
        }
        i += 1;
    }
    uses
}

/// The first segments of the `crate::` paths on `code`; a grouped import
/// (`crate::{a::X, b}`) may continue on the `following` lines.
fn modules_in(code: &str, following: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let preceded = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `streams_crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut text = group.to_owned();
            for more in following {
                if text.contains('}') {
                    break;
                }
                text.push_str(more);
            }
            let inner = text.split('}').next().unwrap_or("");
            for item in inner.split(',') {
                let first = item.trim().split("::").next().unwrap_or("").trim();
                if !first.is_empty() {
                    found.push(first.to_owned());
                }
            }
        } else {
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !ident.is_empty() {
                found.push(ident);
            }
        }
    }
    found
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, modules)| modules.contains(&module))
}

/// Why `from` may not use `to`, if it may not.
fn violation(from: &str, to: &str) -> Option<String> {
    if from == to || OUTSIDE.contains(&from) {
        return None;
    }
    if OUTSIDE.contains(&to) {
        return Some(format!("`{to}` is outside the layers; no layer may use it"));
    }
    let Some(target) = layer_of(to) else {
        return Some(format!(
            "`crate::{to}` is not a layer's module: name the module that defines it"
        ));
    };
    let Some(source) = layer_of(from) else {
        return Some(format!("module `{from}` is in no layer: add it to LAYERS"));
    };
    if target > source {
        return Some(format!(
            "layer {} (`{from}`) may not use layer {} (`{to}`), which is built on it",
            LAYERS[source].0, LAYERS[target].0
        ));
    }
    if target == source {
        return Some(format!(
            "`{from}` and `{to}` are both in layer {}: neither may use the other",
            LAYERS[source].0
        ));
    }
    None
}

#[test]
fn every_import_follows_the_layers() {
    let src = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src/");
        let first = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or_default();
        let from = first.trim_end_matches(".rs");
        // The crate root re-exports every layer; `tests.rs` files are test modules.
        if from == "lib" || relative.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let source = std::fs::read_to_string(file).expect("read source");
        for u in crate_uses(&source) {
            checked += 1;
            if let Some(why) = violation(from, &u.module) {
                problems.push(format!("src/{}:{}: {why}", relative.display(), u.line));
            }
        }
        if source.contains("super::super") {
            problems.push(format!(
                "src/{}: `super::super` reaches across folders; use a `crate::` path",
                relative.display()
            ));
        }
    }
    assert!(
        checked > 100,
        "only {checked} crate paths found: is the scanner broken?"
    );
    assert!(
        problems.is_empty(),
        "imports against the layers:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_scanner_sees_every_form_of_crate_path() {
    let source = "\
use crate::model::TaskId;
use crate::{config::StreamsConfig,
    metrics::Metrics};
/// A doc link to [`crate::runtime::State`] is not a use.
fn f() -> crate::engine::Task { todo() } // crate::runtime in a comment
use crate::KafkaStreams;
#[cfg(test)]
mod tests {
    use crate::runtime::Kit;
}
use crate::topology::Topology;
";
    let modules: Vec<(usize, String)> = crate_uses(source)
        .into_iter()
        .map(|u| (u.line, u.module))
        .collect();
    let expected: Vec<(usize, String)> = [
        (1, "model"),
        (2, "config"),
        (2, "metrics"),
        (5, "engine"),
        (6, "KafkaStreams"),
        (11, "topology"),
    ]
    .into_iter()
    .map(|(l, m)| (l, m.to_owned()))
    .collect();
    assert_eq!(modules, expected);
}

#[test]
fn the_rules_reject_what_they_should() {
    assert!(violation("engine", "metrics").is_some(), "engine -> observers");
    assert!(violation("config", "runtime").is_some(), "config -> host");
    assert!(violation("model", "config").is_some(), "model -> config");
    assert!(violation("processor", "engine").is_some(), "api -> engine");
    assert!(violation("metrics", "KafkaStreams").is_some(), "root item");
    assert!(
        violation("runtime", "driver").is_some(),
        "no module `driver` any more"
    );
    assert!(violation("runtime", "engine").is_none());
    assert!(violation("metrics", "engine").is_none());
    assert!(violation("topology", "model").is_none());
}

/// The most lines a Rust file of the workspace may have.
const MAX_LINES: usize = 600;

#[test]
fn no_rust_file_is_over_600_lines() {
    let workspace = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("..");
    let mut files = Vec::new();
    for member in [
        "streams-core",
        "streams-state",
        "streams-dsl",
        "streams-test-utils",
        "streams-serde-registry",
        "examples",
        "benches",
    ] {
        rust_files(&workspace.join(member), &mut files);
    }
    assert!(files.len() > 100, "found only {} Rust files", files.len());
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f)
                .expect("read a Rust file")
                .lines()
                .count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines, split them by concern:\n{}",
        long.join("\n")
    );
}
