//! RocksDB resources for the store benchmarks, shaped by environment variables so one
//! binary can compare option sets.
//!
//! - `BLOCK_CACHE_BYTES`, `WRITE_BUFFER_BYTES`: the budgets (defaults: the runtime's,
//!   64 MiB and 32 MiB);
//! - `COMPACTION=universal` and `COMPRESSION=none`: Kafka Streams' defaults (universal
//!   compaction, no compression) instead of ours (levelled, LZ4);
//! - `ARENA_BLOCK_BYTES`: the memtables' arena block size.

use streams_state::RocksDbResources;

/// The number in environment variable `name`, or `default` (with a warning when it is set
/// but not a number).
pub fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            eprintln!("{name}={v} is not a number; using {default}");
            default
        }),
        Err(_) => default,
    }
}

/// Resources with the budgets and options the environment names (see the module docs).
pub fn resources_from_env() -> RocksDbResources {
    let block_cache_bytes = env_number("BLOCK_CACHE_BYTES", RocksDbResources::DEFAULT_BLOCK_CACHE_BYTES);
    let write_buffer_bytes = env_number("WRITE_BUFFER_BYTES", RocksDbResources::DEFAULT_WRITE_BUFFER_BYTES);
    let resources = RocksDbResources::new(block_cache_bytes, write_buffer_bytes);
    let arena = env_number("ARENA_BLOCK_BYTES", 0);
    let universal = std::env::var("COMPACTION").is_ok_and(|v| v == "universal");
    let no_compression = std::env::var("COMPRESSION").is_ok_and(|v| v == "none");
    if arena == 0 && !universal && !no_compression {
        return resources;
    }
    resources.with_options_setter(move |_, opts| {
        if arena > 0 {
            opts.set_arena_block_size(arena);
        }
        if universal {
            opts.set_compaction_style(rocksdb::DBCompactionStyle::Universal);
        }
        if no_compression {
            opts.set_compression_type(rocksdb::DBCompressionType::None);
        }
    })
}
