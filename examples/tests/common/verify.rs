//! What the multi-instance tests check once the instances have stopped: what was committed
//! (read with `read_committed`), against what the feeder wrote, by identity.
//!
//! - Exactly-once: every input identity (key/sequence) is in the audit topic, written
//!   unchanged by the same tasks, exactly once; each key's counts are 1, 2, ..., n, each
//!   exactly once, n being its number of inputs.
//! - At-least-once: no input identity is missing from the audit topic (duplicates are
//!   allowed and counted); each key's counts 1..=n each appear at least once, and its final
//!   count is at least n.
//! - At-least-once with instances killed (SIGKILL): the same, except that an aggregate's
//!   counts may skip values. A killed process loses the records it had not sent yet, and
//!   the changelog write of an update may have left while the output of the same update had
//!   not: the task's next owner restores the count past that output and counts the inputs
//!   after the last commit again on top of it. What must hold then is as many distinct
//!   counts as inputs (every input was counted, and its output sent, by the owner whose
//!   commit covered it) and a final count of at least n.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use streams_core::serdes::StringSerde;
use streams_dsl::WindowedSerde;
use streams_examples::smoke::{SmokeTopics, Stats, StatsSerde, WINDOW, group_of};
use streams_state::Serde;

use super::feed::{Fed, key};
use super::{CountTopics, Position};

/// The processing guarantee a test runs under, and checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guarantee {
    ExactlyOnce,
    AtLeastOnce,
    /// At-least-once where instances were killed: counts may skip values (module doc).
    AtLeastOnceKilled,
}

impl Guarantee {
    /// Its `processing.guarantee` value.
    pub fn config(self) -> &'static str {
        match self {
            Guarantee::ExactlyOnce => "exactly_once_v2",
            Guarantee::AtLeastOnce | Guarantee::AtLeastOnceKilled => "at_least_once",
        }
    }

    /// This guarantee's checks after instances were killed (SIGKILL) when `killed`.
    pub fn killed(self, killed: bool) -> Self {
        match self {
            Guarantee::AtLeastOnce if killed => Guarantee::AtLeastOnceKilled,
            other => other,
        }
    }

    /// Whether an aggregate's counts may skip values.
    fn skips(self) -> bool {
        self == Guarantee::AtLeastOnceKilled
    }

    /// How many times each identity or count may appear: its rule's name.
    fn times(self) -> &'static str {
        match self {
            Guarantee::ExactlyOnce => "exactly once",
            Guarantee::AtLeastOnce => "at least once",
            Guarantee::AtLeastOnceKilled => "at least once, counts may skip",
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
        if report.guarantee.skips() {
            if (seen.len() as u64) < *n {
                report.problems.push(format!(
                    "{key}: {} distinct counts in the output, fewer than its {n} inputs",
                    seen.len()
                ));
            }
            continue;
        }
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

/// What the smoke branches wrote (`count-app --smoke`), read with `read_committed`.
pub struct SmokeReport {
    /// Committed records of the join, the stats and the windowed count.
    pub joined: usize,
    pub stats: usize,
    pub windowed: usize,
}

/// Reads the smoke branches' outputs of `output` and adds to `report.problems` what breaks
/// the guarantee's rules (see `streams_examples::smoke`):
///
/// - the join: every input identity exactly once (at least once) with `count == seq + 1`
///   (at least once: `count > seq`);
/// - the stats: each group's counts `1..=N` exactly once (at least once), `N` its inputs; the
///   record of count `N` with the group's exact sum, minimum and maximum (at least once: a
///   count of at least `N`);
/// - the windowed count: per key and window, counts `1..=m` exactly once (at least once),
///   the windows' `m` summing to the key's inputs (at least once: at least them).
pub fn verify_smoke(bootstrap: &str, output: &str, fed: &Fed, report: &mut Report) -> SmokeReport {
    let topics = SmokeTopics::of(output);
    let exactly_once = report.guarantee == Guarantee::ExactlyOnce;
    let times = report.guarantee.times();
    let mut problems = Vec::new();

    // The join: key/seq -> the counts it was joined with.
    let mut joined: HashMap<String, Vec<u64>> = HashMap::new();
    let joined_records = super::read(bootstrap, &topics.joined, true);
    for r in &joined_records {
        let (key, value) = (r.key_str().unwrap(), r.value_str().unwrap());
        let Some((seq, count)) = value
            .split_once(':')
            .and_then(|(s, c)| Some((s.to_owned(), c.parse().ok()?)))
        else {
            problems.push(format!("joined: {key} -> {value:?} is not seq:count"));
            continue;
        };
        joined.entry(format!("{key}/{seq}")).or_default().push(count);
    }
    let mut ids: Vec<&String> = fed.at.keys().collect();
    ids.sort_by_key(|id| fed.at[*id]);
    for id in ids {
        let seq: u64 = id.split_once('/').unwrap().1.parse().unwrap();
        match joined.get(id).map(Vec::as_slice) {
            None | Some([]) => problems.push(format!("joined: {id} missing")),
            Some([count]) if *count == seq + 1 => {}
            Some(counts) if !exactly_once && counts.iter().all(|c| *c > seq) => {}
            Some(counts) => problems.push(format!(
                "joined: {id} joined with counts {counts:?}, not {} {times}",
                seq + 1
            )),
        }
    }
    for id in joined.keys().filter(|id| !fed.at.contains_key(*id)) {
        problems.push(format!("joined: {id} was never written"));
    }

    // The stats: per group, where each count appears and the stats of each.
    let mut stats: HashMap<String, HashMap<u64, Vec<Stats>>> = HashMap::new();
    let stats_records = super::read(bootstrap, &topics.stats, true);
    for r in &stats_records {
        let s = StatsSerde
            .deserialize(r.value.as_deref().unwrap_or_default())
            .unwrap();
        stats
            .entry(r.key_str().unwrap())
            .or_default()
            .entry(s.count)
            .or_default()
            .push(s);
    }
    let mut expected: BTreeMap<String, Stats> = BTreeMap::new();
    for (k, n) in fed.per_key.iter().enumerate() {
        let group = expected.entry(group_of(&key(k))).or_default();
        for seq in 0..*n {
            *group = group.with(seq);
        }
    }
    for (group, want) in &expected {
        let seen = stats.get(group).cloned().unwrap_or_default();
        let top = seen.keys().max().copied().unwrap_or(0);
        if exactly_once {
            if top != want.count {
                problems.push(format!("stats: {group}: last count {top}, {} inputs", want.count));
            }
            match seen.get(&want.count).map(Vec::as_slice) {
                Some([got]) if got == want => {}
                got => problems.push(format!("stats: {group}: final {got:?}, expected {want:?}")),
            }
        } else if top < want.count {
            problems.push(format!(
                "stats: {group}: last count {top}, below its {} inputs",
                want.count
            ));
        }
        if report.guarantee.skips() {
            if (seen.len() as u64) < want.count {
                problems.push(format!(
                    "stats: {group}: {} distinct counts, fewer than its {} inputs",
                    seen.len(),
                    want.count
                ));
            }
            continue;
        }
        for count in 1..=want.count {
            match seen.get(&count).map(Vec::len) {
                None => problems.push(format!("stats: {group}: count {count} missing")),
                Some(n) if n > 1 && exactly_once => {
                    problems.push(format!("stats: {group}: count {count} {n} times"))
                }
                Some(_) => {}
            }
        }
    }

    // The windowed count: per key, per window start, where each count appears.
    let mut windowed: HashMap<String, BTreeMap<i64, HashMap<u64, usize>>> = HashMap::new();
    let windowed_records = super::read(bootstrap, &topics.windowed, true);
    let windowed_key = WindowedSerde::new(StringSerde, WINDOW);
    for r in &windowed_records {
        let w = windowed_key
            .deserialize(r.key.as_deref().unwrap_or_default())
            .unwrap();
        let count = u64::from_be_bytes(r.value.as_deref().unwrap().try_into().unwrap());
        *windowed
            .entry(w.key)
            .or_default()
            .entry(w.start)
            .or_default()
            .entry(count)
            .or_default() += 1;
    }
    for (k, n) in fed.per_key.iter().enumerate() {
        let key = key(k);
        let windows = windowed.get(&key).cloned().unwrap_or_default();
        let mut total = 0;
        let mut distinct = 0;
        for (start, counts) in &windows {
            let top = counts.keys().max().copied().unwrap_or(0);
            total += top;
            distinct += counts.len() as u64;
            if report.guarantee.skips() {
                continue;
            }
            for count in 1..=top {
                match counts.get(&count) {
                    None => problems.push(format!("windowed: {key}@{start}: count {count} missing")),
                    Some(n) if *n > 1 && exactly_once => {
                        problems.push(format!("windowed: {key}@{start}: count {count} {n} times"))
                    }
                    Some(_) => {}
                }
            }
        }
        if total != *n && (exactly_once || total < *n) {
            problems.push(format!(
                "windowed: {key}: its windows' last counts sum to {total}, {n} inputs"
            ));
        }
        if report.guarantee.skips() && distinct < *n {
            problems.push(format!(
                "windowed: {key}: {distinct} distinct counts in its windows, fewer than its {n} inputs"
            ));
        }
    }
    report.problems.extend(problems);
    SmokeReport {
        joined: joined_records.len(),
        stats: stats_records.len(),
        windowed: windowed_records.len(),
    }
}
