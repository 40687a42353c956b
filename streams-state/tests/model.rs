//! Model-based property tests: every store stack, driven by random operation sequences,
//! must behave exactly like a `BTreeMap<Vec<u8>, Vec<u8>>` — every read, every iterator
//! (fully, in order), and, for logged stacks, the changelog replayed onto a fresh store.
//!
//! The `*_shared_budget` stacks run their cache on a [`ThreadCache`] shared with a second,
//! rival cache that the operations write to as well (with its own model): the two caches
//! together never exceed the budget, and both keep answering as their models do.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use streams_state::{
    CachingKeyValueStore, ChangeLoggingKeyValueStore, InMemoryKeyValueStore, KeyRange, KeyValueIter,
    KeyValueStore, RocksDbKeyValueStore, RocksDbResources, StateStore, ThreadCache, VecChangelog,
};
use tempfile::TempDir;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Bytes that sit at the edges of the byte order, so bounds and prefix successors matter.
const ALPHABET: [u8; 5] = [0x00, 0x01, 0x7f, 0xfe, 0xff];

/// A budget that holds only a few entries, so eviction happens all the time.
const TINY_BUDGET: usize = 3 * (streams_state::ENTRY_OVERHEAD + 4);

/// The budget a stack's cache shares with a rival cache: a handful of entries in all.
const SHARED_BUDGET: usize = 6 * (streams_state::ENTRY_OVERHEAD + 4);

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    PutIfAbsent(Vec<u8>, Vec<u8>),
    PutAll(Vec<(Vec<u8>, Vec<u8>)>),
    Delete(Vec<u8>),
    DeleteRange(Bound<Vec<u8>>, Bound<Vec<u8>>),
    DeletePrefix(Vec<u8>),
    Flush,
    Get(Vec<u8>),
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>),
    ReverseRange(Bound<Vec<u8>>, Bound<Vec<u8>>),
    PrefixScan(Vec<u8>),
    All,
    ReverseAll,
    Count,
    /// A write to the rival cache sharing the stack's budget (when it has one).
    RivalPut(Vec<u8>, Vec<u8>),
    /// A delete in the rival cache.
    RivalDelete(Vec<u8>),
    /// A flush (commit) of the rival cache.
    RivalFlush,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(ALPHABET.to_vec()), 0..4)
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    // Empty values included: an empty value is a value, not a delete.
    prop::collection::vec(any::<u8>(), 0..3)
}

fn prefix() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => key(),
        1 => Just(Vec::new()),
        1 => Just(vec![0xff]),
        1 => Just(vec![0xff, 0xff]),
        1 => Just(vec![0x01, 0xff]),
    ]
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        Just(Bound::Unbounded),
        key().prop_map(Bound::Included),
        key().prop_map(Bound::Excluded)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (key(), value()).prop_map(|(k, v)| Op::PutIfAbsent(k, v)),
        2 => prop::collection::vec((key(), value()), 0..5).prop_map(Op::PutAll),
        4 => key().prop_map(Op::Delete),
        1 => (bound(), bound()).prop_map(|(f, t)| Op::DeleteRange(f, t)),
        1 => prefix().prop_map(Op::DeletePrefix),
        1 => Just(Op::Flush),
        3 => key().prop_map(Op::Get),
        2 => (bound(), bound()).prop_map(|(f, t)| Op::Range(f, t)),
        2 => (bound(), bound()).prop_map(|(f, t)| Op::ReverseRange(f, t)),
        2 => prefix().prop_map(Op::PrefixScan),
        1 => Just(Op::All),
        1 => Just(Op::ReverseAll),
        1 => Just(Op::Count),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..80)
}

fn rival_op() -> impl Strategy<Value = Op> {
    // Longer values than the stack's: the rival takes a large part of the budget.
    let long_value = prop::collection::vec(any::<u8>(), 0..24);
    prop_oneof![
        6 => (key(), long_value).prop_map(|(k, v)| Op::RivalPut(k, v)),
        2 => key().prop_map(Op::RivalDelete),
        1 => Just(Op::RivalFlush),
    ]
}

/// Operations on a stack and on the rival cache sharing its budget, interleaved.
fn shared_ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(prop_oneof![3 => op(), 2 => rival_op()], 1..120)
}

/// A second cache on the stack's budget, with its own model.
struct Rival {
    store: CachingKeyValueStore,
    model: Model,
    budget: ThreadCache,
}

/// A store stack under test, with what the test needs to know about it.
struct Stack {
    store: Box<dyn KeyValueStore>,
    /// The changelog of the logged layer, if any.
    log: Option<VecChangelog>,
    /// Whether `approximate_num_entries` is exact for this stack.
    exact_count: bool,
    /// The cache sharing the stack's budget, if any.
    rival: Option<Rival>,
    /// Keeps the RocksDB directory alive; dropped after the store.
    _dir: Option<TempDir>,
}

fn memory() -> Box<dyn KeyValueStore> {
    Box::new(InMemoryKeyValueStore::new("model"))
}

fn rocks() -> (Box<dyn KeyValueStore>, TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store =
        RocksDbKeyValueStore::open("model", dir.path(), &RocksDbResources::shared()).expect("open rocksdb");
    (Box::new(store), dir)
}

fn logged(inner: Box<dyn KeyValueStore>) -> (Box<dyn KeyValueStore>, VecChangelog) {
    let log = VecChangelog::default();
    (
        Box::new(ChangeLoggingKeyValueStore::new(inner, Box::new(log.clone()))),
        log,
    )
}

fn cached(inner: Box<dyn KeyValueStore>, budget: usize) -> Box<dyn KeyValueStore> {
    Box::new(CachingKeyValueStore::new(inner, budget))
}

/// A cache over `inner` on a budget of [`SHARED_BUDGET`], and a rival cache over memory on
/// the same budget.
fn cached_shared(inner: Box<dyn KeyValueStore>) -> (Box<dyn KeyValueStore>, Rival) {
    let budget = ThreadCache::new(SHARED_BUDGET);
    let store = CachingKeyValueStore::with_thread_cache(inner, budget.clone());
    let rival = Rival {
        store: CachingKeyValueStore::with_thread_cache(
            Box::new(InMemoryKeyValueStore::new("rival")),
            budget.clone(),
        ),
        model: Model::new(),
        budget,
    };
    (Box::new(store), rival)
}

fn collect(it: KeyValueIter<'_>) -> Result<Entries, TestCaseError> {
    it.map(|r| {
        r.map(|(k, v)| (k.to_vec(), v.to_vec()))
            .map_err(|e| TestCaseError::fail(e.to_string()))
    })
    .collect()
}

fn model_range(model: &Model, from: &Bound<Vec<u8>>, to: &Bound<Vec<u8>>) -> Entries {
    let r = KeyRange {
        from: from.clone(),
        to: to.clone(),
    };
    model
        .iter()
        .filter(|(k, _)| r.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn rev(mut e: Entries) -> Entries {
    e.reverse();
    e
}

fn slices(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

fn opt(v: Option<Bytes>) -> Option<Vec<u8>> {
    v.map(|b| b.to_vec())
}

macro_rules! ok {
    ($e:expr) => {
        $e.map_err(|e| TestCaseError::fail(format!("{}: {e}", stringify!($e))))?
    };
}

/// Runs `ops` on the stack and on the model, comparing every result.
fn run(mut stack: Stack, ops: &[Op]) -> Result<(), TestCaseError> {
    // `stack` drops its fields in order: the store before its directory.
    let (log, exact_count, mut rival) = (stack.log.take(), stack.exact_count, stack.rival.take());
    let s = stack.store.as_mut();
    let mut model = Model::new();
    for op in ops {
        match op {
            Op::RivalPut(k, v) => {
                if let Some(r) = rival.as_mut() {
                    ok!(r.store.put(k, v));
                    r.model.insert(k.clone(), v.clone());
                }
            }
            Op::RivalDelete(k) => {
                if let Some(r) = rival.as_mut() {
                    let got = opt(ok!(r.store.delete(k)));
                    prop_assert_eq!(got, r.model.remove(k), "rival delete {:?}", k);
                }
            }
            Op::RivalFlush => {
                if let Some(r) = rival.as_mut() {
                    ok!(r.store.flush());
                }
            }
            Op::Put(k, v) => {
                ok!(s.put(k, v));
                model.insert(k.clone(), v.clone());
            }
            Op::PutIfAbsent(k, v) => {
                let got = opt(ok!(s.put_if_absent(k, v)));
                prop_assert_eq!(&got, &model.get(k).cloned(), "put_if_absent {:?}", k);
                model.entry(k.clone()).or_insert_with(|| v.clone());
            }
            Op::PutAll(entries) => {
                let bytes: Vec<(Bytes, Bytes)> = entries
                    .iter()
                    .map(|(k, v)| (Bytes::from(k.clone()), Bytes::from(v.clone())))
                    .collect();
                ok!(s.put_all(&bytes));
                model.extend(entries.iter().cloned());
            }
            Op::Delete(k) => {
                let got = opt(ok!(s.delete(k)));
                prop_assert_eq!(got, model.remove(k), "delete {:?}", k);
            }
            Op::DeleteRange(f, t) => {
                ok!(s.delete_range(slices(f), slices(t)));
                let r = KeyRange {
                    from: f.clone(),
                    to: t.clone(),
                };
                model.retain(|k, _| !r.contains(k));
            }
            Op::DeletePrefix(p) => {
                ok!(s.delete_prefix(p));
                model.retain(|k, _| !k.starts_with(p));
            }
            Op::Flush => ok!(s.flush()),
            Op::Get(k) => prop_assert_eq!(opt(ok!(s.get(k))), model.get(k).cloned(), "get {:?}", k),
            Op::Range(f, t) => {
                let got = collect(ok!(s.range(slices(f), slices(t))))?;
                prop_assert_eq!(got, model_range(&model, f, t), "range {:?}..{:?}", f, t);
            }
            Op::ReverseRange(f, t) => {
                let got = collect(ok!(s.reverse_range(slices(f), slices(t))))?;
                prop_assert_eq!(
                    got,
                    rev(model_range(&model, f, t)),
                    "reverse_range {:?}..{:?}",
                    f,
                    t
                );
            }
            Op::PrefixScan(p) => {
                let got = collect(ok!(s.prefix_scan(p)))?;
                let want: Entries = model
                    .iter()
                    .filter(|(k, _)| k.starts_with(p))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                prop_assert_eq!(got, want, "prefix_scan {:?}", p);
            }
            Op::All => {
                let got = collect(ok!(s.all()))?;
                prop_assert_eq!(got, model_range(&model, &Bound::Unbounded, &Bound::Unbounded));
            }
            Op::ReverseAll => {
                let got = collect(ok!(s.reverse_all()))?;
                prop_assert_eq!(
                    got,
                    rev(model_range(&model, &Bound::Unbounded, &Bound::Unbounded))
                );
            }
            Op::Count => {
                if exact_count {
                    prop_assert_eq!(ok!(s.approximate_num_entries()), model.len() as u64);
                }
            }
        }
        if let Some(r) = &rival {
            // The two caches together stay within their budget, and it knows what they hold.
            let ours = s.stats().cached_bytes.unwrap_or(0);
            let used = r.budget.used_bytes();
            prop_assert_eq!(
                used as u64,
                ours + r.store.cached_bytes() as u64,
                "budget accounting"
            );
            prop_assert!(
                used <= r.budget.max_bytes(),
                "{} bytes cached, budget {}",
                used,
                r.budget.max_bytes()
            );
            if let Some(k) = op_key(op) {
                prop_assert_eq!(
                    opt(ok!(r.store.get(k))),
                    r.model.get(k).cloned(),
                    "rival get {:?}",
                    k
                );
            }
        }
    }
    if let Some(mut r) = rival {
        ok!(r.store.flush());
        let got = collect(ok!(r.store.all()))?;
        prop_assert_eq!(
            got,
            model_range(&r.model, &Bound::Unbounded, &Bound::Unbounded),
            "rival contents"
        );
        ok!(r.store.close());
    }
    ok!(s.flush());
    let everything = model_range(&model, &Bound::Unbounded, &Bound::Unbounded);
    prop_assert_eq!(collect(ok!(s.all()))?, everything.clone(), "final contents");
    if let Some(log) = log {
        let records = log.to_records();
        let mut replica = InMemoryKeyValueStore::new("replica");
        for batch in records.chunks(5) {
            ok!(replica.restore_batch(batch));
        }
        prop_assert_eq!(collect(ok!(replica.all()))?, everything, "changelog replay");
        prop_assert_eq!(ok!(replica.checkpoint()), records.last().map(|r| r.offset));
    }
    ok!(s.close());
    Ok(())
}

/// The key an operation names, if one.
fn op_key(op: &Op) -> Option<&Vec<u8>> {
    match op {
        Op::Put(k, _) | Op::PutIfAbsent(k, _) | Op::Delete(k) | Op::Get(k) => Some(k),
        Op::RivalPut(k, _) | Op::RivalDelete(k) => Some(k),
        _ => None,
    }
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn in_memory(ops in ops()) {
        run(Stack { store: memory(), log: None, exact_count: true, rival: None, _dir: None }, &ops)?;
    }

    #[test]
    fn caching_over_memory_tiny_budget(ops in ops()) {
        run(Stack { store: cached(memory(), TINY_BUDGET), log: None, exact_count: true, rival: None, _dir: None }, &ops)?;
    }

    #[test]
    fn caching_over_memory_no_budget(ops in ops()) {
        run(Stack { store: cached(memory(), 0), log: None, exact_count: true, rival: None, _dir: None }, &ops)?;
    }

    #[test]
    fn logging_over_memory(ops in ops()) {
        let (store, log) = logged(memory());
        run(Stack { store, log: Some(log), exact_count: true, rival: None, _dir: None }, &ops)?;
    }

    #[test]
    fn caching_over_logging_over_memory(ops in ops()) {
        let (store, log) = logged(memory());
        let store = cached(store, TINY_BUDGET);
        run(Stack { store, log: Some(log), exact_count: true, rival: None, _dir: None }, &ops)?;
    }

    #[test]
    fn caching_over_logging_over_memory_large_budget(ops in ops()) {
        let (store, log) = logged(memory());
        let store = cached(store, 1 << 20);
        run(Stack { store, log: Some(log), exact_count: true, rival: None, _dir: None }, &ops)?;
    }

    #[test]
    fn caching_over_memory_shared_budget(ops in shared_ops()) {
        let (store, rival) = cached_shared(memory());
        run(Stack { store, log: None, exact_count: true, rival: Some(rival), _dir: None }, &ops)?;
    }

    #[test]
    fn caching_over_logging_over_memory_shared_budget(ops in shared_ops()) {
        let (store, log) = logged(memory());
        let (store, rival) = cached_shared(store);
        run(Stack { store, log: Some(log), exact_count: true, rival: Some(rival), _dir: None }, &ops)?;
    }
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn rocksdb(ops in ops()) {
        let (store, dir) = rocks();
        run(Stack { store, log: None, exact_count: false, rival: None, _dir: Some(dir) }, &ops)?;
    }

    #[test]
    fn caching_over_rocksdb(ops in ops()) {
        let (store, dir) = rocks();
        let store = cached(store, 8 * TINY_BUDGET);
        run(Stack { store, log: None, exact_count: false, rival: None, _dir: Some(dir) }, &ops)?;
    }

    #[test]
    fn caching_over_logging_over_rocksdb(ops in ops()) {
        let (store, dir) = rocks();
        let (store, log) = logged(store);
        let store = cached(store, TINY_BUDGET);
        run(Stack { store, log: Some(log), exact_count: false, rival: None, _dir: Some(dir) }, &ops)?;
    }

    #[test]
    fn caching_over_logging_over_rocksdb_shared_budget(ops in shared_ops()) {
        let (store, dir) = rocks();
        let (store, log) = logged(store);
        let (store, rival) = cached_shared(store);
        run(Stack { store, log: Some(log), exact_count: false, rival: Some(rival), _dir: Some(dir) }, &ops)?;
    }
}
