//! The RocksDB store against the in-memory model: basic operations, every bound
//! combination of `range`/`reverse_range`/`delete_range`, prefixes without a successor,
//! restore + checkpoint across reopen, locking, corrupt directories, and the builders.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use streams_state::{
    ChangelogRecord, InMemoryKeyValueStore, KeyValueIter, KeyValueStore, RocksDbKeyValueStore,
    RocksDbResources, StateStore, StoreBuildContext, StoreBuilder, StoreError, Stores, VecChangelog,
    serde::StringSerde, serde::U64Serde,
};

fn resources() -> RocksDbResources {
    RocksDbResources::new(8 << 20, 4 << 20)
}

fn open(dir: &Path) -> RocksDbKeyValueStore {
    RocksDbKeyValueStore::open("store", dir, &resources()).expect("open")
}

fn collect(it: KeyValueIter<'_>) -> Vec<(Bytes, Bytes)> {
    it.map(|r| r.expect("entry")).collect()
}

fn keys(it: KeyValueIter<'_>) -> Vec<Vec<u8>> {
    collect(it).into_iter().map(|(k, _)| k.to_vec()).collect()
}

/// Keys around the tricky spots: the empty key, `k ++ [0]` successors, `0xFF` runs.
const KEYS: &[&[u8]] = &[
    b"",
    b"\x00",
    b"a",
    b"a\x00",
    b"ab",
    b"a\xff",
    b"a\xff\xff",
    b"b",
    b"ba",
    b"c",
    b"\xff",
    b"\xff\x00",
    b"\xff\xff",
    b"\xff\xff\xff",
];

/// Range endpoints: present keys and absent ones in between.
const ENDS: &[&[u8]] = &[
    b"",
    b"\x00",
    b"a",
    b"a\x00",
    b"aa",
    b"a\xff",
    b"b",
    b"bb",
    b"\xff",
    b"\xff\xff",
    b"\xff\xff\xff\xff",
];

fn entries() -> Vec<(Bytes, Bytes)> {
    KEYS.iter()
        .enumerate()
        .map(|(i, k)| (Bytes::copy_from_slice(k), Bytes::from(format!("v{i}"))))
        .collect()
}

fn bounds() -> Vec<Bound<&'static [u8]>> {
    let mut out = vec![Bound::Unbounded];
    for e in ENDS {
        out.push(Bound::Included(*e));
        out.push(Bound::Excluded(*e));
    }
    out
}

fn filled(dir: &Path) -> (RocksDbKeyValueStore, InMemoryKeyValueStore) {
    let mut rocks = open(dir);
    let mut model = InMemoryKeyValueStore::new("model");
    rocks.put_all(&entries()).unwrap();
    model.put_all(&entries()).unwrap();
    (rocks, model)
}

#[test]
fn basic_operations() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    assert!(s.persistent() && s.is_open());
    assert_eq!(s.name(), "store");
    assert_eq!(s.path(), dir.path().join("rocksdb").join("store"));
    assert_eq!(s.get(b"k").unwrap(), None);
    s.put(b"k", b"v1").unwrap();
    assert_eq!(s.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(s.put_if_absent(b"k", b"v2").unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(s.put_if_absent(b"j", b"v3").unwrap(), None);
    assert_eq!(s.delete(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(s.delete(b"k").unwrap(), None);
    s.put(b"", b"empty key").unwrap();
    s.put(b"e", b"").unwrap();
    assert_eq!(s.get(b"").unwrap().as_deref(), Some(&b"empty key"[..]));
    assert_eq!(s.get(b"e").unwrap().as_deref(), Some(&b""[..]));
    assert_eq!(
        keys(s.all().unwrap()),
        vec![b"".to_vec(), b"e".to_vec(), b"j".to_vec()]
    );
    assert_eq!(
        keys(s.reverse_all().unwrap()),
        vec![b"j".to_vec(), b"e".to_vec(), b"".to_vec()]
    );
    s.flush().unwrap();
    let estimate = s.approximate_num_entries().unwrap();
    assert!(
        (1..=5).contains(&estimate),
        "estimate-num-keys is approximate: {estimate}"
    );

    s.close().unwrap();
    s.close().unwrap();
    assert!(!s.is_open());
    assert!(matches!(s.get(b"j"), Err(StoreError::Closed { .. })));
    assert!(matches!(s.put(b"j", b"x"), Err(StoreError::Closed { .. })));
    assert!(matches!(s.all().map(|_| ()), Err(StoreError::Closed { .. })));
    assert!(matches!(s.checkpoint(), Err(StoreError::Closed { .. })));

    let s = open(dir.path());
    assert_eq!(
        s.get(b"j").unwrap().as_deref(),
        Some(&b"v3"[..]),
        "data survives close and reopen"
    );
}

#[test]
fn every_range_bound_combination_matches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (rocks, model) = filled(dir.path());
    for from in bounds() {
        for to in bounds() {
            let expected = collect(model.range(from, to).unwrap());
            assert_eq!(
                collect(rocks.range(from, to).unwrap()),
                expected,
                "range({from:?}, {to:?})"
            );
            let mut reversed = expected;
            reversed.reverse();
            assert_eq!(
                collect(rocks.reverse_range(from, to).unwrap()),
                reversed,
                "reverse_range({from:?}, {to:?})"
            );
        }
    }
}

#[test]
fn every_delete_range_bound_combination_matches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rocks, _) = filled(dir.path());
    for from in bounds() {
        for to in bounds() {
            let mut model = InMemoryKeyValueStore::new("model");
            model.put_all(&entries()).unwrap();
            rocks.put_all(&entries()).unwrap();
            model.delete_range(from, to).unwrap();
            rocks.delete_range(from, to).unwrap();
            let expected = collect(model.all().unwrap());
            assert_eq!(
                collect(rocks.all().unwrap()),
                expected,
                "delete_range({from:?}, {to:?})"
            );
            let mut reversed = expected;
            reversed.reverse();
            assert_eq!(
                collect(rocks.reverse_all().unwrap()),
                reversed,
                "after delete_range({from:?}, {to:?})"
            );
        }
    }
}

#[test]
fn prefixes_including_empty_and_all_ff() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rocks, mut model) = filled(dir.path());
    let prefixes: &[&[u8]] = &[
        b"",
        b"\x00",
        b"a",
        b"a\xff",
        b"b",
        b"\xff",
        b"\xff\xff",
        b"\xff\xff\xff\xff",
        b"zz",
    ];
    for p in prefixes {
        let expected = collect(model.prefix_scan(p).unwrap());
        assert!(expected.iter().all(|(k, _)| k.starts_with(p)));
        assert_eq!(
            collect(rocks.prefix_scan(p).unwrap()),
            expected,
            "prefix_scan({p:?})"
        );
    }
    assert_eq!(
        keys(rocks.prefix_scan(b"\xff").unwrap()),
        vec![
            b"\xff".to_vec(),
            b"\xff\x00".to_vec(),
            b"\xff\xff".to_vec(),
            b"\xff\xff\xff".to_vec()
        ]
    );
    assert_eq!(keys(rocks.prefix_scan(b"").unwrap()).len(), KEYS.len());
    for p in prefixes {
        rocks.put_all(&entries()).unwrap();
        model.put_all(&entries()).unwrap();
        rocks.delete_prefix(p).unwrap();
        model.delete_prefix(p).unwrap();
        assert_eq!(
            collect(rocks.all().unwrap()),
            collect(model.all().unwrap()),
            "delete_prefix({p:?})"
        );
    }
    rocks.put_all(&entries()).unwrap();
    rocks.delete_prefix(b"").unwrap();
    assert!(
        keys(rocks.all().unwrap()).is_empty(),
        "the empty prefix deletes everything"
    );
}

#[test]
fn iterators_are_lazy_and_ordered_across_memtable_and_sst() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    for i in (0..2000u32).step_by(2) {
        s.put(&i.to_be_bytes(), b"sst").unwrap();
    }
    s.flush().unwrap();
    for i in (1..2000u32).step_by(2) {
        s.put(&i.to_be_bytes(), b"mem").unwrap();
    }
    s.delete(&10u32.to_be_bytes()).unwrap();
    let got: Vec<u32> = keys(s.all().unwrap())
        .iter()
        .map(|k| u32::from_be_bytes(k.as_slice().try_into().unwrap()))
        .collect();
    let want: Vec<u32> = (0..2000).filter(|i| *i != 10).collect();
    assert_eq!(got, want);
    let mut it = s
        .reverse_range(
            Bound::Excluded(&5u32.to_be_bytes()),
            Bound::Included(&12u32.to_be_bytes()),
        )
        .unwrap();
    assert_eq!(it.next().unwrap().unwrap().1.as_ref(), b"sst");
    let rest: Vec<Vec<u8>> = it.map(|r| r.unwrap().0.to_vec()).collect();
    assert_eq!(rest, [11u32, 9, 8, 7, 6].map(|i| i.to_be_bytes().to_vec()));
}

#[test]
fn entries_of_every_size_are_copied_intact() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    let sizes = [0usize, 1, 100, 2040, 2047, 2048, 2049, 4096, 5000, 100_000];
    let mut expected = Vec::new();
    for round in 0..20u8 {
        for (i, size) in sizes.iter().enumerate() {
            let key = vec![round, i as u8];
            let value: Vec<u8> = (0..*size)
                .map(|j| (j as u8).wrapping_mul(31).wrapping_add(round))
                .collect();
            s.put(&key, &value).unwrap();
            expected.push((Bytes::from(key), Bytes::from(value)));
        }
    }
    // Retained all at once (arenas stay alive) and streamed one by one (arenas reused).
    assert_eq!(collect(s.all().unwrap()), expected);
    for (entry, want) in s.all().unwrap().zip(&expected) {
        assert_eq!(&entry.unwrap(), want);
    }
    expected.reverse();
    assert_eq!(collect(s.reverse_all().unwrap()), expected);
}

#[test]
fn restore_batch_and_checkpoint_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    assert_eq!(s.checkpoint().unwrap(), None);
    s.put(b"gone", b"x").unwrap();
    let batch = vec![
        ChangelogRecord {
            key: Bytes::from_static(b"a"),
            value: Some(Bytes::from_static(b"1")),
            offset: 40,
        },
        ChangelogRecord {
            key: Bytes::from_static(b"gone"),
            value: None,
            offset: 41,
        },
        ChangelogRecord {
            key: Bytes::from_static(b"b"),
            value: Some(Bytes::from_static(b"2")),
            offset: 42,
        },
    ];
    s.restore_batch(&batch).unwrap();
    s.restore_batch(&[]).unwrap();
    assert_eq!(s.checkpoint().unwrap(), Some(42));
    s.close().unwrap();

    let mut s = open(dir.path());
    assert_eq!(s.checkpoint().unwrap(), Some(42));
    assert_eq!(keys(s.all().unwrap()), vec![b"a".to_vec(), b"b".to_vec()]);
    s.put(b"c", b"3").unwrap();
    s.write_checkpoint(Some(i64::MAX)).unwrap();
    drop(s); // no close: write_checkpoint alone made data and checkpoint durable

    let mut s = open(dir.path());
    assert_eq!(s.checkpoint().unwrap(), Some(i64::MAX));
    assert_eq!(s.get(b"c").unwrap().as_deref(), Some(&b"3"[..]));
    s.write_checkpoint(None).unwrap();
    s.close().unwrap();
    assert_eq!(open(dir.path()).checkpoint().unwrap(), None);
}

#[test]
fn a_second_instance_on_the_same_directory_is_locked_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = open(dir.path());
    match RocksDbKeyValueStore::open("store", dir.path(), &resources()) {
        Err(StoreError::Locked { store, path }) => {
            assert_eq!(store, "store");
            assert_eq!(path, dir.path().join("rocksdb/store"));
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    first.close().unwrap();
    assert!(
        RocksDbKeyValueStore::open("store", dir.path(), &resources()).is_ok(),
        "close releases the lock"
    );
}

#[test]
fn a_corrupt_directory_gives_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    open(dir.path()).close().unwrap();
    let store_dir = RocksDbKeyValueStore::store_dir(dir.path(), "store");
    std::fs::write(store_dir.join("CURRENT"), b"\x00garbage\xff").unwrap();
    match RocksDbKeyValueStore::open("store", dir.path(), &resources()) {
        Err(StoreError::Corrupt { store, path, message }) => {
            assert_eq!((store.as_str(), path), ("store", store_dir.clone()));
            assert!(!message.is_empty());
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    std::fs::write(store_dir.join("CURRENT"), b"MANIFEST-999999\n").unwrap();
    let err = RocksDbKeyValueStore::open("store", dir.path(), &resources()).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
}

#[test]
fn invalid_store_names_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["", ".", "..", "a/b", "../x"] {
        let err = RocksDbKeyValueStore::open(name, dir.path(), &resources()).unwrap_err();
        assert!(matches!(err, StoreError::Io { .. }), "{name:?}: {err}");
    }
}

#[test]
fn options_setter_sees_each_store() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let res = resources().with_options_setter(move |store, opts| {
        assert_eq!(store, "tuned");
        opts.set_max_background_jobs(1);
        seen.fetch_add(1, Ordering::SeqCst);
    });
    let mut s = RocksDbKeyValueStore::open("tuned", dir.path(), &res).unwrap();
    s.put(b"k", b"v").unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(res.block_cache_bytes(), 8 << 20);
    assert_eq!(res.write_buffer_bytes(), 4 << 20);
    assert!(
        res.write_buffer_usage() > 0,
        "memtables are accounted to the shared manager"
    );
}

#[test]
fn persistent_builder_layers_logging_and_caching() {
    let dir = tempfile::tempdir().unwrap();
    let changelog = VecChangelog::default();
    let builder = Stores::persistent_kv("counts", StringSerde, U64Serde).with_caching();
    assert_eq!(builder.type_name(), "KvStore<StringSerde, U64Serde>");
    let ctx = StoreBuildContext::new(Some(dir.path().to_owned()))
        .with_changelog(Box::new(changelog.clone()))
        .with_rocksdb(resources());
    let mut store = builder.build(ctx).unwrap();
    assert!(store.persistent());
    store.put(b"a", b"1").unwrap();
    store.put(b"a", b"2").unwrap();
    store.flush().unwrap();
    assert_eq!(
        changelog.changes(),
        vec![(Bytes::from_static(b"a"), Some(Bytes::from_static(b"2")))]
    );
    store.close().unwrap();
    assert!(dir.path().join("rocksdb/counts/CURRENT").exists());

    let unlogged = Stores::persistent_kv("plain", StringSerde, U64Serde).without_logging();
    let ctx = StoreBuildContext::new(Some(dir.path().to_owned()))
        .with_changelog(Box::new(changelog.clone()))
        .with_rocksdb(resources());
    let mut store = unlogged.build(ctx).unwrap();
    store.put(b"b", b"1").unwrap();
    store.flush().unwrap();
    assert_eq!(
        changelog.changes().len(),
        1,
        "an unlogged store writes no changelog"
    );
}

#[test]
fn many_stores_memtables_fit_the_write_buffer_budget() {
    // 4 MiB for the memtables of 32 stores: RocksDB's default arena blocks (an eighth of a
    // 16 MiB memtable) would reserve 64 MiB for the first block of each.
    let res = resources();
    assert_eq!(res.arena_block_bytes(), 8 << 10);
    assert_eq!(RocksDbResources::shared().arena_block_bytes(), 64 << 10);
    assert_eq!(
        RocksDbResources::new(1 << 20, 1 << 20).arena_block_bytes(),
        4 << 10
    );
    assert_eq!(
        RocksDbResources::new(8 << 30, 4 << 30).arena_block_bytes(),
        2 << 20
    );
    let dir = tempfile::tempdir().unwrap();
    let mut stores: Vec<RocksDbKeyValueStore> = (0..32)
        .map(|i| RocksDbKeyValueStore::open(format!("s{i}"), dir.path(), &res).unwrap())
        .collect();
    for (i, s) in stores.iter_mut().enumerate() {
        for k in 0..64u32 {
            s.put(&k.to_be_bytes(), &[i as u8; 64]).unwrap();
        }
        s.write_checkpoint(Some(1)).unwrap();
    }
    let used = res.write_buffer_usage();
    // About 12 KiB a store; 3 MiB, every write flushing, with RocksDB's default.
    assert!(used > 0 && used < 1 << 20, "{used} bytes of memtables");
}
