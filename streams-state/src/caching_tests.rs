//! The write-back cache's unit tests.

use std::sync::{Arc, Mutex};

use super::*;
use crate::InMemoryKeyValueStore;

type Event = (Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>);

fn store(max_bytes: usize) -> CachingKeyValueStore {
    CachingKeyValueStore::new(Box::new(InMemoryKeyValueStore::new("c")), max_bytes)
}

fn entries(it: KeyValueIter<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_>>()
        .unwrap()
}

#[test]
fn cache_shadows_and_hides_inner_entries() {
    let mut s = store(1 << 20);
    s.put(b"a", b"1").unwrap();
    s.put(b"b", b"2").unwrap();
    s.put(b"c", b"3").unwrap();
    s.flush().unwrap();
    s.put(b"b", b"20").unwrap();
    s.delete(b"c").unwrap();
    s.put(b"d", b"4").unwrap();
    assert_eq!(s.get(b"c").unwrap(), None);
    let want = vec![
        (b"a".to_vec(), b"1".to_vec()),
        (b"b".to_vec(), b"20".to_vec()),
        (b"d".to_vec(), b"4".to_vec()),
    ];
    assert_eq!(entries(s.all().unwrap()), want);
    let mut rev = entries(s.reverse_all().unwrap());
    rev.reverse();
    assert_eq!(rev, want);
    assert_eq!(s.approximate_num_entries().unwrap(), 3);
}

#[test]
fn eviction_keeps_the_budget_and_the_data() {
    let mut s = store(3 * (ENTRY_OVERHEAD + 2));
    for i in 0u8..10 {
        s.put(&[i], &[i]).unwrap();
        assert!(s.cached_bytes() <= 3 * (ENTRY_OVERHEAD + 2));
    }
    assert!(s.cached_entries() <= 3);
    for i in 0u8..10 {
        assert_eq!(s.get(&[i]).unwrap().as_deref(), Some(&[i][..]));
    }
}

#[test]
fn flush_listener_sees_deduplicated_writes_with_old_values() {
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let mut s = store(1 << 20);
    let ev = Arc::clone(&events);
    assert!(s.set_flush_listener(
        Box::new(move |k, new, old| {
            ev.lock()
                .unwrap()
                .push((k.to_vec(), new.map(<[u8]>::to_vec), old.map(<[u8]>::to_vec)));
        }),
        true,
    ));
    s.put(b"k", b"1").unwrap();
    s.put(b"k", b"2").unwrap();
    s.flush_cache().unwrap();
    s.delete(b"k").unwrap();
    s.flush().unwrap();
    s.flush().unwrap();
    let got = events.lock().unwrap().clone();
    assert_eq!(
        got,
        vec![
            (b"k".to_vec(), Some(b"2".to_vec()), None),
            (b"k".to_vec(), None, Some(b"2".to_vec()))
        ]
    );
}

#[test]
fn a_listener_without_old_values_is_told_in_write_order_after_batched_writes() {
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let mut s = store(1 << 20);
    let ev = Arc::clone(&events);
    s.set_flush_listener(
        Box::new(move |k, new, old| {
            ev.lock()
                .unwrap()
                .push((k.to_vec(), new.map(<[u8]>::to_vec), old.map(<[u8]>::to_vec)));
        }),
        false,
    );
    s.put(b"a", b"1").unwrap();
    s.flush_cache().unwrap();
    s.put(b"a", b"2").unwrap();
    s.put(b"b", b"3").unwrap();
    s.put(b"a", b"4").unwrap();
    s.flush().unwrap();
    let got = events.lock().unwrap().clone();
    assert_eq!(
        got,
        vec![
            (b"a".to_vec(), Some(b"1".to_vec()), None),
            // In the order of the last writes: `b`, then `a`.
            (b"b".to_vec(), Some(b"3".to_vec()), None),
            (b"a".to_vec(), Some(b"4".to_vec()), None),
        ]
    );
    assert_eq!(s.get(b"a").unwrap().as_deref(), Some(&b"4"[..]));
}

#[test]
fn an_eviction_tells_the_listener_at_the_write_that_caused_it() {
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let mut s = store(2 * (ENTRY_OVERHEAD + 2));
    let ev = Arc::clone(&events);
    s.set_flush_listener(
        Box::new(move |k, new, _| {
            ev.lock()
                .unwrap()
                .push((k.to_vec(), new.map(<[u8]>::to_vec), None));
        }),
        false,
    );
    s.put(b"a", b"1").unwrap();
    s.put(b"b", b"2").unwrap();
    assert!(events.lock().unwrap().is_empty());
    // Over the budget: the oldest entry goes, and every dirty entry is written first.
    s.put(b"c", b"3").unwrap();
    assert_eq!(events.lock().unwrap().len(), 3);
}

#[test]
fn range_delete_drops_dirty_entries() {
    let mut s = store(1 << 20);
    s.put(b"a", b"1").unwrap();
    s.flush().unwrap();
    s.put(b"ab", b"2").unwrap();
    s.put(b"b", b"3").unwrap();
    s.delete_prefix(b"a").unwrap();
    assert_eq!(entries(s.all().unwrap()), vec![(b"b".to_vec(), b"3".to_vec())]);
    s.close().unwrap();
    s.close().unwrap();
    assert!(matches!(s.get(b"b"), Err(StoreError::Closed { .. })));
}

#[test]
fn hash_order_and_recency_indexes_agree_under_random_operations() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    // Room for about eight entries: evictions (with flushes of dirty entries) are frequent.
    let mut s = store(8 * (ENTRY_OVERHEAD + 4));
    let mut model = std::collections::BTreeMap::new();
    for i in 0..5_000u32 {
        let key = [b'k', rng.random_range(0..32u8)];
        match rng.random_range(0..10) {
            0..=5 => {
                let value = i.to_be_bytes();
                s.put(&key, &value).unwrap();
                model.insert(key.to_vec(), value.to_vec());
            }
            6 => {
                s.delete(&key).unwrap();
                model.remove(&key[..]);
            }
            7 => {
                let from = [b'k', rng.random_range(0..32u8)];
                s.delete_range(Bound::Included(&from[..]), Bound::Excluded(&key[..]))
                    .unwrap();
                if from < key {
                    model.retain(|k, _| k[..] < from[..] || k[..] >= key[..]);
                }
            }
            8 => s.flush().unwrap(),
            _ => assert_eq!(
                s.get(&key).unwrap().as_deref(),
                model.get(&key[..]).map(Vec::as_slice)
            ),
        }
        s.check_indexes();
    }
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(entries(s.all().unwrap()), want);
}
