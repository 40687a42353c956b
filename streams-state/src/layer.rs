//! `delegate_to_inner!`: the methods a store layer passes straight down.
//!
//! A layer (caching, change-logging, the transactional overlay, the retention layers of a
//! segmented store) wraps the store below it in a field `inner` and changes only some of
//! the [`StateStore`](crate::StateStore) and [`KeyValueStore`](crate::KeyValueStore)
//! methods; the others pass the call to `inner` unchanged. The macro writes those, so each
//! layer's impl lists only what it does itself. The expansion is the plain call, as written
//! by hand: no extra indirection on the per-record paths.

/// Implements the named methods, inside a layer's `impl StateStore` or
/// `impl KeyValueStore` block, as calls of the same method of `self.inner` with the same
/// arguments: `delegate_to_inner!(name, persistent, is_open, stats);`. Attributes (doc
/// comments) may stand before a name.
macro_rules! delegate_to_inner {
    (@one $(#[$attr:meta])* name) => {
        $(#[$attr])*
        fn name(&self) -> &str {
            self.inner.name()
        }
    };
    (@one $(#[$attr:meta])* persistent) => {
        $(#[$attr])*
        fn persistent(&self) -> bool {
            self.inner.persistent()
        }
    };
    (@one $(#[$attr:meta])* is_open) => {
        $(#[$attr])*
        fn is_open(&self) -> bool {
            self.inner.is_open()
        }
    };
    (@one $(#[$attr:meta])* flush) => {
        $(#[$attr])*
        fn flush(&mut self) -> $crate::error::Result<()> {
            self.inner.flush()
        }
    };
    (@one $(#[$attr:meta])* close) => {
        $(#[$attr])*
        fn close(&mut self) -> $crate::error::Result<()> {
            self.inner.close()
        }
    };
    (@one $(#[$attr:meta])* stats) => {
        $(#[$attr])*
        fn stats(&self) -> $crate::store::StoreStats {
            self.inner.stats()
        }
    };
    (@one $(#[$attr:meta])* get) => {
        $(#[$attr])*
        fn get(&self, key: &[u8]) -> $crate::error::Result<Option<::bytes::Bytes>> {
            self.inner.get(key)
        }
    };
    (@one $(#[$attr:meta])* put) => {
        $(#[$attr])*
        fn put(&mut self, key: &[u8], value: &[u8]) -> $crate::error::Result<()> {
            self.inner.put(key, value)
        }
    };
    (@one $(#[$attr:meta])* delete) => {
        $(#[$attr])*
        fn delete(&mut self, key: &[u8]) -> $crate::error::Result<Option<::bytes::Bytes>> {
            self.inner.delete(key)
        }
    };
    (@one $(#[$attr:meta])* range) => {
        $(#[$attr])*
        fn range(
            &self,
            from: ::std::ops::Bound<&[u8]>,
            to: ::std::ops::Bound<&[u8]>,
        ) -> $crate::error::Result<$crate::iter::KeyValueIter<'_>> {
            self.inner.range(from, to)
        }
    };
    (@one $(#[$attr:meta])* reverse_range) => {
        $(#[$attr])*
        fn reverse_range(
            &self,
            from: ::std::ops::Bound<&[u8]>,
            to: ::std::ops::Bound<&[u8]>,
        ) -> $crate::error::Result<$crate::iter::KeyValueIter<'_>> {
            self.inner.reverse_range(from, to)
        }
    };
    (@one $(#[$attr:meta])* prefix_scan) => {
        $(#[$attr])*
        fn prefix_scan(&self, prefix: &[u8]) -> $crate::error::Result<$crate::iter::KeyValueIter<'_>> {
            self.inner.prefix_scan(prefix)
        }
    };
    (@one $(#[$attr:meta])* all) => {
        $(#[$attr])*
        fn all(&self) -> $crate::error::Result<$crate::iter::KeyValueIter<'_>> {
            self.inner.all()
        }
    };
    (@one $(#[$attr:meta])* reverse_all) => {
        $(#[$attr])*
        fn reverse_all(&self) -> $crate::error::Result<$crate::iter::KeyValueIter<'_>> {
            self.inner.reverse_all()
        }
    };
    (@one $(#[$attr:meta])* approximate_num_entries) => {
        $(#[$attr])*
        fn approximate_num_entries(&self) -> $crate::error::Result<u64> {
            self.inner.approximate_num_entries()
        }
    };
    (@one $(#[$attr:meta])* delete_range) => {
        $(#[$attr])*
        fn delete_range(
            &mut self,
            from: ::std::ops::Bound<&[u8]>,
            to: ::std::ops::Bound<&[u8]>,
        ) -> $crate::error::Result<()> {
            self.inner.delete_range(from, to)
        }
    };
    (@one $(#[$attr:meta])* restore_batch) => {
        $(#[$attr])*
        fn restore_batch(&mut self, batch: &[$crate::changelog::ChangelogRecord]) -> $crate::error::Result<()> {
            self.inner.restore_batch(batch)
        }
    };
    (@one $(#[$attr:meta])* checkpoint) => {
        $(#[$attr])*
        fn checkpoint(&self) -> $crate::error::Result<Option<i64>> {
            self.inner.checkpoint()
        }
    };
    (@one $(#[$attr:meta])* write_checkpoint) => {
        $(#[$attr])*
        fn write_checkpoint(&mut self, offset: Option<i64>) -> $crate::error::Result<()> {
            self.inner.write_checkpoint(offset)
        }
    };
    (@one $(#[$attr:meta])* commit_writes) => {
        $(#[$attr])*
        fn commit_writes(&mut self, checkpoint: Option<i64>) -> $crate::error::Result<()> {
            self.inner.commit_writes(checkpoint)
        }
    };
    (@one $(#[$attr:meta])* set_flush_listener) => {
        $(#[$attr])*
        fn set_flush_listener(&mut self, listener: $crate::store::FlushListener, old_values: bool) -> bool {
            self.inner.set_flush_listener(listener, old_values)
        }
    };
    (@one $(#[$attr:meta])* flush_cache) => {
        $(#[$attr])*
        fn flush_cache(&mut self) -> $crate::error::Result<()> {
            self.inner.flush_cache()
        }
    };
    ($($(#[$attr:meta])* $method:ident),* $(,)?) => {
        $($crate::layer::delegate_to_inner!(@one $(#[$attr])* $method);)*
    };
}

pub(crate) use delegate_to_inner;
