//! Building and running a small Kafka Streams program with Maven, for the tests that
//! compare this crate with Kafka Streams (`describe_java.rs`, `differential_java.rs`).
//!
//! A [`JavaProgram`] is a Maven project under `tests/` with one main class. It is built the
//! first time (into its `target/`, reusing the local Maven repository, and again only when
//! its `pom.xml` or `src/` change, by a hash of them), under a lock directory so that
//! concurrent test binaries build it once. It is then run with a bound on its time; its
//! standard output is the result. A test binary runs it once and keeps the result in a
//! `OnceLock`, then asks [`available`] in each test: without `java` or `mvn` on the PATH a
//! test says `SKIPPED` on stderr and passes, unless `STREAMS_REQUIRE_JAVA=1` (which
//! `scripts/test.sh` sets) makes it fail. A failing build or run always fails the tests,
//! with Maven's or Java's output.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// `1` (or `true`, `yes`) makes these tests fail, instead of skip, without Java or Maven.
pub const REQUIRE_JAVA_ENV: &str = "STREAMS_REQUIRE_JAVA";

/// The bound on the Maven build; the first one downloads Kafka Streams and Maven's plugins.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The bound on one run of the Java program, unless it sets its own.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A Maven project with a main class, run with arguments.
pub struct JavaProgram {
    /// The project's directory (holding `pom.xml` and `src/`).
    pub dir: PathBuf,
    /// The main class.
    pub main_class: &'static str,
    /// The program's arguments.
    pub args: Vec<OsString>,
    /// A short name for messages and temporary files (the test file's name).
    pub label: &'static str,
    /// The bound on its run.
    pub timeout: Duration,
}

impl JavaProgram {
    /// A program in `tests/<dir>` of this crate.
    pub fn in_tests(dir: &str, main_class: &'static str, label: &'static str) -> Self {
        Self {
            dir: PathBuf::from(
                std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
            )
            .join("tests")
            .join(dir),
            main_class,
            args: Vec::new(),
            label,
            timeout: RUN_TIMEOUT,
        }
    }

    /// Builds the program if needed and runs it; its standard output.
    pub fn build_and_run(&self) -> Result<String, Outcome> {
        for (program, arg) in [("java", "-version"), ("mvn", "-v")] {
            if !installed(program, arg) {
                return Err(Outcome::Missing(format!("`{program}` is not on the PATH")));
            }
        }
        let classpath = build(&self.dir, self.label).map_err(Outcome::Failed)?;
        run(self, &classpath).map_err(Outcome::Failed)
    }
}

/// Why a program gave no result.
pub enum Outcome {
    /// Java or Maven is not installed.
    Missing(String),
    /// Building or running the program (or reading its output) failed.
    Failed(String),
}

/// The result of a program run for test `test`; `None` (after saying so) when Java or
/// Maven is missing and not required.
///
/// # Panics
///
/// When the build or the run failed, or Java or Maven is missing and [`REQUIRE_JAVA_ENV`]
/// asks for them.
pub fn available<'a, T>(test: &str, result: &'a Result<T, Outcome>) -> Option<&'a T> {
    match result {
        Ok(value) => Some(value),
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

/// Whether [`REQUIRE_JAVA_ENV`] asks for Java and Maven.
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
fn build(dir: &Path, label: &str) -> Result<OsString, String> {
    let target = dir.join("target");
    fs::create_dir_all(&target).map_err(|e| format!("creating {}: {e}", target.display()))?;
    let _lock = BuildLock::take(&target.join(".build-lock"))?;
    let stamp = target.join("sources.hash");
    let listed = target.join("classpath.txt");
    let hash = sources_hash(dir)?;
    // Built from these sources, and every jar it lists still there (a build made with
    // another local Maven repository lists jars that may be gone).
    let built = fs::read_to_string(&stamp).is_ok_and(|s| s == hash)
        && fs::read_to_string(&listed)
            .is_ok_and(|jars| std::env::split_paths(jars.trim()).all(|jar| jar.is_file()));
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
            "{label}: built the Kafka Streams program in {}",
            seconds(started)
        );
    }
    let jars = fs::read_to_string(&listed).map_err(|e| format!("reading {}: {e}", listed.display()))?;
    let paths = std::iter::once(target.join("classes")).chain(std::env::split_paths(jars.trim()));
    std::env::join_paths(paths).map_err(|e| format!("the class path: {e}"))
}

/// Runs `program` with `classpath`; returns its standard output.
fn run(program: &JavaProgram, classpath: &OsStr) -> Result<String, String> {
    // Runs of one test binary may overlap (a shrinking test while others run).
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let target = program.dir.join("target");
    let name = format!("{}-{}-{run}", program.label, std::process::id());
    let out = target.join(format!("{name}.out"));
    let err = target.join(format!("{name}.err"));
    let mut java = Command::new("java");
    java.arg("-cp")
        .arg(classpath)
        .arg(program.main_class)
        .args(&program.args)
        .current_dir(&program.dir);
    let ok = run_bounded(java, &err, Some(&out), program.timeout);
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
