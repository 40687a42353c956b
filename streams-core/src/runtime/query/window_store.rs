//! [`ReadOnlyWindowStore`] and [`ReadOnlySessionStore`], the typed query handles of window
//! and session stores over every local task, and [`WindowCursor`], their ranges read in
//! chunks.
//!
//! They ask the stream threads as [`ReadOnlyKeyValueStore`](super::ReadOnlyKeyValueStore)
//! does, with the same consistency (see the [module docs](super)): an answer is whole or
//! fails with [`QueryError::Rebalancing`], and a cursor never continues across a rebalance
//! of this instance. How the chunks continue is in `windowed.rs`.

use std::collections::VecDeque;
use std::fmt;

use bytes::Bytes;
use streams_state::{Serde, Windowed};

use crate::runtime::query::handle::{Chunked, Reader, handle_common};
use crate::runtime::query::router::{EpochPin, Op, Partial};
use crate::runtime::query::windowed::{Hit, TimeKind, TimeScan, merge};
use crate::runtime::query::{DEFAULT_CHUNK_SIZE, QueryError};

impl<KS: Serde + Clone, VS: Serde + Clone> Reader<KS, VS> {
    fn entry(&self, hit: Hit) -> Result<(Windowed<KS::Target>, VS::Target), QueryError> {
        let window = Windowed {
            key: self.read_key(&hit.window.key)?,
            start: hit.window.start,
            end: hit.window.end,
        };
        Ok((window, self.value(&hit.value)?))
    }

    /// The cursor over the times `span` of `key` alone.
    fn keyed(
        &self,
        kind: TimeKind,
        key: &KS::Target,
        span: (i64, i64),
        reverse: bool,
    ) -> Result<WindowCursor<KS, VS>, QueryError> {
        Ok(self.cursor(kind, Some(self.key(key)?), span, reverse))
    }

    fn cursor(
        &self,
        kind: TimeKind,
        key: Option<Bytes>,
        (from, to): (i64, i64),
        reverse: bool,
    ) -> WindowCursor<KS, VS> {
        WindowCursor {
            reader: self.clone(),
            scan: TimeScan {
                kind,
                key,
                from,
                to,
                reverse,
                after: None,
                limit: DEFAULT_CHUNK_SIZE,
            },
            buffered: VecDeque::new(),
            exhausted: false,
            pin: EpochPin::default(),
        }
    }
}

/// A read-only, typed view of one window store over every task of this instance that
/// holds it, as Kafka Streams' `ReadOnlyWindowStore`.
///
/// Made by [`KafkaStreams::store`](crate::KafkaStreams::store) of a
/// [`WindowStoreRef`](crate::WindowStoreRef) or
/// [`window_store_named`](crate::KafkaStreams::window_store_named); cheap to clone, `Send`
/// and `Sync`. Ranges come as [`WindowCursor`]s of `(Windowed<K>, V)`, where a window's
/// `end` is its start plus the store's window size. As in the store, a window is visible
/// only within the store's retention. A key of a partition hosted elsewhere reads as
/// absent (see [`for_partition`](Self::for_partition)).
pub struct ReadOnlyWindowStore<KS, VS>(Reader<KS, VS>);

handle_common!(ReadOnlyWindowStore, "window");

impl<KS: Serde + Clone, VS: Serde + Clone> ReadOnlyWindowStore<KS, VS> {
    /// The value of `key` in the window starting at `window_start`, if a local task holds
    /// it.
    pub fn fetch(&self, key: &KS::Target, window_start: i64) -> Result<Option<VS::Target>, QueryError> {
        let mut c = self.fetch_range(key, window_start, window_start)?.chunk_size(1);
        c.next().transpose().map(|e| e.map(|(_, v)| v))
    }

    /// The windows of `key` starting in `time_from..=time_to`, ascending by start.
    pub fn fetch_range(
        &self,
        key: &KS::Target,
        time_from: i64,
        time_to: i64,
    ) -> Result<WindowCursor<KS, VS>, QueryError> {
        self.0.keyed(TimeKind::Window, key, (time_from, time_to), false)
    }

    /// [`fetch_range`](Self::fetch_range), descending by start.
    pub fn backward_fetch_range(
        &self,
        key: &KS::Target,
        time_from: i64,
        time_to: i64,
    ) -> Result<WindowCursor<KS, VS>, QueryError> {
        self.0.keyed(TimeKind::Window, key, (time_from, time_to), true)
    }

    /// Every window starting in `time_from..=time_to`, of every key: by segment of the
    /// start time, then by serialized key, then by start (the store's own order, see
    /// [`streams_state::window`]).
    pub fn fetch_all(&self, time_from: i64, time_to: i64) -> WindowCursor<KS, VS> {
        self.0.cursor(TimeKind::Window, None, (time_from, time_to), false)
    }

    /// [`fetch_all`](Self::fetch_all) in the reverse order.
    pub fn backward_fetch_all(&self, time_from: i64, time_to: i64) -> WindowCursor<KS, VS> {
        self.0.cursor(TimeKind::Window, None, (time_from, time_to), true)
    }

    /// Every visible window, in the order of [`fetch_all`](Self::fetch_all).
    pub fn all(&self) -> WindowCursor<KS, VS> {
        self.fetch_all(i64::MIN, i64::MAX)
    }

    /// Every visible window, in the reverse order.
    pub fn backward_all(&self) -> WindowCursor<KS, VS> {
        self.backward_fetch_all(i64::MIN, i64::MAX)
    }
}

/// A read-only, typed view of one session store over every task of this instance that
/// holds it, as Kafka Streams' `ReadOnlySessionStore`.
///
/// Made by [`KafkaStreams::store`](crate::KafkaStreams::store) of a
/// [`SessionStoreRef`](crate::SessionStoreRef) or
/// [`session_store_named`](crate::KafkaStreams::session_store_named). Sessions come as
/// `(Windowed<K>, V)` with `start` and `end` the session's first and last record times,
/// ascending by end, then by start.
pub struct ReadOnlySessionStore<KS, VS>(Reader<KS, VS>);

handle_common!(ReadOnlySessionStore, "session");

impl<KS: Serde + Clone, VS: Serde + Clone> ReadOnlySessionStore<KS, VS> {
    /// Every visible session of `key`.
    pub fn fetch(&self, key: &KS::Target) -> Result<WindowCursor<KS, VS>, QueryError> {
        self.find_sessions(key, i64::MIN, i64::MAX)
    }

    /// [`fetch`](Self::fetch) in the reverse order.
    pub fn backward_fetch(&self, key: &KS::Target) -> Result<WindowCursor<KS, VS>, QueryError> {
        self.backward_find_sessions(key, i64::MIN, i64::MAX)
    }

    /// The sessions of `key` ending at or after `earliest_session_end` and starting at or
    /// before `latest_session_start`.
    pub fn find_sessions(
        &self,
        key: &KS::Target,
        earliest_session_end: i64,
        latest_session_start: i64,
    ) -> Result<WindowCursor<KS, VS>, QueryError> {
        let span = (earliest_session_end, latest_session_start);
        self.0.keyed(TimeKind::Session, key, span, false)
    }

    /// [`find_sessions`](Self::find_sessions) in the reverse order.
    pub fn backward_find_sessions(
        &self,
        key: &KS::Target,
        earliest_session_end: i64,
        latest_session_start: i64,
    ) -> Result<WindowCursor<KS, VS>, QueryError> {
        let span = (earliest_session_end, latest_session_start);
        self.0.keyed(TimeKind::Session, key, span, true)
    }
}

/// One chunk of a [`WindowCursor`].
pub type WindowChunk<KS, VS> = Vec<(Windowed<<KS as Serde>::Target>, <VS as Serde>::Target)>;

/// A window or session range read in chunks of at most [`chunk_size`](Self::chunk_size)
/// entries per round trip to the stream threads; an iterator of `(Windowed<K>, V)`.
///
/// Every chunk continues after the last entry returned, so the entries present throughout
/// come once each; a rebalance of this instance between two chunks fails the cursor with
/// [`QueryError::Rebalancing`] for good (start over).
pub struct WindowCursor<KS, VS> {
    reader: Reader<KS, VS>,
    scan: TimeScan,
    buffered: VecDeque<Hit>,
    exhausted: bool,
    pin: EpochPin,
}

impl<KS, VS> fmt::Debug for WindowCursor<KS, VS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WindowCursor")
            .field("store", &self.reader.target.store)
            .field("scan", &self.scan)
            .field("exhausted", &self.exhausted)
            .finish_non_exhaustive()
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> WindowCursor<KS, VS> {
    /// Reads at most `n` entries per round trip (at least 1; default 1,000). Entries that
    /// share a window (a store retaining duplicates) come in one chunk.
    #[must_use]
    pub fn chunk_size(mut self, n: usize) -> Self {
        self.scan.limit = n.max(1);
        self
    }

    /// Whether the range has been read to its end.
    pub fn is_exhausted(&self) -> bool {
        self.exhausted && self.buffered.is_empty()
    }

    /// The next chunk of entries, or `None` at the end of the range.
    pub fn next_chunk(&mut self) -> Result<Option<WindowChunk<KS, VS>>, QueryError> {
        let Some(hits) = self.take_chunk()? else {
            return Ok(None);
        };
        hits.into_iter()
            .map(|h| self.reader.entry(h))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> Chunked for WindowCursor<KS, VS> {
    type Raw = Hit;

    fn buffered(&mut self) -> &mut VecDeque<Hit> {
        &mut self.buffered
    }

    fn fetch(&mut self) -> Result<(), QueryError> {
        self.pin.usable()?;
        if self.exhausted {
            return Ok(());
        }
        let op = Op::Time(self.scan.clone());
        let answered = self
            .reader
            .router
            .ask(&self.reader.target, &op, self.reader.timeout)?;
        self.pin.observe(answered.epoch)?;
        let parts = answered.parts.into_iter().filter_map(|(_, p)| match p {
            Partial::Time(hits) => Some(hits),
            _ => None,
        });
        let (hits, more) = merge(parts, self.scan.reverse, self.scan.limit);
        self.exhausted = !more;
        if let Some(last) = hits.last() {
            self.scan.after = Some(last.order.clone());
        }
        self.buffered.extend(hits);
        Ok(())
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> Iterator for WindowCursor<KS, VS> {
    type Item = Result<(Windowed<KS::Target>, VS::Target), QueryError>;

    /// The next entry; after an error the next call retries the same chunk.
    fn next(&mut self) -> Option<Self::Item> {
        Some(self.next_raw()?.and_then(|hit| self.reader.entry(hit)))
    }
}
