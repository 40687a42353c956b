//! Seeded random inputs for the differential cases (`differential_java.rs`).
//!
//! A case's generated input has the shape of its hand-written one
//! (`tests/diff-cases/<case>.json`): the same input topics, values drawn from the values
//! that file uses (so a value parses as the case's functions expect, `"<fk>:<text>"` for
//! a foreign-key join), and the same wall-clock pattern (a case that advances the clock
//! before every record, because Kafka Streams throttles a check to once per wall-clock
//! second, keeps doing so; the others advance it now and then). On top of that shape:
//!
//! - keys from a small, skewed set (one hot key), and null keys;
//! - null values (tombstones) on every input topic, except in the cases listed in
//!   [`NO_NULL_VALUES`] (their functions cannot read a null), and empty values;
//! - timestamps that mostly advance, some at exactly a multiple of 5 ms (window
//!   boundaries: every case's windows, advances, grace periods and gaps are multiples of
//!   5 ms), some out of order within the grace period, some later than it (except in the
//!   stream-stream join cases, whose records all arrive in time: see
//!   `join_time_difference`);
//! - duplicates: a record sent twice in a row.
//!
//! The generator is a SplitMix64 stream: a seed gives the same input on every machine.

use serde_json::{Value, json};

/// Cases whose user functions cannot read a null value (they parse it): no null values.
pub const NO_NULL_VALUES: &[&str] = &["hopping-group-by-reduce"];

/// A deterministic random stream (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `percent`%.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// A generated input for case `case` from its hand-written input `hand`, by `seed`.
pub fn generate(case: &str, hand: &Value, seed: u64) -> Value {
    let mut rng = Rng(seed ^ hash(case));
    let steps = hand["records"].as_array().cloned().unwrap_or_default();
    let records: Vec<&Value> = steps.iter().filter(|r| r.get("topic").is_some()).collect();
    let mut topics: Vec<String> = Vec::new();
    let mut values: Vec<String> = Vec::new();
    for r in &records {
        let topic = r["topic"].as_str().unwrap_or("in").to_owned();
        if !topics.contains(&topic) {
            topics.push(topic);
        }
        if let Some(v) = r["value"].as_str()
            && !values.contains(&v.to_owned())
        {
            values.push(v.to_owned());
        }
    }
    if values.is_empty() {
        values.push("x".to_owned());
    }
    // Every record follows a clock advance in the hand-written input: keep that rhythm.
    let clocked = !records.is_empty()
        && steps
            .windows(2)
            .filter(|w| w[1].get("topic").is_some())
            .all(|w| w[0].get("advance_wall_clock_ms").is_some());
    let nulls = !NO_NULL_VALUES.contains(&case);
    let join = join_time_difference(case);
    let clocked = clocked || join.is_some();
    let keys = ["a", "a", "a", "b", "b", "c", "d"];
    let count = 15 + rng.below(16);
    let mut out = Vec::new();
    let mut time: i64 = 0;
    let mut last: Option<Value> = None;
    for _ in 0..count {
        if clocked {
            out.push(json!({"advance_wall_clock_ms": 1000}));
        } else if rng.chance(10) {
            out.push(json!({"advance_wall_clock_ms": 500 + rng.below(1000)}));
        }
        if let Some(previous) = last.as_ref().filter(|_| rng.chance(5)) {
            out.push(previous.clone());
            continue;
        }
        time += rng.below(8) as i64;
        let mut t = time;
        if rng.chance(15) {
            // Out of order: within grace or late, but at most a join's time difference
            // behind in a stream-stream join (see `join_time_difference`).
            let back = join.map_or(30, |d| d + 1);
            t = (time - rng.below(back) as i64).max(0);
        }
        if rng.chance(30) {
            t = t / 5 * 5; // at a window boundary
        }
        if let Some(d) = join {
            t = t.max(time - d as i64); // in time
        }
        let key = if rng.chance(7) {
            Value::Null
        } else {
            json!(rng.pick(&keys))
        };
        let value = if nulls && rng.chance(12) {
            Value::Null
        } else {
            json!(rng.pick(&values))
        };
        let record = json!({"topic": rng.pick(&topics), "key": key, "value": value, "timestamp": t});
        out.push(record.clone());
        last = Some(record);
    }
    json!({"seed": seed, "records": out})
}

/// The time difference (ms) of a stream-stream join case, whose generated records all
/// arrive in time: never more than the time difference behind the stream time, with the
/// wall clock advanced a second before each. Late records, and Kafka Streams' check for
/// closed windows at most once per wall-clock second, are where our joins differ on
/// purpose (docs/dsl.md); the hand-written cases pin those differences.
fn join_time_difference(case: &str) -> Option<u64> {
    case.starts_with("stream-stream-")
        .then(|| if case.ends_with("-in-time") { 10 } else { 5 })
}

/// FNV-1a of `s`: a case's own stream for each seed.
fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The smallest input found, by removing records, on which `fails` still holds: chunks of
/// half the records, then quarters, and so on down to single records (clock advances are
/// steps like records). `fails` judges a batch of candidates at once (one run of the Java
/// program) and says which still fail.
pub fn shrink(steps: Vec<Value>, mut fails: impl FnMut(&[Vec<Value>]) -> Vec<bool>) -> Vec<Value> {
    let mut current = steps;
    let mut chunk = (current.len() / 2).max(1);
    while !current.is_empty() {
        let candidates: Vec<Vec<Value>> = (0..current.len())
            .step_by(chunk)
            .map(|start| {
                let mut c = current.clone();
                c.drain(start..(start + chunk).min(current.len()));
                c
            })
            .collect();
        match fails(&candidates).iter().position(|&f| f) {
            Some(i) => {
                current = candidates.into_iter().nth(i).unwrap_or_default();
                chunk = chunk.min((current.len() / 2).max(1));
            }
            None if chunk == 1 => break,
            None => chunk /= 2,
        }
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrinking_keeps_only_the_records_the_failure_needs() {
        let steps: Vec<Value> = (0..40).map(|i| json!(i)).collect();
        let needs = |c: &Vec<Value>| c.contains(&json!(7)) && c.contains(&json!(31));
        let mut batches = 0;
        let shrunk = shrink(steps, |cands| {
            batches += 1;
            cands.iter().map(needs).collect()
        });
        assert_eq!(shrunk, [json!(7), json!(31)]);
        assert!(batches < 40, "{batches} batches");
    }

    #[test]
    fn the_same_seed_gives_the_same_input() {
        let hand = json!({"records": [{"topic": "in", "key": "a", "value": "x", "timestamp": 0}]});
        assert_eq!(generate("c", &hand, 3), generate("c", &hand, 3));
        assert_ne!(generate("c", &hand, 3), generate("c", &hand, 4));
    }
}
