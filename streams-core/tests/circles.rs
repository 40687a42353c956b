//! Imports between files go one way. This test reads every `crate::`, `super::` and `self::`
//! path in `streams-core`, `streams-state` and `streams-dsl` (outside comments and test
//! modules), resolves it to the file that defines the module it names, and looks for
//! circles: files that reach each other through their imports.
//!
//! The rules:
//! - no circle at all between the files of `streams-core/src/runtime/`;
//! - no circle of more than two files anywhere in the three crates.
//!
//! A file using its own folder's root (`mod.rs`) or any other ancestor module is not an
//! edge: a folder's files are parts of the module the folder's root declares (the Rust
//! idiom of one type's methods split across files, as the task manager's are). Test
//! modules (`#[cfg(test)]`, inline or in files of their own) are left out.
//!
//! Run it alone with `cargo test -p streams-core --test circles`.

mod source_scan;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use source_scan::{rust_files, skip_item};

/// The module path of each Rust file under `src`: `a/b.rs` is `a::b`, `a/mod.rs` is `a`,
/// `lib.rs` is the crate root (empty).
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(src).expect("under src/").with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            (parts.join("::"), f)
        })
        .collect()
}

/// The lines of `source` outside comments and `#[cfg(test)]` items, and the names of the
/// child modules it declares as test modules (`#[cfg(test)] mod tests;`).
fn code_lines(source: &str) -> (Vec<&str>, Vec<String>) {
    let lines: Vec<&str> = source.lines().collect();
    let mut code = Vec::new();
    let mut test_mods = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if line.starts_with("#[cfg(test)]") {
            // The item may follow on the same line or the next ones (after more attributes).
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim().starts_with("#[") {
                j += 1;
            }
            if let Some(item) = lines.get(j).map(|l| l.trim())
                && let Some(name) = declared_mod(item)
            {
                test_mods.push(name);
            }
            i = skip_item(&lines, j);
            continue;
        }
        if !line.starts_with("//") {
            code.push(line.split(" //").next().unwrap_or(line));
        }
        i += 1;
    }
    (code, test_mods)
}

/// `x` for a line declaring a child module file: `mod x;` with any visibility.
fn declared_mod(item: &str) -> Option<String> {
    let rest = item.strip_suffix(';')?;
    let name = rest.rsplit("mod ").next()?.trim();
    (rest.contains("mod ") && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then(|| name.to_owned())
}

/// Every path starting with `crate::`, `super::` or `self::` in `code` (a grouped import
/// gives one path per member, e.g. `crate::{a::X, b}` gives `crate::a::X` and `crate::b`).
fn paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    for head in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(head).map(|a| a + from) {
            from = at + head.len();
            if at > 0
                && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':')
            {
                continue; // part of a longer path or name (`super::super`, `my_crate::`)
            }
            let mut end = at;
            while end < code.len() {
                let c = bytes[end];
                if c.is_ascii_alphanumeric() || c == b'_' || c == b':' {
                    end += 1;
                } else {
                    break;
                }
            }
            let path = code[at..end].trim_end_matches(':').to_owned();
            if code[end..].starts_with('{') && code[at..end].ends_with("::") {
                let inner = code[end + 1..].split('}').next().unwrap_or("");
                for item in inner.split(',') {
                    let item = item.trim().split(' ').next().unwrap_or("");
                    if !item.is_empty() && item != "self" {
                        found.push(format!("{path}::{item}"));
                    }
                }
                found.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// The module `path` names, seen from module `from`: the longest prefix that is a module.
fn resolve(from: &str, path: &str, known: &BTreeSet<String>) -> Option<String> {
    let mut segments: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").collect()
    };
    match segments.first() {
        Some(&"crate") => {
            base.clear();
            segments.remove(0);
        }
        Some(&"self") => {
            segments.remove(0);
        }
        _ => {
            while segments.first() == Some(&"super") {
                segments.remove(0);
                base.pop();
            }
        }
    }
    base.extend(segments);
    (0..=base.len())
        .rev()
        .map(|n| base[..n].join("::"))
        .find(|m| known.contains(m))
}

/// Whether `module` is `of` or inside it.
fn within(module: &str, of: &str) -> bool {
    of.is_empty() || module == of || module.starts_with(&format!("{of}::"))
}

/// The import graph of the crate at `src`: file module -> modules it uses, test modules left
/// out, uses of a module's own ancestors left out.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files = modules(src);
    let mut sources = BTreeMap::new();
    let mut tests = BTreeSet::new();
    for (module, file) in &files {
        let text = std::fs::read_to_string(file).expect("read a source file");
        let (code, test_mods) = code_lines(&text);
        for t in test_mods {
            tests.insert(if module.is_empty() {
                t
            } else {
                format!("{module}::{t}")
            });
        }
        sources.insert(module.clone(), code.join("\n"));
    }
    let is_test = |m: &str| tests.iter().any(|t| within(m, t));
    let known: BTreeSet<String> = files.keys().filter(|m| !is_test(m)).cloned().collect();
    let mut edges = BTreeMap::new();
    for module in &known {
        let mut to = BTreeSet::new();
        for path in paths(&sources[module]) {
            if let Some(target) = resolve(module, &path, &known)
                && !within(module, &target)
            {
                to.insert(target);
            }
        }
        edges.insert(module.clone(), to);
    }
    edges
}

/// The circles of `edges`: its strongly connected components of more than one module.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.edges.contains_key(w) {
                    continue;
                }
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.found.sort();
    t.found
}

fn crate_src(name: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn no_file_of_the_runtime_is_in_an_import_circle() {
    let edges = graph(&crate_src("streams-core"));
    assert!(
        edges.keys().filter(|m| within(m, "runtime")).count() > 40,
        "too few runtime files found: is the scanner broken?"
    );
    let edge_count: usize = edges.values().map(BTreeSet::len).sum();
    assert!(
        edge_count > 200,
        "only {edge_count} imports found: is the scanner broken?"
    );
    let bad: Vec<_> = circles(&edges)
        .into_iter()
        .filter(|c| c.iter().any(|m| within(m, "runtime")))
        .collect();
    assert!(
        bad.is_empty(),
        "import circles in runtime/ (make the imports go one way): {bad:?}"
    );
}

#[test]
fn no_import_circle_has_more_than_two_files() {
    for name in ["streams-core", "streams-state", "streams-dsl"] {
        let big: Vec<_> = circles(&graph(&crate_src(name)))
            .into_iter()
            .filter(|c| c.len() > 2)
            .collect();
        assert!(
            big.is_empty(),
            "{name}: import circles of more than two files: {big:?}"
        );
    }
}

/// The circles of two files that are left, by crate: a new one fails here (make its
/// imports go one way), and one that is gone must leave the list.
const PAIRS: &[(&str, &[&str])] = &[];

#[test]
fn no_new_circle_of_two_files() {
    for name in ["streams-core", "streams-state", "streams-dsl"] {
        let mut pairs: Vec<String> = circles(&graph(&crate_src(name)))
            .into_iter()
            .filter(|c| c.len() == 2)
            .map(|c| c.join(" <-> "))
            .collect();
        pairs.sort();
        let known: Vec<&str> = PAIRS
            .iter()
            .filter(|(c, _)| *c == name)
            .flat_map(|(_, p)| p.iter().copied())
            .collect();
        assert_eq!(pairs, known, "{name}: the circles of two files changed");
    }
}

#[test]
fn the_scanner_resolves_every_form_of_path() {
    let known: BTreeSet<String> = ["", "a", "a::b", "a::c", "d"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(resolve("a::b", "super::c::Item", &known).as_deref(), Some("a::c"));
    assert_eq!(resolve("a", "self::b::f", &known).as_deref(), Some("a::b"));
    assert_eq!(resolve("a::b", "crate::d::X", &known).as_deref(), Some("d"));
    assert_eq!(resolve("a::b", "crate::Root", &known).as_deref(), Some(""));
    let code = "use crate::{a::X, d};\nlet y = super::c::f(); // crate::z in a comment\nuse super::super::q;";
    let source =
        format!("{code}\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod inline {{\n    use crate::zz;\n}}");
    let (lines, tests) = code_lines(&source);
    assert_eq!(tests, ["tests"]);
    let found = paths(&lines.join("\n"));
    assert_eq!(
        found,
        [
            "crate::a::X",
            "crate::d",
            "crate",
            "super::c::f",
            "super::super::q"
        ]
    );
}

#[test]
fn a_circle_is_found_and_a_chain_is_not() {
    let graph = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry((*a).into()).or_default().insert((*b).into());
            g.entry((*b).into()).or_default();
        }
        g
    };
    assert!(circles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
    assert_eq!(
        circles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
        vec![vec!["a".to_owned(), "b".into(), "c".into()]]
    );
}
