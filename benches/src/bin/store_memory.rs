//! Is the memory of many RocksDB stores bounded by the configured budget?
//!
//! Builds `PARTITIONS` x `STORES_PER_TASK` (25 x 4 = 100 by default) persistent stores the
//! way the runtime builds one stream thread's stores: the same builders, cached and logged,
//! every cache on one thread budget (`ThreadCache`) and every RocksDB instance on one set of
//! `RocksDbResources`; the changelog goes to a sink that drops the records. Then writes
//! `RECORDS` records (2,000,000 by default: random keys, `VALUE_BYTES`-byte values, each key
//! in one store) and commits every `COMMIT_EVERY` records as the runtime does under
//! at-least-once: every store flushes, then writes its checkpoint.
//!
//! Prints the peak RSS (`VmHWM` of `/proc/self/status`) against the configured budget:
//! record cache + block cache + write buffers (the memtables are charged to the block cache,
//! so the budget RocksDB actually keeps is the block cache alone; both sums are shown), and
//! the difference, the fixed cost the budget does not cover.
//!
//! Run: `cargo run --release -p streams-benches --bin store_memory`. Environment: `PARTITIONS`,
//! `STORES_PER_TASK`, `RECORDS`, `VALUE_BYTES`, `COMMIT_EVERY`, `CACHE_BYTES` (default
//! 10 MiB), `BLOCK_CACHE_BYTES` (64 MiB), `WRITE_BUFFER_BYTES` (32 MiB); `PER_STORE_CACHE=1`
//! gives every store a record cache of `CACHE_BYTES` of its own instead, as before the
//! thread budget, for comparison; `READ_BEFORE_WRITE=1` reads each key before writing it (half
//! of them keys written before), as an aggregation does, which fills the block cache.
//! `COMPACTION`, `COMPRESSION` and `ARENA_BLOCK_BYTES` change the stores' options (see
//! `streams_benches::rocksdb_env`).

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use streams_benches::rocksdb_env::{env_number as env, resources_from_env};
use streams_benches::store_keys::{KeyIds, key_of};
use streams_state::serde::StringSerde;
use streams_state::{
    ChangelogError, ChangelogSink, KeyValueStore, StoreBuildContext, StoreBuilder, Stores, ThreadCache,
};

/// Drops changelog records.
struct NullSink;

impl ChangelogSink for NullSink {
    fn send(&mut self, _key: &[u8], _value: Option<&[u8]>) -> Result<(), ChangelogError> {
        Ok(())
    }
}

/// What an at-least-once commit does to a task's stores: flush (the caches write their dirty
/// entries down), then record the changelog offset reached as the checkpoint.
fn commit(stores: &mut [Box<dyn KeyValueStore>], offset: usize) {
    for s in stores {
        s.flush().expect("flush");
        s.write_checkpoint(Some(i64::try_from(offset).unwrap_or(i64::MAX)))
            .expect("checkpoint");
    }
}

/// The store the `n`th distinct key lives in (as a partitioner would place it).
fn store_of(n: usize, stores: usize) -> usize {
    (n as u64).wrapping_mul(0x2545_f491_4f6c_dd1d).rotate_left(29) as usize % stores
}

/// A field of `/proc/self/status` in bytes (`VmHWM`, `VmRSS`), 0 where unavailable.
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The number and total size of the `.sst` files under `dir`.
fn sst_files(dir: &std::path::Path) -> (usize, usize) {
    let mut found = (0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            let (n, bytes) = sst_files(&path);
            found = (found.0 + n, found.1 + bytes);
        } else if path.extension().is_some_and(|e| e == "sst") {
            let len = entry.metadata().map_or(0, |m| m.len());
            found = (found.0 + 1, found.1 + usize::try_from(len).unwrap_or(usize::MAX));
        }
    }
    found
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

fn signed_mib(bytes: i64) -> String {
    format!("{:+.1} MiB", bytes as f64 / f64::from(1 << 20))
}

fn main() {
    let partitions = env("PARTITIONS", 25);
    let stores_per_task = env("STORES_PER_TASK", 4);
    let records = env("RECORDS", 2_000_000);
    let value_bytes = env("VALUE_BYTES", 100);
    let commit_every = env("COMMIT_EVERY", 10_000).max(1);
    let cache_bytes = env("CACHE_BYTES", 10 << 20);
    let per_store_cache = std::env::var("PER_STORE_CACHE").is_ok_and(|v| v == "1");
    let read_before_write = std::env::var("READ_BEFORE_WRITE").is_ok_and(|v| v == "1");

    let rss_at_start = status_bytes("VmRSS");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rocksdb = resources_from_env();
    let (block_cache_bytes, write_buffer_bytes) = (rocksdb.block_cache_bytes(), rocksdb.write_buffer_bytes());
    let thread_cache = ThreadCache::new(cache_bytes);
    let mut stores: Vec<Box<dyn KeyValueStore>> = Vec::with_capacity(partitions * stores_per_task);
    for p in 0..partitions {
        for s in 0..stores_per_task {
            let builder =
                Stores::persistent_kv(format!("store-{s}"), StringSerde, StringSerde).with_caching();
            let budget = if per_store_cache {
                ThreadCache::new(cache_bytes)
            } else {
                thread_cache.clone()
            };
            let ctx = StoreBuildContext::new(Some(dir.path().join(format!("0_{p}"))))
                .with_rocksdb(rocksdb.clone())
                .with_thread_cache(budget)
                .with_changelog(Box::new(NullSink));
            stores.push(builder.build(ctx).expect("open a store"));
        }
    }
    let rss_opened = status_bytes("VmRSS");

    let mut rng = StdRng::seed_from_u64(11);
    let mut value = vec![0u8; value_bytes];
    let started = Instant::now();
    let mut ids = KeyIds::new(read_before_write);
    for n in 0..records {
        // With reads, an aggregation's read-modify-write: half the time a key written before
        // (a record-cache or block-cache hit, or a read from disk), else a new one.
        let id = ids.next(&mut rng);
        let (store, key) = (store_of(id, stores.len()), key_of(id));
        if read_before_write {
            let _ = stores[store].get(key.as_bytes()).expect("get");
        }
        rng.fill(&mut value[..]);
        stores[store].put(key.as_bytes(), &value).expect("put");
        if (n + 1) % commit_every == 0 {
            commit(&mut stores, n);
        }
    }
    commit(&mut stores, records);
    let elapsed = started.elapsed();
    let peak = status_bytes("VmHWM");
    let rss_end = status_bytes("VmRSS");
    let cached: u64 = stores.iter().map(|s| s.stats().cached_bytes.unwrap_or(0)).sum();

    let record_cache_budget = if per_store_cache {
        cache_bytes * stores.len()
    } else {
        cache_bytes
    };
    let stated = record_cache_budget + block_cache_bytes + write_buffer_bytes;
    let tight = record_cache_budget + block_cache_bytes;
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let (sst_files, sst_bytes) = sst_files(dir.path());

    println!(
        "{} stores ({partitions} partitions x {stores_per_task}), {records} {} of {value_bytes}-byte \
         values in {:.1} s ({:.0} records/s), a commit every {commit_every}",
        stores.len(),
        if read_before_write {
            "read-modify-writes (get, then put)"
        } else {
            "writes"
        },
        elapsed.as_secs_f64(),
        records as f64 / elapsed.as_secs_f64()
    );
    println!(
        "record cache: {} ({}), cached at the end {}",
        mib(record_cache_budget),
        if per_store_cache {
            "per store, as before the thread budget"
        } else {
            "one thread budget"
        },
        mib(cached as usize)
    );
    println!(
        "rocksdb: block cache {}, write buffers {} (charged to the block cache); in use at the end: \
         block cache {}, memtables {}; {} flushes for the memtable budget",
        mib(block_cache_bytes),
        mib(write_buffer_bytes),
        mib(rocksdb.block_cache_usage()),
        mib(rocksdb.write_buffer_usage()),
        rocksdb.budget_flushes()
    );
    println!(
        "RSS: {} at start, {} with the stores open, {} at the end; peak (VmHWM) {}",
        mib(rss_at_start),
        mib(rss_opened),
        mib(rss_end),
        mib(peak)
    );
    println!(
        "budget (record cache + block cache + write buffers): {}; peak - budget = {} (the stated constant)",
        mib(stated),
        signed_mib(peak as i64 - stated as i64)
    );
    println!(
        "budget without the write buffers (they live in the block cache): {}; peak - budget = {}",
        mib(tight),
        signed_mib(peak as i64 - tight as i64)
    );
    println!("SST files at the end: {sst_files}, {}", mib(sst_bytes));
    println!("load average: {}", loadavg.trim());
    for mut s in stores {
        s.close().expect("close");
    }
}
