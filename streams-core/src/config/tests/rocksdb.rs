//! RocksDB's memory properties, and typos of the `rocksdb.` ones.

use super::{fails_on, with_app};
use crate::config::StreamsConfig;

#[test]
fn rocksdb_memory_is_configured_and_checked() {
    let c = with_app(&[]).unwrap();
    assert_eq!(c.rocksdb_block_cache_bytes(), 64 << 20);
    assert_eq!(c.rocksdb_write_buffer_bytes(), 32 << 20);
    let c = with_app(&[
        ("rocksdb.block.cache.bytes", "268435456"),
        ("rocksdb.write.buffer.bytes", "67108864"),
    ])
    .unwrap();
    assert_eq!(c.rocksdb_block_cache_bytes(), 256 << 20);
    assert_eq!(c.rocksdb_write_buffer_bytes(), 64 << 20);
    let resources = c.rocksdb_resources();
    assert_eq!(resources.block_cache_bytes(), 256 << 20);
    assert_eq!(resources.write_buffer_bytes(), 64 << 20);
    let shown = c.to_string();
    assert!(shown.contains("rocksdb.block.cache.bytes = 268435456"), "{shown}");
    assert!(shown.contains("rocksdb.write.buffer.bytes = 67108864"), "{shown}");
    // Never a client property.
    assert!(c.consumer_properties().is_empty() && c.producer_properties().is_empty());

    let b = StreamsConfig::builder()
        .application_id("app")
        .rocksdb_block_cache_bytes(1 << 20)
        .rocksdb_write_buffer_bytes(1 << 19)
        .build()
        .unwrap();
    assert_eq!(
        (b.rocksdb_block_cache_bytes(), b.rocksdb_write_buffer_bytes()),
        (1 << 20, 1 << 19)
    );

    for bad in ["0", "-1", "lots", ""] {
        fails_on(
            with_app(&[("rocksdb.block.cache.bytes", bad)]),
            "rocksdb.block.cache.bytes",
        );
        fails_on(
            with_app(&[("rocksdb.write.buffer.bytes", bad)]),
            "rocksdb.write.buffer.bytes",
        );
    }
    // The memtables are charged to the block cache: they cannot outgrow it.
    let m = fails_on(
        with_app(&[("rocksdb.write.buffer.bytes", "134217728")]),
        "rocksdb.write.buffer.bytes",
    );
    assert!(m.contains("rocksdb.block.cache.bytes"), "{m}");
    fails_on(
        with_app(&[("rocksdb.block.cache.bytes", "1048576")]),
        "rocksdb.block.cache.bytes",
    );
}

#[test]
fn unknown_rocksdb_properties_are_typos() {
    let m = fails_on(
        with_app(&[("rocksdb.block.cache.size", "1")]),
        "rocksdb.block.cache.size",
    );
    assert!(m.contains("did you mean `rocksdb.block.cache.bytes`"), "{m}");
    let m = fails_on(
        with_app(&[("rocksdb.write_buffer_bytes", "1")]),
        "rocksdb.write_buffer_bytes",
    );
    assert!(m.contains("did you mean `rocksdb.write.buffer.bytes`"), "{m}");
    let m = fails_on(
        with_app(&[("rocksdb.max.open.files", "1")]),
        "rocksdb.max.open.files",
    );
    assert!(!m.contains("did you mean"), "{m}");
    assert!(m.contains("rocksdb.block.cache.bytes"), "{m}");
    // Near misses outside the prefix are caught as before.
    let m = fails_on(
        with_app(&[("rockdb.block.cache.bytes", "1")]),
        "rockdb.block.cache.bytes",
    );
    assert!(m.contains("did you mean `rocksdb.block.cache.bytes`"), "{m}");
    // The unsupported setter is still ignored, not an error.
    let c = with_app(&[("rocksdb.config.setter", "com.example.Setter")]).unwrap();
    assert_eq!(
        c.ignored_properties().collect::<Vec<_>>(),
        ["rocksdb.config.setter"]
    );
}
