//! The join cases of `differential_java.rs`: stream-table, table-table, global-table and
//! stream-stream joins.

use std::time::Duration;

use streams_dsl::{JoinWindows, StreamJoined, StreamsBuilder};

use crate::diff::Values::Str;
use crate::diff::{Known, check};
use crate::{global, input, nullable_strings, or_null, strings, table};

// ---- joins ----

/// One test per case whose output is the topic `joined` of strings, compared in full:
/// `test_name: "case-name" => |b| what the case builds on b;`.
macro_rules! joined_cases {
    ($($test:ident: $case:literal => $build:expr;)*) => {$(
        #[test]
        fn $test() {
            check($case, &[], &[("joined", Str)], $build);
        }
    )*};
}

joined_cases! {
    stream_table_join: "stream-table-join" => |b| {
        let users = table(b, "users");
        input(b, "orders")
            .join(&users, |_, o, u| format!("{o}/{u}"))
            .to("joined", strings());
    };
    stream_table_left_join: "stream-table-left-join" => |b| {
        let users = table(b, "users");
        input(b, "orders")
            .left_join(&users, |_, o, u| format!("{o}/{}", or_null(u)))
            .to("joined", strings());
    };
    rekeyed_stream_table_join: "rekeyed-stream-table-join" => |b| {
        let users = table(b, "users");
        input(b, "orders")
            .select_key(|_, v| v.split(':').next().unwrap_or_default().to_owned())
            .join(&users, |_, o, u| format!("{o}/{u}"))
            .to("joined", strings());
    };
}

/// Which join a case runs.
#[derive(Clone, Copy)]
enum Join {
    Inner,
    Left,
    Outer,
}

/// Joins the tables `left` and `right` into `joined`: `l/r`, and for a left join `l/null`,
/// for an outer join `null/r` too.
fn joined_tables(b: &StreamsBuilder, join: Join) {
    let left = table(b, "left");
    let right = table(b, "right");
    match join {
        Join::Inner => left.join(&right, |_, l, r| format!("{l}/{r}")),
        Join::Left => left.left_join(&right, |_, l, r| format!("{l}/{}", or_null(r))),
        Join::Outer => left.outer_join(&right, |_, l, r| format!("{}/{}", or_null(l), or_null(r))),
    }
    .to_stream()
    .to("joined", nullable_strings());
}

joined_cases! {
    table_table_join: "table-table-join" => |b| joined_tables(b, Join::Inner);
    table_table_left_join: "table-table-left-join" => |b| joined_tables(b, Join::Left);
    table_table_outer_join: "table-table-outer-join" => |b| joined_tables(b, Join::Outer);
    global_table_join: "global-table-join" => |b| {
        let g = global(b, "g");
        input(b, "in")
            .join_global(&g, |_, v| v.clone(), |_, v, x| format!("{v}/{x}"))
            .to("joined", strings());
    };
    global_table_left_join: "global-table-left-join" => |b| {
        let g = global(b, "g");
        input(b, "in")
            .left_join_global(&g, |_, v| v.clone(), |_, v, x| format!("{v}/{}", or_null(x)))
            .to("joined", strings());
    };
}

// ---- stream-stream joins: records at most 5 ms apart, 3 ms grace ----
//
// These inputs have late records and records whose windows close: Kafka Streams joins and
// emits differently there (see the reasons, and docs/dsl.md "Stream-stream joins"), so our
// output is pinned record by record instead.

/// Our records of the stream-stream left join within `within()`, in order; the outer
/// join's are the same with its unmatched right records, `$right`, after step 8.
macro_rules! joined_within {
    ($($right:literal),*) => {
        &[
            r#"after step  1: joined "a" = "L1/R1" @ 2"#,
            r#"after step  3: joined "a" = "L2/R1" @ 6"#,
            r#"after step  3: joined "a" = "L2/R2" @ 9"#,
            r#"after step  6: joined "a" = "L4/R1" @ 2"#,
            r#"after step  7: joined "a" = "L1/R5" @ 5"#,
            r#"after step  7: joined "a" = "L4/R5" @ 5"#,
            r#"after step  7: joined "a" = "L2/R5" @ 6"#,
            r#"after step  8: joined "b" = "L3/null" @ 3"#,
            $($right,)*
            r#"after step  9: joined "a" = "L5/R1" @ 2"#,
            r#"after step  9: joined "a" = "L5/R5" @ 5"#,
            r#"after step 11: joined "b" = "L6/R4" @ 14"#,
            r#"after step 13: joined "d" = "X/null" @ 20"#,
        ]
    };
}

const LEFT_JOIN: &[&str] = joined_within!();
const OUTER_JOIN: &[&str] = joined_within!(r#"after step  8: joined "c" = "null/R3" @ 4"#);

fn within() -> JoinWindows {
    JoinWindows::of_time_difference_with_grace(Duration::from_millis(5), Duration::from_millis(3))
}

fn or_null_ref(v: Option<&String>) -> &str {
    v.map_or("null", String::as_str)
}

/// Joins the streams `left` and `right` within `windows` into `joined`: `l/r`, and for a
/// left join `l/null`, for an outer join `null/r` too.
fn joined_streams(b: &StreamsBuilder, join: Join, windows: JoinWindows) {
    let left = input(b, "left");
    let right = input(b, "right");
    let joined = StreamJoined::new();
    match join {
        Join::Inner => left.join_stream(&right, |_, l, r| format!("{l}/{r}"), windows, joined),
        Join::Left => left.left_join_stream(
            &right,
            |_, l, r| format!("{l}/{}", or_null_ref(r)),
            windows,
            joined,
        ),
        Join::Outer => left.outer_join_stream(
            &right,
            |_, l, r| format!("{}/{}", or_null_ref(l), or_null_ref(r)),
            windows,
            joined,
        ),
    }
    .to("joined", strings());
}

joined_cases! {
    stream_stream_join: "stream-stream-join" => |b| joined_streams(b, Join::Inner, within());
}

#[test]
fn stream_stream_left_join() {
    check(
        "stream-stream-left-join",
        &[Known::Records {
            reason: "Kafka Streams emits an unmatched record whose window end is behind stream time at \
            once (L3@3 at stream time 9), ours after its window end plus grace",
            ours: LEFT_JOIN,
        }],
        &[("joined", Str)],
        |b| joined_streams(b, Join::Left, within()),
    );
}

#[test]
fn stream_stream_outer_join() {
    check(
        "stream-stream-outer-join",
        &[Known::Records {
            reason: "as stream-stream-left-join, for both sides: Kafka Streams emits null/R4 at once (R4@14 at \
            stream time 20), then L6/R4 when L6@12 arrives; ours waits, and emits L6/R4 only",
            ours: OUTER_JOIN,
        }],
        &[("joined", Str)],
        |b| joined_streams(b, Join::Outer, within()),
    );
}

// ---- stream-stream joins of records that arrive in time: 10 ms apart at most, 5 ms grace ----
//
// Every record arrives while its window and its partners' windows are open, and the wall
// clock advances 1 s before each record (Kafka Streams checks for closed windows at most once
// per wall-clock second): here both sides agree record by record, duplicates, out-of-order
// partners and the emission of unmatched records included.

fn in_time() -> JoinWindows {
    JoinWindows::of_time_difference_with_grace(Duration::from_millis(10), Duration::from_millis(5))
}

joined_cases! {
    stream_stream_join_in_time: "stream-stream-join-in-time" => |b| joined_streams(b, Join::Inner, in_time());
    stream_stream_left_join_in_time: "stream-stream-left-join-in-time" => |b| joined_streams(b, Join::Left, in_time());
    stream_stream_outer_join_in_time: "stream-stream-outer-join-in-time" => |b| joined_streams(b, Join::Outer, in_time());
}
