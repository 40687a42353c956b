//! [`JoinWindows`] and [`StreamJoined`]: the window and the stores of a stream-stream join.
//!
//! Invariants: every bound is a non-negative number of milliseconds (Rust durations are
//! never negative), so a window always holds its own record's timestamp; the window stores
//! keep `before + after + grace + 1` ms behind their stream time, one more than Kafka
//! Streams, because a store's visibility bound is exclusive and a partner exactly at the
//! edge of an open window must still be read.

use std::time::Duration;

use streams_state::Serde;

use crate::dyn_serde::{DynSerde, dyn_serde};
use crate::windowed::millis;

/// The join window of a stream-stream join (Kafka Streams' `JoinWindows`, KIP-633).
///
/// A record of this (left) stream at `t` joins the other stream's records of the same key
/// with timestamps in `[t - before, t + after]`; seen from the other stream the window is
/// mirrored, `[t - after, t + before]`. Both bounds are `d` unless changed with
/// [`before`](Self::before) / [`after`](Self::after). A record's window closes when the
/// join's stream time passes its end plus `grace`; a record whose window is already closed
/// when it arrives is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinWindows {
    pub(crate) before_ms: i64,
    pub(crate) after_ms: i64,
    pub(crate) grace_ms: i64,
}

impl JoinWindows {
    /// Records at most `difference` apart join; out-of-order records are accepted up to
    /// `grace` after their window ends.
    pub fn of_time_difference_with_grace(difference: Duration, grace: Duration) -> Self {
        let d = millis(difference);
        Self {
            before_ms: d,
            after_ms: d,
            grace_ms: millis(grace),
        }
    }

    /// Records at most `difference` apart join; a window closes as soon as it ends.
    pub fn of_time_difference_no_grace(difference: Duration) -> Self {
        Self::of_time_difference_with_grace(difference, Duration::ZERO)
    }

    /// How far before a left record a right record may be and still join.
    pub fn before(self, before: Duration) -> Self {
        Self {
            before_ms: millis(before),
            ..self
        }
    }

    /// How far after a left record a right record may be and still join.
    pub fn after(self, after: Duration) -> Self {
        Self {
            after_ms: millis(after),
            ..self
        }
    }

    /// `before` in milliseconds.
    pub fn before_ms(&self) -> i64 {
        self.before_ms
    }

    /// `after` in milliseconds.
    pub fn after_ms(&self) -> i64 {
        self.after_ms
    }

    /// The grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    /// The window size, `before + after` (ms): the window stores' window size.
    pub fn size_ms(&self) -> i64 {
        self.before_ms.saturating_add(self.after_ms)
    }

    /// How long the window stores keep a record behind their stream time (ms):
    /// `before + after + grace + 1` (see the module docs of `stream_join::options`).
    pub fn retention_ms(&self) -> i64 {
        self.size_ms().saturating_add(self.grace_ms).saturating_add(1)
    }

    /// How far after its own timestamp a record of the left (`true`) or right side can
    /// still be joined: `after` for the left side, `before` for the right.
    pub(crate) fn ahead_ms(&self, left: bool) -> i64 {
        if left { self.after_ms } else { self.before_ms }
    }

    /// Whether the window of a record of side `left` at `t` is closed at stream time `now`:
    /// `t + ahead + grace < now`.
    pub(crate) fn closed(&self, left: bool, t: i64, now: i64) -> bool {
        t.saturating_add(self.ahead_ms(left))
            .saturating_add(self.grace_ms)
            < now
    }
}

/// The serdes and stores of a stream-stream join (Kafka Streams' `StreamJoined`).
///
/// Serdes not given are taken from the joined streams; a join whose serdes are found
/// nowhere is a build error ([`DslIssue::MissingSerde`](crate::DslIssue)). Stores are named
/// as Kafka Streams names them: `<base>-this-join-store` and `<base>-other-join-store` for an
/// inner join; `<base>-this-join-store`, `<base>-outer-other-join-store` and
/// `<base>-left-shared-join-store` for a left join; `<base>-outer-this-join-store`,
/// `<base>-outer-other-join-store` and `<base>-outer-shared-join-store` for an outer join,
/// where `<base>` is [`with_store_name`](Self::with_store_name)
/// else the join's node name; [`with_this_store`](Self::with_this_store) and
/// [`with_other_store`](Self::with_other_store) name the two window stores exactly. Stores
/// are persistent (RocksDB) and change-logged unless changed.
pub struct StreamJoined<K, V1, V2> {
    pub(crate) key_serde: Option<DynSerde<K>>,
    pub(crate) this_value_serde: Option<DynSerde<V1>>,
    pub(crate) other_value_serde: Option<DynSerde<V2>>,
    pub(crate) store_name: Option<String>,
    pub(crate) this_store: Option<String>,
    pub(crate) other_store: Option<String>,
    pub(crate) persistent: bool,
    pub(crate) logging: bool,
}

impl<K, V1, V2> Default for StreamJoined<K, V1, V2> {
    fn default() -> Self {
        Self {
            key_serde: None,
            this_value_serde: None,
            other_value_serde: None,
            store_name: None,
            this_store: None,
            other_store: None,
            persistent: true,
            logging: true,
        }
    }
}

impl<K: 'static, V1: 'static, V2: 'static> StreamJoined<K, V1, V2> {
    /// Serdes from the joined streams, stores named after the join.
    pub fn new() -> Self {
        Self::default()
    }

    /// With the key serde and both value serdes.
    pub fn with<KS, VS1, VS2>(key_serde: KS, this_value_serde: VS1, other_value_serde: VS2) -> Self
    where
        KS: Serde<Target = K>,
        VS1: Serde<Target = V1>,
        VS2: Serde<Target = V2>,
    {
        Self {
            key_serde: Some(dyn_serde(key_serde)),
            this_value_serde: Some(dyn_serde(this_value_serde)),
            other_value_serde: Some(dyn_serde(other_value_serde)),
            ..Self::default()
        }
    }

    /// Names the stores after `<name>` (`<name>-this-join-store` and so on, see
    /// [`StreamJoined`]; changelogs `<application.id>-<store>-changelog`).
    pub fn with_store_name(mut self, name: impl Into<String>) -> Self {
        self.store_name = Some(name.into());
        self
    }

    /// Names the window store of this (left) stream's records exactly.
    pub fn with_this_store(mut self, name: impl Into<String>) -> Self {
        self.this_store = Some(name.into());
        self
    }

    /// Names the window store of the other (right) stream's records exactly.
    pub fn with_other_store(mut self, name: impl Into<String>) -> Self {
        self.other_store = Some(name.into());
        self
    }

    /// Keeps the stores in memory instead of RocksDB.
    pub fn in_memory(mut self) -> Self {
        self.persistent = false;
        self
    }

    /// No changelogs: the stores are not restored after a failure.
    pub fn without_logging(mut self) -> Self {
        self.logging = false;
        self
    }

    /// Whether every store of the join gets a given name (for
    /// [`require_names`](crate::StreamsBuilder::require_names)); `outer`: the join has an
    /// outer-join store, which only [`with_store_name`](Self::with_store_name) names.
    pub(crate) fn names_given(&self, outer: bool) -> bool {
        self.store_name.is_some() || (!outer && self.this_store.is_some() && self.other_store.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_closing() {
        let w =
            JoinWindows::of_time_difference_with_grace(Duration::from_millis(10), Duration::from_millis(5))
                .before(Duration::from_millis(3));
        assert_eq!(
            (w.before_ms(), w.after_ms(), w.grace_ms(), w.size_ms()),
            (3, 10, 5, 13)
        );
        assert_eq!(w.retention_ms(), 19);
        // A left record at 100 is open up to stream time 115, a right one up to 108.
        assert!(!w.closed(true, 100, 115) && w.closed(true, 100, 116));
        assert!(!w.closed(false, 100, 108) && w.closed(false, 100, 109));
        let n = JoinWindows::of_time_difference_no_grace(Duration::from_secs(1));
        assert_eq!((n.before_ms(), n.after_ms(), n.grace_ms()), (1000, 1000, 0));
    }
}
