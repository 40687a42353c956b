//! Click analytics written with the DSL: clicks per user and per region in one-minute
//! event-time windows, enriched from a table of users.
//!
//! ```text
//! clicks (user -> page, event time) --left_join_global(users: user -> region)-->
//!   group_by_key --windowed_by(1 min, grace)--> aggregate (clicks, region) per user and window
//!     --> `per-user` topic
//!     --group_by (region, window)--> reduce(adder +, subtractor -) per region and window
//!       --> `per-region` topic
//! ```
//!
//! The per-user windows are computed where the clicks are read: the clicks topic is keyed by
//! user, so no repartition comes before the window, and a task's stream time follows its own
//! partition's event times. A click is at most [`ClickPlan::jitter`] out of order within its
//! partition, less than the grace period, so no click is late and every count is exact,
//! whatever the interleaving of partitions. The per-region totals re-group the per-user
//! table through a repartition topic: an update of a user's window subtracts its old count
//! from its region's window and adds the new one, so the totals end exact in whatever order
//! the tasks' updates meet.
//!
//! [`ClickPlan`] generates the clicks (seeded, so a run can be repeated) and the expected
//! results; [`run`] writes the inputs, runs the application and reads both output topics
//! until they hold exactly the expected results.

mod run;

use std::collections::BTreeMap;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use streams_core::Topology;
use streams_core::serdes::{NullableSerde, PairSerde, StringSerde, U64Serde};
use streams_dsl::{
    Consumed, DslError, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows, Windowed, WindowedSerde,
};

pub use run::{ClickRun, RunOptions, run};

/// The region of users that the users table does not know.
pub const UNKNOWN_REGION: &str = "unknown";

/// The regions users live in.
pub const REGIONS: [&str; 5] = ["eu-west", "eu-north", "us-east", "us-west", "ap-south"];

/// The topics of one run.
#[derive(Debug, Clone)]
pub struct ClickTopics {
    /// Clicks: key user id, value page, timestamp the click's event time.
    pub clicks: String,
    /// Users: key user id, value region (a compacted table, read as a global table).
    pub users: String,
    /// Per user and window: key [`Windowed`] user, value `(clicks, region)`.
    pub per_user: String,
    /// Per region and window: key [`Windowed`] region, value clicks.
    pub per_region: String,
}

impl ClickTopics {
    /// The topics named `<prefix>-clicks`, `-users`, `-per-user` and `-per-region`.
    pub fn prefixed(prefix: &str) -> Self {
        Self {
            clicks: format!("{prefix}-clicks"),
            users: format!("{prefix}-users"),
            per_user: format!("{prefix}-per-user"),
            per_region: format!("{prefix}-per-region"),
        }
    }

    /// All four names.
    pub fn all(&self) -> [&str; 4] {
        [&self.clicks, &self.users, &self.per_user, &self.per_region]
    }
}

/// The serde of the per-user values: `(clicks, region)`.
pub fn per_user_value_serde() -> PairSerde<U64Serde, StringSerde> {
    PairSerde(U64Serde, StringSerde)
}

/// The topology: see the [module docs](self). `window` is the tumbling window's size,
/// `grace` how long after its end a window still takes clicks.
pub fn click_topology(topics: &ClickTopics, window: Duration, grace: Duration) -> Result<Topology, DslError> {
    let b = StreamsBuilder::new().require_names();
    let users = b.global_table(
        &topics.users,
        Materialized::as_("users")
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde),
    );
    let per_user = b
        .stream(
            [topics.clicks.as_str()],
            Consumed::with(StringSerde, StringSerde).named("clicks"),
        )
        .named("with-region")
        .left_join_global(
            &users,
            |user, _| user.clone(),
            |_, _page, region: Option<String>| region.unwrap_or_else(|| UNKNOWN_REGION.to_owned()),
        )
        .group_by_key(Grouped::as_("by-user"))
        .windowed_by(TimeWindows::of_size_with_grace(window, grace))
        .aggregate(
            || (0, String::new()),
            |_, region, (clicks, _)| (clicks + 1, region),
            Materialized::as_("clicks-per-user").with_value_serde(per_user_value_serde()),
        );
    per_user.to_stream().named("per-user-out").to(
        &topics.per_user,
        Produced::with(
            WindowedSerde::new(StringSerde, window),
            NullableSerde(per_user_value_serde()),
        ),
    );
    per_user
        .group_by(
            |w: &Windowed<String>, (clicks, region): &(u64, String)| {
                let region = Windowed {
                    key: region.clone(),
                    start: w.start,
                    end: w.end,
                };
                (region, *clicks)
            },
            Grouped::as_("by-region")
                .with_key_serde(WindowedSerde::new(StringSerde, window))
                .with_value_serde(U64Serde),
        )
        .reduce(
            |total, clicks| total + clicks,
            |total, clicks| total - clicks,
            Materialized::as_("clicks-per-region"),
        )
        .to_stream()
        .named("per-region-out")
        .to(
            &topics.per_region,
            Produced::with(WindowedSerde::new(StringSerde, window), NullableSerde(U64Serde)),
        );
    b.build()
}

/// One click.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Click {
    /// The user id (the record key).
    pub user: String,
    /// The page (the record value).
    pub page: String,
    /// The event time (ms), the record's timestamp.
    pub timestamp: i64,
}

/// What a run generates: the users, the clicks and their expected windows.
#[derive(Debug, Clone)]
pub struct ClickPlan {
    /// Users `user-0` .. `user-<users - 1>`.
    pub users: u32,
    /// Clicks generated.
    pub clicks: u64,
    /// The window size.
    pub window: Duration,
    /// How far a click's time may be from its place in the sequence, either way.
    pub jitter: Duration,
    /// The event time of the first click (ms).
    pub start_ms: i64,
    /// Event time between two consecutive clicks in the sequence (ms).
    pub spacing_ms: i64,
    /// The random seed.
    pub seed: u64,
}

impl ClickPlan {
    /// `clicks` clicks of `users` users, 20 ms of event time apart, up to 5 s out of order,
    /// from 2026-01-01T00:00:00Z, in windows of `window`.
    pub fn new(users: u32, clicks: u64, window: Duration) -> Self {
        Self {
            users,
            clicks,
            window,
            jitter: Duration::from_secs(5),
            start_ms: 1_767_225_600_000,
            spacing_ms: 20,
            seed: 42,
        }
    }

    /// The user id of user `n`.
    pub fn user_id(n: u32) -> String {
        format!("user-{n}")
    }

    /// User `n`'s region in the users table, `None` for every 20th user (not in the table).
    pub fn region_of(n: u32) -> Option<&'static str> {
        (n % 20 != 19).then(|| REGIONS[n as usize % REGIONS.len()])
    }

    /// The users table: `(user id, region)` of every user with a region.
    pub fn table(&self) -> impl Iterator<Item = (String, &'static str)> + use<> {
        (0..self.users).filter_map(|n| Self::region_of(n).map(|r| (Self::user_id(n), r)))
    }

    /// The clicks, in the order they are written.
    pub fn generate(&self) -> impl Iterator<Item = Click> + use<> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let jitter = self.jitter.as_millis() as i64;
        let (users, start, spacing) = (self.users.max(1), self.start_ms, self.spacing_ms);
        (0..self.clicks).map(move |i| {
            let user = rng.random_range(0..users);
            let offset = rng.random_range(-jitter..=jitter);
            Click {
                user: Self::user_id(user),
                page: format!("/page/{}", rng.random_range(0..50)),
                timestamp: start + i as i64 * spacing + offset,
            }
        })
    }

    fn window_start(&self, timestamp: i64) -> i64 {
        let size = self.window.as_millis() as i64;
        timestamp - timestamp.rem_euclid(size)
    }

    /// The expected final per-user results: `(user, window start) -> (clicks, region)`.
    pub fn expected_per_user(&self) -> BTreeMap<(String, i64), (u64, String)> {
        let mut out: BTreeMap<(String, i64), (u64, String)> = BTreeMap::new();
        for click in self.generate() {
            let n: u32 = click.user["user-".len()..].parse().unwrap_or(u32::MAX);
            let region = Self::region_of(n).unwrap_or(UNKNOWN_REGION);
            let entry = out
                .entry((click.user, self.window_start(click.timestamp)))
                .or_insert_with(|| (0, region.to_owned()));
            entry.0 += 1;
        }
        out
    }

    /// The expected final per-region results: `(region, window start) -> clicks`.
    pub fn expected_per_region(&self) -> BTreeMap<(String, i64), u64> {
        let mut out = BTreeMap::new();
        for ((_, start), (clicks, region)) in self.expected_per_user() {
            *out.entry((region, start)).or_insert(0) += clicks;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use streams_core::serdes::{NullableSerde, StringSerde, U64Serde};
    use streams_test_utils::{DriverConfig, TopologyTestDriver};

    use super::*;

    const WINDOW: Duration = Duration::from_secs(60);

    fn latest<K: Ord, V>(records: Vec<(K, Option<V>)>) -> BTreeMap<K, V> {
        let mut out = BTreeMap::new();
        for (k, v) in records {
            match v {
                Some(v) => out.insert(k, v),
                None => out.remove(&k),
            };
        }
        out
    }

    #[test]
    fn the_topology_computes_the_plans_results_in_the_test_driver() {
        let topics = ClickTopics::prefixed("t");
        let topology = click_topology(&topics, WINDOW, Duration::from_secs(60)).unwrap();
        let config = DriverConfig::default()
            .application_id("clicks")
            .partitions(&topics.clicks, 3)
            .partitions(&topics.users, 2);
        let driver = TopologyTestDriver::new(topology, config).unwrap();
        let plan = ClickPlan::new(50, 5_000, WINDOW);
        let users = driver.input_topic(&topics.users, StringSerde, StringSerde);
        for (user, region) in plan.table() {
            users.pipe(user, region.to_owned()).unwrap();
        }
        let clicks = driver.input_topic(&topics.clicks, StringSerde, StringSerde);
        for click in plan.generate() {
            clicks.pipe_at(click.user, click.page, click.timestamp).unwrap();
        }
        let windowed = || WindowedSerde::new(StringSerde, WINDOW);
        let per_user = driver
            .output_topic(
                &topics.per_user,
                windowed(),
                NullableSerde(per_user_value_serde()),
            )
            .read_key_values()
            .unwrap();
        let per_user: BTreeMap<(String, i64), (u64, String)> = latest(per_user)
            .into_iter()
            .map(|(w, v)| ((w.key, w.start), v))
            .collect();
        assert_eq!(per_user, plan.expected_per_user());
        let per_region = driver
            .output_topic(&topics.per_region, windowed(), NullableSerde(U64Serde))
            .read_key_values()
            .unwrap();
        let per_region: BTreeMap<(String, i64), u64> = latest(per_region)
            .into_iter()
            .map(|(w, v)| ((w.key, w.start), v))
            .collect();
        let expected = plan.expected_per_region();
        assert_eq!(per_region, expected);
        assert_eq!(expected.values().sum::<u64>(), 5_000);
        assert!(expected.keys().any(|(region, _)| region == UNKNOWN_REGION));
    }

    #[test]
    fn clicks_are_never_later_than_the_jitter_within_the_sequence() {
        let plan = ClickPlan::new(10, 10_000, WINDOW);
        let mut max = i64::MIN;
        for c in plan.generate() {
            max = max.max(c.timestamp);
            assert!(max - c.timestamp <= 2 * plan.jitter.as_millis() as i64);
        }
    }
}
