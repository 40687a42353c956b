//! The windowed cases of `differential_java.rs`: tumbling, hopping and sliding windows,
//! emit-on-window-close and suppression. Windowed keys are written as `key@start/end`.

use std::time::Duration;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_dsl::{
    BufferConfig, EmitStrategy, Grouped, KTable, Materialized, SlidingWindows, StreamsBuilder, Suppressed,
    TimeWindows, Windowed, WindowedSerde,
};

use crate::diff::Values::{Long, Str};
use crate::diff::check;
use crate::{ToWindowed, counts, grouped_input, input, key_bytes, nullable_strings};

// ---- windows: 10 ms windows, 5 ms grace ----

fn tumbling() -> TimeWindows {
    TimeWindows::of_size_with_grace(Duration::from_millis(10), Duration::from_millis(5))
}

fn hopping() -> TimeWindows {
    tumbling().advance_by(Duration::from_millis(5))
}

/// Time or sliding windows, for the cases that run alike over both.
#[derive(Clone, Copy)]
enum Windows {
    Time(TimeWindows),
    Sliding(SlidingWindows),
}

impl From<TimeWindows> for Windows {
    fn from(w: TimeWindows) -> Self {
        Windows::Time(w)
    }
}

impl From<SlidingWindows> for Windows {
    fn from(w: SlidingWindows) -> Self {
        Windows::Sliding(w)
    }
}

/// Runs the same calls on the input grouped by key and cut into `windows`: `$s` is the
/// windowed stream, of either type, in `$body`.
macro_rules! over {
    ($b:expr, $windows:expr, |$s:ident| $body:expr) => {
        match $windows.into() {
            Windows::Time(w) => {
                let $s = grouped_input($b).windowed_by(w);
                $body
            }
            Windows::Sliding(w) => {
                let $s = grouped_input($b).windowed_by_sliding(w);
                $body
            }
        }
    };
}

/// The count of the input per key and window; only each window's final result when
/// `final_only`.
fn count(b: &StreamsBuilder, windows: impl Into<Windows>, final_only: bool) -> KTable<Windowed<String>, u64> {
    over!(b, windows, |s| match final_only {
        true => s.emit_strategy(EmitStrategy::on_window_close()),
        false => s,
    }
    .count(Materialized::new()))
}

/// The input's count per key and window, written to `counts`.
fn windowed_count(b: &StreamsBuilder, windows: impl Into<Windows>) {
    count(b, windows, false).to_windowed("counts", counts());
}

/// Only each window's final count, written to `counts`.
fn final_count(b: &StreamsBuilder, windows: impl Into<Windows>) {
    count(b, windows, true).to_windowed("counts", counts());
}

/// The count per key and window suppressed until the window closes, written to `finals`.
fn suppressed_count(b: &StreamsBuilder, windows: impl Into<Windows>) {
    count(b, windows, false)
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_windowed("finals", counts());
}

/// The input's values per key and window concatenated, written to `aggregates`.
fn windowed_concat(b: &StreamsBuilder, windows: impl Into<Windows>) {
    over!(b, windows, |s| s.aggregate(
        String::new,
        |_, v, a| a + &v,
        Materialized::new().with_value_serde(StringSerde),
    ))
    .to_windowed("aggregates", nullable_strings());
}

/// The input's values per key and window reduced to `a+b+…`, written to `reduced`.
fn windowed_reduce(b: &StreamsBuilder, windows: impl Into<Windows>) {
    over!(b, windows, |s| s
        .reduce(|a, v| format!("{a}+{v}"), Materialized::new()))
    .to_windowed("reduced", nullable_strings());
}

#[test]
fn tumbling_count() {
    check("tumbling-count", &[], &[("counts", Long)], |b| {
        windowed_count(b, tumbling())
    });
}

/// Our `WindowedSerde` writes the bytes of Kafka Streams' `TimeWindowedSerde`.
#[test]
fn windowed_key_bytes() {
    check("windowed-key-bytes", &[], &[("counts", Long)], |b| {
        let keys = WindowedSerde::new(StringSerde, Duration::from_millis(10));
        count(b, tumbling(), false)
            .to_stream()
            .map(move |k, v| (key_bytes(&keys, &k), v))
            .to("counts", counts());
    });
}

#[test]
fn tumbling_aggregate() {
    check("tumbling-aggregate", &[], &[("aggregates", Str)], |b| {
        windowed_concat(b, tumbling())
    });
}

#[test]
fn hopping_count() {
    check("hopping-count", &[], &[("counts", Long)], |b| {
        windowed_count(b, hopping())
    });
}

#[test]
fn hopping_aggregate() {
    check("hopping-aggregate", &[], &[("aggregates", Str)], |b| {
        windowed_concat(b, hopping())
    });
}

/// `"<region>:<clicks>"` as `(region, clicks)`.
fn region_clicks(v: &str) -> (String, u64) {
    let (region, clicks) = v.split_once(':').unwrap_or((v, "0"));
    (region.to_owned(), clicks.parse().unwrap_or(0))
}

#[test]
fn hopping_group_by_reduce() {
    check("hopping-group-by-reduce", &[], &[("counts", Long)], |b| {
        grouped_input(b)
            .windowed_by(hopping())
            .reduce(
                |a, v| {
                    let (region, clicks) = region_clicks(&v);
                    format!("{region}:{}", region_clicks(&a).1 + clicks)
                },
                Materialized::new(),
            )
            .group_by(
                |w, v| {
                    let (region, clicks) = region_clicks(v);
                    let key = Windowed {
                        key: region,
                        start: w.start,
                        end: w.end,
                    };
                    (key, clicks)
                },
                Grouped::with(
                    WindowedSerde::new(StringSerde, Duration::from_millis(10)),
                    U64Serde,
                )
                .named("by-region"),
            )
            .reduce(|a, v| a + v, |a, v| a - v, Materialized::new())
            .to_windowed("counts", counts());
    });
}

#[test]
fn tumbling_reduce() {
    check("tumbling-reduce", &[], &[("reduced", Str)], |b| {
        windowed_reduce(b, tumbling())
    });
}

#[test]
fn tumbling_count_emit_final() {
    check("tumbling-count-emit-final", &[], &[("counts", Long)], |b| {
        final_count(b, tumbling())
    });
}

#[test]
fn suppress_window_close() {
    check("suppress-window-close", &[], &[("finals", Long)], |b| {
        suppressed_count(b, tumbling())
    });
}

#[test]
fn suppress_time_limit() {
    check("suppress-time-limit", &[], &[("limited", Long)], |b| {
        grouped_input(b)
            .count(Materialized::new())
            .suppress(Suppressed::until_time_limit(
                Duration::from_millis(10),
                BufferConfig::max_records(2),
            ))
            .to_stream()
            .to("limited", counts());
    });
}

// ---- sliding windows: 10 ms time difference, 5 ms grace ----

fn sliding() -> SlidingWindows {
    SlidingWindows::of_time_difference_with_grace(Duration::from_millis(10), Duration::from_millis(5))
}

#[test]
fn sliding_count() {
    check("sliding-count", &[], &[("counts", Long)], |b| {
        windowed_count(b, sliding())
    });
}

#[test]
fn sliding_aggregate() {
    check("sliding-aggregate", &[], &[("aggregates", Str)], |b| {
        windowed_concat(b, sliding())
    });
}

#[test]
fn sliding_reduce() {
    check("sliding-reduce", &[], &[("reduced", Str)], |b| {
        windowed_reduce(b, sliding())
    });
}

#[test]
fn sliding_count_emit_final() {
    check("sliding-count-emit-final", &[], &[("counts", Long)], |b| {
        final_count(b, sliding())
    });
}

#[test]
fn sliding_count_no_grace() {
    check("sliding-count-no-grace", &[], &[("counts", Long)], |b| {
        let no_grace = SlidingWindows::of_time_difference_no_grace(Duration::from_millis(10));
        windowed_count(b, no_grace)
    });
}

#[test]
fn sliding_suppress_window_close() {
    check("sliding-suppress-window-close", &[], &[("finals", Long)], |b| {
        suppressed_count(b, sliding())
    });
}

#[test]
fn hopping_count_emit_final() {
    check("hopping-count-emit-final", &[], &[("counts", Long)], |b| {
        final_count(b, hopping())
    });
}

#[test]
fn table_suppress_time_limit() {
    check("table-suppress-time-limit", &[], &[("limited", Str)], |b| {
        crate::table(b, "t")
            .suppress(Suppressed::until_time_limit(
                Duration::from_millis(10),
                BufferConfig::unbounded(),
            ))
            .to_stream()
            .to("limited", nullable_strings());
    });
}

/// Two windowed tables joined on their windowed keys: the join reads the other side's
/// window store at the key's window.
#[test]
fn windowed_table_join() {
    check("windowed-table-join", &[], &[("joined", Str)], |b| {
        let counts = input(b, "left")
            .group_by_key(Grouped::new())
            .windowed_by(tumbling())
            .count(Materialized::new());
        let latest = input(b, "right")
            .group_by_key(Grouped::new())
            .windowed_by(tumbling())
            .reduce(|_, v| v, Materialized::new());
        counts
            .join(&latest, |_, n, v| format!("{n}/{v}"))
            .to_windowed("joined", nullable_strings());
    });
}
