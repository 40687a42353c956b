//! Reading the workspace's Rust sources as text, for the architecture tests
//! (`layering.rs`, `circles.rs`).

use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`, `target` folders left out.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a source folder") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() && path.file_name().is_some_and(|n| n == "target") {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The index of the line after the item starting at `start` (a `mod x { … }` block, or a
/// single-line item such as `mod tests;`).
pub fn skip_item(lines: &[&str], start: usize) -> usize {
    let mut depth = 0i32;
    let mut opened = false;
    for (offset, line) in lines[start..].iter().enumerate() {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        if (opened && depth <= 0) || (!opened && line.trim_end().ends_with(';')) {
            return start + offset + 1;
        }
    }
    lines.len()
}
