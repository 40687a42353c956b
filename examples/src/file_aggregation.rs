//! File aggregation (the seed article "file aggregation with range queries"): a file of
//! commands is split into one record per line, each line is processed by a command service
//! (out of order, some fail), and an aggregator collects the per-line results in a RocksDB
//! store under `<file>-part-%019d`. When a file is complete, one range scan over its prefix
//! streams the results, in line order, into the result file; then `delete_prefix` drops
//! the file's state.
//!
//! Counting is idempotent: a result is counted only when its key was absent
//! (`put_if_absent`), so a result redelivered under at-least-once does not make a file
//! look complete early or twice. A redelivered result also triggers a read-repair of the
//! file's count (once per file and run): after a crash, the restored stores may hold a
//! result whose count update was lost, and the recount from the stored results fixes it.
//! Under exactly-once the stores, the output and the input offsets commit together, so the
//! aggregation is exact whatever crashes; at-least-once replays can still meet state that
//! ran ahead of the committed offsets (a file completed and deleted, then some of its
//! results replayed), so run the aggregator with `exactly_once_v2` where that matters.
//! Memory stays flat with file size: state lives in the store, and the output is streamed
//! from the iterator.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::Rng;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use streams_core::serdes::{JsonSerde, StringSerde, U64Serde};
use streams_core::{
    KvStore, ProcessResult, Processor, ProcessorContext, Record, SinkConfig, SourceConfig, Stores, Topology,
    TopologyError,
};

use crate::ExampleError;

/// Topic of pending commands (no key; spread over partitions).
pub const PENDING: &str = "pending-commands";
/// Topic the aggregator reads: per-line results and per-file totals, keyed by file id.
pub const AGGREGATOR_INPUT: &str = "aggregator-input";
/// Topic of finished files: file id -> number of lines.
pub const FILES_DONE: &str = "files-done";

/// The topics of one pipeline; [`Topics::default`] uses the constants above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics {
    /// Pending commands.
    pub pending: String,
    /// Results and totals for the aggregator.
    pub aggregator_input: String,
    /// Finished files.
    pub files_done: String,
}

impl Default for Topics {
    fn default() -> Self {
        Self {
            pending: PENDING.into(),
            aggregator_input: AGGREGATOR_INPUT.into(),
            files_done: FILES_DONE.into(),
        }
    }
}

impl Topics {
    /// The default names, each prefixed with `prefix-`, so pipelines can share a cluster.
    pub fn prefixed(prefix: &str) -> Self {
        let d = Self::default();
        Self {
            pending: format!("{prefix}-{}", d.pending),
            aggregator_input: format!("{prefix}-{}", d.aggregator_input),
            files_done: format!("{prefix}-{}", d.files_done),
        }
    }

    /// All three names.
    pub fn all(&self) -> [&str; 3] {
        [&self.pending, &self.aggregator_input, &self.files_done]
    }
}

/// One line of a file, sent to the command service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command {
    /// The file it belongs to.
    pub file: String,
    /// Its line number, from 0.
    pub line: u64,
    /// The command text.
    pub command: String,
}

/// What the aggregator reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AggregatorMessage {
    /// The result of one line.
    Result {
        /// The line number.
        line: u64,
        /// `ok` or `error`.
        status: String,
        /// The output of the command.
        output: String,
    },
    /// The file's line count, sent by the splitter after its last line.
    Total {
        /// The number of lines.
        lines: u64,
    },
}

/// The aggregator's per-file progress.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Distinct lines received.
    pub received: u64,
    /// The file's line count, once the splitter sent it.
    pub total: Option<u64>,
}

/// The store key of line `line` of `file`: zero-padded so byte order is line order.
pub fn part_key(file: &str, line: u64) -> String {
    format!("{file}-part-{line:019}")
}

/// The result line written for a processed command.
pub fn result_line(status: &str, output: &str) -> String {
    format!("{status}\t{output}")
}

/// The store prefix of every result of `file`.
///
/// File ids must not contain `-part-`, so that no file's prefix is the start of another's
/// keys (`a` and `a-part-x` would share keys otherwise).
pub fn part_prefix(file: &str) -> String {
    format!("{file}-part-")
}

/// The store of every result line received, keyed by [`part_key`].
type Parts = KvStore<StringSerde, StringSerde>;
/// The store of each file's [`Progress`].
type Files = KvStore<StringSerde, JsonSerde<Progress>>;

/// The aggregator processor.
pub struct Aggregator {
    out_dir: PathBuf,
    parts: Parts,
    files: Files,
    /// Files whose count was recounted since this instance started.
    repaired: std::collections::HashSet<String>,
}

impl Aggregator {
    /// Writes result files into `out_dir`, keeping results in `parts` and progress in
    /// `files` until a file is complete.
    pub fn new(out_dir: PathBuf, parts: Parts, files: Files) -> Self {
        Self {
            out_dir,
            parts,
            files,
            repaired: std::collections::HashSet::new(),
        }
    }
}

impl Processor<String, AggregatorMessage, String, u64> for Aggregator {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, AggregatorMessage>,
    ) -> ProcessResult {
        let (parts, files) = (&self.parts, &self.files);
        let file = r.key;
        if file.contains("-part-") {
            return Err(format!("file id `{file}` contains `-part-`").into());
        }
        let prefix = part_prefix(&file);
        let mut progress = files.get(&file)?.unwrap_or_default();
        match r.value {
            AggregatorMessage::Result { line, status, output } => {
                let existing = parts.put_if_absent(&part_key(&file, line), &result_line(&status, &output))?;
                if existing.is_none() {
                    progress.received += 1;
                } else if self.repaired.insert(file.clone()) {
                    // A redelivery: recount what the store holds (once per file and run).
                    let mut n = 0;
                    for entry in parts.read()?.prefix_scan(&prefix, &StringSerde)? {
                        entry?;
                        n += 1;
                    }
                    if n != progress.received {
                        tracing::info!(file = %file, counted = progress.received, stored = n, "repaired count");
                    }
                    progress.received = n;
                }
            }
            AggregatorMessage::Total { lines } => progress.total = Some(lines),
        }
        if progress.total != Some(progress.received) {
            return Ok(files.put(&file, &progress)?);
        }
        let tmp = self.out_dir.join(format!("{file}.result.tmp"));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        {
            let reader = parts.read()?;
            for entry in reader.prefix_scan(&prefix, &StringSerde)? {
                let (_, line) = entry?;
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")?;
            }
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, self.out_dir.join(format!("{file}.result")))?;
        parts.delete_prefix(&prefix, &StringSerde)?;
        files.delete(&file)?;
        self.repaired.remove(&file);
        ctx.forward(Record::new(file, progress.received, r.timestamp))
    }
}

/// The aggregator's topology on the default topics.
pub fn aggregator_topology(out_dir: &Path) -> Result<Topology, TopologyError> {
    aggregator_topology_on(&Topics::default(), out_dir)
}

/// The aggregator's topology on `topics`.
pub fn aggregator_topology_on(topics: &Topics, out_dir: &Path) -> Result<Topology, TopologyError> {
    let out_dir = out_dir.to_path_buf();
    let mut b = Topology::builder();
    let input = b.source(
        "aggregator-input",
        SourceConfig::new(
            [topics.aggregator_input.as_str()],
            StringSerde,
            JsonSerde::<AggregatorMessage>::new(),
        ),
    );
    let parts = b.store(Stores::persistent_kv("file-parts", StringSerde, StringSerde).with_caching());
    let files = b.store(
        Stores::persistent_kv("file-progress", StringSerde, JsonSerde::<Progress>::new()).with_caching(),
    );
    let aggregator = b.processor("aggregator", [&input], {
        let (parts, files) = (parts.clone(), files.clone());
        move |ctx| {
            Ok(Aggregator::new(
                out_dir.clone(),
                ctx.store(&parts)?,
                ctx.store(&files)?,
            ))
        }
    });
    b.connect(&aggregator, &parts).connect(&aggregator, &files);
    b.sink(
        "files-done",
        SinkConfig::topic(topics.files_done.as_str(), StringSerde, U64Serde),
        [&aggregator],
    );
    b.build()
}

/// How the stand-in command service behaves.
#[derive(Debug, Clone, Copy)]
pub struct ServiceBehaviour {
    /// The longest random delay per command.
    pub max_delay: Duration,
    /// The share of commands that fail (still producing an `error` result). Which ones is
    /// decided by [`fails`], so a command fails the same way every time it runs.
    pub failure_rate: f64,
}

/// Whether line `line` of `file` fails at `rate`: a hash of both, so deterministic.
pub fn fails(file: &str, line: u64, rate: f64) -> bool {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same answer in every process.
    let mut h = std::hash::DefaultHasher::new();
    (file, line).hash(&mut h);
    (h.finish() % 1_000_000) as f64 / 1_000_000.0 < rate
}

/// The result line the service produces for line `line` of `file` (command `command`).
pub fn expected_result(file: &str, line: u64, command: &str, rate: f64) -> String {
    let (status, output) = execute(command, fails(file, line, rate));
    result_line(status, &output)
}

/// The stand-in command service: runs each command after a random delay; a failure still
/// produces a result, with status `error`.
pub struct CommandService {
    behaviour: ServiceBehaviour,
}

impl Processor<(), Command, String, AggregatorMessage> for CommandService {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, AggregatorMessage>,
        r: Record<(), Command>,
    ) -> ProcessResult {
        let mut rng = rand::rng();
        if !self.behaviour.max_delay.is_zero() {
            std::thread::sleep(self.behaviour.max_delay.mul_f64(rng.random::<f64>()));
        }
        let failed = fails(&r.value.file, r.value.line, self.behaviour.failure_rate);
        let (status, output) = execute(&r.value.command, failed);
        let msg = AggregatorMessage::Result {
            line: r.value.line,
            status: status.into(),
            output,
        };
        ctx.forward(Record::new(r.value.file, msg, r.timestamp))
    }
}

/// What the command service answers for `command`.
pub fn execute(command: &str, failed: bool) -> (&'static str, String) {
    if failed {
        ("error", format!("failed: {command}"))
    } else {
        ("ok", command.to_uppercase())
    }
}

/// The command service's topology on the default topics.
pub fn service_topology(behaviour: ServiceBehaviour) -> Result<Topology, TopologyError> {
    service_topology_on(&Topics::default(), behaviour)
}

/// The command service's topology on `topics`.
pub fn service_topology_on(topics: &Topics, behaviour: ServiceBehaviour) -> Result<Topology, TopologyError> {
    let mut b = Topology::builder();
    let pending = b.source(
        "pending",
        SourceConfig::new(
            [topics.pending.as_str()],
            streams_core::serdes::UnitSerde,
            JsonSerde::<Command>::new(),
        ),
    );
    let service = b.processor("command-service", [&pending], move |_| {
        Ok(CommandService { behaviour })
    });
    b.sink(
        "results",
        SinkConfig::topic(
            topics.aggregator_input.as_str(),
            StringSerde,
            JsonSerde::<AggregatorMessage>::new(),
        ),
        [&service],
    );
    b.build()
}

/// Writes a file of `lines` commands.
pub fn generate(path: &Path, lines: u64) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for i in 0..lines {
        writeln!(out, "command {i} of {lines}")?;
    }
    out.flush()
}

/// Reads a file line by line: the splitter's input.
pub fn read_commands(path: &Path) -> std::io::Result<impl Iterator<Item = std::io::Result<String>> + use<>> {
    Ok(std::io::BufReader::new(std::fs::File::open(path)?).lines())
}

/// Reads the finished files of a pipeline: the `files-done` topic from the beginning of
/// every partition, committed records only (`read_committed`: under exactly-once a file is
/// reported once its transaction committed), without joining a group.
pub struct FilesDoneReader {
    consumer: BaseConsumer,
    topic: String,
}

impl FilesDoneReader {
    /// A reader of `topic`, which must exist; `timeout` bounds the metadata request.
    pub fn new(bootstrap: &str, topic: &str, timeout: Duration) -> Result<Self, ExampleError> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            // Assigned partitions only: the group is never joined, nothing is committed.
            .set("group.id", format!("{topic}.reader"))
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .set("fetch.wait.max.ms", "100")
            .create()?;
        let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len());
        if partitions == 0 {
            return Err(ExampleError::Other(format!("topic {topic} does not exist")));
        }
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions {
            assignment.add_partition_offset(topic, p as i32, Offset::Beginning)?;
        }
        consumer.assign(&assignment)?;
        Ok(Self {
            consumer,
            topic: topic.to_owned(),
        })
    }

    /// Waits up to `timeout` for the next finished file: `(file id, its line count)`.
    /// `Ok(None)` when none came.
    pub fn poll(&self, timeout: Duration) -> Result<Option<(String, u64)>, ExampleError> {
        match self.consumer.poll(timeout) {
            None => Ok(None),
            Some(Err(e)) => Err(ExampleError::Other(format!("reading {}: {e}", self.topic))),
            Some(Ok(m)) => {
                let file = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                let lines = m
                    .payload()
                    .and_then(|v| <[u8; 8]>::try_from(v).ok())
                    .map(u64::from_be_bytes)
                    .ok_or_else(|| {
                        ExampleError::Other(format!(
                            "{}: the record of file {file} is not a line count",
                            self.topic
                        ))
                    })?;
                Ok(Some((file, lines)))
            }
        }
    }
}

impl std::fmt::Debug for FilesDoneReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilesDoneReader")
            .field("topic", &self.topic)
            .finish()
    }
}

/// Where a result file first differs from the expected output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The line, counted from 1.
    pub line: u64,
    /// What it should be; `None` when the result file has more lines than the input.
    pub expected: Option<String>,
    /// What it is; `None` when the result file ends before it.
    pub found: Option<String>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.expected, &self.found) {
            (Some(e), Some(g)) => write!(f, "line {} is {g:?}, expected {e:?}", self.line),
            (Some(e), None) => write!(f, "the file ends before line {} (expected {e:?})", self.line),
            (None, Some(g)) => write!(f, "line {} ({g:?}) is one more than the input has", self.line),
            (None, None) => write!(f, "line {}", self.line),
        }
    }
}

/// What [`check_result`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Every line is the expected one.
    Matches {
        /// The number of lines.
        lines: u64,
        /// How many of them are `error` results.
        errors: u64,
    },
    /// The first difference.
    Differs(Mismatch),
}

/// Checks the result file `result` of file `file` against its input `input`, line by line:
/// line `i` must be [`expected_result`]`(file, i, <input line i>, rate)`, and there must be
/// as many lines as the input has.
pub fn check_result(
    input: &Path,
    result: &Path,
    file: &str,
    rate: f64,
) -> Result<Verification, ExampleError> {
    let mut expected = read_commands(input)?;
    let mut found = read_commands(result)
        .map_err(|e| ExampleError::Other(format!("reading the result file {}: {e}", result.display())))?;
    let (mut line, mut errors) = (0u64, 0u64);
    loop {
        let want = expected
            .next()
            .transpose()?
            .map(|command| expected_result(file, line, &command, rate));
        let got = found.next().transpose()?;
        match (want, got) {
            (None, None) => return Ok(Verification::Matches { lines: line, errors }),
            (Some(w), Some(g)) if w == g => {
                if g.starts_with("error\t") {
                    errors += 1;
                }
            }
            (expected, found) => {
                return Ok(Verification::Differs(Mismatch {
                    line: line + 1,
                    expected,
                    found,
                }));
            }
        }
        line += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes the input of `lines` commands and its exact result file; returns both paths.
    fn input_and_result(dir: &Path, lines: u64, rate: f64) -> (PathBuf, PathBuf) {
        let (input, result) = (dir.join("in"), dir.join("in.result"));
        generate(&input, lines).unwrap();
        let out: Vec<String> = read_commands(&input)
            .unwrap()
            .enumerate()
            .map(|(i, c)| expected_result("f", i as u64, &c.unwrap(), rate))
            .collect();
        std::fs::write(&result, out.join("\n") + "\n").unwrap();
        (input, result)
    }

    #[test]
    fn an_exact_result_file_matches() {
        let dir = tempfile::tempdir().unwrap();
        let (input, result) = input_and_result(dir.path(), 2000, 0.1);
        match check_result(&input, &result, "f", 0.1).unwrap() {
            Verification::Matches { lines, errors } => {
                assert_eq!(lines, 2000);
                assert!((100..300).contains(&errors), "{errors} errors at 10%");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_first_difference_is_reported_by_line_number() {
        let dir = tempfile::tempdir().unwrap();
        let (input, result) = input_and_result(dir.path(), 10, 0.0);
        let mut lines: Vec<String> = read_commands(&result).unwrap().map(Result::unwrap).collect();
        lines[6] = "ok\tWRONG".into();
        lines[8] = "ok\tALSO WRONG".into();
        std::fs::write(&result, lines.join("\n") + "\n").unwrap();
        let Verification::Differs(m) = check_result(&input, &result, "f", 0.0).unwrap() else {
            panic!("a changed line must not match");
        };
        assert_eq!(m.line, 7);
        assert_eq!(m.found.as_deref(), Some("ok\tWRONG"));
        assert_eq!(m.expected.as_deref(), Some("ok\tCOMMAND 6 OF 10"));
        // The same results under another failure rate differ too.
        assert!(matches!(
            check_result(&input, &result, "f", 1.0).unwrap(),
            Verification::Differs(Mismatch { line: 1, .. })
        ));
    }

    #[test]
    fn a_short_or_long_result_file_differs() {
        let dir = tempfile::tempdir().unwrap();
        let (input, result) = input_and_result(dir.path(), 5, 0.0);
        let full = std::fs::read_to_string(&result).unwrap();
        let short: String = full.lines().take(3).map(|l| format!("{l}\n")).collect();
        std::fs::write(&result, &short).unwrap();
        let Verification::Differs(m) = check_result(&input, &result, "f", 0.0).unwrap() else {
            panic!("a short file must not match");
        };
        assert_eq!((m.line, m.found), (4, None));
        std::fs::write(&result, full + "ok\tEXTRA\n").unwrap();
        let Verification::Differs(m) = check_result(&input, &result, "f", 0.0).unwrap() else {
            panic!("a long file must not match");
        };
        assert_eq!((m.line, m.expected), (6, None));
        assert!(check_result(&input, &dir.path().join("missing"), "f", 0.0).is_err());
    }
}
