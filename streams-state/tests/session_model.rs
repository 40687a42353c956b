//! Session stores against a `BTreeMap` model: random puts, removes, exact fetches,
//! `find_sessions` and key ranges (forward and backward) and retention by session end, with
//! negative times and keys that are byte prefixes of each other, over the in-memory and the
//! RocksDB stack and once through caching and change-logging.

mod common;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use proptest::prelude::*;
use streams_state::serde::{StringSerde, U64Serde};
use streams_state::{
    SessionStore, SessionStoreBuilder, SharedKeyValueStore, StoreBuildContext, StoreBuilder, Stores,
    VecChangelog, Windowed,
};

use common::{enc, in_byte_order, read, rev, stored_key, visible};

const RETENTION: i64 = 240_000; // segments of 120 s
const KEYS: [&str; 5] = ["", "a", "ab", "abc", "b"];

#[derive(Debug, Clone)]
enum Op {
    Put(usize, i64, i64, u64),
    Remove(usize, i64, i64),
    FetchSession(usize, i64, i64),
    Find(usize, i64, i64, bool),
    KeyRange(Option<usize>, Option<usize>, i64, i64, bool),
    All(bool),
    Flush,
}

fn time() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => (-8i64..8).prop_map(|s| s * 60_000),
        1 => -900_000i64..900_000,
    ]
}

fn len() -> impl Strategy<Value = i64> {
    prop_oneof![Just(0i64), Just(1), Just(60_000), Just(130_000)]
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    prop_oneof![
        6 => (key.clone(), time(), len(), 0u64..1000).prop_map(|(k, t, l, v)| Op::Put(k, t, t + l, v)),
        2 => (key.clone(), time(), len()).prop_map(|(k, t, l)| Op::Remove(k, t, t + l)),
        2 => (key.clone(), time(), len()).prop_map(|(k, t, l)| Op::FetchSession(k, t, t + l)),
        3 => (key.clone(), time(), time(), any::<bool>()).prop_map(|(k, a, b, r)| Op::Find(k, a, b, r)),
        2 => (prop::option::of(key.clone()), prop::option::of(key), time(), time(), any::<bool>())
            .prop_map(|(a, b, e, s, r)| Op::KeyRange(a, b, e, s, r)),
        1 => any::<bool>().prop_map(Op::All),
        1 => Just(Op::Flush),
    ]
}

type Entry = (Windowed<String>, u64);

/// The documented model: sessions by (key, end, start); visible iff end > st - retention.
#[derive(Default)]
struct Model {
    sessions: BTreeMap<(String, i64, i64), u64>,
    stream_time: Option<i64>,
}

impl Model {
    fn visible(&self, end: i64) -> bool {
        visible(self.stream_time, RETENTION, end)
    }

    fn observe(&mut self, end: i64) -> bool {
        self.stream_time = Some(self.stream_time.map_or(end, |s| s.max(end)));
        self.visible(end)
    }

    /// Visible sessions passing `f`, in the store's byte order of `[segment][key][end][start]`.
    fn select(&self, f: impl Fn(&str, i64, i64) -> bool) -> Vec<Entry> {
        let v = self
            .sessions
            .iter()
            .filter(|((k, e, s), _)| self.visible(*e) && f(k, *s, *e))
            .map(|((k, e, s), v)| {
                let w = Windowed {
                    key: k.clone(),
                    start: *s,
                    end: *e,
                };
                (stored_key(RETENTION, *e, k, &[&enc(*e), &enc(*s)]), (w, *v))
            })
            .collect();
        in_byte_order(v)
    }
}

fn check(store: &SessionStore<StringSerde, U64Serde>, ops: &[Op]) {
    let mut model = Model::default();
    let w = |k: usize, start: i64, end: i64| Windowed {
        key: KEYS[k].to_owned(),
        start,
        end,
    };
    for op in ops {
        match op {
            Op::Put(k, s, e, v) => {
                store.put(&w(*k, *s, *e), v).unwrap();
                if model.observe(*e) {
                    model.sessions.insert((KEYS[*k].to_owned(), *e, *s), *v);
                }
            }
            Op::Remove(k, s, e) => {
                store.remove(&w(*k, *s, *e)).unwrap();
                if model.observe(*e) {
                    model.sessions.remove(&(KEYS[*k].to_owned(), *e, *s));
                }
            }
            Op::FetchSession(k, s, e) => {
                let want = model
                    .sessions
                    .get(&(KEYS[*k].to_owned(), *e, *s))
                    .filter(|_| model.visible(*e))
                    .copied();
                let key = KEYS[*k].to_owned();
                assert_eq!(store.fetch_session(&key, *s, *e).unwrap(), want, "{op:?}");
                let reader = store.read().unwrap();
                assert_eq!(reader.fetch_session(&key, *s, *e).unwrap(), want, "{op:?}");
            }
            Op::Find(k, ee, ls, r) => {
                let want = rev(
                    model.select(|key, s, e| key == KEYS[*k] && e >= *ee && s <= *ls),
                    *r,
                );
                let key = KEYS[*k].to_owned();
                let reader = store.read().unwrap();
                let got = read(
                    *r,
                    || reader.find_sessions(&key, *ee, *ls),
                    || reader.backward_find_sessions(&key, *ee, *ls),
                );
                assert_eq!(got, want, "{op:?}");
                let all_of_key = rev(model.select(|key, _, _| key == KEYS[*k]), *r);
                let got = read(*r, || reader.fetch(&key), || reader.backward_fetch(&key));
                assert_eq!(got, all_of_key, "fetch of {op:?}");
            }
            Op::KeyRange(a, b, ee, ls, r) => {
                let (lo, hi) = (a.map(|i| KEYS[i]), b.map(|i| KEYS[i]));
                let want = rev(
                    model.select(|k, s, e| {
                        lo.is_none_or(|lo| k >= lo) && hi.is_none_or(|hi| k <= hi) && e >= *ee && s <= *ls
                    }),
                    *r,
                );
                let (lo, hi) = (lo.map(str::to_owned), hi.map(str::to_owned));
                let reader = store.read().unwrap();
                let (lo, hi) = (lo.as_ref(), hi.as_ref());
                let got = read(
                    *r,
                    || reader.find_sessions_in_key_range(lo, hi, *ee, *ls),
                    || reader.backward_find_sessions_in_key_range(lo, hi, *ee, *ls),
                );
                assert_eq!(got, want, "{op:?}");
                let want = rev(
                    model.select(|k, _, _| {
                        lo.is_none_or(|lo| k >= lo.as_str()) && hi.is_none_or(|hi| k <= hi.as_str())
                    }),
                    *r,
                );
                let got = read(
                    *r,
                    || reader.fetch_key_range(lo, hi),
                    || reader.backward_fetch_key_range(lo, hi),
                );
                assert_eq!(got, want, "fetch_key_range of {op:?}");
            }
            Op::All(r) => {
                let want = rev(model.select(|_, _, _| true), *r);
                let reader = store.read().unwrap();
                let got = read(*r, || reader.all(), || reader.backward_all());
                assert_eq!(got, want, "{op:?}");
            }
            Op::Flush => store.flush().unwrap(),
        }
    }
}

fn open(
    b: &SessionStoreBuilder<StringSerde, U64Serde>,
    ctx: StoreBuildContext,
) -> SessionStore<StringSerde, U64Serde> {
    let shared: SharedKeyValueStore = Rc::new(RefCell::new(b.build(ctx).unwrap()));
    b.open(shared)
}

const RET: Duration = Duration::from_millis(RETENTION as u64);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn in_memory_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        let b = Stores::in_memory_session_store("s", RET, StringSerde, U64Serde).without_logging();
        check(&open(&b, StoreBuildContext::default()), &ops);
    }

    #[test]
    fn rocksdb_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let b = Stores::persistent_session_store("s", RET, StringSerde, U64Serde);
        check(&open(&b, StoreBuildContext::new(Some(dir.path().to_owned()))), &ops);
    }

    #[test]
    fn cached_and_logged_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        let b = Stores::in_memory_session_store("s", RET, StringSerde, U64Serde).with_caching();
        let ctx = StoreBuildContext::default()
            .with_changelog(Box::new(VecChangelog::default()))
            .with_cache_max_bytes(300);
        check(&open(&b, ctx), &ops);
    }
}
