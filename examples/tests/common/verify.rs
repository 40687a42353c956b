//! What the multi-instance tests check once the instances have stopped: what was committed
//! (read with `read_committed`), against what the feeder wrote, by identity.
//!
//! - Exactly-once: every input identity (key/sequence) is in the audit topic, written
//!   unchanged by the same tasks, exactly once; each key's counts are 1, 2, ..., n, each
//!   exactly once, n being its number of inputs.
//! - At-least-once: no input identity is missing from the audit topic (duplicates are
//!   allowed and counted); each key's counts 1..=n each appear at least once, and its final
//!   count is at least n.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use super::feed::{Fed, key};
use super::{CountTopics, Position};

/// The processing guarantee a test runs under, and checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guarantee {
    ExactlyOnce,
    AtLeastOnce,
}

impl Guarantee {
    /// Its `processing.guarantee` value.
    pub fn config(self) -> &'static str {
        match self {
            Guarantee::ExactlyOnce => "exactly_once_v2",
            Guarantee::AtLeastOnce => "at_least_once",
        }
    }

    /// How many times each identity or count may appear: its rule's name.
    fn times(self) -> &'static str {
        match self {
            Guarantee::ExactlyOnce => "exactly once",
            Guarantee::AtLeastOnce => "at least once",
        }
    }
}

/// Input records with a problem, per input partition: how many, and their first and last
/// input offsets.
#[derive(Default)]
pub struct Spread(BTreeMap<i32, (usize, i64, i64)>);

impl Spread {
    pub fn add(&mut self, (partition, offset): Position) {
        let e = self.0.entry(partition).or_insert((0, offset, offset));
        *e = (e.0 + 1, e.1.min(offset), e.2.max(offset));
    }

    /// How many records in all.
    pub fn total(&self) -> usize {
        self.0.values().map(|(n, _, _)| n).sum()
    }
}

impl fmt::Display for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.total())
    }
}

impl fmt::Debug for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (partition, (n, first, last))) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{partition}: {n} at {first}..={last}")?;
        }
        f.write_str("}")
    }
}

/// What the check found.
pub struct Report {
    pub guarantee: Guarantee,
    /// Input records missing from the audit topic.
    pub missing: Spread,
    /// Input records more than once in the audit topic.
    pub duplicated: Spread,
    /// Committed audit records, and committed counts.
    pub audit_records: usize,
    pub count_records: usize,
    /// Counts in the output more than once (allowed at least once).
    pub counts_duplicated: usize,
    /// What breaks the guarantee's rules, in input order.
    pub problems: Vec<String>,
}

impl Report {
    /// Panics with the first problems unless there are none; `logs` names the instances'
    /// logs.
    pub fn assert_ok(&self, logs: &str) {
        assert!(
            self.problems.is_empty(),
            "{} problems ({}); inputs missing from the audit topic {:?}, inputs duplicated in it \
             {:?} (per input partition: how many, input offsets first..=last); first problems \
             {:#?}; logs: {logs}",
            self.problems.len(),
            self.guarantee.times(),
            self.missing,
            self.duplicated,
            &self.problems[..self.problems.len().min(20)],
        );
    }
}

/// Reads what was committed on `topics` (audit and output, `read_committed`) and checks it
/// against `fed` under `guarantee`.
pub fn verify(bootstrap: &str, topics: &CountTopics, fed: &Fed, guarantee: Guarantee) -> Report {
    let audit = super::identities(bootstrap, topics.audit(), true);
    let counts = super::counts(bootstrap, &topics.output, true);
    let mut report = Report {
        guarantee,
        missing: Spread::default(),
        duplicated: Spread::default(),
        audit_records: audit.values().map(Vec::len).sum(),
        count_records: counts.values().flat_map(HashMap::values).map(Vec::len).sum(),
        counts_duplicated: 0,
        problems: Vec::new(),
    };
    check_identities(fed, &audit, &mut report);
    check_counts(fed, &counts, &mut report);
    report
}

/// Reads what was committed on audit topic `audit` (`read_committed`) and checks it against
/// `fed` under `guarantee`, without the counts (an output topic deleted, say).
pub fn verify_audit(bootstrap: &str, audit: &str, fed: &Fed, guarantee: Guarantee) -> Report {
    let audit = super::identities(bootstrap, audit, true);
    let mut report = Report {
        guarantee,
        missing: Spread::default(),
        duplicated: Spread::default(),
        audit_records: audit.values().map(Vec::len).sum(),
        count_records: 0,
        counts_duplicated: 0,
        problems: Vec::new(),
    };
    check_identities(fed, &audit, &mut report);
    report
}

/// Every input identity in the audit topic (exactly once, or at least once), and nothing
/// else.
fn check_identities(fed: &Fed, audit: &HashMap<String, Vec<Position>>, report: &mut Report) {
    let mut sorted: Vec<(&String, &Position)> = fed.at.iter().collect();
    sorted.sort_by_key(|(_, at)| **at);
    for (id, at) in &sorted {
        if !audit.contains_key(*id) {
            report.missing.add(**at);
            report.problems.push(format!(
                "{id} (input partition {}, offset {}) is not in the audit topic",
                at.0, at.1
            ));
        }
    }
    for (id, at) in audit {
        if !fed.at.contains_key(id) {
            report
                .problems
                .push(format!("{id} in the audit topic at {at:?} was never written"));
        } else if at.len() > 1 {
            report.duplicated.add(fed.at[id]);
            if report.guarantee == Guarantee::ExactlyOnce {
                report.problems.push(format!(
                    "{id} (input {:?}) is {} times in the audit topic, at {at:?}",
                    fed.at[id],
                    at.len()
                ));
            }
        }
    }
}

/// Each key's counts: 1..=n exactly once each (the highest being n), or at least once each
/// with a final count of at least n.
fn check_counts(fed: &Fed, counts: &HashMap<String, HashMap<u64, Vec<Position>>>, report: &mut Report) {
    let exactly_once = report.guarantee == Guarantee::ExactlyOnce;
    for (k, n) in fed.per_key.iter().enumerate() {
        let key = key(k);
        let seen = counts.get(&key).cloned().unwrap_or_default();
        if exactly_once {
            let last = seen.keys().max().copied().unwrap_or(0);
            if last != *n {
                report
                    .problems
                    .push(format!("{key}: final count {last}, {n} inputs"));
            }
        } else {
            // The count of the key's last output record (one partition per key).
            let last = seen
                .iter()
                .flat_map(|(count, at)| at.iter().map(move |at| (at, *count)))
                .max()
                .map_or(0, |(_, count)| count);
            if last < *n {
                report
                    .problems
                    .push(format!("{key}: final count {last}, below its {n} inputs"));
            }
        }
        report.counts_duplicated += seen.values().map(|at| at.len().saturating_sub(1)).sum::<usize>();
        for count in 1..=*n {
            match seen.get(&count).map(Vec::len) {
                Some(1) => {}
                None => report
                    .problems
                    .push(format!("{key}: count {count} missing from the output")),
                Some(times) if exactly_once => report.problems.push(format!(
                    "{key}: count {count} {times} times in the output, at {:?}",
                    seen[&count]
                )),
                Some(_) => {}
            }
        }
    }
}
