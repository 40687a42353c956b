//! The harness of `differential_java.rs`: runs a case's input through our
//! `TopologyTestDriver` and compares the output, record by record, with what Kafka Streams'
//! `TopologyTestDriver` produced for the same input (`tests/java-diff/`).
//!
//! A case's input is `tests/diff-cases/<case>.json`: `records`, each either a record
//! (`topic`, `key`, `value` (null for a tombstone), `timestamp`) piped with string serdes, or
//! `{"advance_wall_clock_ms": n}`. After every input step both sides read every output topic
//! of the case, in the order the case lists them, and note each record with the index of the
//! step (`after`), its topic, key, value and timestamp. The two lists must be equal: the same
//! records, in the same order, produced by the same input step.
//!
//! Both drivers start with the wall clock at 0, application id `diff`, and no record cache
//! (Kafka Streams' `statestore.cache.max.bytes=0`), so every update is forwarded at once.
//! The Java program runs every case once per test binary.
//!
//! Each case also runs on seeded random inputs of the same shape (`random.rs`): seeds
//! `0..STREAMS_DIFF_SEEDS` (default [`DEFAULT_SEEDS`]; `scripts/diff-random.sh` runs
//! hundreds). Each generated input is written as `<case>~<seed>.json` next to copies of
//! the hand-written ones in a temporary directory, which the Java program runs in full.
//! A difference on a generated input prints the seed, the input, and both outputs.
//!
//! A case may list [`Known`] differences, each with its reason. The outputs are compared in
//! full first; if they differ, they are compared again without what the known differences
//! cover, and the case passes if that matches (saying on stderr which known difference
//! showed). A listed difference that no longer shows (the outputs match without leaving
//! it out) fails the case: the list stays true.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::StreamsBuilder;
use streams_test_utils::{DriverConfig, TestOutputTopic, TopologyTestDriver};

use crate::common::java::{self, JavaProgram, Outcome};
use crate::random;

/// How many random inputs each case runs when `STREAMS_DIFF_SEEDS` is not set.
pub const DEFAULT_SEEDS: u64 = 5;

/// The number of random inputs per case.
fn seeds() -> u64 {
    std::env::var("STREAMS_DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEEDS)
}

/// The Java program's main class.
const MAIN_CLASS: &str = "dev.streams.diff.DiffCases";

/// The directory of the case files.
fn cases_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
        .join("tests/diff-cases")
}

/// How an output topic's values are read: strings (`StringSerde`, Java's `Serdes.String()`)
/// or 64-bit counts (`U64Serde`, Java's `Serdes.Long()`: both 8 bytes big-endian).
#[derive(Debug, Clone, Copy)]
pub enum Values {
    /// UTF-8 strings.
    Str,
    /// Counts and sums.
    Long,
}

/// An output topic of a case.
pub type Output = (&'static str, Values);

/// One output record, as both sides print it.
#[derive(Debug, Clone, PartialEq)]
pub struct OutRecord {
    /// The index of the input step after which it was read.
    pub after: u64,
    /// The output topic.
    pub topic: String,
    /// The key (JSON null for none).
    pub key: Value,
    /// The value: a string, a number, or null (a tombstone).
    pub value: Value,
    /// The record's timestamp (ms).
    pub timestamp: i64,
}

impl fmt::Display for OutRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "after step {:>2}: {} {} = {} @ {}",
            self.after, self.topic, self.key, self.value, self.timestamp
        )
    }
}

/// A difference from Kafka Streams that a case expects, and what the comparison then
/// leaves out. The text says why the difference exists.
#[derive(Debug, Clone, Copy)]
pub enum Known {
    /// Timestamps differ: they are not compared.
    #[allow(dead_code, reason = "no case differs in timestamps today")]
    Timestamps(&'static str),
    /// The records differ on purpose: Kafka Streams' are not compared with ours, but ours
    /// must be exactly `ours` (each record as [`OutRecord`]'s `Display` writes it), so the
    /// case still catches a change of our output, and the difference must still show.
    Records {
        /// Why the outputs differ.
        reason: &'static str,
        /// Our output, record by record.
        ours: &'static [&'static str],
    },
}

impl Known {
    fn reason(&self) -> &'static str {
        match self {
            Known::Timestamps(r) | Known::Records { reason: r, .. } => r,
        }
    }
}

/// `records` without what `known` leaves out of the comparison.
fn comparable(records: &[OutRecord], known: &[Known]) -> Vec<OutRecord> {
    let mut out = records.to_vec();
    for k in known {
        match k {
            Known::Timestamps(_) => out.iter_mut().for_each(|r| r.timestamp = 0),
            Known::Records { .. } => out.clear(),
        }
    }
    out
}

/// What the Java program printed: each case's records, or its error.
type JavaCases = BTreeMap<String, Result<Vec<OutRecord>, String>>;

/// The Java program's output, built and run once per test binary.
fn kafka_outputs(test: &str) -> Option<&'static JavaCases> {
    static OUTPUT: OnceLock<Result<JavaCases, Outcome>> = OnceLock::new();
    // About 5 s per seed (a run of every case) on a slow machine, plus the start.
    let output = OUTPUT.get_or_init(|| run_java(inputs_dir(), None, Duration::from_secs(120 + 10 * seeds())));
    java::available(test, output)
}

/// Runs the Java program on the inputs in `dir`: every case, or only `case` (its
/// hand-written and generated inputs); what it printed, by input.
fn run_java(dir: &Path, case: Option<&str>, timeout: Duration) -> Result<JavaCases, Outcome> {
    let mut program = JavaProgram::in_tests("java-diff", MAIN_CLASS, "differential_java");
    program.args.push(dir.as_os_str().to_owned());
    program.args.extend(case.map(Into::into));
    program.timeout = timeout;
    parse(&program.build_and_run()?).map_err(Outcome::Failed)
}

/// The directory holding every input both sides run: the hand-written cases and the
/// generated `<case>~<seed>.json`, made once per test binary.
fn inputs_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("streams-diff-")
            .tempdir()
            .expect("a temporary directory");
        for case in case_files() {
            let hand = read_input(&cases_dir().join(format!("{case}.json")));
            write_input(&dir.path().join(format!("{case}.json")), &hand);
            for seed in 0..seeds() {
                let generated = random::generate(&case, &hand, seed);
                write_input(&dir.path().join(format!("{case}~{seed}.json")), &generated);
            }
        }
        dir
    })
    .path()
}

fn read_input(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn write_input(path: &Path, input: &Value) {
    let text = serde_json::to_string_pretty(input).expect("an input serializes");
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// The cases the Java program ran; `None` when Java is missing and not required.
pub fn java_cases(test: &str) -> Option<Vec<String>> {
    kafka_outputs(test).map(|cases| cases.keys().filter(|c| !c.contains('~')).cloned().collect())
}

/// The cases that have an input file.
pub fn case_files() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(cases_dir())
        .expect("tests/diff-cases is readable")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".json")
                .filter(|n| !n.contains('~'))
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

fn field<'a>(line: &'a Value, name: &str, text: &str) -> Result<&'a Value, String> {
    line.get(name)
        .ok_or_else(|| format!("no `{name}` in the Java program's line {text}"))
}

/// The Java program's JSON lines, by case.
fn parse(stdout: &str) -> Result<JavaCases, String> {
    let mut cases: BTreeMap<String, Vec<OutRecord>> = BTreeMap::new();
    let mut done = JavaCases::new();
    for text in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let line: Value =
            serde_json::from_str(text).map_err(|e| format!("the Java program printed {text:?}: {e}"))?;
        let case = field(&line, "case", text)?
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Some(error) = line.get("error") {
            done.insert(case, Err(error.to_string()));
        } else if line.get("end").is_some() {
            done.insert(case.clone(), Ok(cases.remove(&case).unwrap_or_default()));
        } else {
            let record = OutRecord {
                after: field(&line, "after", text)?.as_u64().unwrap_or(u64::MAX),
                topic: field(&line, "topic", text)?
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                key: field(&line, "key", text)?.clone(),
                value: field(&line, "value", text)?.clone(),
                timestamp: field(&line, "timestamp", text)?.as_i64().unwrap_or(i64::MIN),
            };
            cases.entry(case).or_default().push(record);
        }
    }
    if let Some(case) = cases.keys().next() {
        return Err(format!(
            "the Java program's output for case {case} has no end line:\n{stdout}"
        ));
    }
    if done.is_empty() {
        return Err(format!("the Java program printed no case:\n{stdout}"));
    }
    Ok(done)
}

/// An output topic of our driver, read with its value serde.
enum Reader {
    Str(TestOutputTopic<NullableSerde<StringSerde>, NullableSerde<StringSerde>>),
    Long(TestOutputTopic<NullableSerde<StringSerde>, NullableSerde<U64Serde>>),
}

impl Reader {
    fn read(&self) -> Vec<(Option<String>, Value, i64)> {
        match self {
            Reader::Str(t) => t
                .read_records()
                .expect("our output decodes")
                .into_iter()
                .map(|r| (r.key, r.value.map_or(Value::Null, Value::from), r.timestamp))
                .collect(),
            Reader::Long(t) => t
                .read_records()
                .expect("our output decodes")
                .into_iter()
                .map(|r| (r.key, r.value.map_or(Value::Null, Value::from), r.timestamp))
                .collect(),
        }
    }
}

/// Runs `input` (of case `case`) through our twin topology (what `build` adds to a
/// builder); every output record of `outputs`.
fn run_ours(
    case: &str,
    input: &Value,
    outputs: &[Output],
    build: &dyn Fn(&StreamsBuilder),
) -> Vec<OutRecord> {
    let b = StreamsBuilder::new();
    build(&b);
    let topology = b
        .build()
        .unwrap_or_else(|e| panic!("{case}: the twin topology does not build: {e}"));
    let config = DriverConfig::default().application_id("diff").cache_max_bytes(0);
    let driver = TopologyTestDriver::new(topology, config).expect("the driver starts");
    let readers: Vec<(&str, Reader)> = outputs
        .iter()
        .map(|&(topic, values)| {
            let reader = match values {
                Values::Str => Reader::Str(driver.output_topic(
                    topic,
                    NullableSerde(StringSerde),
                    NullableSerde(StringSerde),
                )),
                Values::Long => Reader::Long(driver.output_topic(
                    topic,
                    NullableSerde(StringSerde),
                    NullableSerde(U64Serde),
                )),
            };
            (topic, reader)
        })
        .collect();
    let records = input["records"]
        .as_array()
        .unwrap_or_else(|| panic!("{case}: no `records` array"));
    let mut out = Vec::new();
    for (step, r) in (0u64..).zip(records) {
        if let Some(ms) = r.get("advance_wall_clock_ms") {
            let ms = ms.as_u64().expect("advance_wall_clock_ms is a count of ms");
            driver
                .advance_wall_clock(Duration::from_millis(ms))
                .unwrap_or_else(|e| panic!("{case}: step {step}: {e}"));
        } else {
            let text = |name: &str| r[name].as_str().map(str::to_owned);
            let topic = text("topic").unwrap_or_else(|| panic!("{case}: step {step} has no topic"));
            let key = text("key"); // null for a null key
            let timestamp = r["timestamp"]
                .as_i64()
                .unwrap_or_else(|| panic!("{case}: step {step} has no timestamp"));
            driver
                .input_topic(&topic, NullableSerde(StringSerde), NullableSerde(StringSerde))
                .pipe_at(key, text("value"), timestamp)
                .unwrap_or_else(|e| panic!("{case}: step {step}: {e}"));
        }
        for (topic, reader) in &readers {
            for (key, value, timestamp) in reader.read() {
                out.push(OutRecord {
                    after: step,
                    topic: (*topic).to_owned(),
                    key: key.map_or(Value::Null, Value::from),
                    value,
                    timestamp,
                });
            }
        }
    }
    out
}

/// Runs case `case` on our side and compares its output with Kafka Streams', in full or,
/// when it differs, without what the `known` differences cover.
///
/// # Panics
///
/// When the outputs differ (showing the first difference with context), when a known
/// difference no longer shows, or when the Java program failed on the case.
pub fn check(case: &str, known: &[Known], outputs: &[Output], build: impl Fn(&StreamsBuilder)) {
    let Some(kafka) = kafka_outputs(case) else {
        return;
    };
    check_hand_written(kafka, case, known, outputs, &build);
    check_random(kafka, case, known, outputs, &build);
}

/// Kafka Streams' output for input `name` (a case, or `<case>~<seed>`).
fn expected<'a>(kafka: &'a JavaCases, name: &str) -> &'a [OutRecord] {
    match kafka.get(name) {
        Some(Ok(records)) => records,
        Some(Err(e)) => panic!("{name}: the Java program failed on the input: {e}"),
        None => panic!("the Java program has no input {name}"),
    }
}

/// Compares the outputs of the case's generated inputs; the known differences that leave
/// something out of the comparison (timestamps) apply. A case that pins our output for its
/// hand-written input ([`Known::Records`]) pins nothing for generated ones: its generated
/// outputs are compared in full too.
fn check_random(
    kafka: &JavaCases,
    case: &str,
    known: &[Known],
    outputs: &[Output],
    build: &dyn Fn(&StreamsBuilder),
) {
    let leave_out: Vec<Known> = known
        .iter()
        .filter(|k| matches!(k, Known::Timestamps(_)))
        .copied()
        .collect();
    let mut failed = Vec::new();
    let mut first = None;
    for seed in 0..seeds() {
        let name = format!("{case}~{seed}");
        let input = read_input(&inputs_dir().join(format!("{name}.json")));
        let expected = expected(kafka, &name);
        let ours = run_ours(&name, &input, outputs, build);
        if let Some(diff) =
            first_difference(&comparable(expected, &leave_out), &comparable(&ours, &leave_out))
        {
            failed.push(seed);
            first.get_or_insert_with(|| (seed, input, expected.to_vec(), diff));
        }
    }
    let Some((seed, input, expected, diff)) = first else {
        return;
    };
    let steps = input["records"].as_array().cloned().unwrap_or_default();
    let shrunk = random::shrink(steps, |candidates| {
        let inputs: Vec<Value> = candidates
            .iter()
            .map(|c| serde_json::json!({ "records": c }))
            .collect();
        let Some(kafka) = kafka_batch(case, &inputs) else {
            return vec![false; inputs.len()];
        };
        inputs
            .iter()
            .zip(kafka)
            .map(|(input, expected)| {
                expected.is_some_and(|expected| {
                    let ours = run_ours(case, input, outputs, build);
                    first_difference(&comparable(&expected, &leave_out), &comparable(&ours, &leave_out))
                        .is_some()
                })
            })
            .collect()
    });
    let input = serde_json::json!({ "records": shrunk });
    let expected = kafka_batch(case, std::slice::from_ref(&input))
        .and_then(|mut r| r.pop().flatten())
        .unwrap_or(expected);
    let ours = run_ours(case, &input, outputs, build);
    let diff =
        first_difference(&comparable(&expected, &leave_out), &comparable(&ours, &leave_out)).unwrap_or(diff);
    let lines = |records: &[OutRecord]| -> String { records.iter().map(|r| format!("  {r}\n")).collect() };
    let steps: String = input["records"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| format!("  {i:>2}: {r}\n"))
        .collect();
    panic!(
        "{case}: the output on generated input(s) {failed:?} of {} differs from Kafka Streams 4.4.0.\n\
         Seed {seed} (rerun: STREAMS_DIFF_SEEDS={} cargo test -p streams-dsl --test differential_java {}), \
         shrunk to the steps the difference needs:\n\
         {diff}\ninput:\n{steps}Kafka Streams 4.4.0:\n{}streams-rs:\n{}",
        seeds(),
        seed + 1,
        case.replace('-', "_"),
        lines(&expected),
        lines(&ours),
    );
}

/// Kafka Streams' outputs for `inputs` of case `case`, in one run of the Java program;
/// `None` for an input it failed on, and no outputs at all if the run failed.
fn kafka_batch(case: &str, inputs: &[Value]) -> Option<Vec<Option<Vec<OutRecord>>>> {
    let dir = tempfile::Builder::new()
        .prefix("streams-diff-shrink-")
        .tempdir()
        .ok()?;
    std::fs::copy(
        cases_dir().join(format!("{case}.json")),
        dir.path().join(format!("{case}.json")),
    )
    .ok()?;
    for (i, input) in inputs.iter().enumerate() {
        write_input(&dir.path().join(format!("{case}~{i}.json")), input);
    }
    let mut cases = run_java(dir.path(), Some(case), Duration::from_secs(120)).ok()?;
    Some(
        (0..inputs.len())
            .map(|i| cases.remove(&format!("{case}~{i}")).and_then(Result::ok))
            .collect(),
    )
}

/// Compares the outputs of the case's hand-written input, in full or, when they differ,
/// without what the `known` differences cover.
fn check_hand_written(
    kafka: &JavaCases,
    case: &str,
    known: &[Known],
    outputs: &[Output],
    build: &dyn Fn(&StreamsBuilder),
) {
    let expected = expected(kafka, case);
    let input = read_input(&cases_dir().join(format!("{case}.json")));
    let ours = run_ours(case, &input, outputs, build);
    for k in known {
        if let Known::Records { ours: pinned, .. } = k {
            let printed: Vec<String> = ours.iter().map(ToString::to_string).collect();
            assert_eq!(
                printed, *pinned,
                "{case}: our output is not the one the case pins (Known::Records)"
            );
        }
    }
    let Some(diff) = first_difference(expected, &ours) else {
        assert!(
            known.is_empty(),
            "{case}: the output equals Kafka Streams', but the case lists known differences: \
             remove them from the case ({known:?})"
        );
        return;
    };
    if known.is_empty() {
        panic!("{case}: the output differs from Kafka Streams 4.4.0\n{diff}");
    }
    if let Some(rest) = first_difference(&comparable(expected, known), &comparable(&ours, known)) {
        panic!(
            "{case}: the output differs from Kafka Streams 4.4.0 beyond the known differences \
             ({known:?})\n{rest}\nin full:\n{diff}"
        );
    }
    for (i, k) in known.iter().enumerate() {
        let others: Vec<Known> = known
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, k)| *k)
            .collect();
        assert!(
            first_difference(&comparable(expected, &others), &comparable(&ours, &others)).is_some(),
            "{case}: the known difference {k:?} no longer shows: remove it from the case"
        );
    }
    // Past the harness's output capture: a known difference shows in every run.
    let reasons: Vec<&str> = known.iter().map(Known::reason).collect();
    let _ = writeln!(
        std::io::stderr().lock(),
        "KNOWN DIFFERENCE {case}: {}",
        reasons.join("; ")
    );
}

/// The first record where `expected` (Kafka Streams) and `actual` (ours) differ, with up to
/// three equal records before it and five records of each side from it; `None` when equal.
fn first_difference(expected: &[OutRecord], actual: &[OutRecord]) -> Option<String> {
    if expected == actual {
        return None;
    }
    let first = expected.iter().zip(actual).take_while(|(e, a)| e == a).count();
    let mut out = format!(
        "first difference at output record {} ({} records from Kafka Streams, {} from ours)\n\
         --- Kafka Streams 4.4.0\n+++ streams-rs\n",
        first + 1,
        expected.len(),
        actual.len()
    );
    for r in &expected[first.saturating_sub(3)..first] {
        out.push_str(&format!("  {r}\n"));
    }
    for r in expected.iter().skip(first).take(5) {
        out.push_str(&format!("- {r}\n"));
    }
    for r in actual.iter().skip(first).take(5) {
        out.push_str(&format!("+ {r}\n"));
    }
    Some(out)
}
