//! A parser of Java `.properties` text.
//!
//! Supported: `key=value`, `key: value` and `key value` lines; `#` and `!` comment lines;
//! blank lines; whitespace around keys and values is trimmed; a line ending in an odd number
//! of backslashes continues on the next line (whose leading whitespace is dropped); the
//! escapes `\t`, `\n`, `\r`, `\f`, `\uXXXX` (with surrogate pairs) and `\X` for any other `X`
//! (so `\=`, `\:`, `\#`, `\ ` and `\\` put those characters in a key or value). A later
//! line for the same key overrides an earlier one.

use std::iter::Peekable;
use std::str::Chars;

use crate::error::StreamsError;

/// One `key=value` entry and the (1-based) line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) key: String,
    pub(super) value: String,
    pub(super) line: usize,
}

/// Parses `.properties` text into its entries, in file order.
/// Errors name their line as `{location}{line}` (`line 3`, `app.properties:3`).
pub(super) fn parse(text: &str, location: &str) -> Result<Vec<Entry>, StreamsError> {
    let mut entries = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let first = line.trim_start();
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = first.to_owned();
        while ends_in_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split(&logical, &format!("{location}{}", index + 1))?;
        entries.push(Entry {
            key,
            value,
            line: index + 1,
        });
    }
    Ok(entries)
}

/// Whether `line` ends in an odd number of backslashes (an unescaped one).
fn ends_in_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits a logical line (leading whitespace already dropped) into its unescaped key and value.
fn split(line: &str, at: &str) -> Result<(String, String), StreamsError> {
    let mut chars = line.chars().peekable();
    let mut key = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(u) = unescape(&mut chars, &key, at)? {
                    key.push(u);
                }
            }
            '=' | ':' => break,
            c if c.is_whitespace() => {
                skip_whitespace(&mut chars);
                if matches!(chars.peek(), Some('=' | ':')) {
                    chars.next();
                }
                break;
            }
            c => key.push(c),
        }
    }
    skip_whitespace(&mut chars);
    let mut value = String::new();
    // The length of `value` up to its last non-whitespace or escaped character: unescaped
    // trailing whitespace is trimmed.
    let mut significant = 0;
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(u) = unescape(&mut chars, &key, at)? {
                value.push(u);
                significant = value.len();
            }
        } else {
            value.push(c);
            if !c.is_whitespace() {
                significant = value.len();
            }
        }
    }
    value.truncate(significant);
    Ok((key, value))
}

fn skip_whitespace(chars: &mut Peekable<Chars<'_>>) {
    while chars.next_if(|c| c.is_whitespace()).is_some() {}
}

/// Reads the escape after a backslash. `None` for a backslash at the very end of the text.
fn unescape(chars: &mut Peekable<Chars<'_>>, key: &str, at: &str) -> Result<Option<char>, StreamsError> {
    let Some(c) = chars.next() else { return Ok(None) };
    Ok(Some(match c {
        't' => '\t',
        'n' => '\n',
        'r' => '\r',
        'f' => '\x0c',
        'u' => {
            let unit = hex4(chars, key, at)?;
            if (0xD800..0xDC00).contains(&unit) {
                // A high surrogate: a `\uXXXX` low surrogate must follow.
                let low = if chars.next_if_eq(&'\\').is_some() && chars.next_if_eq(&'u').is_some() {
                    hex4(chars, key, at)?
                } else {
                    return Err(malformed(
                        key,
                        at,
                        "a high surrogate `\\u` escape without its low surrogate",
                    ));
                };
                char::decode_utf16([unit, low])
                    .next()
                    .and_then(Result::ok)
                    .ok_or_else(|| malformed(key, at, "an invalid surrogate pair"))?
            } else {
                char::from_u32(u32::from(unit))
                    .ok_or_else(|| malformed(key, at, "a lone low surrogate `\\u` escape"))?
            }
        }
        other => other,
    }))
}

fn hex4(chars: &mut Peekable<Chars<'_>>, key: &str, at: &str) -> Result<u16, StreamsError> {
    let mut unit = 0u16;
    for _ in 0..4 {
        let digit = chars
            .next()
            .and_then(|c| c.to_digit(16))
            .ok_or_else(|| malformed(key, at, "a malformed `\\uXXXX` escape (four hex digits expected)"))?;
        // Four hex digits fit in a u16: `digit` < 16 and `unit` < 0x1000 before the shift.
        unit = (unit << 4) | digit as u16;
    }
    Ok(unit)
}

fn malformed(key: &str, at: &str, what: &str) -> StreamsError {
    StreamsError::Config {
        property: key.to_owned(),
        message: format!("{at}: {what}"),
    }
}
