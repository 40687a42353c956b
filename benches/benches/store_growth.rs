//! Does a RocksDB-backed store stay fast as it grows?
//!
//! One store built the way the runtime builds it, with default options (RocksDB resources
//! of the runtime's default sizes: 64 MiB block cache, 32 MiB of memtables; a 10 MiB record cache;
//! change-logging into a sink that drops the records), grows to `ENTRIES` entries
//! (10,000,000 by default). Each record is a count's read-modify-write: `get` of a key, then
//! `put` of the new value; keys are new 9 times in 10 (a random key among those written) so
//! the store grows while reads also hit old keys. The cache is flushed every 1,000 records
//! (a commit every ~100 ms at 10k records/s).
//!
//! Prints the cost per record of each window of `WINDOW` records as the store passes 100k,
//! 1M, 2M, 5M and 10M entries, and the ratio of the last window to the one at 100k.
//!
//! Run: `cargo bench -p streams-benches --bench store_growth` (several minutes;
//! `ENTRIES=2000000` for a shorter run). `BLOCK_CACHE_BYTES`, `WRITE_BUFFER_BYTES`,
//! `COMPACTION` and `COMPRESSION` change the store's budgets and options (see
//! `streams_benches::rocksdb_env`).

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use streams_benches::rocksdb_env::resources_from_env;
use streams_state::serde::{StringSerde, U64Serde};
use streams_state::{ChangelogError, ChangelogSink, KeyValueStore, StoreBuildContext, StoreBuilder, Stores};

/// Counts and drops changelog records.
struct NullSink;

impl ChangelogSink for NullSink {
    fn send(&mut self, _key: &[u8], _value: Option<&[u8]>) -> Result<(), ChangelogError> {
        Ok(())
    }
}

const WINDOW: u64 = 100_000;

fn main() {
    let entries: u64 = std::env::var("ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let dir = tempfile::tempdir().unwrap();
    let builder = Stores::persistent_kv("growth", StringSerde, U64Serde).with_caching();
    let ctx = StoreBuildContext::new(Some(dir.path().to_path_buf()))
        .with_cache_max_bytes(10 << 20)
        .with_changelog(Box::new(NullSink))
        .with_rocksdb(resources_from_env());
    let mut store: Box<dyn KeyValueStore> = builder.build(ctx).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let marks = [100_000u64, 1_000_000, 2_000_000, 5_000_000, 10_000_000];
    let mut written = 0u64;
    let mut records = 0u64;
    let mut window_start = Instant::now();
    let mut first: Option<f64> = None;
    let mut last = 0.0;
    let started = Instant::now();
    println!("entries | ns per record (window of {WINDOW}) | vs 100k");
    while written < entries {
        let id = if written == 0 || rng.random_range(0..10) < 9 {
            written += 1;
            written - 1
        } else {
            rng.random_range(0..written)
        };
        let key = format!("key-{id:012}");
        let n = store
            .get(key.as_bytes())
            .unwrap()
            .map_or(0, |v| u64::from_be_bytes(v[..8].try_into().unwrap()));
        store.put(key.as_bytes(), &(n + 1).to_be_bytes()).unwrap();
        records += 1;
        if records.is_multiple_of(1_000) {
            store.flush().unwrap();
        }
        if records.is_multiple_of(WINDOW) {
            let ns = window_start.elapsed().as_nanos() as f64 / WINDOW as f64;
            window_start = Instant::now();
            last = ns;
            if first.is_none() && written >= marks[0] {
                first = Some(ns);
            }
            if marks
                .iter()
                .any(|&m| written >= m && written - m < WINDOW * 9 / 10 + 1)
            {
                let ratio = first.map_or(1.0, |f| ns / f);
                println!("{written:>10} | {ns:>8.0} | {ratio:.2}x");
            }
        }
    }
    store.flush().unwrap();
    println!(
        "{entries} entries in {:.1} s; last window {last:.0} ns/record, {:.2}x the window at 100k",
        started.elapsed().as_secs_f64(),
        last / first.unwrap_or(last)
    );
}
