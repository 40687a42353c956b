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
use serde::{Deserialize, Serialize};
use streams_core::serdes::{JsonSerde, StringSerde, U64Serde};
use streams_core::{
    KvStore, ProcessResult, Processor, ProcessorContext, Record, Stores, Topology, TopologyError,
};

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

/// The aggregator processor.
pub struct Aggregator {
    out_dir: PathBuf,
    parts: Option<KvStore<StringSerde, StringSerde>>,
    files: Option<KvStore<StringSerde, JsonSerde<Progress>>>,
    /// Files whose count was recounted since this instance started.
    repaired: std::collections::HashSet<String>,
}

impl Aggregator {
    /// Writes result files into `out_dir`.
    pub fn new(out_dir: PathBuf) -> Self {
        Self {
            out_dir,
            parts: None,
            files: None,
            repaired: std::collections::HashSet::new(),
        }
    }
}

impl Processor<String, AggregatorMessage, String, u64> for Aggregator {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, u64>) -> ProcessResult {
        self.parts = Some(ctx.kv_store("file-parts")?);
        self.files = Some(ctx.kv_store("file-progress")?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, AggregatorMessage>,
    ) -> ProcessResult {
        let (parts, files) = (
            self.parts.as_ref().ok_or("init")?,
            self.files.as_ref().ok_or("init")?,
        );
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
    b.add_source(
        "aggregator-input",
        [topics.aggregator_input.as_str()],
        StringSerde,
        JsonSerde::<AggregatorMessage>::new(),
    )
    .add_processor(
        "aggregator",
        move || Aggregator::new(out_dir.clone()),
        ["aggregator-input"],
    )
    .add_state_store(
        Stores::persistent_kv("file-parts", StringSerde, StringSerde).with_caching(),
        ["aggregator"],
    )
    .add_state_store(
        Stores::persistent_kv("file-progress", StringSerde, JsonSerde::<Progress>::new()).with_caching(),
        ["aggregator"],
    )
    .add_sink(
        "files-done",
        topics.files_done.as_str(),
        StringSerde,
        U64Serde,
        ["aggregator"],
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
    b.add_source(
        "pending",
        [topics.pending.as_str()],
        streams_core::serdes::UnitSerde,
        JsonSerde::<Command>::new(),
    )
    .add_processor(
        "command-service",
        move || CommandService { behaviour },
        ["pending"],
    )
    .add_sink(
        "results",
        topics.aggregator_input.as_str(),
        StringSerde,
        JsonSerde::<AggregatorMessage>::new(),
        ["command-service"],
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
pub fn read_commands(path: &Path) -> std::io::Result<impl Iterator<Item = std::io::Result<String>>> {
    Ok(std::io::BufReader::new(std::fs::File::open(path)?).lines())
}
