//! The versioned store against a model (a map of each key's versions), in memory and on
//! RocksDB, and restored from its changelog.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};
use std::rc::Rc;
use std::time::Duration;

use proptest::prelude::*;

use crate::serde::{StringSerde, U64Serde};
use crate::versioned::{PutOutcome, VersionedKeyValueStore, VersionedRecord};
use crate::{StoreBuildContext, StoreBuilder, Stores, VecChangelog};

type Store = VersionedKeyValueStore<StringSerde, U64Serde>;

#[derive(Debug, Clone)]
enum Op {
    Put(String, Option<u64>, i64),
    Delete(String, i64),
    Get(String),
    GetAsOf(String, i64),
}

/// What the store should do: every version of every key, and the stream time.
struct Model {
    retention: i64,
    stream_time: i64,
    versions: BTreeMap<String, BTreeMap<i64, Option<u64>>>,
}

impl Model {
    fn put(&mut self, k: &str, v: Option<u64>, t: i64) -> PutOutcome {
        let stream_time = self.stream_time.max(t);
        if t < stream_time.saturating_sub(self.retention) {
            return PutOutcome::Expired;
        }
        self.stream_time = stream_time;
        let history = self.versions.entry(k.to_owned()).or_default();
        let newer = history.range((Excluded(t), Unbounded)).next().map(|(ts, _)| *ts);
        history.insert(t, v);
        newer.map_or(PutOutcome::Latest, PutOutcome::ValidTo)
    }

    fn get(&self, k: &str) -> Option<VersionedRecord<u64>> {
        let (t, v) = self.versions.get(k)?.iter().next_back()?;
        Some(VersionedRecord {
            value: (*v)?,
            timestamp: *t,
            valid_to: None,
        })
    }

    fn get_as_of(&self, k: &str, at: i64) -> Option<VersionedRecord<u64>> {
        if at < self.stream_time.saturating_sub(self.retention) {
            return None;
        }
        let history = self.versions.get(k)?;
        let (t, v) = history.range(..=at).next_back()?;
        Some(VersionedRecord {
            value: (*v)?,
            timestamp: *t,
            valid_to: history.range((Excluded(*t), Unbounded)).next().map(|(ts, _)| *ts),
        })
    }
}

fn op() -> impl Strategy<Value = Op> {
    let key = prop::sample::select(vec!["", "a", "ab", "b", "\u{0}"]).prop_map(str::to_owned);
    let time = prop_oneof![-20i64..120, Just(i64::MIN), Just(i64::MAX)];
    prop_oneof![
        4 => (key.clone(), prop::option::weighted(0.8, 0u64..100), time.clone()).prop_map(|(k, v, t)| Op::Put(k, v, t)),
        1 => (key.clone(), time.clone()).prop_map(|(k, t)| Op::Delete(k, t)),
        1 => key.clone().prop_map(Op::Get),
        3 => (key, time).prop_map(|(k, t)| Op::GetAsOf(k, t)),
    ]
}

/// Runs `ops` on `store` and the model, comparing every answer; then every key at every
/// time of interest.
fn check(store: &Store, model: &mut Model, ops: &[Op]) -> Result<(), TestCaseError> {
    for op in ops {
        match op {
            Op::Put(k, v, t) => prop_assert_eq!(
                store.put(k, v.as_ref(), *t).unwrap(),
                model.put(k, *v, *t),
                "{:?}",
                op
            ),
            Op::Delete(k, t) => {
                let expected = model.get_as_of(k, *t);
                model.put(k, None, *t);
                prop_assert_eq!(store.delete(k, *t).unwrap(), expected, "{:?}", op);
            }
            Op::Get(k) => prop_assert_eq!(store.get(k).unwrap(), model.get(k), "{:?}", op),
            Op::GetAsOf(k, t) => prop_assert_eq!(
                store.get_as_of(k, *t).unwrap(),
                model.get_as_of(k, *t),
                "{:?}",
                op
            ),
        }
    }
    prop_assert_eq!(store.observed_stream_time().unwrap(), model.stream_time);
    compare_all(store, model)
}

fn compare_all(store: &Store, model: &Model) -> Result<(), TestCaseError> {
    for k in ["", "a", "ab", "b", "\u{0}"] {
        prop_assert_eq!(store.get(&k.to_owned()).unwrap(), model.get(k));
        for t in [i64::MIN, -21, -1, 0, 7, 50, 119, 120, i64::MAX] {
            prop_assert_eq!(
                store.get_as_of(&k.to_owned(), t).unwrap(),
                model.get_as_of(k, t),
                "{} at {}",
                k,
                t
            );
        }
    }
    Ok(())
}

fn shared(store: Box<dyn crate::KeyValueStore>) -> crate::SharedKeyValueStore {
    Rc::new(RefCell::new(store))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn in_memory_matches_the_model_and_restores_from_its_changelog(
        retention in 0i64..60,
        ops in prop::collection::vec(op(), 0..60),
    ) {
        let builder = Stores::in_memory_versioned_kv("v", Duration::from_millis(retention as u64), StringSerde, U64Serde);
        let changelog = VecChangelog::default();
        let ctx = StoreBuildContext::default().with_changelog(Box::new(changelog.clone()));
        let store = builder.open(shared(builder.build(ctx).unwrap()));
        let mut model = Model { retention, stream_time: i64::MIN, versions: BTreeMap::new() };
        check(&store, &mut model, &ops)?;

        let mut restored = builder.build(StoreBuildContext::default()).unwrap();
        restored.restore_batch(&changelog.to_records()).unwrap();
        let restored = builder.open(shared(restored));
        prop_assert_eq!(restored.observed_stream_time().unwrap(), model.stream_time);
        compare_all(&restored, &model)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn rocksdb_matches_the_model(retention in 0i64..60, ops in prop::collection::vec(op(), 0..60)) {
        let dir = tempfile::tempdir().unwrap();
        let builder = Stores::persistent_versioned_kv("v", Duration::from_millis(retention as u64), StringSerde, U64Serde);
        let ctx = StoreBuildContext::new(Some(dir.path().to_path_buf()));
        let store = builder.open(shared(builder.build(ctx).unwrap()));
        let mut model = Model { retention, stream_time: i64::MIN, versions: BTreeMap::new() };
        check(&store, &mut model, &ops)?;
    }
}

#[test]
fn expired_versions_are_removed_when_their_key_is_written() {
    let builder = Stores::in_memory_versioned_kv("v", Duration::from_millis(10), StringSerde, U64Serde);
    let inner = shared(builder.build(StoreBuildContext::default()).unwrap());
    let store = builder.open(inner.clone());
    let k = "k".to_owned();
    for t in [0, 5, 8, 30, 31] {
        store.put(&k, Some(&(t as u64)), t).unwrap();
    }
    // Stream time 31, horizon 21: the version at 8 answers get_as_of(21..30); 0 and 5 are gone.
    assert_eq!(inner.borrow().approximate_num_entries().unwrap(), 1 + 3);
    assert_eq!(store.get_as_of(&k, 21).unwrap().map(|r| r.value), Some(8));
    assert_eq!(store.get_as_of(&k, 20).unwrap(), None);
    assert_eq!(store.put(&k, Some(&1), 20).unwrap(), PutOutcome::Expired);
    assert_eq!(store.put(&k, Some(&1), 21).unwrap(), PutOutcome::ValidTo(30));
    assert_eq!(
        builder.logging_config().unwrap()["min.compaction.lag.ms"],
        "86400010"
    );
    assert!(!builder.caching());
    assert_eq!(
        builder.type_name(),
        "VersionedKeyValueStore<StringSerde, U64Serde>"
    );
}
