//! The "file aggregation with range queries" pattern at scale: a million partial results
//! `file-part-%019d` arrive in random order, are read back in order with one range query,
//! then deleted with one `delete_prefix`; a second file's results, stored right after the
//! deleted range, are still found by a prefix scan that does not walk the deleted keys.
//!
//! The full million runs by default: under a minute even in a debug build.

use std::ops::Bound;

use bytes::Bytes;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rocksdb::perf::{PerfContext, PerfMetric, PerfStatsLevel, set_perf_stats};
use streams_state::{KeyValueStore, RocksDbKeyValueStore, RocksDbResources, StateStore};

fn line_key(file: &str, line: u64) -> String {
    format!("{file}-part-{line:019}")
}

fn run(lines: u64) {
    let dir = tempfile::tempdir().unwrap();
    let resources = RocksDbResources::new(32 << 20, 16 << 20);
    let mut store = RocksDbKeyValueStore::open("file-aggregation", dir.path(), &resources).unwrap();

    let mut order: Vec<u64> = (1..=lines).collect();
    order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(614));
    for chunk in order.chunks(10_000) {
        let batch: Vec<(Bytes, Bytes)> = chunk
            .iter()
            .map(|i| {
                (
                    Bytes::from(line_key("file", *i)),
                    Bytes::from(format!("result{i}")),
                )
            })
            .collect();
        store.put_all(&batch).unwrap();
    }
    let second: Vec<(Bytes, Bytes)> = (1..=100)
        .map(|i| {
            (
                Bytes::from(line_key("file2", i)),
                Bytes::from(format!("other{i}")),
            )
        })
        .collect();
    store.put_all(&second).unwrap();

    // All partial results of the first file, in line order, lazily.
    let (from, to) = (line_key("file", 1), line_key("file", lines));
    let mut count = 0u64;
    let mut previous: Option<Bytes> = None;
    for entry in store
        .range(Bound::Included(from.as_bytes()), Bound::Included(to.as_bytes()))
        .unwrap()
    {
        let (key, value) = entry.unwrap();
        count += 1;
        assert!(
            previous.as_ref().is_none_or(|p| *p < key),
            "keys strictly ascending"
        );
        assert_eq!(key, line_key("file", count).as_bytes(), "line {count} in place");
        assert_eq!(value, format!("result{count}").as_bytes());
        previous = Some(key);
    }
    assert_eq!(count, lines);

    store.delete_prefix(b"file-part-").unwrap();
    assert_eq!(store.prefix_scan(b"file-part-").unwrap().count(), 0);
    assert_eq!(store.get(line_key("file", lines / 2).as_bytes()).unwrap(), None);

    // The second file sits right after the deleted range: its scan must not walk it. (RocksDB
    // counts one skipped internal key per `next`, so 100 entries read show about 100.)
    set_perf_stats(PerfStatsLevel::EnableCount);
    let mut perf = PerfContext::default();
    perf.reset();
    let found: Vec<Bytes> = store
        .prefix_scan(b"file2-part-")
        .unwrap()
        .map(|e| e.unwrap().0)
        .collect();
    let skipped = perf.metric(PerfMetric::InternalKeySkippedCount);
    let deletes_skipped = perf.metric(PerfMetric::InternalDeleteSkippedCount);
    set_perf_stats(PerfStatsLevel::Disable);
    assert_eq!(found, second.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>());
    assert!(
        skipped <= 2 * found.len() as u64 && deletes_skipped == 0,
        "scan walked {skipped} internal keys, {deletes_skipped} deletes"
    );

    let last_two: Vec<Bytes> = store
        .reverse_all()
        .unwrap()
        .take(2)
        .map(|e| e.unwrap().0)
        .collect();
    assert_eq!(
        last_two,
        vec![
            Bytes::from(line_key("file2", 100)),
            Bytes::from(line_key("file2", 99))
        ]
    );
    store.close().unwrap();
}

/// 15-50 s in a debug build on 2 cores, depending on load (RocksDB's C++ unoptimised); a few seconds
/// in release.
#[test]
fn file_aggregation_1m_lines() {
    run(1_000_000);
}
