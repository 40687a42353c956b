//! The two bytes-level layers that give a segmented (window or session) store its
//! retention, and the function that builds the whole stack.
//!
//! ```text
//! RetentionFront  ->  caching  ->  change-logging  ->  SegmentDropper  ->  inner store
//!  stream time,                                       drops expired        in-memory or
//!  visibility, seq                                    segments, unlogged   RocksDB
//! ```
//!
//! Both layers share the observed stream time (an `Arc<AtomicI64>`, `i64::MIN` for "none
//! yet"): the largest retained time (window start, session end) of any write or restored
//! record so far, recovered from the store's last segment when the stack is built.
//!
//! - [`RetentionFront`] (outermost) advances the stream time on every write, drops writes
//!   of entries already invisible, hides invisible entries from every read (`get`, every
//!   iterator), numbers the puts of a store that retains duplicates, and advances the
//!   stream time from the keys of restored records. Under a cache, the writes advance the
//!   time only when the cache writes them down, in [`SegmentDropper`], as a Kafka Streams
//!   segmented store's time moves only with the writes that reach it: a window still in
//!   the cache stays visible to reads (a windowed table's lookup, from a join) until newer
//!   windows are written down.
//! - [`SegmentDropper`] (right above the inner store, so drops are not logged) deletes every
//!   segment below the oldest live one with one `delete_range` when the stream time moves
//!   past it (checked on every write, flush, commit and restore batch), and ignores writes
//!   into segments it dropped (late cache flushes).
//!
//! Invariant: an entry is visible iff its retained time `t` satisfies
//! `t > stream_time - retention`; a segment is physically removed only when all its times
//! are invisible. The changelog's keys are Kafka Streams' (no segment, plain times: see
//! `changelog_keys`), turned back into store keys by [`RetentionFront`] on restore. The
//! changelog is not told about segment drops (as in Kafka Streams): its
//! `cleanup.policy=compact,delete` with `retention.ms` beyond the store's retention ages
//! them out, and a restore of expired records ends with the same drop.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use bytes::Bytes;

use crate::builder::{StoreBuildContext, inner_store};
use crate::caching::CachingKeyValueStore;
use crate::changelog::ChangelogRecord;
use crate::error::{Result, SerdeError, StoreError};
use crate::iter::KeyValueIter;
use crate::layer::delegate_to_inner;
use crate::logging::ChangeLoggingKeyValueStore;
use crate::store::{KeyValueStore, StateStore};
use crate::window::changelog_keys::{ChangelogKeys, store_records};
use crate::window::schema::{SEGMENT_LEN, SEQ_LEN, Schema, Segments, encode_i64, segment_of};

/// The observed stream time both layers share; `i64::MIN` means none observed.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamTime(Arc<AtomicI64>);

impl StreamTime {
    fn new() -> Self {
        Self(Arc::new(AtomicI64::new(i64::MIN)))
    }

    fn get(&self) -> Option<i64> {
        let t = self.0.load(Ordering::Relaxed);
        (t != i64::MIN).then_some(t)
    }

    fn advance(&self, t: i64) {
        self.0.fetch_max(t, Ordering::Relaxed);
    }
}

/// What a segmented store is: its layout, retention and whether it keeps duplicates.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegmentedSpec {
    pub schema: Schema,
    pub segments: Segments,
    pub retain_duplicates: bool,
}

/// Builds a segmented store's stack: inner -> dropper -> logging (if `logged` and a sink is
/// given) -> caching (if `caching` and a budget) -> front.
pub(crate) fn build_segmented(
    name: &str,
    persistent: bool,
    logged: bool,
    caching: bool,
    spec: SegmentedSpec,
    ctx: StoreBuildContext,
) -> Result<Box<dyn KeyValueStore>> {
    let inner = inner_store(name, persistent, &ctx)?;
    let time = StreamTime::new();
    let cached = caching && ctx.thread_cache.max_bytes() > 0;
    // Under a cache, the writes that reach the store move its time (see the module docs).
    let mut store: Box<dyn KeyValueStore> = Box::new(SegmentDropper::new(inner, spec, time.clone(), cached));
    if let (true, Some(sink)) = (logged, ctx.changelog) {
        let keys = ChangelogKeys {
            sink,
            schema: spec.schema,
        };
        store = Box::new(ChangeLoggingKeyValueStore::new(store, Box::new(keys)));
    }
    if cached {
        store = Box::new(CachingKeyValueStore::with_thread_cache(store, ctx.thread_cache));
    }
    Ok(Box::new(RetentionFront::new(store, spec, time, !cached)?))
}

/// The largest retained time in `store`'s last segment, or `None` for an empty store.
fn recover_stream_time(store: &dyn KeyValueStore, schema: Schema) -> Result<Option<i64>> {
    let Some(last) = store.reverse_all()?.next().transpose()? else {
        return Ok(None);
    };
    let prefix = &last.0[..SEGMENT_LEN.min(last.0.len())];
    let mut max = None;
    for entry in store.prefix_scan(prefix)? {
        let (k, _) = entry?;
        max = max.max(schema.time_of(&k));
    }
    Ok(max)
}

/// The outermost layer of a segmented store; see the [module docs](self).
pub(crate) struct RetentionFront {
    inner: Box<dyn KeyValueStore>,
    spec: SegmentedSpec,
    time: StreamTime,
    /// Whether writes move the stream time here (no cache below); under a cache the
    /// [`SegmentDropper`] moves it.
    advances: bool,
    seq: u32,
}

impl RetentionFront {
    fn new(
        inner: Box<dyn KeyValueStore>,
        spec: SegmentedSpec,
        time: StreamTime,
        advances: bool,
    ) -> Result<Self> {
        if let Some(t) = recover_stream_time(inner.as_ref(), spec.schema)? {
            time.advance(t);
        }
        Ok(Self {
            inner,
            spec,
            time,
            advances,
            seq: 0,
        })
    }

    /// Advances the stream time by `key`'s time (unless a cache is below); returns whether
    /// the entry is visible.
    fn observe(&self, key: &[u8]) -> Result<bool> {
        let t = self
            .spec
            .schema
            .time_of(key)
            .ok_or_else(|| self.spec.schema.malformed(self.inner.name(), key))?;
        if self.advances {
            self.time.advance(t);
        }
        Ok(self.spec.segments.visible(self.time.get(), t))
    }

    fn filtered<'a>(&self, it: KeyValueIter<'a>) -> KeyValueIter<'a> {
        let (schema, segments, st) = (self.spec.schema, self.spec.segments, self.time.get());
        KeyValueIter::new(it.filter(move |e| match e {
            Ok((k, _)) => schema.time_of(k).is_none_or(|t| segments.visible(st, t)),
            Err(_) => true,
        }))
    }
}

impl StateStore for RetentionFront {
    delegate_to_inner!(name, persistent, is_open, flush, close, stats);
}

impl KeyValueStore for RetentionFront {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        match self.spec.schema.time_of(key) {
            Some(t) if !self.spec.segments.visible(self.time.get(), t) => Ok(None),
            _ => self.inner.get(key),
        }
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if !self.observe(key)? {
            return Ok(());
        }
        if self.spec.retain_duplicates && self.spec.schema == Schema::Window {
            self.seq = self.seq.wrapping_add(1);
            let mut k = key.to_vec();
            let at = k.len() - SEQ_LEN;
            k[at..].copy_from_slice(&self.seq.to_be_bytes());
            return self.inner.put(&k, value);
        }
        self.inner.put(key, value)
    }

    fn delete(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        if !self.observe(key)? || self.spec.retain_duplicates {
            return Ok(None);
        }
        self.inner.delete(key)
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        Ok(self.filtered(self.inner.range(from, to)?))
    }

    fn reverse_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Result<KeyValueIter<'_>> {
        Ok(self.filtered(self.inner.reverse_range(from, to)?))
    }

    delegate_to_inner!(approximate_num_entries, delete_range);

    /// `batch` holds changelog keys (Kafka Streams' layout, see `changelog_keys`): they
    /// become store keys before anything else reads them.
    fn restore_batch(&mut self, batch: &[ChangelogRecord]) -> Result<()> {
        let (schema, segments) = (self.spec.schema, self.spec.segments);
        let batch = store_records(schema, segments, batch).map_err(|key| StoreError::Serde {
            store: self.inner.name().to_owned(),
            source: SerdeError::new(
                "SegmentedKeySchema",
                format!(
                    "a changelog key of a {schema:?} store needs at least {} bytes, got {}",
                    schema.suffix_len(),
                    key.len()
                ),
            ),
        })?;
        for t in batch.iter().filter_map(|r| schema.time_of(&r.key)) {
            self.time.advance(t);
        }
        self.inner.restore_batch(&batch)
    }

    delegate_to_inner!(
        checkpoint,
        write_checkpoint,
        commit_writes,
        set_flush_listener,
        flush_cache,
    );
}

/// The layer right above the inner store that drops expired segments; see the
/// [module docs](self).
pub(crate) struct SegmentDropper {
    inner: Box<dyn KeyValueStore>,
    spec: SegmentedSpec,
    time: StreamTime,
    /// Whether writes move the stream time here (a cache above).
    advances: bool,
    /// Every segment below this one was deleted.
    dropped_below: Option<i64>,
}

impl SegmentDropper {
    fn new(inner: Box<dyn KeyValueStore>, spec: SegmentedSpec, time: StreamTime, advances: bool) -> Self {
        Self {
            inner,
            spec,
            time,
            advances,
            dropped_below: None,
        }
    }

    /// Before a write of `key`: moves the stream time by it (under a cache), then drops
    /// what expired.
    fn before_write(&mut self, key: &[u8]) -> Result<()> {
        if self.advances
            && let Some(t) = self.spec.schema.time_of(key)
        {
            self.time.advance(t);
        }
        self.drop_expired(false)
    }

    /// Deletes the segments below the oldest live one if the stream time moved past them
    /// since the last drop (or always, with `force`).
    fn drop_expired(&mut self, force: bool) -> Result<()> {
        let Some(min_live) = self.spec.segments.min_live_segment(self.time.get()) else {
            return Ok(());
        };
        if force || self.dropped_below.is_none_or(|d| min_live > d) {
            let upper = encode_i64(min_live);
            self.inner
                .delete_range(Bound::Unbounded, Bound::Excluded(&upper))?;
            self.dropped_below = Some(min_live);
        }
        Ok(())
    }

    /// Whether `key` lies in a segment already dropped.
    fn in_dropped(&self, key: &[u8]) -> bool {
        matches!((segment_of(key), self.dropped_below), (Some(s), Some(d)) if s < d)
    }
}

impl StateStore for SegmentDropper {
    delegate_to_inner!(name, persistent, is_open, close, stats);

    fn flush(&mut self) -> Result<()> {
        self.drop_expired(false)?;
        self.inner.flush()
    }
}

impl KeyValueStore for SegmentDropper {
    delegate_to_inner!(
        get,
        range,
        reverse_range,
        approximate_num_entries,
        delete_range,
        checkpoint,
        write_checkpoint,
    );

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.before_write(key)?;
        if self.in_dropped(key) {
            return Ok(());
        }
        self.inner.put(key, value)
    }

    fn delete(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        self.before_write(key)?;
        self.inner.delete(key)
    }

    fn restore_batch(&mut self, batch: &[ChangelogRecord]) -> Result<()> {
        self.inner.restore_batch(batch)?;
        let min_live = self.spec.segments.min_live_segment(self.time.get());
        let stale = batch
            .iter()
            .any(|r| matches!((segment_of(&r.key), min_live), (Some(s), Some(m)) if s < m));
        self.drop_expired(stale)
    }

    fn commit_writes(&mut self, checkpoint: Option<i64>) -> Result<()> {
        self.drop_expired(false)?;
        self.inner.commit_writes(checkpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::InMemoryKeyValueStore;

    fn key(t: i64, segments: &Segments) -> Vec<u8> {
        let mut k = encode_i64(segments.segment_id(t)).to_vec();
        k.extend_from_slice(b"k");
        k.extend_from_slice(&encode_i64(t));
        k.extend_from_slice(&[0; SEQ_LEN]);
        k
    }

    fn record(k: Vec<u8>, offset: i64) -> ChangelogRecord {
        ChangelogRecord {
            key: Bytes::from(k),
            value: Some(Bytes::from_static(b"v")),
            offset,
        }
    }

    fn spec() -> SegmentedSpec {
        SegmentedSpec {
            schema: Schema::Window,
            segments: Segments::with_interval(100, 50),
            retain_duplicates: false,
        }
    }

    fn stack(inner: InMemoryKeyValueStore) -> RetentionFront {
        let time = StreamTime::new();
        let dropper = SegmentDropper::new(Box::new(inner), spec(), time.clone(), false);
        RetentionFront::new(Box::new(dropper), spec(), time, true).unwrap()
    }

    #[test]
    fn a_late_restored_record_of_a_dropped_segment_is_removed() {
        let s = spec().segments;
        let mut store = stack(InMemoryKeyValueStore::new("w"));
        store.restore_batch(&[record(key(1_000, &s), 0)]).unwrap();
        store.restore_batch(&[record(key(10, &s), 1)]).unwrap();
        assert_eq!(store.approximate_num_entries().unwrap(), 1);
        assert_eq!(store.get(&key(10, &s)).unwrap(), None);
    }

    #[test]
    fn the_stream_time_comes_back_from_the_last_segment() {
        let s = spec().segments;
        let mut inner = InMemoryKeyValueStore::new("w");
        for t in [-500, 0, 940, 960, 910] {
            inner.put(&key(t, &s), b"v").unwrap();
        }
        let mut store = stack(inner);
        // Stream time 960: times up to 860 are invisible, 910..960 visible.
        assert_eq!(store.get(&key(940, &s)).unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(store.get(&key(0, &s)).unwrap(), None);
        store.put(&key(700, &s), b"late").unwrap();
        assert_eq!(store.get(&key(700, &s)).unwrap(), None, "a late write is dropped");
        assert_eq!(store.all().unwrap().count(), 3);
        store.flush().unwrap();
        assert_eq!(
            store.approximate_num_entries().unwrap(),
            3,
            "old segments dropped on flush"
        );
    }

    #[test]
    fn a_malformed_key_is_an_error() {
        let mut store = stack(InMemoryKeyValueStore::new("w"));
        assert!(matches!(
            store.put(b"short", b"v"),
            Err(crate::StoreError::Serde { .. })
        ));
    }
}
