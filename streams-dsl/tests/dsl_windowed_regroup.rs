//! Re-grouping windowed tables (`KTable::group_by` on a time-window, sliding-window or
//! session aggregation) in the TopologyTestDriver: per-user windows, valued with the user's
//! latest region and click count, are re-grouped into per-region windows summed with an
//! adder and a subtractor. As a user's latest region changes, or sessions merge, rows move
//! between groups or disappear, which only old values from the windowed aggregation get
//! right. The model check recomputes the per-region sums from the per-user table's final
//! rows and compares them with the re-grouped table's final rows, for random clicks.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    Consumed, Grouped, KGroupedStream, KTable, Materialized, Produced, SessionWindowedSerde, SessionWindows,
    SlidingWindows, StreamsBuilder, TimeWindows, Windowed, WindowedSerde,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

/// Which windows the per-user aggregation uses.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Hopping windows of 10 ms advancing by 5 ms, grace 5 ms.
    Hopping,
    /// Sliding windows with a time difference of 10 ms, grace 5 ms.
    Sliding,
    /// Sessions with an inactivity gap of 5 ms, grace 5 ms.
    Session,
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A per-user row `"<region>:<clicks>"` as `(region, clicks)`.
fn row(v: &str) -> (String, u64) {
    match v.split_once(':') {
        Some((r, n)) => (r.to_owned(), n.parse().unwrap_or(0)),
        None => (String::new(), 0),
    }
}

/// `key@start/end`.
fn label(w: &Windowed<String>) -> String {
    format!("{}@{}/{}", w.key, w.start, w.end)
}

/// Folds a click (its region) into a user's window row: the latest region, one more click.
fn fold(_: &String, region: String, acc: String) -> String {
    format!("{region}:{}", row(&acc).1 + 1)
}

/// Clicks (key user, value region) per user and window of `kind`, written to `users`, and
/// their sums per region and window, written to `regions`.
fn topology(b: &StreamsBuilder, kind: Kind) {
    let grouped: KGroupedStream<String, String> = b
        .stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new());
    let store = Materialized::as_("user-windows").with_value_serde(StringSerde);
    let users: KTable<Windowed<String>, String> = match kind {
        Kind::Hopping => grouped
            .windowed_by(TimeWindows::of_size_with_grace(ms(10), ms(5)).advance_by(ms(5)))
            .aggregate(String::new, fold, store),
        Kind::Sliding => grouped
            .windowed_by_sliding(SlidingWindows::of_time_difference_with_grace(ms(10), ms(5)))
            .aggregate(String::new, fold, store),
        // A session ending exactly at the close time is still updated but no longer read
        // with the least retention (as in Kafka Streams), so a record in it starts the
        // session over: a longer retention keeps every open session readable.
        Kind::Session => grouped
            .windowed_by_session(SessionWindows::of_inactivity_gap_with_grace(ms(5), ms(5)))
            .aggregate(
                String::new,
                fold,
                // Merged sessions keep the second operand's region and add up the clicks.
                |_, a, b| {
                    let (r, n) = row(&b);
                    format!("{r}:{}", n + row(&a).1)
                },
                store.with_retention(ms(1000)),
            ),
    };
    let strings = || Produced::with(StringSerde, NullableSerde(StringSerde));
    users
        .to_stream()
        .map(|w, v| (label(&w), v))
        .to("users", strings());
    let grouped = match kind {
        Kind::Session => Grouped::with(SessionWindowedSerde::new(StringSerde), U64Serde),
        _ => Grouped::with(WindowedSerde::new(StringSerde, ms(10)), U64Serde),
    };
    users
        .group_by(
            |w, v| {
                let (region, clicks) = row(v);
                (
                    Windowed {
                        key: region,
                        start: w.start,
                        end: w.end,
                    },
                    clicks,
                )
            },
            grouped.named("by-region"),
        )
        .reduce(|a, b| a + b, |a, b| a - b, Materialized::as_("region-windows"))
        .to_stream()
        .map(|w, v| (label(&w), v))
        .to("regions", Produced::with(StringSerde, NullableSerde(U64Serde)));
}

/// The clicks `(user, region, timestamp)` through a topology of `kind`: the per-user
/// table's and the re-grouped table's final rows.
type Finals = (BTreeMap<String, String>, BTreeMap<String, u64>);

fn run(kind: Kind, clicks: &[(u8, u8, i64)]) -> Finals {
    let b = StreamsBuilder::new();
    topology(&b, kind);
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let input = driver.input_topic("clicks", StringSerde, StringSerde);
    for (user, region, ts) in clicks {
        input
            .pipe_at(format!("u{user}"), format!("r{region}"), *ts)
            .unwrap();
    }
    let mut users = BTreeMap::new();
    let out = driver.output_topic("users", StringSerde, NullableSerde(StringSerde));
    for (k, v) in out.read_key_values().unwrap() {
        match v {
            Some(v) => users.insert(k, v),
            None => users.remove(&k),
        };
    }
    let mut regions = BTreeMap::new();
    let out = driver.output_topic("regions", StringSerde, NullableSerde(U64Serde));
    for (k, v) in out.read_key_values().unwrap() {
        match v {
            Some(v) => regions.insert(k, v),
            None => regions.remove(&k),
        };
    }
    (users, regions)
}

/// The per-region sums the per-user rows give (`key@start/end` -> clicks).
fn recompute(users: &BTreeMap<String, String>) -> BTreeMap<String, u64> {
    let mut sums = BTreeMap::new();
    for (k, v) in users {
        let window = k.split_once('@').map_or("", |(_, w)| w);
        let (region, clicks) = row(v);
        *sums.entry(format!("{region}@{window}")).or_insert(0) += clicks;
    }
    sums
}

/// The re-grouped rows without the groups that lost all their rows (they stay at `0`, as
/// in Kafka Streams).
fn nonzero(regions: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    regions.into_iter().filter(|(_, n)| *n > 0).collect()
}

#[test]
fn a_user_moving_region_within_a_window_moves_its_clicks() {
    let (users, regions) = run(Kind::Hopping, &[(1, 1, 2), (2, 1, 3), (1, 2, 4)]);
    assert_eq!(users["u1@0/10"], "r2:2");
    let expected: BTreeMap<String, u64> = [("r1@0/10".to_owned(), 1), ("r2@0/10".to_owned(), 2)].into();
    assert_eq!(regions, expected, "u1's first click left r1 when u1 moved to r2");
}

#[test]
fn merged_sessions_leave_their_groups() {
    // u1 has two sessions in r1, then a click in r2 between them merges all three.
    let (users, regions) = run(Kind::Session, &[(1, 1, 0), (1, 1, 8), (1, 2, 4)]);
    assert_eq!(users, [("u1@0/8".to_owned(), "r2:3".to_owned())].into());
    let expected: BTreeMap<String, u64> = [
        ("r1@0/0".to_owned(), 0),
        ("r1@8/8".to_owned(), 0),
        ("r2@0/8".to_owned(), 3),
    ]
    .into();
    assert_eq!(regions, expected, "the merged sessions left their groups");
}

#[test]
fn sliding_windows_regroup_as_their_rows_change() {
    let clicks = [(1, 1, 10), (1, 2, 15), (2, 2, 12), (1, 1, 30), (2, 1, 18)];
    let (users, regions) = run(Kind::Sliding, &clicks);
    assert_eq!(nonzero(regions), recompute(&users));
}

fn clicks() -> impl Strategy<Value = Vec<(u8, u8, i64)>> {
    prop::collection::vec((0u8..3, 0u8..3, 0i64..60), 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn regrouped_hopping_windows_match_a_recomputation(clicks in clicks()) {
        let (users, regions) = run(Kind::Hopping, &clicks);
        prop_assert_eq!(nonzero(regions), recompute(&users));
    }

    #[test]
    fn regrouped_sliding_windows_match_a_recomputation(clicks in clicks()) {
        let (users, regions) = run(Kind::Sliding, &clicks);
        prop_assert_eq!(nonzero(regions), recompute(&users));
    }

    #[test]
    fn regrouped_sessions_match_a_recomputation(clicks in clicks()) {
        let (users, regions) = run(Kind::Session, &clicks);
        prop_assert_eq!(nonzero(regions), recompute(&users));
    }
}
