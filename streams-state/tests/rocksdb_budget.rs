//! The shared memtable budget: many RocksDB stores written in turn stay near the budget,
//! each flush carries at least a store's fair share of it, and nothing written is lost by
//! the flushes that do not wait.

use std::time::{Duration, Instant};

use streams_state::{KeyValueStore, RocksDbKeyValueStore, RocksDbResources, StateStore};

const STORES: usize = 16;
const RECORDS_PER_STORE: u32 = 5_000;
const VALUE: [u8; 100] = [7; 100];

fn key(store: usize, i: u32) -> Vec<u8> {
    format!("{store:02}-{i:08}").into_bytes()
}

#[test]
fn stores_written_in_turn_flush_fair_shares_and_stay_near_the_budget() {
    let budget = 1 << 20;
    let res = RocksDbResources::new(8 << 20, budget);
    let dir = tempfile::tempdir().unwrap();
    let mut stores: Vec<_> = (0..STORES)
        .map(|i| RocksDbKeyValueStore::open(format!("s{i}"), dir.path(), &res).unwrap())
        .collect();
    assert_eq!(res.open_stores(), STORES);

    let mut written = 0;
    for i in 0..RECORDS_PER_STORE {
        for (s, store) in stores.iter_mut().enumerate() {
            let key = key(s, i);
            store.put(&key, &VALUE).unwrap();
            written += key.len() + VALUE.len();
        }
    }
    // 16 x 5,000 records of 111 bytes: over 8x the budget went through the memtables.
    assert!(written > 8 * budget, "{written}");
    let flushes = res.budget_flushes() as usize;
    let fair_share = budget / STORES;
    assert!(flushes > 0, "the budget never asked for a flush");
    assert!(
        flushes <= written / fair_share,
        "{flushes} flushes for {written} bytes: some carried less than a fair share ({fair_share})"
    );

    // Without the budget the memtables would hold all 8.5 MiB (each below RocksDB's own
    // 16 MiB limit); with it they come back under twice the budget once the queued
    // flushes are written.
    let deadline = Instant::now() + Duration::from_secs(60);
    while res.write_buffer_usage() > 2 * budget {
        assert!(
            Instant::now() < deadline,
            "memtables hold {} bytes, budget {budget}",
            res.write_buffer_usage()
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // Nothing is lost, before and after a reopen.
    for (s, store) in stores.iter().enumerate() {
        for i in [0, RECORDS_PER_STORE / 2, RECORDS_PER_STORE - 1] {
            assert_eq!(store.get(&key(s, i)).unwrap().as_deref(), Some(&VALUE[..]));
        }
    }
    for store in &mut stores {
        store.close().unwrap();
    }
    assert_eq!(res.open_stores(), 0);
    drop(stores);
    for s in 0..STORES {
        let store = RocksDbKeyValueStore::open(format!("s{s}"), dir.path(), &res).unwrap();
        let found: Vec<_> = store.all().unwrap().map(|e| e.unwrap()).collect();
        let expected: Vec<_> = (0..RECORDS_PER_STORE).map(|i| key(s, i)).collect();
        assert_eq!(
            found.iter().map(|(k, _)| k.to_vec()).collect::<Vec<_>>(),
            expected,
            "store s{s}: every key written, once"
        );
        assert!(
            found.iter().all(|(_, v)| v[..] == VALUE[..]),
            "store s{s}: values"
        );
    }
}
