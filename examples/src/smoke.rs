//! The smoke topology of the fault suite (`count-app --smoke`): the keyed count of
//! [`count`](crate::count) written with the DSL, and beside it the operators whose state
//! and repartitioning a fault can break, each with an output a verifier can check record by
//! record. Inputs are the suite's: key `kNN`, value the key's sequence number `0, 1, 2, ...`.
//!
//! ```text
//! input --------------------------------------------------------------> audit (echo)
//!   |--group_by_key--> count (store `counts`) --------------------------> output
//!   |--join(counts)--> "seq:count" ----------------------------------> <output>-joined
//!   |--group_by(group_of)--> repartition --> aggregate Stats ----------> <output>-stats
//!   '--group_by_key--> 10 s tumbling windows --> count ----------------> <output>-windowed
//! ```
//!
//! Every aggregate runs without a cache, so each input gives one output on each branch:
//! under exactly-once each key's counts are `1..=n` once each; each group's stats counts
//! are `1..=N` once each, the last one carrying the group's exact sum, minimum and maximum;
//! each key's windowed counts are `1..=m` once per window, their last values summing to the
//! key's inputs. The join reads the `counts` table after the count branch updated it for
//! the same record (a node's children run in the order they were added), so input `seq`
//! joins `count = seq + 1` exactly, unless a fault let the store and the input offsets
//! part.

use std::time::Duration;

use streams_core::Topology;
use streams_core::serdes::{NullableSerde, StringSerde, U64Serde};
use streams_dsl::{
    Consumed, DslError, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows, WindowedSerde,
};
use streams_state::{Serde, SerdeError};

/// The size of the windowed count's tumbling windows.
pub const WINDOW: Duration = Duration::from_secs(10);

/// How long after a window's end it still takes records: long enough that no record of a
/// run is ever late (the verifier counts every input in some window).
pub const GRACE: Duration = Duration::from_secs(24 * 3600);

/// How many groups the stats branch repartitions the keys into.
pub const GROUPS: u64 = 5;

/// The group of a key on the stats branch: `g0` .. `g4`, by the sum of its bytes.
pub fn group_of(key: &str) -> String {
    let sum: u64 = key.bytes().map(u64::from).sum();
    format!("g{}", sum % GROUPS)
}

/// The output topics of the smoke branches, named after the count's output topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmokeTopics {
    /// Each input joined with its key's count: `"<seq>:<count>"`.
    pub joined: String,
    /// Each group's [`Stats`] after each input.
    pub stats: String,
    /// Each key's count per window ([`WindowedSerde`] keys of [`WINDOW`]).
    pub windowed: String,
}

impl SmokeTopics {
    /// `<output>-joined`, `<output>-stats` and `<output>-windowed`.
    pub fn of(output: &str) -> Self {
        Self {
            joined: format!("{output}-joined"),
            stats: format!("{output}-stats"),
            windowed: format!("{output}-windowed"),
        }
    }

    /// The three names.
    pub fn all(&self) -> [&str; 3] {
        [&self.joined, &self.stats, &self.windowed]
    }
}

/// Count, sum, minimum and maximum of the sequence numbers a group has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// How many inputs.
    pub count: u64,
    /// Their sum.
    pub sum: u64,
    /// The smallest (`u64::MAX` before the first input).
    pub min: u64,
    /// The largest.
    pub max: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Stats {
    /// These stats with one more input `seq`.
    pub fn with(self, seq: u64) -> Self {
        Self {
            count: self.count + 1,
            sum: self.sum + seq,
            min: self.min.min(seq),
            max: self.max.max(seq),
        }
    }
}

/// [`Stats`] as four big-endian `u64`s: count, sum, min, max.
#[derive(Debug, Clone, Copy, Default)]
pub struct StatsSerde;

impl Serde for StatsSerde {
    type Target = Stats;

    fn serialize_into(&self, s: &Stats, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        for n in [s.count, s.sum, s.min, s.max] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        Ok(())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Stats, SerdeError> {
        let words: [u8; 32] = bytes
            .try_into()
            .map_err(|_| SerdeError::new("StatsSerde", format!("{} bytes, not 32", bytes.len())))?;
        let word = |i: usize| u64::from_be_bytes(words[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let (count, sum, min, max) = (word(0), word(1), word(2), word(3));
        Ok(Stats { count, sum, min, max })
    }
}

/// The sequence number of an input value; a value that is not one counts as 0 on the stats
/// branch (the verifier then finds the sum wrong).
fn seq(value: &str) -> u64 {
    value.parse().unwrap_or(0)
}

/// The topology: see the [module docs](self). `audit` gets every input unchanged.
pub fn smoke_topology(input: &str, output: &str, audit: Option<&str>) -> Result<Topology, DslError> {
    let topics = SmokeTopics::of(output);
    let b = StreamsBuilder::new().require_names();
    let source = b.stream([input], Consumed::with(StringSerde, StringSerde).named("source"));
    if let Some(audit) = audit {
        source.to(
            audit,
            Produced::with(StringSerde, StringSerde).named("audit-sink"),
        );
    }
    // Added before the join, so the join sees the count of the record it joins.
    let counts = source
        .group_by_key(Grouped::as_("by-key"))
        .count(Materialized::as_("counts").without_caching());
    counts.to_stream().named("counts-out").to(
        output,
        Produced::with(StringSerde, NullableSerde(U64Serde)).named("counts-sink"),
    );
    source
        .clone()
        .named("join-counts")
        .join(&counts, |_, seq, count| format!("{seq}:{count}"))
        .to(
            &topics.joined,
            Produced::with(StringSerde, StringSerde).named("joined-sink"),
        );
    source
        .group_by(|key, _| group_of(key), Grouped::as_("by-group"))
        .aggregate(
            Stats::default,
            |_, value, stats| stats.with(seq(&value)),
            Materialized::as_("stats")
                .with_value_serde(StatsSerde)
                .without_caching(),
        )
        .to_stream()
        .named("stats-out")
        .to(
            &topics.stats,
            Produced::with(StringSerde, NullableSerde(StatsSerde)).named("stats-sink"),
        );
    source
        .group_by_key(Grouped::as_("by-key-windowed"))
        .windowed_by(TimeWindows::of_size_with_grace(WINDOW, GRACE))
        .count(Materialized::as_("windowed-counts").without_caching())
        .to_stream()
        .named("windowed-out")
        .to(
            &topics.windowed,
            Produced::with(WindowedSerde::new(StringSerde, WINDOW), NullableSerde(U64Serde))
                .named("windowed-sink"),
        );
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_round_trip_and_add() {
        let s = Stats::default().with(3).with(1).with(7);
        assert_eq!(
            s,
            Stats {
                count: 3,
                sum: 11,
                min: 1,
                max: 7
            }
        );
        assert_eq!(
            StatsSerde
                .deserialize(&StatsSerde.serialize(&s).unwrap())
                .unwrap(),
            s
        );
        assert!(StatsSerde.deserialize(&[0; 31]).is_err());
    }

    #[test]
    fn keys_spread_over_every_group() {
        let groups: std::collections::BTreeSet<String> =
            (0..60).map(|k| group_of(&format!("k{k:02}"))).collect();
        assert_eq!(groups.len(), GROUPS as usize);
    }

    #[test]
    fn every_branch_gives_one_exact_output_per_input_in_the_test_driver() {
        use streams_test_utils::{DriverConfig, TopologyTestDriver};
        let topics = SmokeTopics::of("out");
        let topology = smoke_topology("in", "out", Some("audit")).unwrap();
        let config = DriverConfig::default()
            .application_id("smoke")
            .partitions("in", 3);
        let driver = TopologyTestDriver::new(topology, config).unwrap();
        let input = driver.input_topic("in", StringSerde, StringSerde);
        // Keys k00..k05, 4 inputs each, 6 s apart: windows [0, 10 s) and [10 s, 20 s).
        for seq in 0..4u64 {
            for k in 0..6 {
                input
                    .pipe_at(format!("k{k:02}"), seq.to_string(), seq as i64 * 6_000)
                    .unwrap();
            }
        }
        let audit = driver.output_topic("audit", StringSerde, StringSerde);
        assert_eq!(audit.read_key_values().unwrap().len(), 24);
        let joined = driver
            .output_topic(&topics.joined, StringSerde, StringSerde)
            .read_key_values()
            .unwrap();
        assert_eq!(joined.len(), 24);
        for (_, value) in &joined {
            let (seq, count) = value.split_once(':').unwrap();
            assert_eq!(
                count.parse::<u64>().unwrap(),
                seq.parse::<u64>().unwrap() + 1,
                "{value}"
            );
        }
        let stats = driver
            .output_topic(&topics.stats, StringSerde, NullableSerde(StatsSerde))
            .read_key_values()
            .unwrap();
        assert_eq!(stats.len(), 24);
        let mut last = std::collections::BTreeMap::new();
        for (group, s) in stats {
            last.insert(group, s.unwrap());
        }
        let total: u64 = last.values().map(|s| s.count).sum();
        let sum: u64 = last.values().map(|s| s.sum).sum();
        assert_eq!((total, sum), (24, 6 * (1 + 2 + 3)));
        assert!(last.values().all(|s| s.min == 0 && s.max == 3));
        let windowed = driver
            .output_topic(
                &topics.windowed,
                WindowedSerde::new(StringSerde, WINDOW),
                NullableSerde(U64Serde),
            )
            .read_key_values()
            .unwrap();
        let mut per_window = std::collections::BTreeMap::new();
        for (w, n) in windowed {
            per_window.insert((w.key, w.start), n.unwrap());
        }
        // 0 s and 6 s in the first window, 12 s and 18 s in the second.
        assert_eq!(per_window.len(), 12);
        assert!(per_window.values().all(|n| *n == 2), "{per_window:?}");
    }
}
