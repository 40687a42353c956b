//! Queries of a settled application against the model of what was written: point
//! queries, whole-store reads, ranges, prefix scans, paging, a global store, and the
//! errors before `start` and after `close`.

use std::ops::Bound;
use std::time::{Duration, Instant};

use bytes::Bytes;
use streams_core::serdes::StringSerde;
use streams_core::{QueryError, Replica, State};
use streams_test_utils::kafka;

use crate::app::{fixture, start_and_process};
use crate::{Entries, Model, N, PARTITIONS, Store, USERS, read, retry, wait_until};

/// The entries of `model` within the bounds, ascending.
fn model_range(model: &Model, from: Bound<&str>, to: Bound<&str>) -> Entries {
    let above = |k: &str| match from {
        Bound::Included(f) => k >= f,
        Bound::Excluded(f) => k > f,
        Bound::Unbounded => true,
    };
    let below = |k: &str| match to {
        Bound::Included(t) => k <= t,
        Bound::Excluded(t) => k < t,
        Bound::Unbounded => true,
    };
    model
        .iter()
        .filter(|(k, _)| above(k) && below(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn owned(b: Bound<&str>) -> Bound<String> {
    b.map(str::to_owned)
}

/// (a) and (b): point queries, whole-store reads, ranges, prefix scans and paging against
/// the model.
fn check_reads(store: &Store, model: &Model) {
    let started = Instant::now();
    // Gets from 16 threads: a query waits up to a poll slice (5 ms) for an idle stream
    // thread, and the queries waiting together are answered together.
    let entries: Vec<_> = model.iter().collect();
    std::thread::scope(|s| {
        for part in entries.chunks(N / 16 + 1) {
            s.spawn(move || {
                for (k, v) in part {
                    assert_eq!(retry("get", || store.get(k)).as_ref(), Some(*v), "get({k:?})");
                }
            });
        }
    });
    for missing in ["nope", "user-07-99999", "user", ""] {
        assert_eq!(
            retry("get", || store.get(&missing.to_owned())),
            None,
            "get({missing:?})"
        );
    }
    let all: Entries = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let rev: Entries = all.iter().rev().cloned().collect();
    assert_eq!(read("all", || Ok(store.all().chunk_size(7))), all, "all()");
    assert_eq!(
        read("reverse_all", || Ok(store.reverse_all().chunk_size(7))),
        rev,
        "reverse_all()"
    );

    let keys: Vec<&str> = model.keys().map(String::as_str).collect();
    let (a, b) = (keys[100], keys[1500]);
    use Bound::{Excluded as Ex, Included as In, Unbounded as Un};
    let cases: Vec<(Bound<&str>, Bound<&str>)> = vec![
        (In(a), In(b)),
        (In(a), Ex(b)),
        (Ex(a), In(b)),
        (Ex(a), Ex(b)),
        (Un, In(a)),
        (Un, Ex(a)),
        (In(b), Un),
        (Ex(b), Un),
        (Un, Un),
        (In("user-05"), Ex("user-06")),
        (Ex("user-07"), In("user-07-")),
        (In(a), In(a)),
        (Ex(a), Ex(a)),
        (In(a), Ex(a)),
        (In(b), In(a)),
        (In("a"), In("b")),
        (In("zz"), Un),
        (Ex("z"), In("\u{10FFFF}x")),
    ];
    for (from, to) in cases {
        let want = model_range(model, from, to);
        let (f, t) = (owned(from), owned(to));
        let chunk = if want.len() > 200 { 61 } else { 7 };
        let got = read("range", || {
            Ok(store.range(f.as_ref(), t.as_ref())?.chunk_size(chunk))
        });
        assert_eq!(got, want, "range({from:?}, {to:?})");
        let got = read("reverse_range", || {
            Ok(store.reverse_range(f.as_ref(), t.as_ref())?.chunk_size(chunk))
        });
        let want: Entries = want.into_iter().rev().collect();
        assert_eq!(got, want, "reverse_range({from:?}, {to:?})");
    }
    for prefix in [
        "user-07-",
        "user-1",
        "user-",
        "",
        "zz",
        "z",
        "\u{10FFFF}",
        "user-07-0001",
    ] {
        let want: Entries = all
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .cloned()
            .collect();
        let p = prefix.to_owned();
        let got = read("prefix_scan", || {
            Ok(store.prefix_scan(&p, &StringSerde)?.chunk_size(13))
        });
        assert_eq!(got, want, "prefix_scan({prefix:?})");
    }

    // (b) Paging, forwards through `next_chunk` and backwards through the iterator.
    let (from, to) = (Ex("user-02"), In("user-17"));
    let want = model_range(model, from, to);
    let (f, t) = (owned(from), owned(to));
    let (forwards, pages) = paged(store, f.as_ref(), t.as_ref(), false);
    assert_eq!(pages, want.len().div_ceil(100));
    assert_eq!(forwards, want, "paged forwards");
    let want: Entries = want.into_iter().rev().collect();
    assert_eq!(
        paged(store, f.as_ref(), t.as_ref(), true).0,
        want,
        "paged backwards"
    );
    println!(
        "checked {} entries' reads in {:?}",
        model.len(),
        started.elapsed()
    );
}

/// A range read in pages of 100 entries, each by a new cursor resumed after the last key
/// of the page before; and the number of pages.
fn paged(store: &Store, from: Bound<&String>, to: Bound<&String>, reverse: bool) -> (Entries, usize) {
    let (mut entries, mut pages, mut last) = (Entries::new(), 0, None::<Bytes>);
    loop {
        let (page, last_key) = retry("page", || {
            let c = if reverse {
                store.reverse_range(from, to)?
            } else {
                store.range(from, to)?
            };
            let mut c = match &last {
                Some(l) => c.chunk_size(100).resume_after(l.clone()),
                None => c.chunk_size(100),
            };
            let page = if reverse {
                c.by_ref().take(100).collect::<Result<Entries, _>>()?
            } else {
                c.next_chunk()?.unwrap_or_default()
            };
            Ok((page, c.last_key().cloned()))
        });
        if page.is_empty() {
            return (entries, pages);
        }
        entries.extend(page);
        pages += 1;
        last = last_key;
    }
}

/// The state of a `NotRunning` error (which is not retriable).
fn not_running<T: std::fmt::Debug>(r: Result<T, QueryError>) -> Option<State> {
    match r {
        Err(e @ QueryError::NotRunning { state }) => Some(state).filter(|_| !e.is_retriable()),
        other => panic!("expected NotRunning: {other:?}"),
    }
}

#[test]
fn in_memory_store_and_global_store_answer_point_range_and_prefix_queries() {
    let Some(bootstrap) = kafka::require_kafka("interactive_queries_kafka in_memory") else {
        return;
    };
    let mut f = fixture(bootstrap, false, true, 2);
    // (d) A handle made before start answers NotRunning; an unknown name is refused.
    let store = f.app.store(&f.kv).unwrap();
    let key = "user-07".to_owned();
    assert_eq!(not_running(store.get(&key)), Some(State::Created));
    assert_eq!(not_running(store.all().next().unwrap()), Some(State::Created));
    match f.app.store_named("nope", StringSerde, StringSerde) {
        Err(QueryError::UnknownStore(name)) => assert_eq!(name, "nope"),
        other => panic!("unknown store: {other:?}"),
    }

    start_and_process(&mut f.app, 2 * N as u64);
    check_reads(&store, &f.model);
    assert_eq!(retry("count", || store.approximate_num_entries()), N as u64);
    let named = f.app.store_named("kv", StringSerde, StringSerde).unwrap();
    assert_eq!(retry("get", || named.get(&key)).as_ref(), f.model.get(&key));
    // Without standbys, every partition's copy is a running active task's, and a stale
    // handle reads what the plain one does.
    let lags = retry("lags", || store.partition_lags());
    assert_eq!(
        lags.keys().copied().collect::<Vec<_>>(),
        (0..PARTITIONS).collect::<Vec<_>>()
    );
    assert!(
        lags.values()
            .all(|l| l.replica == Replica::Active && l.offset_lag == Some(0)),
        "{lags:?}"
    );
    let stale = store.clone().stale_stores();
    assert_eq!(retry("stale get", || stale.get(&key)).as_ref(), f.model.get(&key));
    let all = read("stale all", || Ok(stale.all().chunk_size(7)));
    assert_eq!(all, f.model.clone().into_iter().collect::<Entries>());

    // (c) The global store (RocksDB here), answered from one thread's replica.
    let users = f.app.store(f.users_store.as_ref().unwrap()).unwrap();
    let all_users = || users.all().collect::<Result<Entries, _>>();
    wait_until("the global store's entries", Duration::from_secs(30), || {
        all_users().is_ok_and(|u| u.len() == USERS)
    });
    let want: Entries = f.users.clone().into_iter().collect();
    assert_eq!(all_users().unwrap(), want);
    for (k, v) in &f.users {
        assert_eq!(retry("global get", || users.get(k)).as_ref(), Some(v));
    }
    assert_eq!(retry("global get", || users.get(&"u999".to_owned())), None);
    assert!(
        users.partition_lags().unwrap().is_empty(),
        "a global store is no task's"
    );
    let from = "u010".to_owned();
    let got = read("global range", || {
        Ok(users
            .reverse_range(Bound::Excluded(&from), Bound::Unbounded)?
            .chunk_size(7))
    });
    let want: Entries = want.iter().rev().filter(|(k, _)| *k > from).cloned().collect();
    assert_eq!(got, want);
    let got = read("global prefix", || {
        users.prefix_scan(&"u04".to_owned(), &StringSerde)
    });
    assert_eq!(got.len(), 10);
    println!(
        "global store: approximate_num_entries {} of {USERS}",
        retry("count", || users.approximate_num_entries())
    );

    // (d) After close: NotRunning.
    assert!(f.app.close(Duration::from_secs(30)));
    for r in [store.get(&key), users.get(&key)] {
        assert_eq!(not_running(r), Some(State::NotRunning));
    }
    assert_eq!(not_running(store.all().next().unwrap()), Some(State::NotRunning));
}

#[test]
fn rocksdb_store_behind_a_cache_answers_point_range_and_prefix_queries() {
    let Some(bootstrap) = kafka::require_kafka("interactive_queries_kafka rocksdb") else {
        return;
    };
    let mut f = fixture(bootstrap, true, false, 2);
    let store = f.app.store(&f.kv).unwrap();
    start_and_process(&mut f.app, 2 * N as u64);
    check_reads(&store, &f.model);
    let n = retry("count", || store.approximate_num_entries());
    println!("rocksdb: approximate_num_entries {n} of {N}");
    assert!(n > 0);
    assert!(f.app.close(Duration::from_secs(30)));
}
