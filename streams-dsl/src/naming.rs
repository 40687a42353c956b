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

use std::collections::BTreeSet;

/// Hands out node names by the rule of the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Namer {
    used: BTreeSet<String>,
}

impl Namer {
    /// Claims `given`, or derives `<parent>-<op>` (numbered on collision). Returns the name
    /// and whether a user-given name was already taken.
    pub fn name(&mut self, given: Option<&str>, parent: &str, op: &str) -> (String, bool) {
        if let Some(g) = given {
            let fresh = self.used.insert(g.to_owned());
            return (g.to_owned(), !fresh);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_follow_the_parent_and_number_siblings() {
        let mut n = Namer::default();
        assert_eq!(n.name(None, "src", "filter").0, "src-filter");
        assert_eq!(n.name(None, "src", "filter").0, "src-filter-2");
        assert_eq!(n.name(None, "src", "map").0, "src-map");
        assert_eq!(n.name(Some("mine"), "src", "map"), ("mine".into(), false));
        assert_eq!(n.name(Some("mine"), "x", "y"), ("mine".into(), true));
    }
}
