//! The foreign-key join and cogroup cases of `differential_java.rs` (windowed keys written
//! as `key@start/end`).

use std::time::Duration;

use streams_core::serdes::StringSerde;
use streams_dsl::{Grouped, Materialized, TimeWindows};

use crate::diff::Values::Str;
use crate::diff::check;
use crate::{ToWindowed, input, nullable_strings, or_null, strings, table};

/// The foreign key of a left value `"<fk>:<text>"`.
fn fk(v: &str) -> String {
    v.split(':').next().unwrap_or_default().to_owned()
}

/// The foreign key of row `k` valued `"<fk>:<text>"`, read with the row's key: `*` stands
/// for the row's own key, an empty `<fk>` is a null foreign key.
#[allow(clippy::ptr_arg)] // the extractor's signature: `Fn(&K, &V)`
fn foreign_key(k: &String, v: &String) -> Option<String> {
    match fk(v) {
        f if f.is_empty() => None,
        f if f == "*" => Some(k.clone()),
        f => Some(f),
    }
}

fn joined_store() -> Materialized<String, String> {
    Materialized::as_("joined").with_value_serde(StringSerde)
}

#[test]
fn fk_join() {
    check("fk-join", &[], &[("joined", Str)], |b| {
        table(b, "left")
            .join_foreign(
                &table(b, "right"),
                |v: &String| fk(v),
                |l, r| format!("{l}/{r}"),
                joined_store(),
            )
            .to_stream()
            .to("joined", nullable_strings());
    });
}

#[test]
fn fk_left_join() {
    check("fk-left-join", &[], &[("joined", Str)], |b| {
        table(b, "left")
            .left_join_foreign(
                &table(b, "right"),
                |v: &String| fk(v),
                |l, r| format!("{l}/{}", or_null(r)),
                joined_store(),
            )
            .to_stream()
            .to("joined", nullable_strings());
    });
}

#[test]
fn fk_join_null_key() {
    check("fk-join-null-key", &[], &[("joined", Str)], |b| {
        table(b, "left")
            .join_foreign_with_key(
                &table(b, "right"),
                foreign_key,
                |l, r| format!("{l}/{r}"),
                joined_store(),
            )
            .to_stream()
            .to("joined", nullable_strings());
    });
}

#[test]
fn fk_left_join_null_key() {
    check("fk-left-join-null-key", &[], &[("joined", Str)], |b| {
        table(b, "left")
            .left_join_foreign_with_key(
                &table(b, "right"),
                foreign_key,
                |l, r| format!("{l}/{}", or_null(r)),
                joined_store(),
            )
            .to_stream()
            .to("joined", nullable_strings());
    });
}

#[test]
fn cogroup_aggregate() {
    check("cogroup-aggregate", &[], &[("aggregates", Str)], |b| {
        let second = input(b, "b")
            .map(|_, v| (fk(&v), v))
            .group_by_key(Grouped::as_("b-by-prefix"));
        input(b, "a")
            .group_by_key(Grouped::new())
            .cogroup(|_, v, agg: String| format!("{agg}a({v})"))
            .cogroup(&second, |_, v, agg| format!("{agg}b({v})"))
            .aggregate(
                || "|".to_owned(),
                Materialized::new().with_value_serde(StringSerde),
            )
            .to_stream()
            .map_values(|_, v| v.unwrap_or_default())
            .to("aggregates", strings());
    });
}

#[test]
fn cogroup_windowed_aggregate() {
    check("cogroup-windowed-aggregate", &[], &[("aggregates", Str)], |b| {
        input(b, "a")
            .group_by_key(Grouped::new())
            .cogroup(|_, v, agg: String| format!("{agg}a({v})"))
            .cogroup(&input(b, "b").group_by_key(Grouped::new()), |_, v, agg| {
                format!("{agg}b({v})")
            })
            .windowed_by(TimeWindows::of_size_with_grace(
                Duration::from_millis(10),
                Duration::from_millis(5),
            ))
            .aggregate(
                || "|".to_owned(),
                Materialized::new().with_value_serde(StringSerde),
            )
            .to_windowed("aggregates", nullable_strings());
    });
}
