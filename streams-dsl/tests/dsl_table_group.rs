//! Re-grouping a table (`KTable::group_by`) and aggregating it with adders and subtractors,
//! in the TopologyTestDriver: rows inserted, updated within their group, moved between
//! groups and deleted; old values through filter, map_values and a table-table join; and a
//! model check of random update sequences against a recomputation from the final table.

use std::collections::BTreeMap;

use proptest::prelude::*;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    BufferConfig, Consumed, DslError, DslIssue, DynSerde, Grouped, KTable, Materialized, Produced,
    StreamsBuilder, Suppressed, TimeWindows,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

type Updates = Vec<(String, Option<u64>)>;

fn up(p: &[(&str, Option<u64>)]) -> Updates {
    p.iter().map(|(k, v)| ((*k).into(), *v)).collect()
}

/// A user row `"<region>:<amount>"` as `(region, amount)`; a malformed row is region `?`.
fn row(v: &str) -> (String, u64) {
    match v.split_once(':') {
        Some((r, a)) => (r.to_owned(), a.parse().unwrap_or(0)),
        None => ("?".to_owned(), 0),
    }
}

/// The users table, keyed by user, valued `"<region>:<amount>"`.
fn users(b: &StreamsBuilder) -> KTable<String, String> {
    b.table("users", Materialized::with(StringSerde, StringSerde))
}

/// Counts and sums of the users per region, written to `counts` and `sums`.
fn count_and_sum(table: &KTable<String, String>, name: &str) {
    let grouped = table.group_by(|_, v| row(v), Grouped::with(StringSerde, U64Serde).named(name));
    grouped
        .count(Materialized::as_(format!("{name}-counts")))
        .to_stream()
        .to("counts", Produced::with(StringSerde, NullableSerde(U64Serde)));
    grouped
        .reduce(
            |a, v| a + v,
            |a, v| a - v,
            Materialized::as_(format!("{name}-sums")),
        )
        .to_stream()
        .to("sums", Produced::with(StringSerde, NullableSerde(U64Serde)));
}

fn driver(b: &StreamsBuilder) -> TopologyTestDriver {
    TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap()
}

fn pipe(driver: &TopologyTestDriver, topic: &str, updates: &[(&str, Option<&str>)]) {
    let input = driver.input_topic(topic, StringSerde, NullableSerde(StringSerde));
    for (k, v) in updates {
        input.pipe((*k).into(), v.map(Into::into)).unwrap();
    }
}

fn read(driver: &TopologyTestDriver, topic: &str) -> Updates {
    driver
        .output_topic(topic, StringSerde, NullableSerde(U64Serde))
        .read_key_values()
        .unwrap()
}

#[test]
fn counts_and_sums_follow_inserts_updates_moves_and_deletes() {
    let b = StreamsBuilder::new();
    count_and_sum(&users(&b), "by-region");
    let driver = driver(&b);
    pipe(
        &driver,
        "users",
        &[
            ("a", Some("eu:5")),
            ("b", Some("us:3")),
            ("a", Some("eu:7")), // same group: one repartition record, one update
            ("a", Some("us:2")), // moves: subtracted from eu, then added to us
            ("b", None),         // deleted: only subtracted
            ("c", None),         // deleting an absent row changes nothing
        ],
    );
    assert_eq!(
        read(&driver, "counts"),
        up(&[
            ("eu", Some(1)),
            ("us", Some(1)),
            ("eu", Some(1)),
            ("eu", Some(0)),
            ("us", Some(2)),
            ("us", Some(1)),
        ])
    );
    assert_eq!(
        read(&driver, "sums"),
        up(&[
            ("eu", Some(5)),
            ("us", Some(3)),
            ("eu", Some(7)),
            ("eu", Some(0)),
            ("us", Some(5)),
            ("us", Some(2)),
        ])
    );
    let sums = driver
        .kv_store::<DynSerde<String>, DynSerde<u64>>("by-region-sums")
        .unwrap();
    assert_eq!(sums.get(&"us".into()).unwrap(), Some(2));
    assert_eq!(sums.get(&"eu".into()).unwrap(), Some(0));
}

#[test]
fn regrouping_goes_through_a_named_repartition_topic() {
    let b = StreamsBuilder::new();
    count_and_sum(&users(&b), "by-region");
    let text = b.build().unwrap().describe().to_string();
    for line in [
        "Processor: by-region-select (stores: [])",
        "Sink: by-region-sink (topic: by-region-repartition)",
        "Source: by-region-source (topics: [by-region-repartition])",
        "Processor: by-region-counts (stores: [by-region-counts])",
        "Processor: by-region-sums (stores: [by-region-sums])",
        "Processor: by-region-counts-to_stream (stores: [])",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }

    // Unnamed: the selecting node, topic and aggregation follow the naming rule.
    let b = StreamsBuilder::new();
    users(&b)
        .group_by(|_, v| row(v), Grouped::with(StringSerde, U64Serde))
        .count(Materialized::new());
    let text = b.build().unwrap().describe().to_string();
    assert!(
        text.contains(
            "Sink: users-table-group_by-group-sink (topic: users-table-group_by-group-repartition)"
        ),
        "{text}"
    );
    assert!(
        text.contains("Processor: users-table-group_by-group-source-count (stores: [users-table-group_by-group-source-count-store])"),
        "{text}"
    );

    // With names required, both the topic and the store must be named.
    let b = StreamsBuilder::new().require_names();
    users(&b)
        .group_by(|_, v| row(v), Grouped::with(StringSerde, U64Serde))
        .count(Materialized::new());
    assert!(matches!(b.build(), Err(DslError::Invalid(issues)) if issues.len() == 2));
}

#[test]
fn aggregate_subtracts_old_values_through_filter_and_map_values() {
    let b = StreamsBuilder::new();
    let big_rows = users(&b).filter(|_, v| row(v).1 >= 3).map_values(|_, v| row(&v));
    // Sum per region of the rows with an amount of at least 3; the aggregate is a list of
    // the users in the group, to check that exactly the right user leaves.
    let members = big_rows
        .group_by(
            |user, (region, _)| (region.clone(), user.clone()),
            Grouped::with(StringSerde, StringSerde).named("by-region"),
        )
        .aggregate(
            String::new,
            |_, user, agg| {
                if agg.is_empty() {
                    user
                } else {
                    format!("{agg},{user}")
                }
            },
            |_, user, agg| {
                agg.split(',')
                    .filter(|u| *u != user)
                    .collect::<Vec<_>>()
                    .join(",")
            },
            Materialized::as_("members").with_value_serde(StringSerde),
        );
    members
        .to_stream()
        .to("members", Produced::with(StringSerde, NullableSerde(StringSerde)));
    let driver = driver(&b);
    pipe(
        &driver,
        "users",
        &[
            ("a", Some("eu:5")),
            ("b", Some("eu:9")),
            ("a", Some("eu:1")), // filtered out now: leaves eu
            ("a", Some("us:4")), // passes again, in us
            ("b", Some("us:2")), // filtered out: leaves eu
            ("a", None),
        ],
    );
    let out = driver
        .output_topic("members", StringSerde, NullableSerde(StringSerde))
        .read_key_values()
        .unwrap();
    let expected: Vec<(String, Option<String>)> = [
        ("eu", "a"),
        ("eu", "a,b"),
        ("eu", "b"),
        ("us", "a"),
        ("eu", ""),
        ("us", ""),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned())))
    .collect();
    assert_eq!(out, expected);
}

#[test]
fn regrouping_a_join_subtracts_the_old_joined_row() {
    let b = StreamsBuilder::new();
    let users = users(&b);
    let tiers = b.table("tiers", Materialized::with(StringSerde, StringSerde));
    // Per tier, the sum of the amounts of the users who have one.
    users
        .join(&tiers, |_, u, t| (t, row(&u).1))
        .group_by(
            |_, (tier, amount)| (tier.clone(), *amount),
            Grouped::with(StringSerde, U64Serde).named("by-tier"),
        )
        .reduce(|a, v| a + v, |a, v| a - v, Materialized::as_("tier-sums"))
        .to_stream()
        .to("sums", Produced::with(StringSerde, NullableSerde(U64Serde)));
    let driver = driver(&b);
    pipe(&driver, "users", &[("a", Some("eu:5")), ("b", Some("eu:3"))]);
    pipe(&driver, "tiers", &[("a", Some("gold")), ("b", Some("gold"))]);
    pipe(&driver, "users", &[("a", Some("eu:7"))]);
    pipe(&driver, "tiers", &[("b", Some("silver")), ("a", None)]);
    assert_eq!(
        read(&driver, "sums"),
        up(&[
            ("gold", Some(5)),
            ("gold", Some(8)),
            ("gold", Some(10)),  // a's 5 replaced by 7 in one update
            ("gold", Some(7)),   // b leaves gold ...
            ("silver", Some(3)), // ... for silver
            ("gold", Some(0)),   // a's tier deleted: the joined row is gone
        ])
    );
}

#[test]
fn to_stream_shows_new_values_only_when_old_values_are_on() {
    let b = StreamsBuilder::new();
    let users = users(&b);
    users
        .to_stream()
        .to("rows", Produced::with(StringSerde, NullableSerde(StringSerde)));
    count_and_sum(&users, "by-region");
    let driver = driver(&b);
    pipe(
        &driver,
        "users",
        &[("a", Some("eu:5")), ("a", Some("us:1")), ("a", None)],
    );
    let rows = driver
        .output_topic("rows", StringSerde, NullableSerde(StringSerde))
        .read_key_values()
        .unwrap();
    let expected: Vec<(String, Option<String>)> = vec![
        ("a".into(), Some("eu:5".into())),
        ("a".into(), Some("us:1".into())),
        ("a".into(), None),
    ];
    assert_eq!(rows, expected);
}

#[test]
fn regrouping_a_suppressed_table_is_a_build_error() {
    let b = StreamsBuilder::new();
    let windowed = b
        .stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .windowed_by(TimeWindows::of_size_no_grace(std::time::Duration::from_secs(60)))
        .count(Materialized::as_("clicks-per-minute"))
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()));
    windowed
        .group_by(
            |w, n| (w.key.clone(), *n),
            Grouped::with(StringSerde, U64Serde).named("g"),
        )
        .count(Materialized::as_("g-counts"));
    match b.build() {
        Err(DslError::Invalid(issues)) => assert!(
            issues
                .iter()
                .any(|i| matches!(i, DslIssue::NoOldValues { operator, .. } if operator == "g-select")),
            "{issues:?}"
        ),
        other => panic!("expected a build error, got {:?}", other.map(|_| ())),
    }
}

/// The counts and sums per region that the final rows give.
fn recompute(rows: &BTreeMap<String, (String, u64)>) -> BTreeMap<String, (u64, u64)> {
    let mut groups = BTreeMap::new();
    for (region, amount) in rows.values() {
        let e = groups.entry(region.clone()).or_insert((0, 0));
        e.0 += 1;
        e.1 += amount;
    }
    groups
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// After every update, the count and sum stores hold what the rows at that point give
    /// (a region emptied keeps `0`), and the last update forwarded per region is the store's.
    #[test]
    fn aggregates_match_a_recomputation_from_the_table(
        updates in prop::collection::vec((0..6usize, prop::option::weighted(0.8, (0..4usize, 0..20u64))), 1..60)
    ) {
        let b = StreamsBuilder::new();
        count_and_sum(&users(&b), "g");
        let driver = driver(&b);
        let input = driver.input_topic("users", StringSerde, NullableSerde(StringSerde));
        let counts = driver.kv_store::<DynSerde<String>, DynSerde<u64>>("g-counts").unwrap();
        let sums = driver.kv_store::<DynSerde<String>, DynSerde<u64>>("g-sums").unwrap();
        let mut rows = BTreeMap::new();
        let mut seen = std::collections::BTreeSet::new();
        for (user, value) in updates {
            let user = format!("u{user}");
            let value = value.map(|(r, a)| (format!("r{r}"), a));
            input.pipe(user.clone(), value.as_ref().map(|(r, a)| format!("{r}:{a}"))).unwrap();
            match value {
                Some(v) => {
                    seen.insert(v.0.clone());
                    rows.insert(user, v);
                }
                None => {
                    rows.remove(&user);
                }
            }
            let expected = recompute(&rows);
            for region in &seen {
                let (n, sum) = expected.get(region).copied().unwrap_or((0, 0));
                prop_assert_eq!(counts.get(region).unwrap(), Some(n), "count of {}", region);
                prop_assert_eq!(sums.get(region).unwrap(), Some(sum), "sum of {}", region);
            }
        }
        let mut last_counts = BTreeMap::new();
        for (k, v) in read(&driver, "counts") {
            last_counts.insert(k, v);
        }
        for (region, n) in &last_counts {
            prop_assert_eq!(*n, counts.get(region).unwrap());
        }
        prop_assert_eq!(last_counts.len(), seen.len());
    }
}
