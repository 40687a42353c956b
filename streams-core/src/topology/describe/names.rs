//! The names a `describe()` text shows, and how two descriptions' names differ: the check
//! before an application takes over a Kafka Streams application's state, whose stores,
//! changelogs and repartition topics are named after the topology's stores and steps.

use std::collections::BTreeSet;
use std::fmt;

use super::TopologyDescription;

/// The names of a topology's description: its nodes, its stores and the topics its sources
/// read and its sinks write (a sink's topic-name extractor is not a topic, and left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribedNames {
    /// Node names.
    pub nodes: BTreeSet<String>,
    /// Store names (each logged one has the changelog `<application.id>-<store>-changelog`).
    pub stores: BTreeSet<String>,
    /// Topic names, repartition topics as `describe()` shows them (without the application
    /// id).
    pub topics: BTreeSet<String>,
}

impl DescribedNames {
    /// The names in a `describe()` text in Kafka Streams' format, as
    /// `Topology.describe().toString()` prints it in Java (and [`TopologyDescription`]'s
    /// `Display` here). Lines that are not a source, processor or sink line are skipped.
    pub fn parse(text: &str) -> Self {
        let mut names = Self::default();
        for line in text.lines().map(str::trim) {
            let Some((kind, rest)) = line.split_once(": ") else {
                continue;
            };
            let Some((node, detail)) = rest.split_once(" (") else {
                continue;
            };
            let (what, list) = detail.trim_end_matches(')').split_once(": ").unwrap_or(("", ""));
            let items = list
                .trim_start_matches('[')
                .trim_end_matches(']')
                .split(", ")
                .filter(|i| !i.is_empty())
                .map(str::to_owned);
            match (kind, what) {
                ("Source", "topics") | ("Sink", "topic") => names.topics.extend(items),
                ("Processor", "stores") => names.stores.extend(items),
                ("Sink", _) => {}
                _ => continue,
            }
            names.nodes.insert(node.to_owned());
        }
        names
    }
}

impl TopologyDescription {
    /// The names this description shows.
    pub fn names(&self) -> DescribedNames {
        let mut names = DescribedNames::default();
        for node in self.subtopologies.iter().flat_map(|s| &s.nodes) {
            names.nodes.insert(node.name.clone());
            match node.kind {
                "Processor" => names.stores.extend(node.detail.iter().cloned()),
                "Sink" if node.extractor => {}
                _ => names.topics.extend(node.detail.iter().cloned()),
            }
        }
        names
    }

    /// How this description's names differ from those of `kafka_streams`, the
    /// `describe()` text of a Kafka Streams application (see [`NameDifferences`]).
    ///
    /// ```
    /// use streams_core::serdes::StringSerde;
    /// use streams_core::{SourceConfig, Topology};
    ///
    /// let mut b = Topology::builder();
    /// b.add_source_with("in", SourceConfig::new(["words"], StringSerde, StringSerde));
    /// let ours = b.build().unwrap().describe();
    /// let java = "Topologies:\n   Sub-topology: 0\n    Source: KSTREAM-SOURCE-0000000000 (topics: [words])\n      --> none\n\n";
    /// let diff = ours.name_differences(java);
    /// assert!(diff.state_compatible());
    /// assert_eq!(diff.nodes_only_there, ["KSTREAM-SOURCE-0000000000"]);
    /// ```
    pub fn name_differences(&self, kafka_streams: &str) -> NameDifferences {
        let (here, there) = (self.names(), DescribedNames::parse(kafka_streams));
        let only = |a: &BTreeSet<String>, b: &BTreeSet<String>| a.difference(b).cloned().collect();
        NameDifferences {
            stores_only_there: only(&there.stores, &here.stores),
            stores_only_here: only(&here.stores, &there.stores),
            topics_only_there: only(&there.topics, &here.topics),
            topics_only_here: only(&here.topics, &there.topics),
            nodes_only_there: only(&there.nodes, &here.nodes),
            nodes_only_here: only(&here.nodes, &there.nodes),
        }
    }
}

/// The names one topology's description has and another's (a Kafka Streams
/// application's, "there") has not, and the reverse ("here"). Stores and topics decide
/// whether state carries over between the two (a store's changelog and a repartition topic
/// are named after them); node names only show in `describe()` and in logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NameDifferences {
    /// Stores only the other description has.
    pub stores_only_there: Vec<String>,
    /// Stores only this description has.
    pub stores_only_here: Vec<String>,
    /// Topics only the other description reads or writes.
    pub topics_only_there: Vec<String>,
    /// Topics only this description reads or writes.
    pub topics_only_here: Vec<String>,
    /// Nodes only the other description has.
    pub nodes_only_there: Vec<String>,
    /// Nodes only this description has.
    pub nodes_only_here: Vec<String>,
}

impl NameDifferences {
    /// Whether both have the same stores and topics, so that the changelogs and
    /// repartition topics one application wrote are the other's.
    pub fn state_compatible(&self) -> bool {
        self.stores_only_there.is_empty()
            && self.stores_only_here.is_empty()
            && self.topics_only_there.is_empty()
            && self.topics_only_here.is_empty()
    }

    /// Whether every name is the same, nodes included.
    pub fn is_empty(&self) -> bool {
        self.state_compatible() && self.nodes_only_there.is_empty() && self.nodes_only_here.is_empty()
    }
}

impl fmt::Display for NameDifferences {
    /// One line per kind of name that differs, or `same names`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("same names");
        }
        let lists = [
            ("stores only in Kafka Streams", &self.stores_only_there),
            ("stores only here", &self.stores_only_here),
            ("topics only in Kafka Streams", &self.topics_only_there),
            ("topics only here", &self.topics_only_here),
            ("nodes only in Kafka Streams", &self.nodes_only_there),
            ("nodes only here", &self.nodes_only_here),
        ];
        let mut first = true;
        for (what, names) in lists.iter().filter(|(_, n)| !n.is_empty()) {
            if !first {
                writeln!(f)?;
            }
            first = false;
            write!(f, "{what}: {}", names.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAVA: &str = "Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [lines])
      --> KSTREAM-AGGREGATE-0000000002
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [counts, other])
      --> KSTREAM-SINK-0000000003
      <-- KSTREAM-SOURCE-0000000000
    Sink: KSTREAM-SINK-0000000003 (topic: out)
      <-- KSTREAM-AGGREGATE-0000000002
    Sink: routed (extractor class: Route)
      <-- KSTREAM-AGGREGATE-0000000002

";

    #[test]
    fn a_kafka_streams_text_gives_its_nodes_stores_and_topics() {
        let names = DescribedNames::parse(JAVA);
        assert_eq!(
            names.nodes,
            BTreeSet::from(
                [
                    "KSTREAM-SOURCE-0000000000",
                    "KSTREAM-AGGREGATE-0000000002",
                    "KSTREAM-SINK-0000000003",
                    "routed"
                ]
                .map(String::from)
            )
        );
        assert_eq!(
            names.stores,
            BTreeSet::from(["counts", "other"].map(String::from))
        );
        assert_eq!(names.topics, BTreeSet::from(["lines", "out"].map(String::from)));
    }

    #[test]
    fn differences_list_each_side_and_tell_state_from_nodes() {
        let ours = TopologyDescription {
            subtopologies: Vec::new(),
        };
        let diff = ours.name_differences(JAVA);
        assert!(!diff.state_compatible());
        assert_eq!(diff.stores_only_there, ["counts", "other"]);
        assert_eq!(diff.topics_only_there, ["lines", "out"]);
        assert!(diff.stores_only_here.is_empty());
        assert!(
            diff.to_string()
                .starts_with("stores only in Kafka Streams: counts, other\n")
        );
        let same = ours.name_differences("Topologies:\n");
        assert!(same.is_empty());
        assert_eq!(same.to_string(), "same names");
    }
}
