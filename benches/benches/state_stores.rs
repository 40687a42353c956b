//! State store micro-benchmarks: in-memory, RocksDB through our store, RocksDB behind the
//! write-back cache, and the raw `rocksdb` crate doing the same work on a copy of the same
//! files, so our overhead reads as a ratio.
//!
//! Data: 1,000,000 keys `k%07d` with 64-byte values, loaded once, compacted, and copied to
//! one directory per RocksDB variant. Groups (in run order): `get`, `range_100`,
//! `range_10000`, `prefix_scan_10`, `prefix_scan_100`, `prefix_scan_10000`,
//! `prefix_scan_100_after_100k_deletes` (the 100,000 keys right before the prefix deleted
//! one by one just before, tombstones still in the memtable), `put` (last: it adds data).
//!
//! Run: `cargo bench -p streams-benches --bench state_stores` (a few minutes).

use std::hint::black_box;
use std::ops::Bound;
use std::path::Path;
use std::time::Duration;

use criterion::{
    BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main, measurement::WallTime,
};
use rocksdb::{DB, ReadOptions, WriteBatch, WriteOptions};
use streams_state::{
    CachingKeyValueStore, InMemoryKeyValueStore, KeyValueIter, KeyValueStore, RocksDbKeyValueStore,
    RocksDbResources,
};
use tempfile::TempDir;

const KEYS: u32 = 1_000_000;
const VALUE: [u8; 64] = [b'v'; 64];
const STORE: &str = "bench";

fn key(i: u32) -> Vec<u8> {
    format!("k{i:07}").into_bytes()
}

/// Every variant of the benchmark, on identical data.
struct Fixture {
    _dir: TempDir,
    memory: InMemoryKeyValueStore,
    rocks: RocksDbKeyValueStore,
    cached: CachingKeyValueStore,
    raw: DB,
    no_wal: WriteOptions,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Large enough that every variant's working set stays cached.
        let resources = RocksDbResources::new(512 << 20, 128 << 20);
        let mut no_wal = WriteOptions::default();
        no_wal.disable_wal(true);
        let base = dir.path().join("base");
        {
            let db = DB::open(&resources.store_options(STORE), &base).unwrap();
            for chunk in (0..KEYS).collect::<Vec<_>>().chunks(10_000) {
                let mut batch = WriteBatch::default();
                for i in chunk {
                    batch.put(key(*i), VALUE);
                }
                db.write_opt(batch, &no_wal).unwrap();
            }
            db.flush().unwrap();
            db.compact_range::<&[u8], &[u8]>(None, None);
        }
        for variant in ["rocks", "cached"] {
            copy_dir(
                &base,
                &RocksDbKeyValueStore::store_dir(&dir.path().join(variant), STORE),
            );
        }
        copy_dir(&base, &dir.path().join("raw"));
        let rocks = RocksDbKeyValueStore::open(STORE, &dir.path().join("rocks"), &resources).unwrap();
        let cached = RocksDbKeyValueStore::open(STORE, &dir.path().join("cached"), &resources).unwrap();
        let cached = CachingKeyValueStore::new(Box::new(cached), 10 << 20);
        let raw = DB::open(&resources.store_options(STORE), dir.path().join("raw")).unwrap();
        let mut memory = InMemoryKeyValueStore::new(STORE);
        for i in 0..KEYS {
            memory.put(&key(i), &VALUE).unwrap();
        }
        Self {
            _dir: dir,
            memory,
            rocks,
            cached,
            raw,
            no_wal,
        }
    }

    /// Deletes `count` keys from `first` one by one in every variant.
    fn delete_keys(&mut self, first: u32, count: u32) {
        for i in first..first + count {
            let k = key(i);
            self.memory.delete(&k).unwrap();
            self.rocks.delete(&k).unwrap();
            self.cached.delete(&k).unwrap();
            self.raw.delete_opt(&k, &self.no_wal).unwrap();
        }
    }
}

/// A cheap deterministic random key index.
struct XorShift(u64);

impl XorShift {
    fn next_index(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % u64::from(KEYS)) as u32
    }
}

fn consume(it: KeyValueIter<'_>) -> usize {
    let mut n = 0;
    for entry in it {
        black_box(entry.unwrap());
        n += 1;
    }
    n
}

fn raw_scan(db: &DB, lower: &[u8], upper: &[u8]) -> usize {
    let mut opts = ReadOptions::default();
    opts.set_iterate_lower_bound(lower);
    opts.set_iterate_upper_bound(upper);
    let mut it = db.raw_iterator_opt(opts);
    it.seek_to_first();
    let mut n = 0;
    while let Some(item) = it.item() {
        black_box(item);
        n += 1;
        it.next();
    }
    it.status().unwrap();
    n
}

fn successor(k: &[u8]) -> Vec<u8> {
    let mut s = k.to_vec();
    s.push(0);
    s
}

fn configure<'c>(c: &'c mut Criterion, name: &str, elements: u64) -> BenchmarkGroup<'c, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    group.throughput(Throughput::Elements(elements));
    group
}

/// Benchmarks an inclusive range `[from, to]` expected to hold `expected` entries.
fn bench_range(c: &mut Criterion, f: &Fixture, name: &str, from: &[u8], to: &[u8], expected: usize) {
    let (lo, hi) = (Bound::Included(from), Bound::Included(to));
    let upper = successor(to);
    assert_eq!(raw_scan(&f.raw, from, &upper), expected, "{name}");
    assert_eq!(consume(f.rocks.range(lo, hi).unwrap()), expected, "{name}");
    assert_eq!(consume(f.cached.range(lo, hi).unwrap()), expected, "{name}");
    assert_eq!(consume(f.memory.range(lo, hi).unwrap()), expected, "{name}");
    let mut g = configure(c, name, expected as u64);
    g.bench_function("raw_rocksdb", |b| b.iter(|| raw_scan(&f.raw, from, &upper)));
    g.bench_function("rocksdb", |b| b.iter(|| consume(f.rocks.range(lo, hi).unwrap())));
    g.bench_function("cached_rocksdb", |b| {
        b.iter(|| consume(f.cached.range(lo, hi).unwrap()))
    });
    g.bench_function("in_memory", |b| {
        b.iter(|| consume(f.memory.range(lo, hi).unwrap()))
    });
    g.finish();
}

fn bench_prefix(c: &mut Criterion, f: &Fixture, name: &str, prefix: &[u8], expected: usize) {
    let upper = streams_state::prefix_successor(prefix).unwrap();
    assert_eq!(raw_scan(&f.raw, prefix, &upper), expected, "{name}");
    assert_eq!(consume(f.rocks.prefix_scan(prefix).unwrap()), expected, "{name}");
    assert_eq!(consume(f.cached.prefix_scan(prefix).unwrap()), expected, "{name}");
    assert_eq!(consume(f.memory.prefix_scan(prefix).unwrap()), expected, "{name}");
    let mut g = configure(c, name, expected as u64);
    g.bench_function("raw_rocksdb", |b| b.iter(|| raw_scan(&f.raw, prefix, &upper)));
    g.bench_function("rocksdb", |b| {
        b.iter(|| consume(f.rocks.prefix_scan(prefix).unwrap()))
    });
    g.bench_function("cached_rocksdb", |b| {
        b.iter(|| consume(f.cached.prefix_scan(prefix).unwrap()))
    });
    g.bench_function("in_memory", |b| {
        b.iter(|| consume(f.memory.prefix_scan(prefix).unwrap()))
    });
    g.finish();
}

fn bench_get(c: &mut Criterion, f: &Fixture) {
    let mut g = configure(c, "get", 1);
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    g.bench_function("raw_rocksdb", |b| {
        b.iter(|| f.raw.get_pinned(key(rng.next_index())).unwrap().unwrap().len())
    });
    g.bench_function("rocksdb", |b| {
        b.iter(|| f.rocks.get(&key(rng.next_index())).unwrap().unwrap())
    });
    g.bench_function("cached_rocksdb", |b| {
        b.iter(|| f.cached.get(&key(rng.next_index())).unwrap().unwrap())
    });
    g.bench_function("in_memory", |b| {
        b.iter(|| f.memory.get(&key(rng.next_index())).unwrap().unwrap())
    });
    g.finish();
}

fn bench_put(c: &mut Criterion, f: &mut Fixture) {
    let mut g = configure(c, "put", 1);
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let (raw, no_wal) = (&f.raw, &f.no_wal);
    g.bench_function("raw_rocksdb", |b| {
        b.iter(|| raw.put_opt(key(rng.next_index()), VALUE, no_wal).unwrap())
    });
    g.bench_function("rocksdb", |b| {
        b.iter(|| f.rocks.put(&key(rng.next_index()), &VALUE).unwrap())
    });
    g.bench_function("cached_rocksdb", |b| {
        b.iter(|| f.cached.put(&key(rng.next_index()), &VALUE).unwrap())
    });
    g.bench_function("in_memory", |b| {
        b.iter(|| f.memory.put(&key(rng.next_index()), &VALUE).unwrap())
    });
    g.finish();
}

fn state_stores(c: &mut Criterion) {
    let mut f = Fixture::new();
    bench_get(c, &f);
    bench_range(c, &f, "range_100", &key(600_000), &key(600_099), 100);
    bench_range(c, &f, "range_10000", &key(600_000), &key(609_999), 10_000);
    bench_prefix(c, &f, "prefix_scan_10", b"k050000", 10);
    bench_prefix(c, &f, "prefix_scan_100", b"k05000", 100);
    bench_prefix(c, &f, "prefix_scan_10000", b"k050", 10_000);
    f.delete_keys(400_000, 100_000);
    bench_prefix(c, &f, "prefix_scan_100_after_100k_deletes", b"k05000", 100);
    bench_put(c, &mut f);
}

criterion_group!(benches, state_stores);
criterion_main!(benches);
