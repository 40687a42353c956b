//! The session-window cases of `differential_java.rs`: `count`, `aggregate` (with a
//! merger), `reduce`, emit-on-window-close and `suppress(until_window_closes)` over
//! sessions of a 10 ms inactivity gap and 20 ms grace. Session keys are written as
//! `key@start/end`.

use std::time::Duration;

use streams_core::serdes::StringSerde;
use streams_dsl::{
    BufferConfig, EmitStrategy, Grouped, Materialized, SessionWindowedSerde, SessionWindows, Suppressed,
};

use crate::diff::Values::{Long, Str};
use crate::diff::check;
use crate::{ToWindowed, counts, grouped_input, input, key_bytes, nullable_strings};

fn sessions() -> SessionWindows {
    SessionWindows::of_inactivity_gap_with_grace(Duration::from_millis(10), Duration::from_millis(20))
}

#[test]
fn session_count() {
    check("session-count", &[], &[("counts", Long)], |b| {
        grouped_input(b)
            .windowed_by_session(sessions())
            .count(Materialized::new())
            .to_windowed("counts", counts());
    });
}

/// Our `SessionWindowedSerde` writes the bytes of Kafka Streams' `SessionWindowedSerde`.
#[test]
fn session_key_bytes() {
    check("session-key-bytes", &[], &[("counts", Long)], |b| {
        let keys = SessionWindowedSerde::new(StringSerde);
        grouped_input(b)
            .windowed_by_session(sessions())
            .count(Materialized::new())
            .to_stream()
            .map(move |k, v| (key_bytes(&keys, &k), v))
            .to("counts", counts());
    });
}

#[test]
fn session_aggregate() {
    check("session-aggregate", &[], &[("aggregates", Str)], |b| {
        grouped_input(b)
            .windowed_by_session(sessions())
            .aggregate(
                String::new,
                |_, v, a| a + &v,
                |_, a1, a2| format!("{a1}|{a2}"),
                Materialized::new().with_value_serde(StringSerde),
            )
            .to_windowed("aggregates", nullable_strings());
    });
}

#[test]
fn session_reduce() {
    check("session-reduce", &[], &[("reduced", Str)], |b| {
        grouped_input(b)
            .windowed_by_session(sessions())
            .reduce(|a, v| format!("{a}+{v}"), Materialized::new())
            .to_windowed("reduced", nullable_strings());
    });
}

#[test]
fn session_count_emit_final() {
    check("session-count-emit-final", &[], &[("counts", Long)], |b| {
        grouped_input(b)
            .windowed_by_session(sessions())
            .emit_strategy(EmitStrategy::on_window_close())
            .count(Materialized::new())
            .to_windowed("counts", counts());
    });
}

#[test]
fn session_suppress_window_close() {
    check("session-suppress-window-close", &[], &[("finals", Long)], |b| {
        grouped_input(b)
            .windowed_by_session(sessions())
            .count(Materialized::new())
            .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
            .to_windowed("finals", counts());
    });
}

/// Two session tables joined on their session keys: a row joins only the other side's
/// session of the same start and end, and a merged-away session leaves the join.
#[test]
fn session_table_join() {
    check("session-table-join", &[], &[("joined", Str)], |b| {
        let left = input(b, "left")
            .group_by_key(Grouped::new())
            .windowed_by_session(sessions())
            .count(Materialized::new());
        let right = input(b, "right")
            .group_by_key(Grouped::new())
            .windowed_by_session(sessions())
            .count(Materialized::new());
        left.left_join(&right, |_, l, r| {
            format!("{l}/{}", r.map_or("null".to_owned(), |r| r.to_string()))
        })
        .to_windowed("joined", nullable_strings());
    });
}
