//! Topology optimizations, as Kafka Streams' `topology.optimization` property names them.
//!
//! - `reuse.ktable.source.topics`: a table read from a topic with
//!   [`StreamsBuilder::table`](crate::StreamsBuilder::table) and kept in a logged store gets
//!   no `<application.id>-<store>-changelog` topic; its store is restored from the table's
//!   own topic, up to the group's committed offset (see
//!   [`TopologyBuilder::use_source_topic_as_changelog`](streams_core::TopologyBuilder::use_source_topic_as_changelog)).
//! - `merge.repartition.topics`: the repartition topics that groupings and joins of one
//!   stream node need are one topic, the first's, read by all of them (an explicit
//!   [`repartition`](crate::KStream::repartition) keeps its own). Its nodes are named after
//!   the topic (`<topic>-sink`, `-source`; under
//!   [`Naming::KafkaStreams`](crate::Naming) also `<topic>-filter`), as Kafka Streams names
//!   the topic it merges into. Kafka Streams also merges the repartitions of different nodes
//!   downstream of one key change, moving the steps between the key change and the
//!   repartitions behind the merged topic; here only those of one node are merged.
//!
//! `all` turns on every optimization implemented here; the default, as in Kafka Streams, is
//! `none`. Names of Kafka Streams optimizations not implemented here (`single.store.self.join`)
//! are rejected rather than silently ignored.

use std::str::FromStr;

/// The value of Kafka Streams' `topology.optimization` property that enables every
/// optimization.
pub const OPTIMIZE_ALL: &str = "all";
/// The value that enables none (the default).
pub const NO_OPTIMIZATION: &str = "none";
/// The name of the optimization reusing a table's source topic as its changelog.
pub const REUSE_KTABLE_SOURCE_TOPICS: &str = "reuse.ktable.source.topics";
/// The name of the optimization merging the repartition topics of one stream.
pub const MERGE_REPARTITION_TOPICS: &str = "merge.repartition.topics";

/// Which topology optimizations a [`StreamsBuilder`](crate::StreamsBuilder) applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Optimizations {
    reuse_ktable_source_topics: bool,
    merge_repartition_topics: bool,
}

impl Optimizations {
    /// No optimization (the default).
    pub const NONE: Self = Self {
        reuse_ktable_source_topics: false,
        merge_repartition_topics: false,
    };
    /// Every optimization implemented.
    pub const ALL: Self = Self {
        reuse_ktable_source_topics: true,
        merge_repartition_topics: true,
    };

    /// Whether tables read from a topic restore their store from that topic instead of a
    /// changelog of their own.
    pub fn reuses_ktable_source_topics(&self) -> bool {
        self.reuse_ktable_source_topics
    }

    /// Whether the groupings and joins of one stream node share one repartition topic.
    pub fn merges_repartition_topics(&self) -> bool {
        self.merge_repartition_topics
    }
}

/// A `topology.optimization` value that is not `none`, `all` or a comma-separated list of
/// implemented optimization names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid topology.optimization `{value}`: expected `none`, `all` or a comma-separated list of \
     optimizations from [reuse.ktable.source.topics, merge.repartition.topics]"
)]
pub struct InvalidOptimization {
    /// The value given.
    pub value: String,
}

impl FromStr for Optimizations {
    type Err = InvalidOptimization;

    /// Parses a `topology.optimization` value: `none`, `all`, or a comma-separated list of
    /// optimization names (surrounding spaces ignored, as Kafka Streams does).
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidOptimization {
            value: value.to_owned(),
        };
        match value.trim() {
            NO_OPTIMIZATION => return Ok(Self::NONE),
            OPTIMIZE_ALL => return Ok(Self::ALL),
            _ => {}
        }
        let mut out = Self::NONE;
        for name in value.split(',').map(str::trim) {
            match name {
                REUSE_KTABLE_SOURCE_TOPICS => out.reuse_ktable_source_topics = true,
                MERGE_REPARTITION_TOPICS => out.merge_repartition_topics = true,
                _ => return Err(invalid()),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_streams_values() {
        assert_eq!("none".parse(), Ok(Optimizations::NONE));
        assert_eq!(" all ".parse(), Ok(Optimizations::ALL));
        assert_eq!(
            "reuse.ktable.source.topics, merge.repartition.topics".parse(),
            Ok(Optimizations::ALL)
        );
        let reuse: Optimizations = "reuse.ktable.source.topics".parse().unwrap();
        assert!(reuse.reuses_ktable_source_topics() && !reuse.merges_repartition_topics());
        let merge: Optimizations = "merge.repartition.topics".parse().unwrap();
        assert!(merge.merges_repartition_topics() && !merge.reuses_ktable_source_topics());
        assert!(Optimizations::default() == Optimizations::NONE);
        assert!(Optimizations::ALL.reuses_ktable_source_topics());
    }

    #[test]
    fn rejects_unknown_and_unimplemented_names() {
        for bad in [
            "",
            "All,none",
            "single.store.self.join",
            "reuse.ktable.source.topics,x",
            "nonee",
        ] {
            let e = bad.parse::<Optimizations>().unwrap_err();
            assert_eq!(e.value, bad);
            assert!(e.to_string().contains("topology.optimization"));
        }
    }
}
