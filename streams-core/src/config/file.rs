//! Java `.properties` text, read with the `java-properties` crate.
//!
//! The crate implements the format of `java.util.Properties::load`: `key=value`, `key: value`
//! and `key value` lines; `#` and `!` comment lines; blank lines; whitespace (space, tab, form
//! feed) before keys and around separators dropped; a line ending in an odd number of
//! backslashes continuing on the next line (whose leading whitespace is dropped); `\r\n`, `\r`
//! and `\n` line ends; the escapes `\t`, `\n`, `\r`, `\f`, `\uXXXX` and `\X` for any other `X`
//! (so `\=`, `\:`, `\#`, `\ ` and `\\` put those characters in a key or value). As in Java,
//! whitespace at the end of a value is kept (`StreamsConfig::from_properties` trims it). A
//! later line for the same key overrides an earlier one.
//!
//! What this module adds, where the crate departs from Java: the text is UTF-8 (as Java 9+
//! reads resource bundles; the crate defaults to ISO-8859-1); comment lines are dropped before
//! the crate sees them (it unescapes comment text, so `# C:\users` would fail on `\u`); an
//! escaped UTF-16 surrogate pair (`\uD83D\uDE00`) is decoded to its character first (the crate
//! decodes each `\uXXXX` alone and refuses surrogates); and the text always ends in a line end,
//! so that a backslash on the last line does not lose that line's entry.

use java_properties::{LineContent, PropertiesError, PropertiesIter};

use crate::model::error::StreamsError;

/// One `key=value` entry and the (1-based) line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) key: String,
    pub(super) value: String,
    pub(super) line: usize,
}

/// The whitespace of the `.properties` format.
const WHITESPACE: [char; 3] = [' ', '\t', '\x0c'];

/// Parses `.properties` text into its entries, in file order.
/// Errors (malformed `\uXXXX` escapes) name their line as `{location}{line}` (`line 3`,
/// `app.properties:3`) and, as the property at fault, the key as written on that line (up to
/// its first separator character).
pub(super) fn parse(text: &str, location: &str) -> Result<Vec<Entry>, StreamsError> {
    let prepared = prepare(text);
    let mut entries = Vec::new();
    for line in PropertiesIter::new_with_encoding(prepared.as_bytes(), encoding_rs::UTF_8) {
        let line = line.map_err(|e| malformed(&e, &prepared, location))?;
        let number = line.line_number();
        if let LineContent::KVPair(key, value) = line.consume_content() {
            entries.push(Entry {
                key,
                value,
                line: number,
            });
        }
    }
    Ok(entries)
}

/// `text` with one `\n` after each of its lines (the crate's line numbers are kept), its comment
/// lines emptied and its escaped surrogate pairs decoded.
fn prepare(text: &str) -> String {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut prepared = String::with_capacity(text.len() + 1);
    // Whether the previous line continues on this one (which then is no comment line).
    let mut continued = false;
    for line in text.split('\n') {
        let comment = !continued && line.trim_start_matches(WHITESPACE).starts_with(['#', '!']);
        if !comment {
            decode_surrogate_pairs(line, &mut prepared);
            continued = line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1;
        }
        prepared.push('\n');
    }
    prepared
}

/// Appends `line` to `out`, each escaped UTF-16 surrogate pair replaced by its character (a
/// character that is no separator, whitespace or comment mark, so this changes no parse).
fn decode_surrogate_pairs(line: &str, out: &mut String) {
    let mut rest = line;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let escape = &rest[at..];
        if let Some(c) = surrogate_pair(escape) {
            out.push(c);
            rest = &escape[r"\uD83D\uDE00".len()..];
        } else {
            // The backslash and the character it escapes, so that `\\u` is not taken for `\u`.
            let len = 1 + escape[1..].chars().next().map_or(0, char::len_utf8);
            out.push_str(&escape[..len]);
            rest = &escape[len..];
        }
    }
    out.push_str(rest);
}

/// The character of the `\uXXXX\uXXXX` surrogate pair that `s` starts with, if it does.
fn surrogate_pair(s: &str) -> Option<char> {
    let unit = |s: &str| {
        let hex = s.strip_prefix(r"\u")?.get(..4)?;
        hex.bytes()
            .all(|b| b.is_ascii_hexdigit())
            .then(|| u16::from_str_radix(hex, 16).ok())?
    };
    let high = unit(s).filter(|u| (0xD800..0xDC00).contains(u))?;
    let low = unit(s.get(6..)?).filter(|u| (0xDC00..0xE000).contains(u))?;
    char::decode_utf16([high, low]).next()?.ok()
}

/// A [`StreamsError::Config`] for a line the crate refused, naming the key written on it.
fn malformed(e: &PropertiesError, prepared: &str, location: &str) -> StreamsError {
    // The crate's message ends in ` (line_number = N)`; the location says that.
    let message = e.to_string();
    let what = message.split(" (line_number").next().unwrap_or_default();
    match e.line_number() {
        Some(number) => {
            let line = prepared
                .split('\n')
                .nth(number.saturating_sub(1))
                .unwrap_or_default();
            let key = line
                .trim_start_matches(WHITESPACE)
                .split(['=', ':', ' ', '\t', '\x0c'])
                .next()
                .unwrap_or_default();
            StreamsError::Config {
                property: key.to_owned(),
                message: format!("{location}{number}: {what}"),
            }
        }
        None => StreamsError::Config {
            property: location.trim_end_matches([' ', ':']).to_owned(),
            message: what.to_owned(),
        },
    }
}
