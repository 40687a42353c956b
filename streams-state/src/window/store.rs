//! [`WindowStore`]: the typed handle of a window store, and its reader.

use std::cell::Ref;

use bytes::Bytes;

use crate::error::{Result, StoreError};
use crate::flushed::{Flushed, FlushedEntries, FlushedEntry};
use crate::handle::{StoreHandle, debug_store_name};
use crate::serde::{OrderedSerde, Serde};
use crate::store::KeyValueStore;
use crate::window::Windowed;
use crate::window::scan::{SegmentScan, segment_bounds};
use crate::window::schema::{SEGMENT_LEN, SEQ_LEN, Schema, Segments, TIME_LEN, encode_i64};

/// `[segment][key][start]`: the prefix of every entry of `key` at `start`.
fn key_at(segments: &Segments, key: &[u8], start: i64) -> Vec<u8> {
    let mut k = Vec::with_capacity(SEGMENT_LEN + key.len() + TIME_LEN + SEQ_LEN);
    k.extend_from_slice(&encode_i64(segments.segment_id(start)));
    k.extend_from_slice(key);
    k.extend_from_slice(&encode_i64(start));
    k
}

/// The start time of a window key.
fn start_of(key: &[u8]) -> Option<i64> {
    Schema::Window.time_of(key)
}

/// A typed handle to a window store: values per key and window start.
///
/// Made by a [`WindowStoreBuilder`](crate::WindowStoreBuilder) (see
/// [`Stores::in_memory_window_store`](crate::Stores::in_memory_window_store)); the
/// [module docs](crate::window) give the key layout, the iteration orders and retention.
/// Like [`KvStore`](crate::KvStore), it is a cheap handle on a
/// [`SharedKeyValueStore`](crate::SharedKeyValueStore): single reads and writes borrow the
/// store for the call; iteration goes through a [`WindowStoreReader`]
/// ([`read`](Self::read)), and a write while a reader lives fails with
/// [`StoreError::Borrowed`].
#[derive(Clone)]
pub struct WindowStore<KS: Serde, VS: Serde> {
    h: StoreHandle<KS, VS>,
    segments: Segments,
    window_size: i64,
    retain_duplicates: bool,
}

impl<KS: Serde, VS: Serde> std::fmt::Debug for WindowStore<KS, VS> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowStore")
            .field("name", &self.h.name)
            .field("segments", &self.segments)
            .field("window_size", &self.window_size)
            .finish_non_exhaustive()
    }
}

impl<KS: Serde, VS: Serde> WindowStore<KS, VS> {
    pub(crate) fn new(
        h: StoreHandle<KS, VS>,
        segments: Segments,
        window_size: i64,
        retain_duplicates: bool,
    ) -> Self {
        Self {
            h,
            segments,
            window_size,
            retain_duplicates,
        }
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        &self.h.name
    }

    /// The size of the store's windows (ms): a [`Windowed`] key's `end` is `start + size`.
    pub fn window_size(&self) -> i64 {
        self.window_size
    }

    fn windowed(&self, key: &[u8]) -> Result<Windowed<KS::Target>> {
        let (Some(user), Some(start)) = (Schema::Window.user_key(key), start_of(key)) else {
            return Err(Schema::Window.malformed(&self.h.name, key));
        };
        Ok(Windowed {
            key: self.h.key(user)?,
            start,
            end: start.saturating_add(self.window_size),
        })
    }

    /// Sets the value of `key` in the window starting at `window_start`; `None` deletes it.
    ///
    /// The write advances the store's stream time to `window_start` if later. A window
    /// already out of retention is not written. In a store that retains duplicates every
    /// put adds an entry and a delete does nothing (as in Kafka Streams).
    pub fn put(&self, key: &KS::Target, value: Option<&VS::Target>, window_start: i64) -> Result<()> {
        let mut k = key_at(&self.segments, &self.h.key_bytes(key)?, window_start);
        k.extend_from_slice(&[0; SEQ_LEN]);
        let v = value.map(|v| self.h.value_bytes(v)).transpose()?;
        self.h.writing("write", |store| match v {
            Some(v) => store.put(&k, &v),
            None => store.delete(&k).map(drop),
        })
    }

    /// The value of `key` in the window starting at `window_start`, if any (the first one
    /// put, in a store that retains duplicates).
    pub fn fetch(&self, key: &KS::Target, window_start: i64) -> Result<Option<VS::Target>> {
        self.read()?.fetch(key, window_start)
    }

    /// Keeps what the store's write-back cache writes down for the caller to forward, as
    /// [`KvStore::forward_on_flush`](crate::KvStore::forward_on_flush) does.
    pub fn forward_on_flush(&self, old_values: bool) -> Result<Option<FlushedEntries>> {
        self.h.forward_on_flush(old_values)
    }

    /// Writes the dirty entries of the store's cache down, without flushing the layers
    /// below.
    pub fn flush_cache(&self) -> Result<()> {
        self.h.flush_cache()
    }

    /// The windowed key, new value and old value of an entry the cache wrote down.
    pub fn decode_flushed(&self, entry: &FlushedEntry) -> Result<Flushed<Windowed<KS::Target>, VS::Target>> {
        self.h.flushed(self.windowed(&entry.key)?, entry)
    }

    /// Writes buffered changes down (cache, changelog) and drops expired segments.
    pub fn flush(&self) -> Result<()> {
        self.h.writing("flush", |s| s.flush())
    }

    /// A reader for iteration, holding a shared borrow of the store while it lives.
    pub fn read(&self) -> Result<WindowStoreReader<'_, KS, VS>> {
        Ok(WindowStoreReader {
            store: self.h.reading()?,
            ws: self,
        })
    }
}

/// A shared borrow of a window store for reading; see [`WindowStore::read`].
///
/// Every iterator is lazy and yields `Result`s: a store error ends it, a serde error is
/// yielded for its entry and the iteration goes on. Time bounds are inclusive.
pub struct WindowStoreReader<'a, KS: Serde, VS: Serde> {
    store: Ref<'a, Box<dyn KeyValueStore>>,
    ws: &'a WindowStore<KS, VS>,
}

debug_store_name!(impl[KS: Serde, VS: Serde] WindowStoreReader<'_, KS, VS>, "name", |r| r.ws.h.name);

/// Inclusive segment bounds of the times `from..=to`.
fn segment_span(segments: &Segments, from: i64, to: i64) -> (i64, i64) {
    if from > to {
        (1, 0)
    } else {
        (segments.segment_id(from), segments.segment_id(to))
    }
}

impl<KS: Serde, VS: Serde> WindowStoreReader<'_, KS, VS> {
    /// The value of `key` in the window starting at `window_start`, if any.
    pub fn fetch(&self, key: &KS::Target, window_start: i64) -> Result<Option<VS::Target>> {
        let k = self.ws.h.key_bytes(key)?;
        let mut prefix = key_at(&self.ws.segments, &k, window_start);
        if !self.ws.retain_duplicates {
            // The one entry has sequence number 0: a point read.
            prefix.extend_from_slice(&[0; SEQ_LEN]);
            return self.store.get(&prefix)?.map(|v| self.ws.h.value(&v)).transpose();
        }
        let want = prefix.len() + SEQ_LEN;
        let first = self
            .store
            .prefix_scan(&prefix)?
            .find(|e| e.as_ref().map_or(true, |(key, _)| key.len() == want))
            .transpose()?;
        first.map(|(_, v)| self.ws.h.value(&v)).transpose()
    }

    fn scan(&self, forward: bool, (from, to): (i64, i64), key: Option<Vec<u8>>) -> SegmentScan<'_> {
        let segments = self.ws.segments;
        let span = segment_span(&segments, from, to);
        let in_time = move |k: &[u8]| start_of(k).is_some_and(|t| (from..=to).contains(&t));
        match key {
            Some(key) => {
                // `[to][0xFF; SEQ_LEN]`: the last entry of the window at `to`.
                let mut hi_tail = [0xFF; TIME_LEN + SEQ_LEN];
                hi_tail[..TIME_LEN].copy_from_slice(&encode_i64(to));
                let tails = (encode_i64(from), hi_tail);
                SegmentScan::one_key(
                    &**self.store,
                    forward,
                    span,
                    (Schema::Window, key),
                    tails,
                    in_time,
                )
            }
            None => SegmentScan::new(
                &**self.store,
                forward,
                span,
                Box::new(segment_bounds),
                Box::new(in_time),
            ),
        }
    }

    fn times<'r>(&'r self, scan: SegmentScan<'r>) -> WindowIter<'r, VS> {
        WindowIter {
            inner: scan,
            value_serde: &self.ws.h.value_serde,
            store: &self.ws.h.name,
        }
    }

    fn keyed<'r>(&'r self, scan: SegmentScan<'r>) -> KeyWindowIter<'r, KS, VS> {
        KeyWindowIter {
            inner: scan,
            ws: self.ws,
        }
    }

    /// The windows of `key` starting in `time_from..=time_to`, as `(window start, value)`,
    /// ascending by start (entries of one start in insertion order when duplicates are
    /// retained).
    pub fn fetch_range(&self, key: &KS::Target, time_from: i64, time_to: i64) -> Result<WindowIter<'_, VS>> {
        let k = self.ws.h.key_bytes(key)?;
        Ok(self.times(self.scan(true, (time_from, time_to), Some(k))))
    }

    /// [`fetch_range`](Self::fetch_range) in the reverse order: descending by start.
    pub fn backward_fetch_range(
        &self,
        key: &KS::Target,
        time_from: i64,
        time_to: i64,
    ) -> Result<WindowIter<'_, VS>> {
        let k = self.ws.h.key_bytes(key)?;
        Ok(self.times(self.scan(false, (time_from, time_to), Some(k))))
    }

    /// Every window starting in `time_from..=time_to`: by segment, then in byte order of
    /// `[key][start][seq]` inside a segment (see the [module docs](crate::window)).
    pub fn fetch_all(&self, time_from: i64, time_to: i64) -> Result<KeyWindowIter<'_, KS, VS>> {
        Ok(self.keyed(self.scan(true, (time_from, time_to), None)))
    }

    /// [`fetch_all`](Self::fetch_all) in exactly the reverse order.
    pub fn backward_fetch_all(&self, time_from: i64, time_to: i64) -> Result<KeyWindowIter<'_, KS, VS>> {
        Ok(self.keyed(self.scan(false, (time_from, time_to), None)))
    }

    /// Every visible window, in the order of [`fetch_all`](Self::fetch_all).
    pub fn all(&self) -> Result<KeyWindowIter<'_, KS, VS>> {
        self.fetch_all(i64::MIN, i64::MAX)
    }

    /// Every visible window, in the reverse order of [`all`](Self::all).
    pub fn backward_all(&self) -> Result<KeyWindowIter<'_, KS, VS>> {
        self.backward_fetch_all(i64::MIN, i64::MAX)
    }
}

impl<KS: OrderedSerde, VS: Serde> WindowStoreReader<'_, KS, VS> {
    fn key_range(
        &self,
        forward: bool,
        key_from: Option<&KS::Target>,
        key_to: Option<&KS::Target>,
        (from, to): (i64, i64),
    ) -> Result<KeyWindowIter<'_, KS, VS>> {
        let lo = key_from.map(|k| self.ws.h.key_bytes(k)).transpose()?;
        let hi = key_to.map(|k| self.ws.h.key_bytes(k)).transpose()?;
        let span = segment_span(&self.ws.segments, from, to);
        let in_time = move |k: &[u8]| start_of(k).is_some_and(|t| (from..=to).contains(&t));
        let scan = SegmentScan::key_range(&**self.store, forward, span, Schema::Window, (lo, hi), in_time);
        Ok(self.keyed(scan))
    }

    /// The windows of the keys in `key_from..=key_to` (`None`: unbounded) starting in
    /// `time_from..=time_to`: by segment, then in byte order of `[key][start][seq]`.
    pub fn fetch_key_range(
        &self,
        key_from: Option<&KS::Target>,
        key_to: Option<&KS::Target>,
        time_from: i64,
        time_to: i64,
    ) -> Result<KeyWindowIter<'_, KS, VS>> {
        self.key_range(true, key_from, key_to, (time_from, time_to))
    }

    /// [`fetch_key_range`](Self::fetch_key_range) in exactly the reverse order.
    pub fn backward_fetch_key_range(
        &self,
        key_from: Option<&KS::Target>,
        key_to: Option<&KS::Target>,
        time_from: i64,
        time_to: i64,
    ) -> Result<KeyWindowIter<'_, KS, VS>> {
        self.key_range(false, key_from, key_to, (time_from, time_to))
    }
}

/// The windows of one key: `(window start, value)`.
pub struct WindowIter<'r, VS: Serde> {
    inner: SegmentScan<'r>,
    value_serde: &'r VS,
    store: &'r str,
}

debug_store_name!(impl[VS: Serde] WindowIter<'_, VS>, "store", |r| r.store);

impl<VS: Serde> Iterator for WindowIter<'_, VS> {
    type Item = Result<(i64, VS::Target)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (k, v): (Bytes, Bytes) = match self.inner.next()? {
            Ok(kv) => kv,
            Err(e) => return Some(Err(e)),
        };
        let Some(start) = start_of(&k) else {
            return Some(Err(Schema::Window.malformed(self.store, &k)));
        };
        Some(
            self.value_serde
                .deserialize(&v)
                .map(|v| (start, v))
                .map_err(|source| StoreError::Serde {
                    store: self.store.to_owned(),
                    source,
                }),
        )
    }
}

/// Windows of several keys: `(Windowed key, value)`.
pub struct KeyWindowIter<'r, KS: Serde, VS: Serde> {
    inner: SegmentScan<'r>,
    ws: &'r WindowStore<KS, VS>,
}

debug_store_name!(impl[KS: Serde, VS: Serde] KeyWindowIter<'_, KS, VS>, "store", |r| r.ws.h.name);

impl<KS: Serde, VS: Serde> Iterator for KeyWindowIter<'_, KS, VS> {
    type Item = Result<(Windowed<KS::Target>, VS::Target)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (k, v) = match self.inner.next()? {
            Ok(kv) => kv,
            Err(e) => return Some(Err(e)),
        };
        Some(self.ws.windowed(&k).and_then(|w| Ok((w, self.ws.h.value(&v)?))))
    }
}
