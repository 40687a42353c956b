//! Process-wide RocksDB resources and the options every store is opened with.

use std::fmt;
use std::sync::{Arc, OnceLock};

use super::budget::Budget;
use ::rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, Cache, DBCompressionType, Options, WriteBufferManager,
};

/// A user hook that tunes the options of one store: called with the store's name and the
/// options about to be used, after the defaults are applied and before the store opens.
type OptionsSetter = dyn Fn(&str, &mut Options) + Send + Sync;

/// Memory-bounding resources shared by every RocksDB store opened with them (clones share
/// them): one LRU block cache, one write-buffer manager that charges the memtables' memory
/// to that cache, and a memtable budget that decides which store flushes when the
/// memtables together pass `write_buffer_bytes` (a store that wrote at least its fair
/// share of the budget, not whichever store happens to be written: see the `budget`
/// module). RocksDB's memory is then roughly capped by the cache size, whatever the number
/// of stores (Kafka Streams' `BoundedMemoryRocksDBConfig`).
///
/// An optional options setter (Kafka Streams' `rocksdb.config.setter`) tunes each store's
/// [`rocksdb::Options`]. Cloning is cheap: the resources are reference counted.
///
/// The runtime makes one per application instance, sized by the `rocksdb.block.cache.bytes`
/// and `rocksdb.write.buffer.bytes` properties. [`RocksDbResources::default()`] is the
/// process-wide instance with default sizes ([`shared`](Self::shared)), so stores built
/// without explicit resources share one budget.
///
/// # What is bounded
///
/// The block cache holds data blocks, index and filter blocks (partitioned, at high
/// priority, the top level pinned) and, charged to it, the memtables: their memory is part of
/// `block_cache_bytes`, not added to it. Not bounded: each instance's fixed structures (table
/// readers of open files, column families' empty memtables, background-job state), blocks
/// pinned by open iterators, memtables that overshoot their budget while a flush runs (the
/// cache's limit is not strict: reads and writes never fail for want of cache), and the
/// allocator's overhead.
#[derive(Clone)]
pub struct RocksDbResources {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    block_cache_bytes: usize,
    pub(super) write_buffer_bytes: usize,
    cache: Cache,
    write_buffers: WriteBufferManager,
    pub(super) budget: Arc<Budget>,
    setter: Option<Arc<OptionsSetter>>,
}

impl RocksDbResources {
    /// The default block cache size: 64 MiB.
    pub const DEFAULT_BLOCK_CACHE_BYTES: usize = 64 << 20;
    /// The default budget of all memtables together: 32 MiB (charged to the block cache).
    pub const DEFAULT_WRITE_BUFFER_BYTES: usize = 32 << 20;
    /// The size of one memtable of one store (RocksDB's `write_buffer_size`): 16 MiB.
    pub const MEMTABLE_BYTES: usize = 16 << 20;

    /// New resources: a block cache of `block_cache_bytes` and a write-buffer manager
    /// limiting all memtables together to `write_buffer_bytes`, charged to the cache (so
    /// `write_buffer_bytes` is best at most `block_cache_bytes`, which `StreamsConfig`
    /// enforces for its properties).
    pub fn new(block_cache_bytes: usize, write_buffer_bytes: usize) -> Self {
        let cache = Cache::new_lru_cache(block_cache_bytes);
        // Without a size: the manager charges the memtables to the cache but never asks a
        // store to flush; `MemtableShare` decides that (see the `budget` module).
        let write_buffers = WriteBufferManager::new_write_buffer_manager_with_cache(0, false, cache.clone());
        Self {
            inner: Arc::new(Inner {
                block_cache_bytes,
                write_buffer_bytes,
                cache,
                write_buffers,
                budget: Arc::default(),
                setter: None,
            }),
        }
    }

    /// The process-wide resources with default sizes, created on first use.
    pub fn shared() -> Self {
        static SHARED: OnceLock<RocksDbResources> = OnceLock::new();
        SHARED
            .get_or_init(|| Self::new(Self::DEFAULT_BLOCK_CACHE_BYTES, Self::DEFAULT_WRITE_BUFFER_BYTES))
            .clone()
    }

    /// The same cache and write-buffer manager, with `setter` called on each store's options
    /// before it opens (replacing any previous setter). The setter gets the store's name.
    pub fn with_options_setter(&self, setter: impl Fn(&str, &mut Options) + Send + Sync + 'static) -> Self {
        let inner = Inner {
            block_cache_bytes: self.inner.block_cache_bytes,
            write_buffer_bytes: self.inner.write_buffer_bytes,
            cache: self.inner.cache.clone(),
            write_buffers: self.inner.write_buffers.clone(),
            budget: self.inner.budget.clone(),
            setter: Some(Arc::new(setter)),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The configured block cache capacity in bytes.
    pub fn block_cache_bytes(&self) -> usize {
        self.inner.block_cache_bytes
    }

    /// The configured memtable budget in bytes.
    pub fn write_buffer_bytes(&self) -> usize {
        self.inner.write_buffer_bytes
    }

    /// The arena block size of every memtable (RocksDB's `arena_block_size`): a 512th of
    /// the memtable budget, between 4 KiB and RocksDB's own default for a memtable of
    /// [`MEMTABLE_BYTES`](Self::MEMTABLE_BYTES) (2 MiB); 64 KiB for the default budget.
    ///
    /// The write-buffer manager counts a memtable's memory in whole arena blocks, and every
    /// store with a non-empty memtable holds at least one. With RocksDB's default (an eighth
    /// of the memtable size) 100 stores held 200 MiB of mostly empty blocks against a 32 MiB
    /// budget: every write found the budget exceeded and flushed a tiny memtable, and the
    /// reservations charged to the block cache left no room for data blocks. See
    /// docs/benchmarks.md, "Bounded memory".
    pub fn arena_block_bytes(&self) -> usize {
        (self.inner.write_buffer_bytes / 512).clamp(4 << 10, Self::MEMTABLE_BYTES / 8) & !0xfff
    }

    /// The bytes currently held in the block cache (including charged memtable memory).
    pub fn block_cache_usage(&self) -> usize {
        self.inner.cache.get_usage()
    }

    /// The bytes currently used by memtables of all stores sharing these resources.
    pub fn write_buffer_usage(&self) -> usize {
        self.inner.write_buffers.get_usage()
    }

    /// The options the store `store` is opened with: the shared cache and write-buffer
    /// manager, small arena blocks, bloom filters, LZ4, atomic flush, then the user's
    /// setter. Exposed so tools (e.g. benchmarks) can open a store's directory with
    /// identical options.
    pub fn store_options(&self, store: &str) -> Options {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        // Data and checkpoint live in different column families: flush them together.
        opts.set_atomic_flush(true);
        opts.set_write_buffer_manager(&self.inner.write_buffers);
        opts.set_write_buffer_size(Self::MEMTABLE_BYTES);
        opts.set_arena_block_size(self.arena_block_bytes());
        opts.set_compression_type(DBCompressionType::Lz4);
        opts.set_block_based_table_factory(&self.table_options());
        if let Some(setter) = &self.inner.setter {
            setter(store, &mut opts);
        }
        opts
    }

    /// Options of the small metadata column family: shares the block cache; its memtable
    /// (one key, rewritten at every commit) takes small arena blocks too.
    pub(crate) fn metadata_options(&self) -> Options {
        let mut opts = Options::default();
        opts.set_block_based_table_factory(&self.table_options());
        opts.set_arena_block_size(self.arena_block_bytes());
        opts
    }

    /// Table options for stores that grow large in a bounded cache.
    ///
    /// Index and filter blocks live in the shared block cache (so they count against the
    /// budget), at high priority. They are *partitioned*: a lookup loads one small filter
    /// partition and one index partition (4 KiB) through a pinned top-level index, instead
    /// of a whole SST file's filter (megabytes for a large file) that the memtables and
    /// data blocks evict again at once. Without this a growing store re-read and
    /// re-checksummed full filter blocks on every lookup and slowed down as it grew (see
    /// docs/benchmarks.md, "Stores that grow").
    fn table_options(&self) -> BlockBasedOptions {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&self.inner.cache);
        table.set_bloom_filter(10.0, false);
        table.set_cache_index_and_filter_blocks(true);
        table.set_cache_index_and_filter_blocks_with_high_priority(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(true);
        table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
        table.set_partition_filters(true);
        table.set_metadata_block_size(4096);
        table.set_pin_top_level_index_and_filter(true);
        table.set_optimize_filters_for_memory(true);
        table
    }
}

impl Default for RocksDbResources {
    /// The process-wide instance, see [`shared`](Self::shared).
    fn default() -> Self {
        Self::shared()
    }
}

impl fmt::Debug for RocksDbResources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RocksDbResources")
            .field("block_cache_bytes", &self.inner.block_cache_bytes)
            .field("write_buffer_bytes", &self.inner.write_buffer_bytes)
            .field("options_setter", &self.inner.setter.is_some())
            .finish()
    }
}
