//! How nodes, stores and internal topics get their names.
//!
//! Kafka Streams numbers unnamed nodes with one global counter
//! (`KSTREAM-FILTER-0000000003`), so adding an operator anywhere renames every later node,
//! and with them stores, changelogs and repartition topics. Here a name comes from the
//! closest user-given name instead:
//!
//! - an operator named by the user (`KStream::named`, or the name of a
//!   `Grouped`/`Materialized`/`Produced`/`Consumed`)
//!   takes that name;
//! - an unnamed operator is named `<parent>-<operator>` (`words-source-filter`); a second
//!   unnamed operator of the same kind on the same parent gets `-2`, and so on;
//! - a source is named `<topic>-source` (several topics joined with `+`);
//! - a store is the `Materialized` name, else `<operator node>-store`;
//! - a repartition topic is `<application.id>-<base>-repartition`, where `<base>` is the
//!   `Grouped` name, else `<node before it>-group`; its sink and source nodes are
//!   `<base>-sink` and `<base>-source`.
//!
//! Adding an operator therefore renames nothing outside its own descendants, and naming an
//! operator pins the names of everything below it.

//!
//! [`Naming::KafkaStreams`] (set by `StreamsBuilder::with_kafka_streams_names`) names
//! unnamed nodes, stores and repartition topics as Kafka Streams does instead, for an
//! application that takes over the topics of a running Kafka Streams application whose
//! steps were left unnamed: `KSTREAM-FILTER-0000000003`, `KSTREAM-AGGREGATE-STATE-STORE-
//! 0000000001`, `<store>-repartition`. Each generated name takes the next value of one
//! counter, in the order Kafka Streams' DSL takes them, including the values Kafka Streams
//! takes without naming anything with them.

use std::collections::BTreeSet;

/// How unnamed nodes, stores and repartition topics are named.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Naming {
    /// Each name derives from the closest user-given name (the rule of the
    /// [module docs](self)); adding an operator renames only its own
    /// descendants.
    #[default]
    Derived,
    /// Kafka Streams' names: an operator prefix and one counter for the whole topology
    /// (`KSTREAM-MAP-0000000002`). Adding an operator renames every later unnamed node,
    /// store and topic, as in Kafka Streams.
    KafkaStreams,
}

/// What a node is an operator of: the same operator has another Kafka Streams prefix on a
/// table (`KTABLE-FILTER-`) than on a stream (`KSTREAM-FILTER-`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum On {
    Stream,
    Table,
}

/// Hands out node names by the rule of the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Namer {
    used: BTreeSet<String>,
    naming: Naming,
    /// The next value of Kafka Streams' counter.
    index: u64,
}

impl Namer {
    /// The naming scheme in use.
    pub fn naming(&self) -> Naming {
        self.naming
    }

    /// Switches to `naming`, for names handed out from now on.
    pub fn set_naming(&mut self, naming: Naming) {
        self.naming = naming;
    }

    /// Claims `given`, or derives `<parent>-<op>` (numbered on collision), or under
    /// [`Naming::KafkaStreams`] generates Kafka Streams' name for `op` on a node of kind
    /// `on`. Returns the name and whether a user-given name was already taken.
    ///
    /// Under [`Naming::KafkaStreams`] an operator's user-given name takes a value of the
    /// counter all the same, as in Kafka Streams; a name claimed with no operator (`op`
    /// empty: a name made from another one) takes none.
    pub fn name(&mut self, given: Option<&str>, parent: &str, op: &str, on: On) -> (String, bool) {
        if let Some(g) = given {
            if !op.is_empty() {
                self.burn();
            }
            let fresh = self.used.insert(g.to_owned());
            return (g.to_owned(), !fresh);
        }
        if self.naming == Naming::KafkaStreams {
            let name = self.generate(&kafka_prefix(op, on));
            self.used.insert(name.clone());
            return (name, false);
        }
        let base = format!("{parent}-{op}");
        let mut candidate = base.clone();
        let mut n = 2;
        while self.used.contains(&candidate) {
            candidate = format!("{base}-{n}");
            n += 1;
        }
        self.used.insert(candidate.clone());
        (candidate, false)
    }

    /// `prefix` followed by the next value of Kafka Streams' counter, in ten digits
    /// (`KSTREAM-AGGREGATE-STATE-STORE-0000000001`).
    pub fn generate(&mut self, prefix: &str) -> String {
        let name = format!("{prefix}{:010}", self.index);
        self.index += 1;
        name
    }

    /// Takes a value of Kafka Streams' counter without naming anything with it, where
    /// Kafka Streams does so.
    pub fn burn(&mut self) {
        if self.naming == Naming::KafkaStreams {
            self.index += 1;
        }
    }
}

/// Whether `name` is one Kafka Streams generated: it names the nodes of a repartition topic
/// named after it by number rather than after the topic.
pub(crate) fn is_generated(name: &str) -> bool {
    let Some((head, digits)) = name.rsplit_once('-') else {
        return false;
    };
    head.starts_with("KSTREAM") && digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Kafka Streams' name prefix of operator `op` (this crate's operator names) on a node of
/// kind `on`.
fn kafka_prefix(op: &str, on: On) -> String {
    let known = match (on, op) {
        (On::Table, "filter") => "KTABLE-FILTER-",
        (On::Table, "map_values") => "KTABLE-MAPVALUES-",
        (On::Table, "to_stream") => "KTABLE-TOSTREAM-",
        (On::Table, "suppress") => "KTABLE-SUPPRESS-",
        (On::Table, "join" | "left_join" | "outer_join") => "KTABLE-MERGE-",
        (On::Table, "group_by") => "KTABLE-SELECT-",
        (On::Table, "count" | "aggregate") => "KTABLE-AGGREGATE-",
        (On::Table, "reduce") => "KTABLE-REDUCE-",
        (On::Table, "table") => "KTABLE-SOURCE-",
        (_, "source") => "KSTREAM-SOURCE-",
        (_, "filter" | "filter_not") => "KSTREAM-FILTER-",
        (_, "map") => "KSTREAM-MAP-",
        (_, "map_values") => "KSTREAM-MAPVALUES-",
        (_, "flat_map") => "KSTREAM-FLATMAP-",
        (_, "flat_map_values") => "KSTREAM-FLATMAPVALUES-",
        (_, "select_key") => "KSTREAM-KEY-SELECT-",
        (_, "peek") => "KSTREAM-PEEK-",
        (_, "foreach") => "KSTREAM-FOREACH-",
        (_, "merge") => "KSTREAM-MERGE-",
        (_, "to" | "sink") => "KSTREAM-SINK-",
        (_, "process") => "KSTREAM-PROCESSOR-",
        (_, "split") => "KSTREAM-BRANCH-",
        (_, "through") => "KSTREAM-REPARTITION-",
        (_, "join") => "KSTREAM-JOIN-",
        (_, "left_join" | "join_global" | "left_join_global") => "KSTREAM-LEFTJOIN-",
        (_, "count" | "aggregate" | "windowed_count" | "windowed_aggregate" | "sliding_count")
        | (_, "sliding_aggregate" | "session_count" | "session_aggregate") => "KSTREAM-AGGREGATE-",
        (_, "reduce" | "windowed_reduce" | "sliding_reduce" | "session_reduce") => "KSTREAM-REDUCE-",
        _ => "",
    };
    if known.is_empty() {
        let kind = if on == On::Table { "KTABLE" } else { "KSTREAM" };
        format!("{kind}-{}-", op.to_uppercase().replace('_', ""))
    } else {
        known.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_follow_the_parent_and_number_siblings() {
        let mut n = Namer::default();
        assert_eq!(n.name(None, "src", "filter", On::Stream).0, "src-filter");
        assert_eq!(n.name(None, "src", "filter", On::Stream).0, "src-filter-2");
        assert_eq!(n.name(None, "src", "map", On::Stream).0, "src-map");
        assert_eq!(
            n.name(Some("mine"), "src", "map", On::Stream),
            ("mine".into(), false)
        );
        assert_eq!(n.name(Some("mine"), "x", "y", On::Stream), ("mine".into(), true));
    }

    #[test]
    fn kafka_streams_names_count_up_across_kinds_and_burns() {
        let mut n = Namer::default();
        n.set_naming(Naming::KafkaStreams);
        assert_eq!(
            n.name(None, "x", "source", On::Stream).0,
            "KSTREAM-SOURCE-0000000000"
        );
        assert_eq!(
            n.generate("KSTREAM-AGGREGATE-STATE-STORE-"),
            "KSTREAM-AGGREGATE-STATE-STORE-0000000001"
        );
        n.burn();
        assert_eq!(
            n.name(None, "x", "filter", On::Table).0,
            "KTABLE-FILTER-0000000003"
        );
        assert_eq!(n.name(Some("given"), "x", "map", On::Stream).0, "given");
        assert_eq!(n.name(Some("given-sink"), "", "", On::Stream).0, "given-sink");
        assert_eq!(
            n.name(None, "x", "map_values", On::Stream).0,
            "KSTREAM-MAPVALUES-0000000005"
        );
    }

    #[test]
    fn generated_names_are_recognised() {
        assert!(is_generated("KSTREAM-AGGREGATE-STATE-STORE-0000000003"));
        assert!(is_generated("KSTREAM-KEY-SELECT-0000000007"));
        assert!(!is_generated("KTABLE-AGGREGATE-STATE-STORE-0000000003"));
        assert!(!is_generated("counts"));
        assert!(!is_generated("KSTREAM-MAP-12"));
    }
}
