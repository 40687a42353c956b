//! Reading a `GET /users/{id}/hooks[?after=<key>&limit=<n>]` request of the query server
//! ([`super::query`]) into a [`HooksQuery`], or the [`Rejection`] to answer at once.
//!
//! Invariants: only `GET` of exactly that path is accepted; the id is decimal digits that
//! fit a `u64`; `after` is percent-decoded and must be a key of that user (`next` of an
//! earlier page); `limit` is `1..=MAX_LIMIT` (default [`DEFAULT_LIMIT`]); other query
//! parameters are ignored.

use hyper::{Method, StatusCode};

use super::query::{DEFAULT_LIMIT, MAX_LIMIT};
use super::topics::user_key;

/// A valid `GET /users/{id}/hooks` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HooksQuery {
    pub user_id: u64,
    pub after: Option<String>,
    pub limit: usize,
}

/// Checks a request: `GET /users/{id}/hooks` with an optional `after` (a key of that
/// user, percent-decoded) and `limit` (`1..=MAX_LIMIT`); other query parameters are
/// ignored.
pub(super) fn parse(method: &Method, path: &str, query: Option<&str>) -> Result<HooksQuery, Rejection> {
    let id = path
        .strip_prefix("/users/")
        .and_then(|rest| rest.strip_suffix("/hooks"))
        .filter(|id| !id.contains('/'))
        .ok_or(Rejection(
            StatusCode::NOT_FOUND,
            "not found: GET /users/{id}/hooks",
        ))?;
    if method != Method::GET {
        return Err(Rejection(StatusCode::METHOD_NOT_ALLOWED, "only GET"));
    }
    let bad = |m: &'static str| Rejection(StatusCode::BAD_REQUEST, m);
    let user_id = Some(id)
        .filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|id| id.parse::<u64>().ok())
        .ok_or_else(|| bad("the user id must be a number"))?;
    let mut after = None;
    let mut limit = DEFAULT_LIMIT;
    for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "after" => {
                let key = percent_decode(value).ok_or_else(|| bad("after is not a valid key"))?;
                if !key.starts_with(&format!("{}:", user_key(user_id))) {
                    return Err(bad(
                        "after must be a key of this user (a `next` of an earlier page)",
                    ));
                }
                after = Some(key);
            }
            "limit" => {
                limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| bad("limit must be a number from 1 to 1000"))?;
            }
            _ => {}
        }
    }
    Ok(HooksQuery {
        user_id,
        after,
        limit,
    })
}

/// Why a request was refused before anything was asked: its status and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rejection(pub StatusCode, pub &'static str);

/// `%XX` escapes decoded (as UTF-8); `None` for a malformed escape or invalid UTF-8.
pub(super) fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
