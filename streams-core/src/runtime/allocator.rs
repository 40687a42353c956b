//! The process's C allocator, which RocksDB, librdkafka and (unless the application picks
//! another global allocator) Rust code share.
//!
//! glibc's `malloc` gives threads that allocate at once arenas of their own, up to eight
//! per core. A streams application runs many such threads: its stream threads, RocksDB's
//! flush and compaction threads, librdkafka's broker threads. Memory freed in an arena
//! stays with that arena, so the process's resident memory grows with the number of arenas
//! that have held a peak, not only with what is allocated: the file-aggregation demo's
//! heap peaked at about 89 MB while its resident memory went from 181 MB with 1,000,000
//! lines to 232 MB with 5,000,000 (`docs/benchmarks.md`, "Memory of the file-aggregation
//! demo"). Fewer arenas bound that, at the price of threads waiting for each other's
//! allocations more often.

/// Limits glibc's `malloc` to at most `arenas` arenas (`mallopt(M_ARENA_MAX)`, as the
/// `MALLOC_ARENA_MAX` environment variable does), so that the memory freed by one thread
/// is reused by the others instead of staying resident in an arena of its own.
///
/// Process-wide: call it at the start of `main`, before threads are started (a thread
/// keeps the arena it already has). Returns whether the allocator took the limit: `false`
/// for `arenas == 0` and on targets whose C library is not glibc, where it does nothing.
///
/// ```
/// // At the start of main, before KafkaStreams::new: two arenas for the whole process.
/// let limited = streams_core::limit_malloc_arenas(2);
/// assert_eq!(limited, cfg!(all(target_os = "linux", target_env = "gnu")));
/// ```
pub fn limit_malloc_arenas(arenas: u16) -> bool {
    if arenas == 0 {
        return false;
    }
    set_arena_max(arenas)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn set_arena_max(arenas: u16) -> bool {
    // SAFETY: mallopt takes two integers and changes an allocator parameter; glibc
    // serialises it against concurrent allocations, and M_ARENA_MAX is a parameter glibc
    // defines on every architecture.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, i32::from(arenas)) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_arenas: u16) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::limit_malloc_arenas;

    #[test]
    fn zero_arenas_is_refused_and_a_limit_is_taken_on_glibc() {
        assert!(!limit_malloc_arenas(0));
        let glibc = cfg!(all(target_os = "linux", target_env = "gnu"));
        // The default of glibc (eight per core) is a limit like any other: setting it
        // back leaves the test process as it was.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(limit_malloc_arenas((8 * cores) as u16), glibc);
    }
}
