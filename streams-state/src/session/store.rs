//! [`SessionStore`]: the typed handle of a session store, and its reader.

use std::cell::Ref;

use crate::error::Result;
use crate::flushed::{Flushed, FlushedEntries, FlushedEntry};
use crate::handle::{StoreHandle, debug_store_name};
use crate::serde::{OrderedSerde, Serde};
use crate::store::KeyValueStore;
use crate::window::Windowed;
use crate::window::scan::SegmentScan;
use crate::window::schema::{SEGMENT_LEN, Schema, Segments, TIME_LEN, decode_i64, encode_i64};

/// The suffix after the user key: `[end][start]`.
const SUFFIX: usize = 2 * TIME_LEN;

/// `(start, end)` of a session key.
fn times_of(key: &[u8]) -> Option<(i64, i64)> {
    let end = Schema::Session.time_of(key)?;
    let start = decode_i64(&key[key.len() - TIME_LEN..])?;
    Some((start, end))
}

/// A typed handle to a session store: values per key and session `(start, end)`.
///
/// Made by a [`SessionStoreBuilder`](crate::SessionStoreBuilder) (see
/// [`Stores::in_memory_session_store`](crate::Stores::in_memory_session_store)); the
/// [module docs](crate::session) give the key layout, the orders and retention. Borrow
/// rules as [`WindowStore`](crate::WindowStore): iteration goes through a
/// [`SessionStoreReader`] ([`read`](Self::read)).
#[derive(Clone)]
pub struct SessionStore<KS: Serde, VS: Serde> {
    h: StoreHandle<KS, VS>,
    segments: Segments,
}

impl<KS: Serde, VS: Serde> std::fmt::Debug for SessionStore<KS, VS> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("name", &self.h.name)
            .field("segments", &self.segments)
            .finish_non_exhaustive()
    }
}

impl<KS: Serde, VS: Serde> SessionStore<KS, VS> {
    pub(crate) fn new(h: StoreHandle<KS, VS>, segments: Segments) -> Self {
        Self { h, segments }
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        &self.h.name
    }

    fn session_key(&self, key: &KS::Target, start: i64, end: i64) -> Result<Vec<u8>> {
        let k = self.h.key_bytes(key)?;
        let mut b = Vec::with_capacity(SEGMENT_LEN + k.len() + SUFFIX);
        b.extend_from_slice(&encode_i64(self.segments.segment_id(end)));
        b.extend_from_slice(&k);
        b.extend_from_slice(&encode_i64(end));
        b.extend_from_slice(&encode_i64(start));
        Ok(b)
    }

    /// The session of a stored key.
    fn session(&self, key: &[u8]) -> Result<Windowed<KS::Target>> {
        let (Some(user), Some((start, end))) = (Schema::Session.user_key(key), times_of(key)) else {
            return Err(Schema::Session.malformed(&self.h.name, key));
        };
        Ok(Windowed {
            key: self.h.key(user)?,
            start,
            end,
        })
    }

    fn entry(&self, key: &[u8], value: &[u8]) -> Result<(Windowed<KS::Target>, VS::Target)> {
        Ok((self.session(key)?, self.h.value(value)?))
    }

    fn writing<R>(&self, f: impl FnOnce(&mut dyn KeyValueStore) -> Result<R>) -> Result<R> {
        self.h.writing("write", f)
    }

    /// Sets the value of `session`. The write advances the store's stream time to the
    /// session's end if later; a session already out of retention is not written.
    pub fn put(&self, session: &Windowed<KS::Target>, value: &VS::Target) -> Result<()> {
        let k = self.session_key(&session.key, session.start, session.end)?;
        let v = self.h.value_bytes(value)?;
        self.writing(|s| s.put(&k, &v))
    }

    /// Removes `session` (its key, start and end must match exactly).
    pub fn remove(&self, session: &Windowed<KS::Target>) -> Result<()> {
        let k = self.session_key(&session.key, session.start, session.end)?;
        self.writing(|s| s.delete(&k).map(drop))
    }

    /// The value of the session of `key` from `start` to `end`, if any.
    pub fn fetch_session(&self, key: &KS::Target, start: i64, end: i64) -> Result<Option<VS::Target>> {
        let k = self.session_key(key, start, end)?;
        let bytes = self.h.reading()?.get(&k)?;
        bytes.map(|b| self.h.value(&b)).transpose()
    }

    /// Writes buffered changes down (cache, changelog) and drops expired segments.
    pub fn flush(&self) -> Result<()> {
        self.writing(|s| s.flush())
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

    /// The session, new value and old value of an entry the cache wrote down.
    pub fn decode_flushed(&self, entry: &FlushedEntry) -> Result<Flushed<Windowed<KS::Target>, VS::Target>> {
        self.h.flushed(self.session(&entry.key)?, entry)
    }

    /// A reader for iteration, holding a shared borrow of the store while it lives.
    pub fn read(&self) -> Result<SessionStoreReader<'_, KS, VS>> {
        Ok(SessionStoreReader {
            store: self.h.reading()?,
            ss: self,
        })
    }
}

/// A shared borrow of a session store for reading; see [`SessionStore::read`].
///
/// Iterators are lazy and yield `(Windowed key, value)` results: a store error ends one,
/// a serde error is yielded for its entry and the iteration goes on.
pub struct SessionStoreReader<'a, KS: Serde, VS: Serde> {
    store: Ref<'a, Box<dyn KeyValueStore>>,
    ss: &'a SessionStore<KS, VS>,
}

debug_store_name!(impl[KS: Serde, VS: Serde] SessionStoreReader<'_, KS, VS>, "name", |r| r.ss.h.name);

/// Whether a session `(start, end)` ends at or after `earliest_end` and starts at or before
/// `latest_start`.
fn overlaps(key: &[u8], earliest_end: i64, latest_start: i64) -> bool {
    times_of(key).is_some_and(|(s, e)| e >= earliest_end && s <= latest_start)
}

impl<KS: Serde, VS: Serde> SessionStoreReader<'_, KS, VS> {
    /// The segments that can hold a session ending at or after `earliest_end`.
    fn span(&self, earliest_end: i64) -> (i64, i64) {
        let segments = &self.ss.segments;
        (segments.segment_id(earliest_end), segments.segment_id(i64::MAX))
    }

    fn sessions<'r>(&'r self, scan: SegmentScan<'r>) -> SessionIter<'r, KS, VS> {
        SessionIter {
            inner: scan,
            ss: self.ss,
        }
    }

    fn one_key(
        &self,
        forward: bool,
        key: &KS::Target,
        earliest_end: i64,
        latest_start: i64,
    ) -> Result<SessionIter<'_, KS, VS>> {
        let key = self.ss.h.key_bytes(key)?;
        let span = self.span(earliest_end);
        let tails = (encode_i64(earliest_end), [0xFF; SUFFIX]);
        let overlapping = move |k: &[u8]| overlaps(k, earliest_end, latest_start);
        let scan = SegmentScan::one_key(
            &**self.store,
            forward,
            span,
            (Schema::Session, key),
            tails,
            overlapping,
        );
        Ok(self.sessions(scan))
    }

    /// The sessions of `key` that end at or after `earliest_session_end` and start at or
    /// before `latest_session_start` (the sessions a record at a time between the two
    /// would merge with), ascending by end, then by start.
    pub fn find_sessions(
        &self,
        key: &KS::Target,
        earliest_session_end: i64,
        latest_session_start: i64,
    ) -> Result<SessionIter<'_, KS, VS>> {
        self.one_key(true, key, earliest_session_end, latest_session_start)
    }

    /// [`find_sessions`](Self::find_sessions) in exactly the reverse order.
    pub fn backward_find_sessions(
        &self,
        key: &KS::Target,
        earliest_session_end: i64,
        latest_session_start: i64,
    ) -> Result<SessionIter<'_, KS, VS>> {
        self.one_key(false, key, earliest_session_end, latest_session_start)
    }

    /// Every visible session of `key`, ascending by end, then by start.
    pub fn fetch(&self, key: &KS::Target) -> Result<SessionIter<'_, KS, VS>> {
        self.one_key(true, key, i64::MIN, i64::MAX)
    }

    /// [`fetch`](Self::fetch) in exactly the reverse order.
    pub fn backward_fetch(&self, key: &KS::Target) -> Result<SessionIter<'_, KS, VS>> {
        self.one_key(false, key, i64::MIN, i64::MAX)
    }

    /// The value of the session of `key` from `start` to `end`, if any.
    pub fn fetch_session(&self, key: &KS::Target, start: i64, end: i64) -> Result<Option<VS::Target>> {
        let k = self.ss.session_key(key, start, end)?;
        self.store.get(&k)?.map(|b| self.ss.h.value(&b)).transpose()
    }

    fn key_range(
        &self,
        forward: bool,
        (key_from, key_to): (Option<&KS::Target>, Option<&KS::Target>),
        earliest_end: i64,
        latest_start: i64,
    ) -> Result<SessionIter<'_, KS, VS>> {
        let lo = key_from.map(|k| self.ss.h.key_bytes(k)).transpose()?;
        let hi = key_to.map(|k| self.ss.h.key_bytes(k)).transpose()?;
        let span = self.span(earliest_end);
        let overlapping = move |k: &[u8]| overlaps(k, earliest_end, latest_start);
        let scan = SegmentScan::key_range(
            &**self.store,
            forward,
            span,
            Schema::Session,
            (lo, hi),
            overlapping,
        );
        Ok(self.sessions(scan))
    }

    /// Every visible session, in the order of
    /// [`find_sessions_in_key_range`](Self::find_sessions_in_key_range).
    pub fn all(&self) -> Result<SessionIter<'_, KS, VS>> {
        self.key_range(true, (None, None), i64::MIN, i64::MAX)
    }

    /// Every visible session, in the reverse order of [`all`](Self::all).
    pub fn backward_all(&self) -> Result<SessionIter<'_, KS, VS>> {
        self.key_range(false, (None, None), i64::MIN, i64::MAX)
    }
}

impl<KS: OrderedSerde, VS: Serde> SessionStoreReader<'_, KS, VS> {
    /// The sessions of the keys in `key_from..=key_to` (`None`: unbounded) that end at or
    /// after `earliest_session_end` and start at or before `latest_session_start`: by
    /// segment of the end, then in byte order of `[key][end][start]`.
    pub fn find_sessions_in_key_range(
        &self,
        key_from: Option<&KS::Target>,
        key_to: Option<&KS::Target>,
        earliest_session_end: i64,
        latest_session_start: i64,
    ) -> Result<SessionIter<'_, KS, VS>> {
        self.key_range(
            true,
            (key_from, key_to),
            earliest_session_end,
            latest_session_start,
        )
    }

    /// [`find_sessions_in_key_range`](Self::find_sessions_in_key_range) in exactly the
    /// reverse order.
    pub fn backward_find_sessions_in_key_range(
        &self,
        key_from: Option<&KS::Target>,
        key_to: Option<&KS::Target>,
        earliest_session_end: i64,
        latest_session_start: i64,
    ) -> Result<SessionIter<'_, KS, VS>> {
        self.key_range(
            false,
            (key_from, key_to),
            earliest_session_end,
            latest_session_start,
        )
    }

    /// Every visible session of the keys in `key_from..=key_to` (`None`: unbounded), in the
    /// order of [`find_sessions_in_key_range`](Self::find_sessions_in_key_range).
    pub fn fetch_key_range(
        &self,
        key_from: Option<&KS::Target>,
        key_to: Option<&KS::Target>,
    ) -> Result<SessionIter<'_, KS, VS>> {
        self.key_range(true, (key_from, key_to), i64::MIN, i64::MAX)
    }

    /// [`fetch_key_range`](Self::fetch_key_range) in exactly the reverse order.
    pub fn backward_fetch_key_range(
        &self,
        key_from: Option<&KS::Target>,
        key_to: Option<&KS::Target>,
    ) -> Result<SessionIter<'_, KS, VS>> {
        self.key_range(false, (key_from, key_to), i64::MIN, i64::MAX)
    }
}

/// Sessions with their values: `(Windowed key, value)`.
pub struct SessionIter<'r, KS: Serde, VS: Serde> {
    inner: SegmentScan<'r>,
    ss: &'r SessionStore<KS, VS>,
}

debug_store_name!(impl[KS: Serde, VS: Serde] SessionIter<'_, KS, VS>, "store", |r| r.ss.h.name);

impl<KS: Serde, VS: Serde> Iterator for SessionIter<'_, KS, VS> {
    type Item = Result<(Windowed<KS::Target>, VS::Target)>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.inner.next()? {
            Ok((k, v)) => self.ss.entry(&k, &v),
            Err(e) => Err(e),
        })
    }
}
