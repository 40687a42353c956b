//! The twins of the Java program's `generated-*` cases (`GeneratedNames.java`): topologies
//! whose steps are left unnamed, built with [`StreamsBuilder::with_kafka_streams_names`], so
//! that every node, store and repartition topic must carry the name Kafka Streams generates.
//! Each takes the same steps in the same order as its Java twin.

use std::time::Duration;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{NameDifferences, Topology, TopologyDescription};
use streams_dsl::{
    BufferConfig, Consumed, Grouped, JoinWindows, Materialized, Optimizations, Produced, SessionWindows,
    SlidingWindows, StreamJoined, StreamsBuilder, Suppressed, TimeWindows,
};
use streams_state::serde::NullableSerde;

use super::{Case, check, dsl};

fn builder() -> StreamsBuilder {
    StreamsBuilder::new().with_kafka_streams_names()
}

fn strings() -> Consumed<StringSerde, StringSerde> {
    Consumed::with(StringSerde, StringSerde)
}

fn out() -> Produced<StringSerde, StringSerde> {
    Produced::with(StringSerde, StringSerde)
}

fn nullable_out() -> Produced<StringSerde, NullableSerde<StringSerde>> {
    Produced::with(StringSerde, NullableSerde(StringSerde))
}

fn table(b: &StreamsBuilder, topic: &str) -> streams_dsl::KTable<String, String> {
    b.table(topic, Materialized::with(StringSerde, StringSerde))
}

fn stateless() -> Topology {
    let b = builder();
    let words = b.stream(["words"], strings());
    let kept = words.filter(|_, v| !v.is_empty()).filter_not(|_, v| v.is_empty());
    kept.foreach(|_, _| {});
    let branches = kept
        .map_values(|_, v| v.to_uppercase())
        .flat_map_values(|_, v: String| v.split(' ').map(str::to_owned).collect::<Vec<_>>())
        .split()
        .branch(|_, v| v.len() > 5)
        .branch(|_, v| v.len() > 2)
        .default_branch();
    branches[0].to("long-words", out());
    branches[1].select_key(|_, v| v.clone()).to("short-words", out());
    branches[2]
        .peek(|_, _| {})
        .map(|k, v| (v, k))
        .merge(&words.flat_map(|k, v| vec![(k, v)]))
        .to("tiny-words", out());
    dsl(&b)
}

fn count() -> Topology {
    let b = builder();
    b.stream(["lines"], strings())
        .flat_map_values(|_, v: String| v.split(' ').map(str::to_owned).collect::<Vec<_>>())
        .group_by(|_, v| v.clone(), Grouped::new())
        .count(Materialized::new())
        .to_stream()
        .to("counts", Produced::with(StringSerde, NullableSerde(U64Serde)));
    dsl(&b)
}

fn reduce() -> Topology {
    let b = builder();
    b.stream(["in"], strings())
        .group_by_key(Grouped::new())
        .reduce(|a, c| a + &c, Materialized::new())
        .to_stream()
        .to("out", nullable_out());
    b.stream(["in2"], strings())
        .select_key(|_, v| v.clone())
        .group_by_key(Grouped::new())
        .aggregate(
            String::new,
            |_, v, a| a + &v,
            Materialized::with(StringSerde, StringSerde),
        )
        .to_stream()
        .to("out2", nullable_out());
    dsl(&b)
}

fn named_steps() -> Topology {
    let b = builder();
    let lines = b.stream(["lines"], strings());
    lines
        .group_by(|_, v| v.clone(), Grouped::as_("words"))
        .count(Materialized::as_("counts"));
    lines
        .select_key(|_, v| v.clone())
        .group_by_key(Grouped::new())
        .count(Materialized::as_("by-value"));
    dsl(&b)
}

fn tables() -> Topology {
    let b = builder();
    let users = table(&b, "users");
    let ages = table(&b, "ages");
    b.stream(["orders"], strings())
        .join(&users, |_, o, u| format!("{o}{u}"))
        .to("enriched", out());
    b.stream(["orders2"], strings())
        .left_join(&users, |_, o, u: Option<String>| {
            format!("{o}{}", u.unwrap_or_default())
        })
        .to("enriched2", out());
    users
        .join(&ages, |_, n, a| format!("{n}{a}"))
        .to_stream()
        .to("joined", nullable_out());
    users
        .left_join(&ages, |_, n, a: Option<String>| {
            format!("{n}{}", a.unwrap_or_default())
        })
        .filter(|_, _| true)
        .map_values_as(|_, v| v, Materialized::with(StringSerde, StringSerde))
        .to_stream()
        .to("joined2", nullable_out());
    dsl(&b)
}

fn windowed() -> Topology {
    let b = builder();
    b.stream(["clicks"], strings())
        .group_by_key(Grouped::new())
        .windowed_by(TimeWindows::of_size_with_grace(
            Duration::from_secs(300),
            Duration::from_secs(60),
        ))
        .count(Materialized::new())
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_stream()
        .foreach(|_, _| {});
    b.stream(["views"], strings())
        .group_by_key(Grouped::new())
        .windowed_by_session(SessionWindows::of_inactivity_gap_no_grace(Duration::from_secs(
            300,
        )))
        .count(Materialized::new())
        .to_stream()
        .foreach(|_, _| {});
    b.stream(["taps"], strings())
        .group_by_key(Grouped::new())
        .windowed_by_sliding(SlidingWindows::of_time_difference_no_grace(Duration::from_secs(
            300,
        )))
        .reduce(|a, c| a + &c, Materialized::new());
    dsl(&b)
}

fn table_group_by() -> Topology {
    let b = builder();
    table(&b, "t")
        .group_by(|k, v| (v.clone(), k.clone()), Grouped::new())
        .count(Materialized::new())
        .to_stream()
        .to("out", Produced::with(StringSerde, NullableSerde(U64Serde)));
    table(&b, "t2")
        .group_by(|k, v| (v.clone(), k.clone()), Grouped::new())
        .reduce(|a, c| a + &c, |a, _| a, Materialized::new())
        .suppress(Suppressed::until_time_limit(
            Duration::from_secs(1),
            BufferConfig::unbounded(),
        ));
    dsl(&b)
}

fn global() -> Topology {
    let b = builder();
    let g = b.global_table("g", Materialized::with(StringSerde, StringSerde));
    b.stream(["s"], strings())
        .join_global(&g, |_, v| v.clone(), |_, a, c| format!("{a}{c}"))
        .left_join_global(
            &g,
            |_, v| v.clone(),
            |_, a, c: Option<String>| format!("{a}{}", c.unwrap_or_default()),
        )
        .to("out", out());
    dsl(&b)
}

fn repartition() -> Topology {
    let b = builder();
    b.stream(["s"], strings())
        .repartition(Grouped::new())
        .to("out", out());
    let rekeyed = b.stream(["s2"], strings()).select_key(|_, v| v.clone());
    rekeyed
        .join(&table(&b, "t3"), |_, a, c| format!("{a}{c}"))
        .to("out2", out());
    dsl(&b)
}

fn stream_joins() -> Topology {
    let b = builder();
    let l = b.stream(["left"], strings());
    let r = b.stream(["right"], strings());
    let w = JoinWindows::of_time_difference_no_grace(Duration::from_secs(60));
    l.join_stream(&r, |_, a, c| format!("{a}{c}"), w, StreamJoined::new())
        .to("inner", out());
    l.left_join_stream(&r, |_, a, c| format!("{a}{c:?}"), w, StreamJoined::new())
        .to("left-out", out());
    l.clone()
        .named("both")
        .outer_join_stream(
            &r,
            |_, a, c| format!("{a:?}{c:?}"),
            w,
            StreamJoined::new().with_store_name("pairs"),
        )
        .to("outer", out());
    l.select_key(|_, v| v.clone())
        .join_stream(&r, |_, a, c| format!("{a}{c}"), w, StreamJoined::new())
        .to("rekeyed", out());
    dsl(&b)
}

fn optimized() -> Topology {
    let b = builder().with_optimization(Optimizations::ALL);
    let users = table(&b, "users");
    let rekeyed = b.stream(["clicks"], strings()).select_key(|_, v| v.clone());
    rekeyed
        .group_by_key(Grouped::new())
        .count(Materialized::new())
        .to_stream()
        .to("c1", Produced::with(StringSerde, NullableSerde(U64Serde)));
    rekeyed
        .group_by_key(Grouped::new())
        .reduce(|a, c| a + &c, Materialized::new())
        .to_stream()
        .to("c2", nullable_out());
    rekeyed.join(&users, |_, a, c| format!("{a}{c}")).to("c3", out());
    dsl(&b)
}

fn cogroup() -> Topology {
    let b = builder();
    let a = b.stream(["a"], strings()).group_by_key(Grouped::new());
    let c = b
        .stream(["c"], strings())
        .select_key(|_, v| v.clone())
        .group_by_key(Grouped::new());
    a.cogroup(|_, v, agg: String| agg + &v)
        .cogroup(&c, |_, v, agg| agg + &v)
        .aggregate(String::new, Materialized::with(StringSerde, StringSerde))
        .to_stream()
        .to("out", nullable_out());
    dsl(&b)
}

fn fk_join() -> Topology {
    let b = builder();
    let left = table(&b, "left");
    let right = table(&b, "right");
    left.join_foreign(
        &right,
        |v: &String| v.clone(),
        |l, r| format!("{l}{r}"),
        Materialized::with(StringSerde, StringSerde),
    )
    .to_stream()
    .to("out", nullable_out());
    left.left_join_foreign(
        &right,
        |v: &String| v.clone(),
        |l, r: Option<String>| format!("{l}{r:?}"),
        Materialized::as_("fk2").with_value_serde(StringSerde),
    );
    dsl(&b)
}

/// How the names of case `name`'s description `ours` differ from Kafka Streams' text
/// `kafka`, for the cases whose graphs differ by design (`None` for the others, compared
/// byte for byte), leaving out the differences that design explains:
/// - `generated-stream-joins`: Kafka Streams writes each side's window store in a node of
///   its own (`KSTREAM-WINDOWED-`); this crate's side nodes write their own store;
/// - `generated-fk-join`: Kafka Streams' foreign-key join has two nodes more than this
///   crate's (only stores and topics are compared), and keeps no store for a result with
///   an unnamed `Materialized`, where this crate keeps one under the name Kafka Streams
///   takes for it (docs/dsl.md, "Kafka Streams' generated names").
pub(super) fn by_names(name: &str, ours: &TopologyDescription, kafka: &str) -> Option<NameDifferences> {
    let mut diff = ours.name_differences(kafka);
    match name {
        "generated-stream-joins" => diff
            .nodes_only_there
            .retain(|n| !n.contains("-WINDOWED-") && !n.ends_with("-windowed")),
        "generated-fk-join" => {
            diff.nodes_only_there.clear();
            diff.nodes_only_here.clear();
            diff.stores_only_here
                .retain(|s| !s.starts_with("KTABLE-FK-JOIN-OUTPUT-STATE-STORE-"));
        }
        _ => return None,
    }
    Some(diff)
}

/// The cases, by the names of their Java twins.
pub(super) const CASES: &[Case] = &[
    Case {
        name: "generated-stateless",
        build: stateless,
        renames: &[],
    },
    Case {
        name: "generated-count",
        build: count,
        renames: &[],
    },
    Case {
        name: "generated-reduce",
        build: reduce,
        renames: &[],
    },
    Case {
        name: "generated-named-steps",
        build: named_steps,
        renames: &[],
    },
    Case {
        name: "generated-tables",
        build: tables,
        renames: &[],
    },
    Case {
        name: "generated-windowed",
        build: windowed,
        renames: &[],
    },
    Case {
        name: "generated-table-group-by",
        build: table_group_by,
        renames: &[],
    },
    Case {
        name: "generated-global",
        build: global,
        renames: &[],
    },
    Case {
        name: "generated-repartition",
        build: repartition,
        renames: &[],
    },
    Case {
        name: "generated-optimized",
        build: optimized,
        renames: &[],
    },
    Case {
        name: "generated-cogroup",
        build: cogroup,
        renames: &[],
    },
    Case {
        name: "generated-fk-join",
        build: fk_join,
        renames: &[],
    },
    Case {
        name: "generated-stream-joins",
        build: stream_joins,
        renames: &[],
    },
];

#[test]
fn generated_stateless_matches_kafka_streams() {
    check("generated-stateless");
}

#[test]
fn generated_count_matches_kafka_streams() {
    check("generated-count");
}

#[test]
fn generated_reduce_matches_kafka_streams() {
    check("generated-reduce");
}

#[test]
fn generated_named_steps_matches_kafka_streams() {
    check("generated-named-steps");
}

#[test]
fn generated_tables_matches_kafka_streams() {
    check("generated-tables");
}

#[test]
fn generated_windowed_matches_kafka_streams() {
    check("generated-windowed");
}

#[test]
fn generated_table_group_by_matches_kafka_streams() {
    check("generated-table-group-by");
}

#[test]
fn generated_global_matches_kafka_streams() {
    check("generated-global");
}

#[test]
fn generated_repartition_matches_kafka_streams() {
    check("generated-repartition");
}

#[test]
fn generated_stream_join_names_match_kafka_streams() {
    check("generated-stream-joins");
}

#[test]
fn generated_optimized_matches_kafka_streams() {
    check("generated-optimized");
}

#[test]
fn generated_cogroup_matches_kafka_streams() {
    check("generated-cogroup");
}

#[test]
fn generated_fk_join_stores_and_topics_match_kafka_streams() {
    check("generated-fk-join");
}
