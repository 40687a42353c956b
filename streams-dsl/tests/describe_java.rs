//! `describe()` against Kafka Streams 4.1.1, byte for byte.
//!
//! `tests/java-describe/` is a Java program that builds a set of topologies with Kafka
//! Streams 4.1.1 (Processor API and DSL) and prints each one's `describe()`. Every case
//! there has a twin here, built with our APIs under the same name; each test compares the
//! two texts and prints the first differing lines on failure.
//!
//! The Java program is built with Maven the first time (into `tests/java-describe/target/`,
//! reusing the local Maven repository; rebuilt when its sources change) and run once per
//! test binary. Without `java` or `mvn` on the PATH the tests say `SKIPPED` on stderr and
//! pass, unless `STREAMS_REQUIRE_JAVA=1` (which `scripts/test.sh` sets): then they fail. A
//! failing Maven build always fails them, with Maven's output.
//!
//! The DSL twins name their nodes as our DSL does; the Java program gives Kafka Streams those
//! names with `Named`, `Consumed`, `Produced`, `Joined`, `Branched` and `Materialized`.
//! Where Kafka Streams cannot be given our name, the case lists a [`Rename`] applied to
//! Kafka's text before comparing; where its DSL builds other nodes, the Java program builds
//! ours another way (both are explained at the case, and in docs/processor-api.md).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use streams_core::serdes::StringSerde;
use streams_core::{
    ProcessResult, Processor, ProcessorContext, Record, SinkConfig, SourceConfig, Stores, Topology,
};
use streams_dsl::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};

/// `1` (or `true`, `yes`) makes these tests fail, instead of skip, without Java or Maven.
const REQUIRE_JAVA_ENV: &str = "STREAMS_REQUIRE_JAVA";

/// The bound on the Maven build; the first one downloads Kafka Streams and Maven's plugins.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The bound on one run of the Java program.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The Java program's main class.
const MAIN_CLASS: &str = "dev.streams.describe.DescribeTopologies";

fn java_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java-describe")
}

// ---------------------------------------------------------------------------------------
// The twins of the Java program's cases.
// ---------------------------------------------------------------------------------------

/// Does nothing: `describe()` shows only names, edges and stores.
struct Noop;
impl Processor<String, String, String, String> for Noop {
    fn process(
        &mut self,
        _: &mut ProcessorContext<'_, String, String>,
        _: Record<String, String>,
    ) -> ProcessResult {
        Ok(())
    }
}

/// A global store's processor, which forwards nothing.
struct Updater;
impl Processor<String, String, (), ()> for Updater {
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, _: Record<String, String>) -> ProcessResult {
        Ok(())
    }
}

fn kv(name: &str) -> streams_core::state::KeyValueStoreBuilder<StringSerde, StringSerde> {
    Stores::in_memory_kv(name, StringSerde, StringSerde)
}

fn strings<T: Into<String>>(topics: impl IntoIterator<Item = T>) -> SourceConfig<StringSerde, StringSerde> {
    SourceConfig::new(topics, StringSerde, StringSerde)
}

fn built(b: &streams_core::TopologyBuilder) -> Topology {
    b.build().expect("the twin topology builds")
}

fn papi_chain() -> Topology {
    let mut b = Topology::builder();
    b.add_source("events", ["event_logs"], StringSerde, StringSerde)
        .add_processor("join", || Noop, ["events"])
        .add_state_store(kv("web_hooks_store"), ["join"])
        .add_sink("out", "web_hook_requests", StringSerde, StringSerde, ["join"]);
    built(&b)
}

fn papi_branching() -> Topology {
    let mut b = Topology::builder();
    b.add_source_with("orders", strings(["orders-us", "orders-eu", "orders-apac"]))
        .add_source("payments", ["payments"], StringSerde, StringSerde)
        .add_processor("validate", || Noop, ["orders"])
        .add_processor("audit", || Noop, ["orders"])
        .add_processor("enrich", || Noop, ["validate", "payments"])
        .add_sink(
            "valid-out",
            "valid-orders",
            StringSerde,
            StringSerde,
            ["validate"],
        )
        .add_sink_with(
            "routed",
            SinkConfig::extractor(
                |k: &String, _: &String| format!("orders-{k}"),
                StringSerde,
                StringSerde,
            )
            .extractor_name("RouteByRegion"),
            ["enrich"],
        )
        .add_processor("fanout", || Noop, ["enrich"])
        .add_sink("fanout-a", "fanout-a", StringSerde, StringSerde, ["fanout"])
        .add_sink("fanout-b", "fanout-b", StringSerde, StringSerde, ["fanout"])
        .add_sink("audit-out", "audit", StringSerde, StringSerde, ["audit"])
        .add_source("clicks", ["clicks"], StringSerde, StringSerde)
        .add_processor("sessionize", || Noop, ["clicks"])
        .add_sink(
            "sessions-out",
            "sessions",
            StringSerde,
            StringSerde,
            ["sessionize"],
        )
        .add_source("refunds", ["refunds"], StringSerde, StringSerde)
        .add_processor("refund-check", || Noop, ["refunds"])
        .add_state_store(kv("products"), [] as [&str; 0])
        .add_state_store(kv("rates"), ["enrich"])
        .add_state_store(kv("customers"), ["enrich"])
        .add_state_store(kv("tariffs"), ["enrich"])
        .add_state_store(kv("sessions"), ["sessionize"])
        .add_state_store(kv("audit-log"), ["audit", "refund-check"])
        .add_state_store(kv("refund-ledger"), [] as [&str; 0])
        .connect_processor_and_state_stores("enrich", ["products"])
        .connect_processor_and_state_stores("refund-check", ["refund-ledger"]);
    built(&b)
}

fn papi_diamond() -> Topology {
    let mut b = Topology::builder();
    b.add_source("in", ["input"], StringSerde, StringSerde)
        .add_processor("left", || Noop, ["in"])
        .add_processor("right", || Noop, ["in"])
        .add_processor("both", || Noop, ["left", "right"])
        .add_sink("side", "side-output", StringSerde, StringSerde, ["right"])
        .add_sink("out", "output", StringSerde, StringSerde, ["both"]);
    built(&b)
}

fn add_global(b: &mut streams_core::TopologyBuilder, name: &str) {
    b.add_global_store(
        kv(name).without_logging(),
        &format!("{name}-source"),
        strings([name]),
        &format!("{name}-updater"),
        || Updater,
    );
}

fn papi_global_interleaved() -> Topology {
    let mut b = Topology::builder();
    b.add_source("a-in", ["a"], StringSerde, StringSerde).add_sink(
        "a-out",
        "a-copy",
        StringSerde,
        StringSerde,
        ["a-in"],
    );
    add_global(&mut b, "lookup");
    b.add_source("b-in", ["b"], StringSerde, StringSerde)
        .add_processor("b-proc", || Noop, ["b-in"])
        .add_sink("b-out", "b-copy", StringSerde, StringSerde, ["b-proc"]);
    add_global(&mut b, "geo");
    built(&b)
}

fn papi_global_first() -> Topology {
    let mut b = Topology::builder();
    add_global(&mut b, "lookup");
    b.add_source("in", ["input"], StringSerde, StringSerde)
        .add_processor("use-lookup", || Noop, ["in"])
        .add_sink("out", "output", StringSerde, StringSerde, ["use-lookup"]);
    built(&b)
}

fn papi_global_only() -> Topology {
    let mut b = Topology::builder();
    add_global(&mut b, "lookup");
    built(&b)
}

fn strings_in() -> Consumed<StringSerde, StringSerde> {
    Consumed::with(StringSerde, StringSerde)
}

fn strings_out() -> Produced<StringSerde, StringSerde> {
    Produced::with(StringSerde, StringSerde)
}

fn dsl(b: &StreamsBuilder) -> Topology {
    b.build().expect("the twin DSL program builds")
}

fn dsl_stateless() -> Topology {
    let b = StreamsBuilder::new();
    let words = b.stream(["words"], strings_in());
    let kept = words.filter(|_, v| !v.is_empty());
    kept.foreach(|_, _| {});
    let branches = kept
        .named("upper")
        .map_values(|_, v| v.to_uppercase())
        .split()
        .branch(|_, v| v.len() > 5)
        .branch(|_, v| v.len() > 2)
        .default_branch();
    branches[0].to("long-words", strings_out());
    branches[1].to("short-words", strings_out());
    branches[2].peek(|_, _| {}).to("tiny-words", strings_out());
    dsl(&b)
}

fn dsl_repartition_count() -> Topology {
    let b = StreamsBuilder::new();
    b.stream(["lines"], strings_in())
        .map(|_, v: String| (v.clone(), v))
        .group_by_key(Grouped::as_("words"))
        .count(Materialized::as_("counts"));
    dsl(&b)
}

fn string_table(name: &str) -> Materialized<String, String> {
    Materialized::as_(name)
        .with_key_serde(StringSerde)
        .with_value_serde(StringSerde)
}

fn dsl_stream_table_join() -> Topology {
    let b = StreamsBuilder::new();
    let users = b.table("users", string_table("users-store"));
    b.stream(["orders"], strings_in())
        .join(&users, |_, o, u| format!("{o}{u}"))
        .to("enriched-orders", strings_out());
    dsl(&b)
}

fn dsl_table_table_join() -> Topology {
    let b = StreamsBuilder::new();
    let names = b.table("names", string_table("names"));
    let ages = b.table("ages", string_table("ages"));
    names.join(&ages, |_, n, a| format!("{n}{a}"));
    dsl(&b)
}

fn dsl_global_table_join() -> Topology {
    let b = StreamsBuilder::new();
    let users = b.global_table("users", string_table("users-global-store"));
    b.stream(["clicks"], strings_in())
        .join_global(&users, |_, v: &String| v.clone(), |_, c, u| format!("{c}{u}"))
        .to("enriched-clicks", strings_out());
    dsl(&b)
}

/// A node name Kafka Streams' DSL gives where ours gives another, replaced in Kafka's text
/// before the comparison.
struct Rename {
    kafka: &'static str,
    ours: &'static str,
}

/// A case: its name in the Java program, our twin, and the names that differ by design.
struct Case {
    name: &'static str,
    build: fn() -> Topology,
    renames: &'static [Rename],
}

const CASES: &[Case] = &[
    Case {
        name: "papi-chain",
        build: papi_chain,
        renames: &[],
    },
    Case {
        name: "papi-branching",
        build: papi_branching,
        renames: &[],
    },
    Case {
        name: "papi-diamond",
        build: papi_diamond,
        renames: &[],
    },
    Case {
        name: "papi-global-interleaved",
        build: papi_global_interleaved,
        renames: &[],
    },
    Case {
        name: "papi-global-first",
        build: papi_global_first,
        renames: &[],
    },
    Case {
        name: "papi-global-only",
        build: papi_global_only,
        renames: &[],
    },
    Case {
        name: "dsl-stateless",
        build: dsl_stateless,
        renames: &[],
    },
    // Kafka Streams' groupByKey after a key change adds a null-key filter node
    // (`words-repartition-filter`) and names the pair `words-repartition-sink`/`-source`; our
    // keys are never null, and our pair is `words-sink`/`words-source`. The Java program
    // writes that pair itself (`to` and `stream`), so both describe the same graph.
    Case {
        name: "dsl-repartition-count",
        build: dsl_repartition_count,
        renames: &[],
    },
    // Kafka Streams' `table()` names its table node `<Consumed name>-table-source`; ours is
    // `<topic>-table`. The Java program reads the table with `stream().toTable()`, which
    // builds the same two nodes under names it is given.
    Case {
        name: "dsl-stream-table-join",
        build: dsl_stream_table_join,
        renames: &[],
    },
    // Kafka Streams names a table-table join's side nodes `<join name>-join-this` and
    // `-join-other`; ours are `<join name>-this` and `-other`.
    Case {
        name: "dsl-table-table-join",
        build: dsl_table_table_join,
        renames: &[
            Rename {
                kafka: "names-table-join-join-this",
                ours: "names-table-join-this",
            },
            Rename {
                kafka: "names-table-join-join-other",
                ours: "names-table-join-other",
            },
        ],
    },
    // Kafka Streams names a global table's source `<Consumed name>-source` (its processor
    // takes the Consumed name); ours are `<topic>-global_source` and `<topic>-global_table`.
    Case {
        name: "dsl-global-table-join",
        build: dsl_global_table_join,
        renames: &[Rename {
            kafka: "users-global_table-source",
            ours: "users-global_source",
        }],
    },
];

// ---------------------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------------------

#[test]
fn papi_chain_matches_kafka_streams() {
    check("papi-chain");
}

#[test]
fn papi_branching_matches_kafka_streams() {
    check("papi-branching");
}

#[test]
fn papi_diamond_matches_kafka_streams() {
    check("papi-diamond");
}

#[test]
fn papi_global_interleaved_matches_kafka_streams() {
    check("papi-global-interleaved");
}

#[test]
fn papi_global_first_matches_kafka_streams() {
    check("papi-global-first");
}

#[test]
fn papi_global_only_matches_kafka_streams() {
    check("papi-global-only");
}

#[test]
fn dsl_stateless_matches_kafka_streams() {
    check("dsl-stateless");
}

#[test]
fn dsl_repartition_count_matches_kafka_streams() {
    check("dsl-repartition-count");
}

#[test]
fn dsl_stream_table_join_matches_kafka_streams() {
    check("dsl-stream-table-join");
}

#[test]
fn dsl_table_table_join_matches_kafka_streams() {
    check("dsl-table-table-join");
}

#[test]
fn dsl_global_table_join_matches_kafka_streams() {
    check("dsl-global-table-join");
}

/// The Java program and this file list the same cases.
#[test]
fn every_kafka_case_has_a_twin() {
    let Some(kafka) = kafka_descriptions("every_kafka_case_has_a_twin") else {
        return;
    };
    let java: Vec<&str> = kafka.keys().map(String::as_str).collect();
    let mut ours: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    ours.sort_unstable();
    assert_eq!(java, ours, "the Java program's cases and this file's differ");
}

/// Compares case `name`'s two descriptions.
fn check(name: &str) {
    let case = CASES
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    let Some(kafka) = kafka_descriptions(name) else {
        return;
    };
    let Some(expected) = kafka.get(name) else {
        panic!("the Java program printed no case {name}");
    };
    let mut expected = expected.clone();
    for r in case.renames {
        expected = rename(&expected, r.kafka, r.ours);
    }
    let ours = (case.build)().describe().to_string();
    if let Some(diff) = first_difference(&expected, &ours) {
        panic!(
            "{name}: describe() differs from Kafka Streams 4.1.1{}\n{diff}",
            if case.renames.is_empty() {
                ""
            } else {
                " (after the case's renames)"
            }
        );
    }
}

/// `text` with every whole-name occurrence of `from` replaced by `to`.
fn rename(text: &str, from: &str, to: &str) -> String {
    let in_name = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(in_name) || after.is_some_and(in_name) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

/// A unified-style diff of the first lines where `expected` (Kafka Streams) and `actual`
/// (ours) differ, with three lines of context; `None` when the texts are equal.
fn first_difference(expected: &str, actual: &str) -> Option<String> {
    if expected == actual {
        return None;
    }
    let e: Vec<&str> = expected.split('\n').collect();
    let a: Vec<&str> = actual.split('\n').collect();
    let first = e.iter().zip(&a).take_while(|(x, y)| x == y).count();
    let start = first.saturating_sub(3);
    const SHOWN: usize = 8;
    let e_end = (first + SHOWN).min(e.len());
    let a_end = (first + SHOWN).min(a.len());
    let mut out = String::from("--- Kafka Streams 4.1.1\n+++ streams-rs\n");
    out.push_str(&format!(
        "@@ -{},{} +{},{} @@ (first difference at line {}; lines quoted, so spaces show)\n",
        start + 1,
        e_end - start,
        start + 1,
        a_end - start,
        first + 1
    ));
    for line in &e[start..first] {
        out.push_str(&format!(" {line:?}\n"));
    }
    for line in &e[first..e_end] {
        out.push_str(&format!("-{line:?}\n"));
    }
    for line in &a[first..a_end] {
        out.push_str(&format!("+{line:?}\n"));
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------
// Building and running the Java program.
// ---------------------------------------------------------------------------------------

/// The Java program's descriptions by case name, built and run once per test binary;
/// `None` (after saying so) when Java or Maven is missing and not required.
///
/// # Panics
///
/// When the build or the run fails, or Java or Maven is missing and [`REQUIRE_JAVA_ENV`]
/// asks for them.
fn kafka_descriptions(test: &str) -> Option<&'static BTreeMap<String, String>> {
    static OUTPUT: OnceLock<Result<BTreeMap<String, String>, Outcome>> = OnceLock::new();
    match OUTPUT.get_or_init(build_and_run) {
        Ok(cases) => Some(cases),
        Err(Outcome::Missing(what)) => {
            if java_required() {
                panic!(
                    "{test}: {REQUIRE_JAVA_ENV}=1 but {what} (run scripts/install-deps.sh: it \
                     installs a JDK 17 and Maven)"
                );
            }
            // Past the harness's output capture: a skip must show in every run.
            let _ = writeln!(
                std::io::stderr().lock(),
                "SKIPPED {test}: {what}; set {REQUIRE_JAVA_ENV}=1 to fail instead (scripts/test.sh does)"
            );
            None
        }
        Err(Outcome::Failed(why)) => panic!("{test}: {why}"),
    }
}

/// Why there are no descriptions.
enum Outcome {
    /// Java or Maven is not installed.
    Missing(String),
    /// Building or running the program failed.
    Failed(String),
}

fn java_required() -> bool {
    std::env::var(REQUIRE_JAVA_ENV).is_ok_and(|v| {
        let v = v.trim();
        v == "1" || v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("yes")
    })
}

/// Whether `program` runs (with an argument that makes it print its version).
fn installed(program: &str, version_arg: &str) -> bool {
    Command::new(program)
        .arg(version_arg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn build_and_run() -> Result<BTreeMap<String, String>, Outcome> {
    for (program, arg) in [("java", "-version"), ("mvn", "-v")] {
        if !installed(program, arg) {
            return Err(Outcome::Missing(format!("`{program}` is not on the PATH")));
        }
    }
    let dir = java_dir();
    let classpath = build(&dir).map_err(Outcome::Failed)?;
    let stdout = run(&dir, &classpath).map_err(Outcome::Failed)?;
    parse(&stdout).map_err(Outcome::Failed)
}

/// A stable hash (FNV-1a, 64 bits) of the program's sources: the build is redone when it
/// changes.
fn sources_hash(dir: &Path) -> Result<String, String> {
    let mut files = vec![dir.join("pom.xml")];
    let mut pending = vec![dir.join("src")];
    while let Some(d) = pending.pop() {
        let entries = fs::read_dir(&d).map_err(|e| format!("reading {}: {e}", d.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("reading {}: {e}", d.display()))?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in &files {
        let bytes = fs::read(f).map_err(|e| format!("reading {}: {e}", f.display()))?;
        let name = f.strip_prefix(dir).unwrap_or(f).to_string_lossy().into_owned();
        for b in name.bytes().chain([0]).chain(bytes).chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    Ok(format!("{h:016x}"))
}

/// Builds the program unless it is built from these sources already; returns its class
/// path (its classes, then Kafka Streams' jars).
fn build(dir: &Path) -> Result<std::ffi::OsString, String> {
    let target = dir.join("target");
    fs::create_dir_all(&target).map_err(|e| format!("creating {}: {e}", target.display()))?;
    let _lock = BuildLock::take(&target.join(".build-lock"))?;
    let stamp = target.join("sources.hash");
    let listed = target.join("classpath.txt");
    let hash = sources_hash(dir)?;
    let built = fs::read_to_string(&stamp).is_ok_and(|s| s == hash) && listed.is_file();
    if !built {
        let _ = fs::remove_file(&stamp);
        let log = target.join("mvn.log");
        let started = Instant::now();
        let mut mvn = Command::new("mvn");
        mvn.args([
            "-q",
            "-B",
            "-Dstyle.color=never",
            "compile",
            "dependency:build-classpath",
        ])
        .current_dir(dir);
        let status = run_bounded(mvn, &log, None, BUILD_TIMEOUT)?;
        let output = without_escapes(&fs::read_to_string(&log).unwrap_or_default());
        if !status {
            return Err(format!(
                "building the Java program with Maven failed ({} in {}); its output:\n{output}",
                dir.display(),
                seconds(started)
            ));
        }
        fs::write(&stamp, &hash).map_err(|e| format!("writing {}: {e}", stamp.display()))?;
        let _ = writeln!(
            std::io::stderr().lock(),
            "describe_java: built the Kafka Streams program in {}",
            seconds(started)
        );
    }
    let jars = fs::read_to_string(&listed).map_err(|e| format!("reading {}: {e}", listed.display()))?;
    let paths = std::iter::once(target.join("classes")).chain(std::env::split_paths(jars.trim()));
    std::env::join_paths(paths).map_err(|e| format!("the class path: {e}"))
}

/// Runs the program; returns its standard output.
fn run(dir: &Path, classpath: &std::ffi::OsStr) -> Result<String, String> {
    let target = dir.join("target");
    let out = target.join(format!("describe-{}.out", std::process::id()));
    let err = target.join(format!("describe-{}.err", std::process::id()));
    let mut java = Command::new("java");
    java.arg("-cp").arg(classpath).arg(MAIN_CLASS).current_dir(dir);
    let ok = run_bounded(java, &err, Some(&out), RUN_TIMEOUT);
    let stdout = fs::read_to_string(&out).unwrap_or_default();
    let stderr = fs::read_to_string(&err).unwrap_or_default();
    let _ = fs::remove_file(&out);
    let _ = fs::remove_file(&err);
    if !ok? {
        return Err(format!(
            "the Java program failed; its output:\n{stdout}\nand its errors:\n{stderr}"
        ));
    }
    Ok(stdout)
}

/// Runs `cmd` with its stderr (and its stdout, unless `stdout` names a file for it) written
/// to `log`, killing it after `limit`; whether it exited successfully.
fn run_bounded(mut cmd: Command, log: &Path, stdout: Option<&Path>, limit: Duration) -> Result<bool, String> {
    let file = |p: &Path| fs::File::create(p).map_err(|e| format!("creating {}: {e}", p.display()));
    let errors = file(log)?;
    let output = match stdout {
        Some(p) => file(p)?,
        None => errors
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?,
    };
    let program = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(output)
        .stderr(errors)
        .spawn()
        .map_err(|e| format!("starting {program}: {e}"))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status.success()),
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                let so_far = fs::read_to_string(log).unwrap_or_default();
                return Err(format!(
                    "{program} did not finish within {} s and was killed; its output so far:\n{so_far}",
                    limit.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for {program}: {e}")),
        }
    }
}

/// `text` without terminal escape sequences (Maven colours some lines whatever it is told).
fn without_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        // ESC [ parameters, ended by a letter.
        if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        }
    }
    out
}

fn seconds(since: Instant) -> String {
    format!("{:.1} s", since.elapsed().as_secs_f64())
}

/// A directory held while one process builds the program; another waits for it. A lock
/// older than the build's bound is left over from a killed run and taken over.
struct BuildLock(PathBuf);

impl BuildLock {
    fn take(path: &Path) -> Result<Self, String> {
        let started = Instant::now();
        loop {
            match fs::create_dir(path) {
                Ok(()) => return Ok(Self(path.to_owned())),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let age = fs::metadata(path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok());
                    if age.is_some_and(|a| a > BUILD_TIMEOUT) {
                        let _ = fs::remove_dir(path);
                    } else if started.elapsed() > BUILD_TIMEOUT {
                        return Err(format!("{} is held by another build", path.display()));
                    } else {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
                Err(e) => return Err(format!("creating {}: {e}", path.display())),
            }
        }
    }
}

impl Drop for BuildLock {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

/// The cases of the program's output: `=== BEGIN name ===`, the text, a newline of the
/// program's own and `=== END name ===`.
fn parse(stdout: &str) -> Result<BTreeMap<String, String>, String> {
    let mut cases = BTreeMap::new();
    let mut rest = stdout;
    while !rest.is_empty() {
        let bad = || format!("unexpected output from the Java program:\n{stdout}");
        let after_begin = rest.strip_prefix("=== BEGIN ").ok_or_else(bad)?;
        let (name, body) = after_begin.split_once(" ===\n").ok_or_else(bad)?;
        let end = format!("\n=== END {name} ===\n");
        let at = body.find(&end).ok_or_else(bad)?;
        cases.insert(name.to_owned(), body[..at].to_owned());
        rest = &body[at + end.len()..];
    }
    if cases.is_empty() {
        return Err(format!("the Java program printed no case:\n{stdout}"));
    }
    Ok(cases)
}
