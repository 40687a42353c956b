//! Restore: what a logged (and cached) store writes to its changelog, replayed in batches
//! with `restore_batch`, rebuilds the same contents, and the checkpoint is the last offset.

use std::ops::Bound;

use bytes::Bytes;
use streams_state::{
    CachingKeyValueStore, ChangeLoggingKeyValueStore, ChangelogRecord, InMemoryKeyValueStore, KeyValueStore,
    RocksDbKeyValueStore, RocksDbResources, StateStore, VecChangelog,
};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn entries(store: &dyn KeyValueStore) -> Entries {
    store
        .all()
        .unwrap()
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A cached, logged in-memory store, written with a mix of every kind of change, flushed.
/// Returns its final contents and its changelog.
fn write_source(cache_bytes: usize) -> (Entries, VecChangelog) {
    let log = VecChangelog::default();
    let logged =
        ChangeLoggingKeyValueStore::new(Box::new(InMemoryKeyValueStore::new("src")), Box::new(log.clone()));
    let mut store = CachingKeyValueStore::new(Box::new(logged), cache_bytes);
    for i in 0u32..300 {
        let key = format!("file-{}-part-{:019}", i % 7, i);
        store.put(key.as_bytes(), format!("line {i}").as_bytes()).unwrap();
        if i % 5 == 0 {
            store
                .delete(format!("file-{}-part-{:019}", i % 7, i / 2).as_bytes())
                .unwrap();
        }
        if i % 11 == 0 {
            store
                .put_if_absent(format!("extra-{i}").as_bytes(), b"x")
                .unwrap();
        }
        if i % 50 == 49 {
            store.flush().unwrap();
        }
    }
    let batch: Vec<(Bytes, Bytes)> = (0u8..20)
        .map(|i| (Bytes::from(vec![b'z', i]), Bytes::from(vec![i; i as usize])))
        .collect();
    store.put_all(&batch).unwrap();
    store.delete_prefix(b"file-3-").unwrap();
    store
        .delete_range(Bound::Included(b"z\x05"), Bound::Excluded(b"z\x0a"))
        .unwrap();
    store.put(b"file-3-part-again", b"back").unwrap();
    store.flush().unwrap();
    let contents = entries(&store);
    assert!(
        contents.len() > 200,
        "the workload leaves data: {}",
        contents.len()
    );
    (contents, log)
}

fn restore_into(target: &mut dyn KeyValueStore, records: &[ChangelogRecord], batch: usize) {
    assert_eq!(target.checkpoint().unwrap(), None);
    for chunk in records.chunks(batch) {
        target.restore_batch(chunk).unwrap();
        assert_eq!(target.checkpoint().unwrap(), chunk.last().map(|r| r.offset));
    }
}

#[test]
fn restore_into_memory_matches_the_source() {
    for cache_bytes in [0, 1024, 1 << 20] {
        let (want, log) = write_source(cache_bytes);
        let records = log.to_records();
        for batch in [1, 7, 1000] {
            let mut target = InMemoryKeyValueStore::new("dst");
            restore_into(&mut target, &records, batch);
            assert_eq!(entries(&target), want, "cache {cache_bytes}, batch {batch}");
            assert_eq!(target.checkpoint().unwrap(), records.last().map(|r| r.offset));
        }
    }
}

#[test]
fn caching_dedupes_the_changelog() {
    let (_, uncached) = write_source(0);
    let (_, cached) = write_source(1 << 20);
    assert!(cached.changes().len() < uncached.changes().len());
}

#[test]
fn restore_through_layers_does_not_log_again() {
    let (want, log) = write_source(1024);
    let records = log.to_records();
    let relog = VecChangelog::default();
    let logged = ChangeLoggingKeyValueStore::new(
        Box::new(InMemoryKeyValueStore::new("dst")),
        Box::new(relog.clone()),
    );
    let mut target = CachingKeyValueStore::new(Box::new(logged), 1024);
    restore_into(&mut target, &records, 13);
    target.flush().unwrap();
    assert_eq!(entries(&target), want);
    assert!(
        relog.changes().is_empty(),
        "restore must not write to the changelog"
    );
}

#[test]
fn restore_into_rocksdb_matches_the_source_and_survives_reopen() {
    let (want, log) = write_source(1024);
    let records = log.to_records();
    let dir = tempfile::tempdir().unwrap();
    let resources = RocksDbResources::shared();
    let half = records.len() / 2;
    {
        let mut target = RocksDbKeyValueStore::open("dst", dir.path(), &resources).unwrap();
        restore_into(&mut target, &records[..half], 64);
        target.close().unwrap();
    }
    // A restart resumes after the checkpoint.
    let mut target = RocksDbKeyValueStore::open("dst", dir.path(), &resources).unwrap();
    let checkpoint = target.checkpoint().unwrap();
    assert_eq!(checkpoint, Some(records[half - 1].offset));
    let rest: Vec<ChangelogRecord> = records
        .iter()
        .filter(|r| checkpoint.is_none_or(|c| r.offset > c))
        .cloned()
        .collect();
    for chunk in rest.chunks(64) {
        target.restore_batch(chunk).unwrap();
    }
    assert_eq!(entries(&target), want);
    assert_eq!(target.checkpoint().unwrap(), records.last().map(|r| r.offset));
    target.close().unwrap();
}
