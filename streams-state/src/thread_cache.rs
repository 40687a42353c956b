//! [`ThreadCache`]: the record-cache budget of one stream thread, shared by the write-back
//! caches ([`CachingKeyValueStore`](crate::CachingKeyValueStore)) of every store of every
//! task the thread runs, as Kafka Streams' `ThreadCache`.
//!
//! The rules are documented on [`ThreadCache`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The record-cache budget shared by the caches of one stream thread.
///
/// # Rules
///
/// `statestore.cache.max.bytes` is divided among the stream threads; within a thread, all
/// caches draw on one budget, so the thread's cache memory does not grow with the number of
/// tasks or stores. Every cached entry is charged `key.len() + value.len() +`
/// [`ENTRY_OVERHEAD`](crate::ENTRY_OVERHEAD) bytes against the thread's budget.
///
/// - **The bound.** After every operation on any cache, the bytes charged to the thread's
///   caches together are at most [`max_bytes`](ThreadCache::max_bytes). A write that takes
///   the thread over its budget makes the cache written to evict its own least recently
///   written entries (the entry just written last of all) until the thread fits again. This
///   is Kafka Streams' rule, and it keeps the bound: the other caches did not grow, so a
///   cache that has evicted everything leaves the thread within budget.
/// - **Dirty entries.** When the entry to evict is dirty, the cache first writes every one
///   of its dirty entries down through its layers (change-logging, the inner store), in key
///   order, as on a commit; then the entry is dropped.
/// - **Recency across caches.** Entries are stamped with one write sequence per thread, so
///   the "least recently written" order is the thread's, across stores. Every eviction for
///   the budget raises the thread's *eviction mark* to the stamp of the entry evicted. An
///   entry older than the mark is one a thread-wide LRU would have evicted before it: each
///   cache drops its entries older than the mark at its next write and at its next flush
///   (commit), dirty ones written down first as above. So a cache that filled the budget
///   and then went quiet does not keep it: once another store of the thread has to evict,
///   the quiet one gives its stale entries back at the next commit at the latest. (Kafka
///   Streams keeps them until that store itself has to evict, or closes.) Until then the
///   store that has to evict writes through, as it would under Kafka Streams.
/// - **Reads** do not count as use, do not populate a cache, and never evict.
///
/// Closing or dropping a cache gives its bytes back to the budget.
///
/// # Threads
///
/// A `ThreadCache` is a handle: clones share one budget. Stores are `Send` (the runtime
/// restores a task's stores on another thread before it runs the task), so the accounting
/// is atomic, but it takes no lock, and only one thread writes to a thread's caches.
#[derive(Clone)]
pub struct ThreadCache {
    inner: Arc<Inner>,
}

struct Inner {
    max_bytes: usize,
    /// Bytes charged by every cache of the budget together.
    used: AtomicUsize,
    /// The next write's stamp: one sequence for all caches, so recency is the thread's.
    next_seq: AtomicU64,
    /// The eviction mark: one past the stamp of the newest entry evicted for the budget.
    /// Entries stamped below it are stale.
    evicted_below: AtomicU64,
    /// Caches drawing on the budget now.
    caches: AtomicUsize,
    /// Entries evicted for the budget so far (their own and stale ones).
    evictions: AtomicU64,
}

impl ThreadCache {
    /// A budget of `max_bytes` for the caches that will share it. A budget of 0 caches
    /// nothing: every write goes through at once.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                max_bytes,
                used: AtomicUsize::new(0),
                next_seq: AtomicU64::new(0),
                evicted_below: AtomicU64::new(0),
                caches: AtomicUsize::new(0),
                evictions: AtomicU64::new(0),
            }),
        }
    }

    /// The budget in bytes.
    pub fn max_bytes(&self) -> usize {
        self.inner.max_bytes
    }

    /// The bytes charged by all caches of the budget together now.
    pub fn used_bytes(&self) -> usize {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// The number of caches drawing on the budget now (open caches not yet dropped).
    pub fn caches(&self) -> usize {
        self.inner.caches.load(Ordering::Relaxed)
    }

    /// The number of entries evicted so far to keep the budget, by any of its caches.
    pub fn evictions(&self) -> u64 {
        self.inner.evictions.load(Ordering::Relaxed)
    }

    /// Whether `self` and `other` are the same budget.
    pub fn same_budget(&self, other: &ThreadCache) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The stamp of a new write.
    pub(crate) fn next_seq(&self) -> u64 {
        self.inner.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether the caches together exceed the budget.
    pub(crate) fn over_budget(&self) -> bool {
        self.used_bytes() > self.inner.max_bytes
    }

    /// Changes the bytes charged by `old` -> `new` (one cache's entry replaced).
    pub(crate) fn charge(&self, old: usize, new: usize) {
        if new >= old {
            self.inner.used.fetch_add(new - old, Ordering::Relaxed);
        } else {
            self.inner.used.fetch_sub(old - new, Ordering::Relaxed);
        }
    }

    /// Entries stamped below this are stale (see [`ThreadCache`]).
    pub(crate) fn evicted_below(&self) -> u64 {
        self.inner.evicted_below.load(Ordering::Relaxed)
    }

    /// Records that an entry stamped `seq` was evicted for the budget.
    pub(crate) fn evicted(&self, seq: u64) {
        self.inner.evicted_below.fetch_max(seq + 1, Ordering::Relaxed);
        self.inner.evictions.fetch_add(1, Ordering::Relaxed);
    }

    /// Records that a stale entry was dropped.
    pub(crate) fn dropped_stale(&self) {
        self.inner.evictions.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn register(&self) {
        self.inner.caches.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn unregister(&self) {
        self.inner.caches.fetch_sub(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for ThreadCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadCache")
            .field("max_bytes", &self.max_bytes())
            .field("used_bytes", &self.used_bytes())
            .field("caches", &self.caches())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::Bytes;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::ThreadCache;
    use crate::{
        CachingKeyValueStore, ChangeLoggingKeyValueStore, ENTRY_OVERHEAD, InMemoryKeyValueStore,
        KeyValueStore, StateStore, VecChangelog,
    };

    /// The charge of an entry with a one-byte key and a one-byte value.
    const ENTRY: usize = ENTRY_OVERHEAD + 2;

    fn cache(name: &str, budget: &ThreadCache) -> CachingKeyValueStore {
        CachingKeyValueStore::with_thread_cache(Box::new(InMemoryKeyValueStore::new(name)), budget.clone())
    }

    /// A cache over change-logging over memory, and its changelog.
    fn logged_cache(name: &str, budget: &ThreadCache) -> (CachingKeyValueStore, VecChangelog) {
        let log = VecChangelog::default();
        let logged = ChangeLoggingKeyValueStore::new(
            Box::new(InMemoryKeyValueStore::new(name)),
            Box::new(log.clone()),
        );
        (
            CachingKeyValueStore::with_thread_cache(Box::new(logged), budget.clone()),
            log,
        )
    }

    fn changed_keys(log: &VecChangelog) -> Vec<Vec<u8>> {
        log.changes().into_iter().map(|(k, _)| k.to_vec()).collect()
    }

    #[test]
    fn two_caches_never_exceed_the_budget_together() {
        let budget = ThreadCache::new(7 * ENTRY + 10);
        let mut stores = [cache("a", &budget), cache("b", &budget)];
        let mut models = [BTreeMap::new(), BTreeMap::new()];
        let mut rng = StdRng::seed_from_u64(7);
        for i in 0..5_000u32 {
            // The first store is written three times as often, with longer values.
            let s = usize::from(rng.random_ratio(1, 4));
            let key = vec![rng.random_range(0..40u8)];
            match rng.random_range(0..10) {
                0 => {
                    let old = stores[s].delete(&key).unwrap();
                    assert_eq!(old.map(|b| b.to_vec()), models[s].remove(&key));
                }
                1 if i % 7 == 0 => stores[s].flush().unwrap(),
                _ => {
                    let value = vec![b'v'; rng.random_range(0..(40 - 30 * s))];
                    stores[s].put(&key, &value).unwrap();
                    models[s].insert(key.clone(), value);
                }
            }
            let used = stores[0].cached_bytes() + stores[1].cached_bytes();
            assert_eq!(budget.used_bytes(), used);
            assert!(used <= budget.max_bytes(), "{used} > {}", budget.max_bytes());
            let probe = vec![rng.random_range(0..40u8)];
            for (store, model) in stores.iter().zip(&models) {
                assert_eq!(
                    store.get(&probe).unwrap().map(|b| b.to_vec()),
                    model.get(&probe).cloned()
                );
            }
        }
        assert!(budget.evictions() > 0);
        for (store, model) in stores.iter().zip(&models) {
            let all: Vec<(Vec<u8>, Vec<u8>)> = store
                .all()
                .unwrap()
                .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<crate::Result<_>>()
                .unwrap();
            let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(all, want);
        }
    }

    #[test]
    fn evicting_a_dirty_entry_flushes_that_stores_dirty_entries() {
        let budget = ThreadCache::new(4 * ENTRY);
        let (mut a, a_log) = logged_cache("a", &budget);
        let (mut b, b_log) = logged_cache("b", &budget);
        a.put(b"1", b"a").unwrap();
        a.put(b"2", b"a").unwrap();
        b.put(b"1", b"b").unwrap();
        b.put(b"2", b"b").unwrap();
        assert_eq!(budget.used_bytes(), 4 * ENTRY);
        assert!(a_log.changes().is_empty() && b_log.changes().is_empty());

        // Over budget: `b` evicts its oldest entry, dirty, so all its dirty entries go down
        // through logging first; `a` is not touched yet.
        b.put(b"3", b"b").unwrap();
        assert_eq!(
            changed_keys(&b_log),
            [b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]
        );
        assert!(a_log.changes().is_empty());
        assert_eq!((a.cached_entries(), b.cached_entries()), (2, 2));
        assert_eq!(budget.used_bytes(), 4 * ENTRY);

        // `a`'s entries were written before the one `b` evicted: stale. Its next write
        // drops them, writing its dirty entries down first.
        a.put(b"3", b"a").unwrap();
        assert_eq!(
            changed_keys(&a_log),
            [b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]
        );
        assert_eq!((a.cached_entries(), b.cached_entries()), (1, 2));
        assert_eq!(budget.used_bytes(), 3 * ENTRY);
        for key in [b"1", b"2", b"3"] {
            assert_eq!(a.get(key).unwrap().as_deref(), Some(&b"a"[..]));
            assert_eq!(b.get(key).unwrap().as_deref(), Some(&b"b"[..]));
        }
        // Nothing was written down twice.
        a.flush().unwrap();
        b.flush().unwrap();
        assert_eq!(a_log.changes().len(), 3);
        assert_eq!(b_log.changes().len(), 3);
    }

    #[test]
    fn a_quiet_cache_gives_its_entries_back_at_the_next_commit() {
        let budget = ThreadCache::new(4 * ENTRY);
        let mut quiet = cache("quiet", &budget);
        let mut busy = cache("busy", &budget);
        for k in 0..4u8 {
            quiet.put(&[k], b"q").unwrap();
        }
        // The budget is full of `quiet`'s entries: `busy` writes through (Kafka Streams'
        // rule keeps the bound)...
        busy.put(b"x", b"1").unwrap();
        assert_eq!((quiet.cached_entries(), busy.cached_entries()), (4, 0));
        assert_eq!(busy.get(b"x").unwrap().as_deref(), Some(&b"1"[..]));
        // ... until `quiet` commits and drops the entries older than `busy`'s evicted one.
        quiet.flush().unwrap();
        assert_eq!(quiet.cached_entries(), 0);
        for k in 0..4u8 {
            assert_eq!(quiet.get(&[k]).unwrap().as_deref(), Some(&b"q"[..]));
            busy.put(&[k], b"2").unwrap();
        }
        assert_eq!(busy.cached_entries(), 4);
        assert_eq!(budget.used_bytes(), 4 * ENTRY);
    }

    #[test]
    fn closing_and_dropping_give_the_bytes_back() {
        let budget = ThreadCache::new(1 << 20);
        let mut a = cache("a", &budget);
        let mut b = cache("b", &budget);
        a.put(b"k", b"v").unwrap();
        b.put_all(&[(Bytes::from_static(b"k"), Bytes::from_static(b"v"))])
            .unwrap();
        b.put(b"l", b"w").unwrap();
        assert_eq!((budget.caches(), budget.used_bytes()), (2, 3 * ENTRY));
        a.close().unwrap();
        assert_eq!((budget.caches(), budget.used_bytes()), (1, 2 * ENTRY));
        a.close().unwrap();
        drop(a);
        assert_eq!(budget.caches(), 1);
        drop(b);
        assert_eq!((budget.caches(), budget.used_bytes()), (0, 0));
        assert!(budget.same_budget(&budget.clone()));
        assert!(!budget.same_budget(&ThreadCache::new(1 << 20)));
    }

    #[test]
    fn a_zero_budget_writes_through() {
        let budget = ThreadCache::new(0);
        let (mut a, log) = logged_cache("a", &budget);
        a.put(b"k", b"v").unwrap();
        assert_eq!(a.cached_entries(), 0);
        assert_eq!(log.changes().len(), 1);
        assert_eq!(a.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }
}
