//! Window stores against a `BTreeMap` model: random puts, deletes, fetches, time and key
//! ranges (forward and backward) and retention, with negative times and keys that are byte
//! prefixes of each other, over the in-memory and the RocksDB stack and once through
//! caching (a budget small enough to evict) and change-logging. Every read is compared in
//! full, orders included, as the `streams_state::window` docs state them.

mod common;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use proptest::prelude::*;
use streams_state::serde::{StringSerde, U64Serde};
use streams_state::{
    SharedKeyValueStore, StoreBuildContext, StoreBuilder, Stores, VecChangelog, WindowStore,
    WindowStoreBuilder, Windowed,
};

use common::{enc, in_byte_order, read, rev, stored_key, visible};

const RETENTION: i64 = 240_000; // segments of 120 s
const WINDOW: i64 = 30_000;
const KEYS: [&str; 6] = ["", "a", "ab", "abc", "b", "ba"];

#[derive(Debug, Clone)]
enum Op {
    Put(usize, i64, Option<u64>),
    Fetch(usize, i64),
    Range(usize, i64, i64, bool),
    KeyRange(Option<usize>, Option<usize>, i64, i64, bool),
    All(bool),
    FetchAll(i64, i64, bool),
    Flush,
}

fn time() -> impl Strategy<Value = i64> {
    prop_oneof![
        -900_000i64..900_000,
        (-8i64..8).prop_map(|s| s * 120_000),
        (-8i64..8).prop_map(|s| s * 120_000 - 1),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS.len();
    prop_oneof![
        6 => (key.clone(), time(), prop::option::weighted(0.8, 0u64..1000)).prop_map(|(k, t, v)| Op::Put(k, t, v)),
        2 => (key.clone(), time()).prop_map(|(k, t)| Op::Fetch(k, t)),
        2 => (key.clone(), time(), time(), any::<bool>()).prop_map(|(k, a, b, r)| Op::Range(k, a.min(b), a.max(b), r)),
        2 => (prop::option::of(key.clone()), prop::option::of(key), time(), time(), any::<bool>())
            .prop_map(|(a, b, f, t, r)| Op::KeyRange(a, b, f.min(t), f.max(t), r)),
        1 => any::<bool>().prop_map(Op::All),
        1 => (time(), time(), any::<bool>()).prop_map(|(a, b, r)| Op::FetchAll(a.min(b), a.max(b), r)),
        1 => Just(Op::Flush),
    ]
}

/// The documented model: entries by (key, start, seq); visible iff start > st - retention.
#[derive(Default)]
struct Model {
    entries: BTreeMap<(String, i64, u32), u64>,
    stream_time: Option<i64>,
    seq: u32,
    dups: bool,
}

impl Model {
    fn visible(&self, t: i64) -> bool {
        visible(self.stream_time, RETENTION, t)
    }

    fn put(&mut self, key: &str, t: i64, v: Option<u64>) {
        self.stream_time = Some(self.stream_time.map_or(t, |s| s.max(t)));
        if !self.visible(t) {
            return;
        }
        match (v, self.dups) {
            (Some(v), true) => {
                self.seq += 1;
                self.entries.insert((key.to_owned(), t, self.seq), v);
            }
            (Some(v), false) => {
                self.entries.insert((key.to_owned(), t, 0), v);
            }
            (None, true) => {}
            (None, false) => {
                self.entries.remove(&(key.to_owned(), t, 0));
            }
        }
    }

    /// Visible entries passing `f`, in the store's byte order of
    /// `[segment][key][start][seq]`.
    fn select(&self, f: impl Fn(&str, i64) -> bool) -> Vec<(Windowed<String>, u64)> {
        let v = self
            .entries
            .iter()
            .filter(|((k, t, _), _)| self.visible(*t) && f(k, *t))
            .map(|((k, t, s), v)| {
                let w = Windowed {
                    key: k.clone(),
                    start: *t,
                    end: t + WINDOW,
                };
                (
                    stored_key(RETENTION, *t, k, &[&enc(*t), &s.to_be_bytes()]),
                    (w, *v),
                )
            })
            .collect();
        in_byte_order(v)
    }

    /// Entries in segments not yet dropped (the stored ones, visible or not).
    fn stored(&self) -> usize {
        let live = |t: i64| match self.stream_time {
            None => true,
            Some(st) => {
                let oldest = i64::try_from(i128::from(st) - i128::from(RETENTION) + 1).unwrap_or(i64::MIN);
                t.div_euclid(RETENTION / 2) >= oldest.div_euclid(RETENTION / 2)
            }
        };
        self.entries.keys().filter(|(_, t, _)| live(*t)).count()
    }
}

/// Runs `ops` against `store` and the model; `exact_count`: the stack's entry count is exact.
fn check(store: &WindowStore<StringSerde, U64Serde>, dups: bool, ops: &[Op], exact_count: bool) {
    let mut model = Model {
        dups,
        ..Model::default()
    };
    let s = |i: usize| KEYS[i].to_owned();
    for op in ops {
        match op {
            Op::Put(k, t, v) => {
                store.put(&s(*k), v.as_ref(), *t).unwrap();
                model.put(KEYS[*k], *t, *v);
            }
            Op::Fetch(k, t) => {
                let want = model
                    .entries
                    .range((s(*k), *t, 0)..=(s(*k), *t, u32::MAX))
                    .find(|_| model.visible(*t))
                    .map(|(_, v)| *v);
                assert_eq!(store.fetch(&s(*k), *t).unwrap(), want, "{op:?}");
            }
            Op::Range(k, from, to, r) => {
                let mut want: Vec<(i64, u32, u64)> = model
                    .entries
                    .iter()
                    .filter(|((key, t, _), _)| {
                        key == KEYS[*k] && (*from..=*to).contains(t) && model.visible(*t)
                    })
                    .map(|((_, t, seq), v)| (*t, *seq, *v))
                    .collect();
                want.sort();
                let want: Vec<(i64, u64)> = rev(want.into_iter().map(|(t, _, v)| (t, v)).collect(), *r);
                let reader = store.read().unwrap();
                let got = read(
                    *r,
                    || reader.fetch_range(&s(*k), *from, *to),
                    || reader.backward_fetch_range(&s(*k), *from, *to),
                );
                assert_eq!(got, want, "{op:?}");
            }
            Op::KeyRange(a, b, from, to, r) => {
                let (lo, hi) = (a.map(|i| KEYS[i]), b.map(|i| KEYS[i]));
                let want = rev(
                    model.select(|k, t| {
                        lo.is_none_or(|lo| k >= lo)
                            && hi.is_none_or(|hi| k <= hi)
                            && (*from..=*to).contains(&t)
                    }),
                    *r,
                );
                let (lo, hi) = (a.map(s), b.map(s));
                let reader = store.read().unwrap();
                let (lo, hi) = (lo.as_ref(), hi.as_ref());
                let got = read(
                    *r,
                    || reader.fetch_key_range(lo, hi, *from, *to),
                    || reader.backward_fetch_key_range(lo, hi, *from, *to),
                );
                assert_eq!(got, want, "{op:?}");
            }
            Op::All(r) => {
                let want = rev(model.select(|_, _| true), *r);
                let reader = store.read().unwrap();
                let got = read(*r, || reader.all(), || reader.backward_all());
                assert_eq!(got, want, "{op:?}");
            }
            Op::FetchAll(from, to, r) => {
                let want = rev(model.select(|_, t| (*from..=*to).contains(&t)), *r);
                let reader = store.read().unwrap();
                let got = read(
                    *r,
                    || reader.fetch_all(*from, *to),
                    || reader.backward_fetch_all(*from, *to),
                );
                assert_eq!(got, want, "{op:?}");
            }
            Op::Flush => {
                store.flush().unwrap();
                if exact_count {
                    let raw = shared_of(store);
                    let n = raw.borrow().approximate_num_entries().unwrap();
                    assert_eq!(n as usize, model.stored(), "expired segments are dropped whole");
                }
            }
        }
    }
}

thread_local! {
    static RAW: RefCell<Option<SharedKeyValueStore>> = const { RefCell::new(None) };
}

fn shared_of(_: &WindowStore<StringSerde, U64Serde>) -> SharedKeyValueStore {
    RAW.with(|r| r.borrow().clone().expect("a store is open"))
}

fn open(
    builder: &WindowStoreBuilder<StringSerde, U64Serde>,
    ctx: StoreBuildContext,
) -> WindowStore<StringSerde, U64Serde> {
    let shared: SharedKeyValueStore = Rc::new(RefCell::new(builder.build(ctx).unwrap()));
    RAW.with(|r| *r.borrow_mut() = Some(shared.clone()));
    builder.open(shared)
}

/// The builder of the store under test: in memory or persistent, with or without
/// duplicates.
fn builder(persistent: bool, dups: bool) -> WindowStoreBuilder<StringSerde, U64Serde> {
    let (retention, window) = (
        Duration::from_millis(RETENTION as u64),
        Duration::from_millis(WINDOW as u64),
    );
    if persistent {
        Stores::persistent_window_store("w", retention, window, dups, StringSerde, U64Serde)
    } else {
        Stores::in_memory_window_store("w", retention, window, dups, StringSerde, U64Serde)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn in_memory_matches_the_model(dups in any::<bool>(), ops in prop::collection::vec(op(), 1..120)) {
        let b = builder(false, dups).without_logging();
        check(&open(&b, StoreBuildContext::default()), dups, &ops, true);
    }

    #[test]
    fn rocksdb_matches_the_model(dups in any::<bool>(), ops in prop::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let b = builder(true, dups);
        let store = open(&b, StoreBuildContext::new(Some(dir.path().to_owned())));
        check(&store, dups, &ops, false);
        drop(store);
        RAW.with(|r| r.borrow_mut().take());
    }

    #[test]
    fn cached_and_logged_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        let b = builder(false, false).with_caching();
        let ctx = StoreBuildContext::default()
            .with_changelog(Box::new(VecChangelog::default()))
            .with_cache_max_bytes(300);
        check(&open(&b, ctx), false, &ops, false);
    }
}
