//! One record-cache budget per stream thread: the caches of all stores of all tasks that a
//! thread (here, the test driver) runs draw on one `ThreadCache`, never holding more than it
//! together, and every store still reads and logs exactly what was written.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use streams_core::serdes::StringSerde;
use streams_core::state::{ENTRY_OVERHEAD, KvStore};
use streams_core::{
    ProcessResult, Processor, ProcessorContext, Record, SourceConfig, StoreRef, Stores, Topology,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

const PARTITIONS: i32 = 4;
const STORES: usize = 4;

/// Writes each record into every store, with the store's index before the value.
struct WriteAll {
    stores: Vec<KvStore<StringSerde, StringSerde>>,
}

impl Processor<String, String, String, String> for WriteAll {
    fn process(
        &mut self,
        _ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        for (i, store) in self.stores.iter().enumerate() {
            store.put(&r.key, &format!("{i}:{}", r.value))?;
        }
        Ok(())
    }
}

/// A source of `events` feeding one processor with two cached RocksDB stores and two cached
/// in-memory ones, all logged.
fn topology() -> (Topology, Vec<StoreRef<StringSerde, StringSerde>>) {
    let mut b = Topology::builder();
    let events = b.source("events", SourceConfig::new(["events"], StringSerde, StringSerde));
    let refs: Vec<_> = (0..STORES)
        .map(|i| {
            let name = format!("store-{i}");
            let builder = if i % 2 == 0 {
                Stores::persistent_kv(name, StringSerde, StringSerde)
            } else {
                Stores::in_memory_kv(name, StringSerde, StringSerde)
            };
            b.store(builder.with_caching())
        })
        .collect();
    let write = b.processor("write-all", [&events], {
        let refs = refs.clone();
        move |ctx| {
            let stores = refs.iter().map(|r| ctx.store(r)).collect::<Result<_, _>>()?;
            Ok(WriteAll { stores })
        }
    });
    for r in &refs {
        b.connect(&write, r);
    }
    (b.build().unwrap(), refs)
}

/// What store `i` must hold for the last values `model`: each value with the store's index.
fn expected(model: &BTreeMap<String, String>, i: usize) -> BTreeMap<String, String> {
    model
        .iter()
        .map(|(k, v)| (k.clone(), format!("{i}:{v}")))
        .collect()
}

#[test]
fn all_caches_of_the_driver_share_one_budget() {
    // Room for about 100 entries in all, for 16 caches (4 partitions x 4 stores): each
    // cache alone would take that much if they did not share.
    let budget = 100 * (ENTRY_OVERHEAD + 60);
    let (topology, refs) = topology();
    let config = DriverConfig::default()
        .application_id("shared-cache")
        .partitions("events", PARTITIONS)
        .cache_max_bytes(budget)
        .commit_every(200);
    let driver = TopologyTestDriver::new(topology, config).unwrap();
    let cache = driver.thread_cache();
    assert_eq!(cache.max_bytes(), budget);
    assert_eq!(cache.caches(), PARTITIONS as usize * STORES);

    let input = driver.input_topic("events", StringSerde, StringSerde);
    let mut rng = StdRng::seed_from_u64(42);
    let mut model = BTreeMap::new();
    let mut peak = 0;
    for n in 0..3_000 {
        let key = format!("key-{:04}", rng.random_range(0..600));
        let value = format!("{n:0width$}", width = rng.random_range(10..40));
        input.pipe(key.clone(), value.clone()).unwrap();
        model.insert(key, value);
        let used = cache.used_bytes();
        assert!(used <= budget, "{used} bytes cached, budget {budget}");
        peak = peak.max(used);
    }
    // The caches did fill the budget, and had to evict to keep it.
    assert!(peak > budget / 2, "peak {peak} of {budget}");
    assert!(cache.evictions() > 0);

    // Every store holds the last value of each of its keys, across its partitions, before
    // and after a commit; its changelog ends with the same values.
    for round in 0..2 {
        for (i, store) in refs.iter().enumerate() {
            let mut got = BTreeMap::new();
            for p in 0..PARTITIONS {
                let handle = driver.store(store, p).unwrap();
                let reader = handle.read().unwrap();
                for entry in reader.all().unwrap() {
                    let (k, v) = entry.unwrap();
                    assert!(got.insert(k, v).is_none(), "a key in two partitions");
                }
            }
            assert_eq!(got, expected(&model, i), "store-{i}, round {round}");
        }
        driver.commit().unwrap();
    }
    for (i, store) in refs.iter().enumerate() {
        let changelog = driver.output_topic(
            &format!("shared-cache-{}-changelog", store.name()),
            StringSerde,
            StringSerde,
        );
        let logged: BTreeMap<String, String> = changelog.read_key_values().unwrap().into_iter().collect();
        assert_eq!(logged, expected(&model, i), "changelog of store-{i}");
    }
    driver.close().unwrap();
    assert_eq!((cache.caches(), cache.used_bytes()), (0, 0));
}

#[test]
fn each_driver_has_a_budget_of_its_own() {
    let (t1, _) = topology();
    let (t2, _) = topology();
    let d1 = TopologyTestDriver::new(t1, DriverConfig::default()).unwrap();
    let d2 = TopologyTestDriver::new(t2, DriverConfig::default()).unwrap();
    assert!(!d1.thread_cache().same_budget(&d2.thread_cache()));
    assert_eq!(d1.thread_cache().caches(), STORES);
}
