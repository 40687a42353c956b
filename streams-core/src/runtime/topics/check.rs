//! The check before a switch: the internal topics a topology needs, against those the
//! cluster holds under the application's prefix. Taking over a running application (a
//! Kafka Streams one included) with the same `application.id` only carries the state
//! over when every changelog and repartition topic this topology needs is already there,
//! with its partition count, and no internal topic of the application is left that this
//! topology would not read: that one belongs to a store or step named otherwise here.

use std::collections::BTreeMap;
use std::fmt;

use super::InternalTopic;

/// The endings of the topics Kafka Streams and this runtime create for an application.
const INTERNAL_SUFFIXES: [&str; 4] = [
    "-changelog",
    "-repartition",
    "-subscription-registration-topic",
    "-subscription-response-topic",
];

/// One internal topic the topology needs, and what the cluster holds under its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeededTopic {
    /// The topic's name (`<application.id>-...`).
    pub name: String,
    /// The partitions the topology needs.
    pub partitions: i32,
    /// The partitions of the cluster's topic of that name; `None` when there is none.
    pub found: Option<i32>,
}

impl NeededTopic {
    /// Whether the cluster has the topic with the partitions needed.
    pub fn is_present(&self) -> bool {
        self.found == Some(self.partitions)
    }
}

/// The internal topics a topology needs against those the cluster holds (see
/// [`KafkaStreams::check_topics`](crate::KafkaStreams::check_topics)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicCheck {
    /// Every internal topic the topology needs, by name.
    pub needed: Vec<NeededTopic>,
    /// Internal topics of the application (its prefix and a changelog, repartition or
    /// foreign-key join topic's ending) that the topology would not use.
    pub unexpected: Vec<String>,
}

impl TopicCheck {
    /// Whether the application can take over the state in the cluster: every topic it
    /// needs is there with its partitions, and no other internal topic of the application
    /// is.
    pub fn is_ready(&self) -> bool {
        self.needed.iter().all(NeededTopic::is_present) && self.unexpected.is_empty()
    }
}

impl fmt::Display for TopicCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.needed {
            match t.found {
                Some(n) if n == t.partitions => writeln!(f, "ok          {} ({n} partitions)", t.name)?,
                Some(n) => writeln!(
                    f,
                    "mismatch    {} has {n} partitions, the topology needs {}",
                    t.name, t.partitions
                )?,
                None => writeln!(f, "missing     {} (the topology would create it empty)", t.name)?,
            }
        }
        for name in &self.unexpected {
            writeln!(f, "unexpected  {name} (no store or step here has that name)")?;
        }
        Ok(())
    }
}

/// Compares the topology's `plan` with the topics `listed` (name → partitions) of
/// application `app_id`.
pub(crate) fn compare(plan: &[InternalTopic], listed: &BTreeMap<String, i32>, app_id: &str) -> TopicCheck {
    let mut needed: Vec<NeededTopic> = plan
        .iter()
        .map(|t| NeededTopic {
            name: t.name.clone(),
            partitions: t.partitions,
            found: listed.get(&t.name).copied(),
        })
        .collect();
    needed.sort_by(|a, b| a.name.cmp(&b.name));
    let prefix = format!("{app_id}-");
    let unexpected = listed
        .keys()
        .filter(|name| name.starts_with(&prefix))
        .filter(|name| INTERNAL_SUFFIXES.iter().any(|s| name.ends_with(s)))
        .filter(|name| !plan.iter().any(|t| &t.name == *name))
        .cloned()
        .collect();
    TopicCheck { needed, unexpected }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, partitions: i32) -> InternalTopic {
        InternalTopic {
            name: name.into(),
            partitions,
            config: BTreeMap::new(),
        }
    }

    #[test]
    fn needed_topics_are_matched_by_name_and_partitions() {
        let plan = [
            topic("app-counts-changelog", 2),
            topic("app-by-group-repartition", 2),
        ];
        let listed = BTreeMap::from([
            ("app-counts-changelog".to_owned(), 2),
            ("app-by-group-repartition".to_owned(), 4),
            ("other-counts-changelog".to_owned(), 2),
            ("app-output".to_owned(), 2),
        ]);
        let check = compare(&plan, &listed, "app");
        assert_eq!(
            check.needed,
            [
                NeededTopic {
                    name: "app-by-group-repartition".into(),
                    partitions: 2,
                    found: Some(4)
                },
                NeededTopic {
                    name: "app-counts-changelog".into(),
                    partitions: 2,
                    found: Some(2)
                },
            ]
        );
        assert!(
            check.unexpected.is_empty(),
            "other applications' and non-internal topics are not"
        );
        assert!(!check.is_ready());
        assert!(
            check
                .to_string()
                .contains("mismatch    app-by-group-repartition has 4 partitions")
        );
    }

    #[test]
    fn an_internal_topic_the_topology_would_not_use_is_unexpected() {
        // A Java step left unnamed: its generated store name is not this topology's.
        let plan = [topic("app-counts-changelog", 1)];
        let listed = BTreeMap::from([
            ("app-counts-changelog".to_owned(), 1),
            (
                "app-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog".to_owned(),
                1,
            ),
            ("app-fk-subscription-response-topic".to_owned(), 1),
        ]);
        let check = compare(&plan, &listed, "app");
        assert_eq!(
            check.unexpected,
            [
                "app-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog",
                "app-fk-subscription-response-topic"
            ]
        );
        assert!(!check.is_ready());
        let ready = compare(
            &plan,
            &BTreeMap::from([("app-counts-changelog".to_owned(), 1)]),
            "app",
        );
        assert!(ready.is_ready());
        assert_eq!(
            ready.to_string(),
            "ok          app-counts-changelog (1 partitions)\n"
        );
        let empty = compare(&plan, &BTreeMap::new(), "app");
        assert!(!empty.is_ready());
        assert!(empty.to_string().starts_with("missing     app-counts-changelog"));
    }
}
