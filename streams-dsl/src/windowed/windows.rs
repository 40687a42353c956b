//! Window definitions: [`TimeWindows`] (tumbling and hopping), [`SlidingWindows`] and the
//! [`EmitStrategy`] of a windowed aggregation.
//!
//! Window assignment follows Kafka Streams exactly: a time window is `[start, start + size)`
//! with `start` a non-negative multiple of the advance (no window ever starts before 0, so a
//! record near 0 falls into fewer hopping windows), and a record with a negative timestamp
//! falls into no window. A sliding window is `[start, start + time difference]`, inclusive at
//! both ends; which sliding windows exist is decided by the aggregation itself
//! (`sliding_agg`).

use std::time::Duration;

/// Milliseconds of a duration, saturating at `i64::MAX`.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Time windows of a fixed size, with a grace period for late records: tumbling (no
/// overlap) unless [`advance_by`](Self::advance_by) makes them hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindows {
    pub(crate) size_ms: i64,
    pub(crate) advance_ms: i64,
    pub(crate) grace_ms: i64,
}

impl TimeWindows {
    /// Tumbling windows of `size` that accept records up to `grace` after they end. A size
    /// of zero is taken as 1 ms.
    pub fn of_size_with_grace(size: Duration, grace: Duration) -> Self {
        let size_ms = millis(size).max(1);
        Self {
            size_ms,
            advance_ms: size_ms,
            grace_ms: millis(grace),
        }
    }

    /// Windows of `size` that close when they end.
    pub fn of_size_no_grace(size: Duration) -> Self {
        Self::of_size_with_grace(size, Duration::ZERO)
    }

    /// Hopping windows: a new window starts every `advance`, so windows overlap when
    /// `advance` is less than the size (equal to the size is tumbling). An advance of zero
    /// or above the size, or so small that a record would fall into more than 65536
    /// windows, makes `windowed_by` report [`DslIssue::InvalidWindows`](crate::DslIssue) at
    /// build.
    pub fn advance_by(self, advance: Duration) -> Self {
        Self {
            advance_ms: millis(advance),
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

    /// The grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    /// The start of the latest window holding `timestamp` (the only one when tumbling);
    /// `None` for a negative timestamp, which no window holds.
    pub fn window_start(&self, timestamp: i64) -> Option<i64> {
        (timestamp >= 0).then(|| timestamp - timestamp % self.advance_ms.max(1))
    }

    /// The starts of every window holding `timestamp`, earliest first, as Kafka Streams'
    /// `TimeWindows.windowsFor`: starts are non-negative multiples of the advance in
    /// `(timestamp - size, timestamp]`; none for a negative timestamp.
    pub fn window_starts(&self, timestamp: i64) -> Vec<i64> {
        let advance = self.advance_ms.max(1);
        let mut starts = Vec::new();
        if timestamp < 0 {
            return starts;
        }
        // The smallest multiple of the advance above `timestamp - size`, at least 0.
        let lowest = timestamp
            .saturating_sub(self.size_ms)
            .saturating_add(advance)
            .max(0);
        let mut start = lowest - lowest % advance;
        while start <= timestamp && starts.len() < MAX_WINDOWS {
            starts.push(start);
            start = start.saturating_add(advance);
        }
        starts
    }

    /// An advance in `1..=size` that puts a record in at most [`MAX_WINDOWS`] windows.
    pub(crate) fn valid(&self) -> bool {
        self.advance_ms > 0
            && self.advance_ms <= self.size_ms
            && (self.size_ms - 1) / self.advance_ms < MAX_WINDOWS as i64
    }
}

/// The most windows one record may fall into; smaller advances are a build error.
pub(crate) const MAX_WINDOWS: usize = 1 << 16;

/// Sliding windows (Kafka Streams' `SlidingWindows`, KIP-450): windows of a fixed time
/// difference `d`, inclusive at both ends, that exist where records are. Each record at `t`
/// has a left window `[t - d, t]` (ending at it) and, when a later record falls within
/// `d` after it, a right window `[t + 1, t + 1 + d]`; records before `d` share the window
/// `[0, d]`. Every distinct set of records within `d` of each other thus gets one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindows {
    pub(crate) diff_ms: i64,
    pub(crate) grace_ms: i64,
}

impl SlidingWindows {
    /// Sliding windows of time difference `diff` accepting records up to `grace` after a
    /// window ends.
    pub fn of_time_difference_with_grace(diff: Duration, grace: Duration) -> Self {
        Self {
            diff_ms: millis(diff),
            grace_ms: millis(grace),
        }
    }

    /// Sliding windows of time difference `diff` that close when they end.
    pub fn of_time_difference_no_grace(diff: Duration) -> Self {
        Self::of_time_difference_with_grace(diff, Duration::ZERO)
    }

    /// The time difference (the window size minus one) in milliseconds.
    pub fn time_difference_ms(&self) -> i64 {
        self.diff_ms
    }

    /// The grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }
}

/// When a windowed aggregation forwards its results (Kafka Streams' `EmitStrategy`,
/// KIP-825).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EmitStrategy {
    on_close: bool,
}

impl EmitStrategy {
    /// Every update of a window is forwarded (the default).
    pub fn on_window_update() -> Self {
        Self { on_close: false }
    }

    /// Only a window's final result is forwarded, once, when the window closes (stream
    /// time passes its end plus the grace period).
    pub fn on_window_close() -> Self {
        Self { on_close: true }
    }

    /// Whether only final results are forwarded.
    pub fn is_on_window_close(&self) -> bool {
        self.on_close
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn tumbling_window_starts() {
        let w = TimeWindows::of_size_no_grace(ms(10));
        assert_eq!(w.window_start(0), Some(0));
        assert_eq!(w.window_start(19), Some(10));
        assert_eq!(w.window_start(-1), None);
        assert_eq!(w.window_starts(19), [10]);
        assert_eq!(w.window_starts(0), [0]);
        assert!(w.window_starts(-1).is_empty());
    }

    #[test]
    fn hopping_window_starts_never_go_below_zero() {
        let w = TimeWindows::of_size_no_grace(ms(10)).advance_by(ms(5));
        assert_eq!(w.window_starts(0), [0]);
        assert_eq!(w.window_starts(4), [0]);
        assert_eq!(w.window_starts(7), [0, 5]);
        assert_eq!(w.window_starts(10), [5, 10]);
        assert!(w.window_starts(-3).is_empty());
        let w = TimeWindows::of_size_no_grace(ms(10)).advance_by(ms(3));
        assert_eq!(w.window_starts(10), [3, 6, 9]);
        assert_eq!(w.window_starts(12), [3, 6, 9, 12]);
        assert_eq!(w.window_starts(2), [0]);
        assert!(w.valid());
        assert!(!w.advance_by(Duration::ZERO).valid());
        assert!(!w.advance_by(ms(11)).valid());
        let day = TimeWindows::of_size_no_grace(Duration::from_secs(86_400));
        assert!(!day.advance_by(ms(1)).valid());
        assert!(day.advance_by(Duration::from_secs(60)).valid());
    }

    #[test]
    fn window_starts_hold_the_timestamp() {
        for (size, advance) in [(10, 10), (10, 5), (10, 3), (7, 2), (1, 1)] {
            let w = TimeWindows::of_size_no_grace(ms(size)).advance_by(ms(advance));
            for t in 0..50i64 {
                let expected: Vec<i64> = (0..=t)
                    .filter(|s| s % advance as i64 == 0 && s + size as i64 > t)
                    .collect();
                assert_eq!(
                    w.window_starts(t),
                    expected,
                    "size {size} advance {advance} t {t}"
                );
            }
        }
    }

    #[test]
    fn emit_strategy_defaults_to_updates() {
        assert!(!EmitStrategy::default().is_on_window_close());
        assert!(EmitStrategy::on_window_close().is_on_window_close());
        assert_eq!(EmitStrategy::on_window_update(), EmitStrategy::default());
    }
}
