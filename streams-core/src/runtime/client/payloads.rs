//! Where the keys and values of consumed records are copied to.
//!
//! A consumed message's bytes live in librdkafka's buffers only until the message is
//! dropped, so every record's key and value are copied out. Copying each into a buffer of
//! its own costs two allocations and two frees per record. Instead, small payloads are
//! appended to a chunk of [`CHUNK_BYTES`] and handed out as `Bytes` slices of it (the way the
//! RocksDB iterators copy entries): a record then costs reference-count operations, and a
//! chunk is allocated once per few hundred records.
//!
//! # Invariants
//!
//! - A `Bytes` handed out never aliases memory that is written later. Every slice is split
//!   off the chunk's filled part (`BytesMut::split`), so the arena only ever appends behind
//!   it. When the chunk is full it is reused in place only if no slice cut from it is alive
//!   (`BytesMut::reserve` checks that the arena holds the only reference); otherwise a new
//!   chunk is allocated and the old one lives until its last slice is dropped.
//! - A payload larger than [`LARGE_BYTES`] gets a buffer of its own, so one large record
//!   never wastes most of a chunk and a retained slice keeps at most one chunk alive.
//! - Empty payloads allocate nothing and reference no chunk.
//!
//! Each stream thread (and every other thread that turns messages into records) has its
//! own arena, in a thread-local: the records of one poll batch fill the same chunk.

use std::cell::RefCell;

use bytes::{Bytes, BytesMut};

/// The size of a chunk small payloads are copied into.
pub(crate) const CHUNK_BYTES: usize = 64 * 1024;

/// Payloads above this size are copied into a buffer of their own.
pub(crate) const LARGE_BYTES: usize = CHUNK_BYTES / 4;

/// Copies payloads into shared chunks (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct PayloadArena {
    /// The unfilled rest of the current chunk (`len` is 0 between copies).
    chunk: BytesMut,
}

impl PayloadArena {
    /// An owned copy of `bytes`, a slice of the current chunk when small.
    pub(crate) fn copy(&mut self, bytes: &[u8]) -> Bytes {
        if bytes.is_empty() {
            return Bytes::new();
        }
        if bytes.len() > LARGE_BYTES {
            return Bytes::copy_from_slice(bytes);
        }
        if self.chunk.capacity() < bytes.len() {
            // In place when no slice of the chunk is alive, else a new chunk.
            self.chunk.reserve(CHUNK_BYTES);
        }
        self.chunk.extend_from_slice(bytes);
        self.chunk.split().freeze()
    }
}

thread_local! {
    static ARENA: RefCell<PayloadArena> = RefCell::new(PayloadArena::default());
}

/// Runs `f` on this thread's arena, or on a fresh one if the thread's arena is in use (a
/// re-entrant call).
pub(crate) fn with_arena<R>(f: impl FnOnce(&mut PayloadArena) -> R) -> R {
    ARENA.with(|a| match a.try_borrow_mut() {
        Ok(mut a) => f(&mut a),
        Err(_) => f(&mut PayloadArena::default()),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Bytes of `len` with a pattern derived from `seed`.
    fn payload(seed: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
    }

    #[test]
    fn small_payloads_share_one_chunk() {
        let mut arena = PayloadArena::default();
        let a = arena.copy(b"key-1");
        let b = arena.copy(&[7; 100]);
        assert_eq!(&a[..], b"key-1");
        assert_eq!(&b[..], &[7; 100][..]);
        // Adjacent slices of one buffer.
        assert_eq!(a.as_ptr().wrapping_add(a.len()), b.as_ptr());
    }

    #[test]
    fn a_full_chunk_with_live_slices_is_not_overwritten() {
        let mut arena = PayloadArena::default();
        let first = arena.copy(&payload(1, 1000));
        let mut kept = vec![first.clone()];
        // Several chunks' worth, every slice kept alive.
        for i in 0..300u32 {
            kept.push(arena.copy(&payload(i as u8, 1000)));
        }
        assert_eq!(&first[..], &payload(1, 1000)[..]);
        for (i, b) in kept.iter().enumerate().skip(1) {
            assert_eq!(&b[..], &payload((i - 1) as u8, 1000)[..], "slice {i}");
        }
    }

    #[test]
    fn a_chunk_whose_slices_are_dropped_is_reused_in_place() {
        let mut arena = PayloadArena::default();
        let start = arena.copy(&[1; 10]).as_ptr();
        let mut reused = false;
        for _ in 0..(2 * CHUNK_BYTES / 1000) {
            let b = arena.copy(&[2; 1000]);
            reused |= b.as_ptr() == start;
            drop(b);
        }
        assert!(reused, "the chunk was not reused once it had no live slice");
    }

    #[test]
    fn large_and_empty_payloads_take_no_chunk_space() {
        let mut arena = PayloadArena::default();
        let a = arena.copy(b"a");
        assert!(arena.copy(b"").is_empty());
        let large = payload(3, LARGE_BYTES + 1);
        let big = arena.copy(&large);
        assert_eq!(&big[..], &large[..]);
        let b = arena.copy(b"b");
        assert_eq!(a.as_ptr().wrapping_add(1), b.as_ptr());
    }

    #[test]
    fn the_thread_arena_copies() {
        let a = with_arena(|arena| arena.copy(b"one"));
        let (b, c) = with_arena(|arena| (with_arena(|inner| inner.copy(b"two")), arena.copy(b"three")));
        assert_eq!(&a[..], b"one");
        assert_eq!(&b[..], b"two");
        assert_eq!(&c[..], b"three");
        // The outer call used the thread's arena: `three` follows `one` in its chunk.
        assert_eq!(a.as_ptr().wrapping_add(3), c.as_ptr());
    }

    proptest! {
        /// Whatever the sizes and whichever slices are dropped along the way, every slice
        /// kept holds exactly the bytes it was copied from.
        #[test]
        fn kept_slices_keep_their_bytes(
            ops in proptest::collection::vec((0usize..(LARGE_BYTES + 2000), any::<u8>(), any::<bool>()), 1..400)
        ) {
            let mut arena = PayloadArena::default();
            let mut kept: Vec<(Vec<u8>, Bytes)> = Vec::new();
            for (len, seed, keep) in ops {
                let want = payload(seed, len);
                let got = arena.copy(&want);
                prop_assert_eq!(&got[..], &want[..]);
                if keep {
                    kept.push((want, got));
                }
            }
            for (want, got) in &kept {
                prop_assert_eq!(&got[..], &want[..]);
            }
        }
    }
}
