//! Window and session queries as each task answers them, and the merge of the tasks' parts.
//!
//! A stream thread holds only a store's bytes and its builder; it reads a window or session
//! store through the builder's [`StoreLayout`], which opens the same bytes with raw-bytes
//! serdes, so no serde of the caller's types crosses to the thread.
//!
//! # Order and chunks
//!
//! Every entry carries an *order key*: the prefix of its bytes-store key that the store
//! iterates by — `[segment][key][start]` for a window, `[segment][key][end][start]` for a
//! session (numbers big-endian, sign bit flipped, so byte order is numeric order). Each
//! task's entries therefore come in order-key order (descending when reversed), and so do
//! the merged entries of several tasks, because one key lives in one partition.
//!
//! A chunk continues after the order key of the last entry returned: a task skips the
//! entries up to it (and, going forward, the segments before it), so a scan read in chunks
//! returns what one scan would. Entries with equal order keys (duplicates of a window store
//! that retains them) are never split between chunks: a task and the merge both extend a
//! chunk past its limit until the order key changes.

use std::cmp::Ordering;

use bytes::Bytes;
use streams_state::{SharedKeyValueStore, StoreBuilder, StoreLayout, Windowed};

/// Which kind of store a [`TimeScan`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeKind {
    /// A window store: `from..=to` bounds the window start.
    Window,
    /// A session store: sessions ending at or after `from` and starting at or before `to`.
    Session,
}

/// A window or session range, as each task reads it.
#[derive(Debug, Clone)]
pub(crate) struct TimeScan {
    pub kind: TimeKind,
    /// One key's entries, or every key's (window stores only).
    pub key: Option<Bytes>,
    pub from: i64,
    pub to: i64,
    pub reverse: bool,
    /// The order key of the last entry returned: continue after it.
    pub after: Option<Bytes>,
    pub limit: usize,
}

/// One entry of a window or session store.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    /// Its order key (see the module docs).
    pub order: Bytes,
    pub window: Windowed<Bytes>,
    pub value: Bytes,
}

/// `v` big-endian with its sign bit flipped: byte order is numeric order.
fn encode(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

/// The segment id at the front of an order key.
fn segment_of(order: &[u8]) -> Option<i64> {
    let b: [u8; 8] = order.get(..8)?.try_into().ok()?;
    Some((u64::from_be_bytes(b) ^ (1 << 63)) as i64)
}

fn order_key(segment: i64, key: &[u8], times: &[i64]) -> Bytes {
    let mut o = Vec::with_capacity(8 + key.len() + 8 * times.len());
    o.extend_from_slice(&encode(segment));
    o.extend_from_slice(key);
    for t in times {
        o.extend_from_slice(&encode(*t));
    }
    Bytes::from(o)
}

/// Whether `order` comes after `after` in the scan's direction.
fn beyond(order: &[u8], after: &[u8], reverse: bool) -> bool {
    let c = order.cmp(after);
    if reverse {
        c == Ordering::Less
    } else {
        c == Ordering::Greater
    }
}

/// One store instance's part of `scan`.
pub(crate) fn read(
    bytes: &SharedKeyValueStore,
    builder: &dyn StoreBuilder,
    scan: &TimeScan,
) -> Result<Vec<Hit>, String> {
    let err = |e: streams_state::StoreError| e.to_string();
    let hits = match (builder.layout(), scan.kind) {
        (StoreLayout::Window { store, .. }, TimeKind::Window) => {
            let interval = store.segment_interval_ms();
            let size = store.window_size_ms();
            let (from, to) = narrow(scan, interval);
            let ws = store.open(bytes.clone());
            let reader = ws.read().map_err(err)?;
            let window = |key: Vec<u8>, start: i64| Windowed {
                key: Bytes::from(key),
                start,
                end: start.saturating_add(size),
            };
            let hit = |w: Windowed<Bytes>, value: Vec<u8>| Hit {
                order: order_key(start_segment(w.start, interval), &w.key, &[w.start]),
                window: w,
                value: Bytes::from(value),
            };
            match &scan.key {
                Some(key) => {
                    let k = key.to_vec();
                    let iter = if scan.reverse {
                        reader.backward_fetch_range(&k, from, to)
                    } else {
                        reader.fetch_range(&k, from, to)
                    }
                    .map_err(err)?;
                    take(
                        iter.map(|r| r.map(|(start, v)| hit(window(k.clone(), start), v))),
                        scan,
                    )?
                }
                None => {
                    let iter = if scan.reverse {
                        reader.backward_fetch_all(from, to)
                    } else {
                        reader.fetch_all(from, to)
                    }
                    .map_err(err)?;
                    take(iter.map(|r| r.map(|(w, v)| hit(window(w.key, w.start), v))), scan)?
                }
            }
        }
        (StoreLayout::Session { store }, TimeKind::Session) => {
            let interval = store.segment_interval_ms();
            let Some(key) = &scan.key else {
                return Err("a session query names its key".to_owned());
            };
            let (from, to) = narrow(scan, interval);
            let ss = store.open(bytes.clone());
            let reader = ss.read().map_err(err)?;
            let k = key.to_vec();
            let iter = if scan.reverse {
                reader.backward_find_sessions(&k, from, to)
            } else {
                reader.find_sessions(&k, from, to)
            }
            .map_err(err)?;
            take(
                iter.map(|r| {
                    r.map(|(w, v)| Hit {
                        order: order_key(start_segment(w.end, interval), &w.key, &[w.end, w.start]),
                        window: Windowed {
                            key: Bytes::from(w.key),
                            start: w.start,
                            end: w.end,
                        },
                        value: Bytes::from(v),
                    })
                }),
                scan,
            )?
        }
        (layout, kind) => {
            return Err(format!(
                "a {} store cannot answer a {kind:?} query",
                layout.kind()
            ));
        }
    };
    Ok(hits)
}

fn start_segment(t: i64, interval: i64) -> i64 {
    t.div_euclid(interval.max(1))
}

/// The scan's time bounds, narrowed (going forward) to the segments from the one of
/// `after` on: the entries of earlier segments all come before it.
fn narrow(scan: &TimeScan, interval: i64) -> (i64, i64) {
    let segment = scan.after.as_deref().and_then(segment_of);
    match segment {
        Some(s) if !scan.reverse => (scan.from.max(s.saturating_mul(interval)), scan.to),
        Some(s) if scan.kind == TimeKind::Window => {
            let last = s.saturating_add(1).saturating_mul(interval).saturating_sub(1);
            (scan.from, scan.to.min(last))
        }
        _ => (scan.from, scan.to),
    }
}

/// The entries after `scan.after`, at most `scan.limit` unless the last ones share an order
/// key.
fn take(
    iter: impl Iterator<Item = Result<Hit, streams_state::StoreError>>,
    scan: &TimeScan,
) -> Result<Vec<Hit>, String> {
    let mut out: Vec<Hit> = Vec::new();
    for hit in iter {
        let hit = hit.map_err(|e| e.to_string())?;
        if let Some(after) = &scan.after
            && !beyond(&hit.order, after, scan.reverse)
        {
            continue;
        }
        if out.len() >= scan.limit && out.last().is_some_and(|l| l.order != hit.order) {
            break;
        }
        out.push(hit);
    }
    Ok(out)
}

/// Merges the parts of several tasks: the first `limit` entries in order-key order
/// (descending when `reverse`, never splitting equal order keys), and whether the range may
/// hold more.
pub(crate) fn merge(
    parts: impl IntoIterator<Item = Vec<Hit>>,
    reverse: bool,
    limit: usize,
) -> (Vec<Hit>, bool) {
    let mut hits = Vec::new();
    let mut more = false;
    for h in parts {
        more |= h.len() >= limit;
        hits.extend(h);
    }
    // Stable: equal order keys (one task's duplicates) keep the task's order.
    if reverse {
        hits.sort_by(|a, b| b.order.cmp(&a.order));
    } else {
        hits.sort_by(|a, b| a.order.cmp(&b.order));
    }
    if hits.len() > limit {
        let cut = hits[limit - 1].order.clone();
        let keep = limit + hits[limit..].iter().take_while(|h| h.order == cut).count();
        hits.truncate(keep);
        more = true;
    }
    (hits, more)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(seg: i64, key: &str, start: i64) -> Hit {
        Hit {
            order: order_key(seg, key.as_bytes(), &[start]),
            window: Windowed {
                key: Bytes::copy_from_slice(key.as_bytes()),
                start,
                end: start + 10,
            },
            value: Bytes::new(),
        }
    }

    fn starts(h: &[Hit]) -> Vec<(String, i64)> {
        h.iter()
            .map(|h| {
                (
                    String::from_utf8_lossy(&h.window.key).into_owned(),
                    h.window.start,
                )
            })
            .collect()
    }

    #[test]
    fn order_keys_sort_by_segment_then_key_then_time_with_negative_times_first() {
        assert!(order_key(-1, b"z", &[-5]) < order_key(0, b"a", &[0]));
        assert!(order_key(0, b"a", &[7]) < order_key(0, b"b", &[1]));
        assert!(order_key(0, b"a", &[-7]) < order_key(0, b"a", &[1]));
        assert_eq!(segment_of(&order_key(-3, b"k", &[1])), Some(-3));
    }

    #[test]
    fn merged_parts_keep_order_and_never_split_duplicates() {
        let a = vec![hit(0, "a", 1), hit(0, "a", 1), hit(1, "a", 70)];
        let b = vec![hit(0, "b", 2)];
        let (h, more) = merge(vec![a.clone(), b.clone()], false, 1);
        assert_eq!(starts(&h), [("a".into(), 1), ("a".into(), 1)]);
        assert!(more);
        let (h, more) = merge(vec![a, b], true, 2);
        assert_eq!(starts(&h), [("a".into(), 70), ("b".into(), 2)]);
        assert!(more);
    }

    #[test]
    fn a_continued_scan_skips_what_came_before_and_the_segments_before_it() {
        let scan = |after: Option<Bytes>, reverse| TimeScan {
            kind: TimeKind::Window,
            key: None,
            from: 0,
            to: 1_000_000,
            reverse,
            after,
            limit: 2,
        };
        let hits = vec![hit(0, "a", 1), hit(0, "b", 1), hit(0, "b", 1), hit(1, "a", 70)];
        let first = take(hits.clone().into_iter().map(Ok), &scan(None, false)).unwrap();
        assert_eq!(
            starts(&first),
            [("a".into(), 1), ("b".into(), 1), ("b".into(), 1)]
        );
        let after = first.last().map(|h| h.order.clone());
        let rest = take(hits.into_iter().map(Ok), &scan(after.clone(), false)).unwrap();
        assert_eq!(starts(&rest), [("a".into(), 70)]);
        assert_eq!(narrow(&scan(after.clone(), false), 60), (0, 1_000_000));
        let late = Some(order_key(2, b"a", &[130]));
        assert_eq!(narrow(&scan(late.clone(), false), 60), (120, 1_000_000));
        assert_eq!(narrow(&scan(late, true), 60), (0, 179));
    }
}
