//! Restore of window and session stores: what a logged (and cached) store writes to its
//! changelog, replayed with `restore_batch` into a fresh store, gives the same visible
//! contents; windows expired before or during the replay stay invisible and their segments
//! are gone; a RocksDB store reopened recovers its stream time from its last segment.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use streams_state::serde::{StringSerde, U64Serde};
use streams_state::{
    KeyValueStore, RocksDbKeyValueStore, RocksDbResources, SessionStore, SharedKeyValueStore,
    StoreBuildContext, StoreBuilder, Stores, VecChangelog, WindowStore, WindowStoreBuilder, Windowed,
};

const MINUTE: i64 = 60_000;
const RETENTION: Duration = Duration::from_secs(600); // segments of 5 minutes

fn window_builder(persistent: bool) -> WindowStoreBuilder<StringSerde, U64Serde> {
    let size = Duration::from_secs(60);
    if persistent {
        Stores::persistent_window_store("w", RETENTION, size, false, StringSerde, U64Serde)
    } else {
        Stores::in_memory_window_store("w", RETENTION, size, false, StringSerde, U64Serde)
    }
}

fn shared(store: Box<dyn KeyValueStore>) -> SharedKeyValueStore {
    Rc::new(RefCell::new(store))
}

fn all(store: &WindowStore<StringSerde, U64Serde>) -> Vec<(Windowed<String>, u64)> {
    let reader = store.read().unwrap();
    reader.all().unwrap().collect::<Result<_, _>>().unwrap()
}

/// Writes windows of 4 keys over 40 minutes (stream time ends at 39 min, so the windows
/// before 30 min are invisible), with overwrites and deletes, through a cache and a
/// changelog; returns the visible contents and the changelog.
fn write_windows() -> (Vec<(Windowed<String>, u64)>, VecChangelog) {
    let log = VecChangelog::default();
    let b = window_builder(false).with_caching();
    let ctx = StoreBuildContext::default()
        .with_changelog(Box::new(log.clone()))
        .with_cache_max_bytes(2_000);
    let store = b.open(shared(b.build(ctx).unwrap()));
    for i in 0..400i64 {
        let key = ["a", "ab", "b", "c"][(i % 4) as usize].to_string();
        let start = (i / 10) * MINUTE - 5 * MINUTE;
        store.put(&key, Some(&(i as u64)), start).unwrap();
        if i % 7 == 0 {
            store.put(&key, None, start).unwrap();
        }
        if i % 50 == 0 {
            store.flush().unwrap();
        }
    }
    store.flush().unwrap();
    let contents = all(&store);
    assert!(
        contents.iter().all(|(w, _)| w.start >= 25 * MINUTE),
        "{contents:?}"
    );
    assert!(contents.len() > 20, "{}", contents.len());
    (contents, log)
}

#[test]
fn restored_window_store_has_the_same_visible_contents() {
    let (contents, log) = write_windows();
    let records = log.to_records();
    assert!(
        records.iter().any(|r| r.value.is_some() && {
            let start = &r.key[r.key.len() - 12..r.key.len() - 4];
            let t = (u64::from_be_bytes(start.try_into().unwrap()) ^ (1 << 63)) as i64;
            t < 20 * MINUTE
        }),
        "the changelog still holds expired windows: segment drops are not logged"
    );
    for persistent in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let b = window_builder(persistent);
        let raw = shared(
            b.build(StoreBuildContext::new(Some(dir.path().to_owned())))
                .unwrap(),
        );
        for batch in records.chunks(37) {
            raw.borrow_mut().restore_batch(batch).unwrap();
        }
        let store = b.open(raw.clone());
        assert_eq!(all(&store), contents, "persistent: {persistent}");
        assert_eq!(
            store.fetch(&"a".to_string(), 0).unwrap(),
            None,
            "expired stays invisible"
        );
        let reader = store.read().unwrap();
        let old: Vec<_> = reader
            .fetch_all(i64::MIN, 20 * MINUTE)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(old.is_empty(), "{old:?}");
        drop(reader);
        if !persistent {
            // Segments wholly expired were dropped: what is left are the live segments
            // (30 min onwards is visible; the segment of 25..30 min is partly live).
            let n = raw.borrow().approximate_num_entries().unwrap() as usize;
            // At most 4 keys x 5 minutes of invisible windows remain, of 160 written.
            let visible = contents.len();
            assert!(
                n > visible && n <= visible + 20,
                "{n} entries for {visible} visible"
            );
        }
        raw.borrow_mut().close().unwrap();
        if persistent {
            // Reopened: the stream time comes back from the last segment.
            let raw = shared(
                b.build(StoreBuildContext::new(Some(dir.path().to_owned())))
                    .unwrap(),
            );
            let store = b.open(raw);
            assert_eq!(all(&store), contents, "after reopening");
            store.put(&"z".to_string(), Some(&1), 20 * MINUTE).unwrap();
            assert_eq!(
                store.fetch(&"z".to_string(), 20 * MINUTE).unwrap(),
                None,
                "late write dropped"
            );
        }
    }
}

#[test]
fn restored_session_store_has_the_same_visible_contents() {
    let log = VecChangelog::default();
    let b = Stores::in_memory_session_store("s", RETENTION, StringSerde, U64Serde);
    let ctx = StoreBuildContext::default().with_changelog(Box::new(log.clone()));
    let store: SessionStore<_, _> = b.open(shared(b.build(ctx).unwrap()));
    for i in 0..200i64 {
        let key = ["a", "ab", "b"][(i % 3) as usize].to_string();
        let s = Windowed {
            key,
            start: i * 10_000 - MINUTE,
            end: i * 10_000 + (i % 4) * 20_000 - MINUTE,
        };
        store.put(&s, &(i as u64)).unwrap();
        if i % 9 == 0 {
            store.remove(&s).unwrap();
        }
    }
    store.flush().unwrap();
    let read_all = |store: &SessionStore<StringSerde, U64Serde>| -> Vec<(Windowed<String>, u64)> {
        let reader = store.read().unwrap();
        reader.all().unwrap().collect::<Result<_, _>>().unwrap()
    };
    let contents = read_all(&store);
    assert!(!contents.is_empty() && contents.iter().all(|(s, _)| s.end > 1_860_000 - 600_000));
    let restored_raw = shared(b.build(StoreBuildContext::default()).unwrap());
    for batch in log.to_records().chunks(16) {
        restored_raw.borrow_mut().restore_batch(batch).unwrap();
    }
    let restored = b.open(restored_raw);
    assert_eq!(read_all(&restored), contents);
}

#[test]
fn under_exactly_once_only_committed_windows_and_drops_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let b = window_builder(true);
    let ctx = || StoreBuildContext::new(Some(dir.path().to_owned())).with_transactional(true);
    let a = "a".to_string();
    let raw = shared(b.build(ctx()).unwrap());
    let store = b.open(raw.clone());
    store.put(&a, Some(&1), 0).unwrap();
    store.flush().unwrap();
    raw.borrow_mut().commit_writes(Some(1)).unwrap();
    store.put(&a, Some(&2), MINUTE).unwrap();
    store.flush().unwrap();
    raw.borrow_mut().close().unwrap(); // the second write was never committed
    drop(store);

    let raw = shared(b.build(ctx()).unwrap());
    assert_eq!(raw.borrow().checkpoint().unwrap(), Some(1));
    let store = b.open(raw.clone());
    assert_eq!(all(&store).len(), 1);
    assert_eq!(store.fetch(&a, 0).unwrap(), Some(1));
    assert_eq!(store.fetch(&a, MINUTE).unwrap(), None);
    store.put(&a, Some(&3), 60 * MINUTE).unwrap(); // expires the window at 0
    store.flush().unwrap();
    raw.borrow_mut().commit_writes(Some(2)).unwrap();
    raw.borrow_mut().close().unwrap();
    drop(store);

    // The bytes under the layers: the expired segment is gone, the drop was committed.
    let rocks = RocksDbKeyValueStore::open("w", dir.path(), &RocksDbResources::shared()).unwrap();
    assert_eq!(rocks.all().unwrap().count(), 1);
    drop(rocks);
    let raw = shared(b.build(ctx()).unwrap());
    assert_eq!(all(&b.open(raw)).len(), 1);
}
