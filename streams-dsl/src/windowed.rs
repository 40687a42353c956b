//! Time-window aggregation: [`KGroupedStream::windowed_by`] with [`TimeWindows`], then
//! `count` or `aggregate` per key and window into a store keyed by [`Windowed`] keys.
//!
//! Windows are `[start, start + size)` with `start` a multiple of the advance. Tumbling
//! windows advance by their size, so a record falls into exactly one; hopping windows
//! advance by less, so a record falls into every window that contains its timestamp
//! (`size / advance` of them when the advance divides the size). A record is dropped from a
//! window that closed (its end plus the grace period is at or before the task's stream
//! time), as Kafka Streams drops late records, and still counted in the record's windows
//! that are open. Windows older than `size + grace` behind stream time are removed from the
//! store by a stream-time punctuator; the store keeps its keys ordered by window start, so
//! removal reads only expired entries.

use std::sync::Arc;
use std::time::Duration;

use streams_core::{ProcessResult, Processor, ProcessorContext, PunctuationType, Record, ScheduleId};
use streams_state::{Serde, SerdeError};

use crate::error::DslIssue;
use crate::grouped::KGroupedStream;
use crate::ktable::KTable;
use crate::options::{DynSerde, Materialized, dyn_serde};
use crate::processors::{DslStore, UpdateFn, open};

/// A key in one time window.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Windowed<K> {
    /// The record key.
    pub key: K,
    /// The window's start (ms, inclusive).
    pub start: i64,
    /// The window's end (ms, exclusive).
    pub end: i64,
}

/// Serializes a [`Windowed`] key as the window start (8 bytes, big-endian with the sign bit
/// flipped, so byte order is time order) followed by the key's bytes. The window size is
/// needed to read the end back.
pub struct WindowedSerde<K> {
    inner: DynSerde<K>,
    size_ms: i64,
}

impl<K> Clone for WindowedSerde<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            size_ms: self.size_ms,
        }
    }
}

impl<K: 'static> WindowedSerde<K> {
    /// Windowed keys of `inner` in windows of `size`.
    pub fn new(inner: impl Serde<Target = K>, size: Duration) -> Self {
        Self::of(dyn_serde(inner), millis(size))
    }

    fn of(inner: DynSerde<K>, size_ms: i64) -> Self {
        Self { inner, size_ms }
    }
}

impl<K: 'static> Serde for WindowedSerde<K> {
    type Target = Windowed<K>;

    fn serialize_into(&self, value: &Windowed<K>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(&((value.start as u64) ^ (1 << 63)).to_be_bytes());
        self.inner.serialize_into(&value.key, out)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Windowed<K>, SerdeError> {
        let (start, key) = bytes
            .split_first_chunk::<8>()
            .ok_or_else(|| SerdeError::new("WindowedSerde", "fewer than 8 bytes"))?;
        let start = (u64::from_be_bytes(*start) ^ (1 << 63)) as i64;
        Ok(Windowed {
            key: self.inner.deserialize(key)?,
            start,
            end: start.saturating_add(self.size_ms),
        })
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// Time windows of a fixed size, with a grace period for late records: tumbling (no
/// overlap) unless [`advance_by`](Self::advance_by) makes them hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindows {
    size_ms: i64,
    advance_ms: i64,
    grace_ms: i64,
}

impl TimeWindows {
    /// Tumbling windows of `size` that accept records up to `grace` after they end.
    pub fn of_size_with_grace(size: Duration, grace: Duration) -> Self {
        let size_ms = millis(size);
        Self {
            size_ms,
            advance_ms: size_ms,
            grace_ms: i64::try_from(grace.as_millis()).unwrap_or(i64::MAX),
        }
    }

    /// Hopping windows: a new window starts every `advance`, so windows overlap when
    /// `advance` is less than the size (equal to the size is tumbling). An advance of zero
    /// or above the size, or so small that a record would fall into more than 65536
    /// windows, makes `windowed_by` report [`DslIssue::InvalidWindows`] at build.
    pub fn advance_by(self, advance: Duration) -> Self {
        Self {
            advance_ms: i64::try_from(advance.as_millis()).unwrap_or(i64::MAX),
            ..self
        }
    }

    /// The window size in milliseconds.
    pub fn size_ms(&self) -> i64 {
        self.size_ms
    }

    /// The advance (hop) in milliseconds; the size for tumbling windows.
    pub fn advance_ms(&self) -> i64 {
        self.advance_ms
    }

    /// Windows of `size` that close when they end.
    pub fn of_size_no_grace(size: Duration) -> Self {
        Self::of_size_with_grace(size, Duration::ZERO)
    }

    /// The start of the latest window holding `timestamp` (the only one when tumbling).
    pub fn window_start(&self, timestamp: i64) -> i64 {
        timestamp - timestamp.rem_euclid(self.advance_ms.max(1))
    }

    /// The starts of every window holding `timestamp`, earliest first.
    pub fn window_starts(&self, timestamp: i64) -> Vec<i64> {
        let advance = self.advance_ms.max(1);
        let mut starts = Vec::new();
        let mut start = self.window_start(timestamp);
        while start.saturating_add(self.size_ms) > timestamp && starts.len() < MAX_WINDOWS {
            starts.push(start);
            start = start.saturating_sub(advance);
        }
        starts.reverse();
        starts
    }

    /// An advance in `1..=size` that puts a record in at most [`MAX_WINDOWS`] windows.
    fn valid(&self) -> bool {
        self.advance_ms > 0
            && self.advance_ms <= self.size_ms
            && (self.size_ms - 1) / self.advance_ms < MAX_WINDOWS as i64
    }
}

/// The most windows one record may fall into; smaller advances are a build error.
pub(crate) const MAX_WINDOWS: usize = 1 << 16;

/// A grouped stream cut into time windows (tumbling or hopping), to count or aggregate per
/// key and window. Late records (past the grace period) are dropped; expired windows are
/// removed.
pub struct TimeWindowedKStream<K, V> {
    grouped: KGroupedStream<K, V>,
    windows: TimeWindows,
}

impl<K: Clone + 'static, V: Clone + 'static> KGroupedStream<K, V> {
    /// Aggregates per key and time window.
    pub fn windowed_by(&self, windows: TimeWindows) -> TimeWindowedKStream<K, V> {
        TimeWindowedKStream {
            grouped: self.clone(),
            windows,
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static> TimeWindowedKStream<K, V> {
    /// The number of records per key and window.
    pub fn count(&self, materialized: Materialized<K, u64>) -> KTable<Windowed<K>, u64> {
        let materialized = if materialized.value_serde.is_none() {
            materialized.with_value_serde(streams_core::serdes::U64Serde)
        } else {
            materialized
        };
        self.aggregate_with(
            "windowed_count",
            Arc::new(|_, _, old| old.unwrap_or(0) + 1),
            materialized,
        )
    }

    /// Folds the values of each key and window into an aggregate that starts as
    /// `initializer()`.
    pub fn aggregate<A: Clone + 'static>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        materialized: Materialized<K, A>,
    ) -> KTable<Windowed<K>, A> {
        self.aggregate_with(
            "windowed_aggregate",
            Arc::new(move |k, v, old| aggregator(k, v, old.unwrap_or_else(&initializer))),
            materialized,
        )
    }

    fn aggregate_with<A: Clone + 'static>(
        &self,
        op: &str,
        update: UpdateFn<K, V, A>,
        materialized: Materialized<K, A>,
    ) -> KTable<Windowed<K>, A> {
        let s = self.grouped.stream();
        let given = materialized.name.clone().or_else(|| s.next_name.clone());
        s.shared.check_named(given.is_some(), &s.node, "a store");
        let node = s.shared.name(given.as_deref(), &s.node, op);
        if !self.windows.valid() {
            s.shared.issue(DslIssue::InvalidWindows {
                operator: node.clone(),
                size_ms: self.windows.size_ms,
                advance_ms: self.windows.advance_ms,
            });
        }
        let store = materialized
            .name
            .clone()
            .unwrap_or_else(|| format!("{node}-store"));
        let ks = materialized.key_serde.clone().or_else(|| s.key_serde.clone());
        let (Some(ks), Some(vs)) = (ks, materialized.value_serde.clone()) else {
            s.shared.issue(DslIssue::MissingSerde {
                operator: node.clone(),
                what: "store key or value",
            });
            return KTable::new(s.shared.clone(), node, None);
        };
        let wks: DynSerde<Windowed<K>> = dyn_serde(WindowedSerde::of(ks, self.windows.size_ms));
        let windows = self.windows;
        let store_name = store.clone();
        s.shared.processor_with(
            &node,
            move |ctx| {
                Ok(WindowedAggregate {
                    windows,
                    update: update.clone(),
                    store: open(ctx, &store_name)?,
                })
            },
            &s.node,
        );
        let builder = materialized.store_with(&store, wks.clone(), vs.clone());
        s.shared.store(builder, &[&node]);
        KTable::new(s.shared.clone(), node, Some(store)).with_serdes(Some(wks), Some(vs))
    }
}

struct WindowedAggregate<K: 'static, V, A: 'static> {
    windows: TimeWindows,
    update: UpdateFn<K, V, A>,
    store: DslStore<Windowed<K>, A>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> Processor<K, V, Windowed<K>, Option<A>>
    for WindowedAggregate<K, V, A>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, Windowed<K>, Option<A>>) -> ProcessResult {
        ctx.schedule(
            Duration::from_millis(self.windows.advance_ms.max(1).unsigned_abs()),
            PunctuationType::StreamTime,
        );
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Option<A>>,
        r: Record<K, V>,
    ) -> ProcessResult {
        let store = &self.store;
        let stream_time = ctx.stream_time();
        for start in self.windows.window_starts(r.timestamp) {
            let end = start.saturating_add(self.windows.size_ms);
            if end.saturating_add(self.windows.grace_ms) <= stream_time {
                continue; // this window closed: late for it
            }
            let key = Windowed {
                key: r.key.clone(),
                start,
                end,
            };
            let new = (self.update)(&key.key, r.value.clone(), store.get(&key)?);
            store.put(&key, &new)?;
            ctx.forward(Record {
                key,
                value: Some(new),
                timestamp: r.timestamp,
                headers: r.headers.clone(),
            })?;
        }
        Ok(())
    }

    fn punctuate(
        &mut self,
        _: &mut ProcessorContext<'_, Windowed<K>, Option<A>>,
        _: ScheduleId,
        now: i64,
    ) -> ProcessResult {
        let store = &self.store;
        let retention = self.windows.size_ms.saturating_add(self.windows.grace_ms);
        let cutoff = now.saturating_sub(retention);
        let mut expired = Vec::new();
        {
            let reader = store.read()?;
            for entry in reader.all()? {
                let (key, _) = entry?;
                if key.start >= cutoff {
                    break;
                }
                expired.push(key);
            }
        }
        for key in expired {
            store.delete(&key)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use streams_core::serdes::StringSerde;

    use super::*;

    #[test]
    fn windowed_keys_round_trip_and_sort_by_window_start() {
        let serde = WindowedSerde::new(StringSerde, Duration::from_millis(10));
        let key = |start: i64, k: &str| Windowed {
            key: k.to_owned(),
            start,
            end: start + 10,
        };
        let keys = [
            key(-20, "z"),
            key(-10, "a"),
            key(0, "b"),
            key(10, "a"),
            key(1 << 40, "a"),
        ];
        let bytes: Vec<Vec<u8>> = keys.iter().map(|k| serde.serialize(k).unwrap()).collect();
        let mut sorted = bytes.clone();
        sorted.sort();
        assert_eq!(sorted, bytes, "byte order is window-start order");
        for (k, b) in keys.iter().zip(&bytes) {
            assert_eq!(&serde.deserialize(b).unwrap(), k);
        }
        assert!(serde.deserialize(b"short").is_err());
    }

    #[test]
    fn tumbling_window_starts() {
        let w = TimeWindows::of_size_no_grace(Duration::from_millis(10));
        assert_eq!(w.window_start(0), 0);
        assert_eq!(w.window_start(19), 10);
        assert_eq!(w.window_start(-1), -10);
        assert_eq!(w.window_starts(19), [10]);
    }

    #[test]
    fn hopping_window_starts() {
        let w = TimeWindows::of_size_no_grace(Duration::from_millis(10)).advance_by(Duration::from_millis(5));
        assert_eq!(w.window_starts(0), [-5, 0]);
        assert_eq!(w.window_starts(7), [0, 5]);
        assert_eq!(w.window_starts(10), [5, 10]);
        let w = TimeWindows::of_size_no_grace(Duration::from_millis(10)).advance_by(Duration::from_millis(3));
        assert_eq!(w.window_starts(10), [3, 6, 9]);
        assert!(w.valid());
        assert!(!w.advance_by(Duration::ZERO).valid());
        assert!(!w.advance_by(Duration::from_millis(11)).valid());
        let day = TimeWindows::of_size_no_grace(Duration::from_secs(86_400));
        assert!(!day.advance_by(Duration::from_millis(1)).valid());
        assert!(day.advance_by(Duration::from_secs(60)).valid());
    }
}
