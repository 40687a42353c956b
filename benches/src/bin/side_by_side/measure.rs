//! Measuring one run: the child process, its CPU time and peak RSS and the broker's CPU time
//! from `/proc`, the wait until its consumer group has committed the end of the input, and
//! the check of its output (`check.rs`).

use super::*;

/// One measured run.
pub(crate) struct RunResult {
    pub(crate) cell: String,
    pub(crate) run: usize,
    pub(crate) records: u64,
    pub(crate) seconds: f64,
    pub(crate) first_output_s: f64,
    pub(crate) cpu_s: f64,
    /// The broker's CPU seconds over the same window (NaN when its process is unknown).
    pub(crate) broker_cpu_s: f64,
    pub(crate) peak_rss_kib: u64,
    /// The 1-minute load average before the run.
    pub(crate) load1: f64,
    /// `ok`, or why the output is wrong: the run then does not count.
    pub(crate) check: String,
    /// Seconds the check took (outside the timed window).
    pub(crate) check_s: f64,
    /// What of a Nexmark query's output must equal the other implementation's.
    pub(crate) digest: Option<Digest>,
}

/// What every run of the driver shares.
pub(crate) struct Harness<'a> {
    pub(crate) bootstrap: &'a str,
    pub(crate) out_dir: &'a Path,
    pub(crate) java_cp: &'a str,
    pub(crate) clk_tck: f64,
    /// The broker's process: its CPU time is read around every timed window.
    pub(crate) broker_pid: Option<u32>,
}

/// The broker's process id: `BENCH_BROKER_PID` (run.sh sets it), else the pid file that
/// `scripts/kafka.sh` keeps in its run dir (`$KAFKA_RUN_DIR/kafka.pid`; run.sh's run dir is
/// `/tmp/kafka-bench`). `None` unless that process is running `kafka.Kafka`.
pub(crate) fn broker_pid() -> Option<u32> {
    let pid: u32 = match std::env::var("BENCH_BROKER_PID") {
        Ok(p) => p.trim().parse().ok()?,
        Err(_) => {
            let dir = std::env::var("KAFKA_RUN_DIR").unwrap_or_else(|_| "/tmp/kafka-bench".into());
            std::fs::read_to_string(Path::new(&dir).join("kafka.pid"))
                .ok()?
                .trim()
                .parse()
                .ok()?
        }
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let is_kafka = cmdline.split(|b| *b == 0).any(|arg| arg == b"kafka.Kafka");
    is_kafka.then_some(pid)
}

pub(crate) fn admin(bootstrap: &str) -> Res<AdminClient<DefaultClientContext>> {
    Ok(ClientConfig::new().set("bootstrap.servers", bootstrap).create()?)
}

/// Deletes every topic of application `app_id`: those named `<app_id>-...` (its output,
/// changelogs and repartition topics).
pub(crate) fn delete_app_topics(bootstrap: &str, app_id: &str) -> Res<()> {
    let probe: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let meta = probe.fetch_metadata(None, Duration::from_secs(10))?;
    let prefix = format!("{app_id}-");
    let topics: Vec<&str> = meta
        .topics()
        .iter()
        .map(|t| t.name())
        .filter(|t| t.starts_with(&prefix))
        .collect();
    if topics.is_empty() {
        return Ok(());
    }
    delete_topics(bootstrap, &topics)
}

/// Whether group `app_id` has committed the end of every partition of the internal topics
/// its application reads (`<app_id>-...` but changelogs and `output`: repartition topics,
/// a foreign-key join's subscription and response topics): with the input's end
/// committed, the last sub-topology has then processed everything too. Only
/// at-least-once: a transaction's commit marker would sit after the last committed offset.
fn internal_topics_done(consumer: &BaseConsumer, app_id: &str, output: &str) -> bool {
    let Ok(meta) = consumer.fetch_metadata(None, Duration::from_secs(5)) else {
        return false;
    };
    let prefix = format!("{app_id}-");
    let mut tpl = TopicPartitionList::new();
    let mut ends = Vec::new();
    let internal = meta.topics().iter().filter(|t| {
        let name = t.name();
        name.starts_with(&prefix) && !name.ends_with("-changelog") && name != output
    });
    for t in internal {
        for p in t.partitions() {
            let Ok((_, high)) = consumer.fetch_watermarks(t.name(), p.id(), Duration::from_secs(5)) else {
                return false;
            };
            tpl.add_partition(t.name(), p.id());
            ends.push((t.name().to_owned(), p.id(), high));
        }
    }
    if ends.is_empty() {
        return true;
    }
    let Ok(committed) = consumer.committed_offsets(tpl, Duration::from_secs(5)) else {
        return false;
    };
    ends.iter().all(|(t, p, high)| {
        *high == 0
            || matches!(committed.find_partition(t, *p).map(|e| e.offset()), Some(Offset::Offset(o)) if o >= *high)
    })
}

pub(crate) fn delete_topics(bootstrap: &str, topics: &[&str]) -> Res<()> {
    let admin = admin(bootstrap)?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    // Missing topics (a run that failed early) are fine.
    let _ = block_on_timeout(admin.delete_topics(topics, &opts), Duration::from_secs(60));
    Ok(())
}

/// CPU seconds (user + system, all threads) of a live process.
pub(crate) fn proc_cpu(pid: u32, clk_tck: f64) -> Res<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').ok_or("bad /proc stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
    Ok(ticks as f64 / clk_tck)
}

/// CPU seconds (user + system, all threads) and peak RSS (KiB) of a live process.
pub(crate) fn proc_usage(pid: u32, clk_tck: f64) -> Res<(f64, u64)> {
    let cpu = proc_cpu(pid, clk_tck)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    Ok((cpu, hwm))
}

pub(crate) fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn spawn_app(
    imp: &str,
    workload: &str,
    guarantee: &str,
    bootstrap: &str,
    app_id: &str,
    input: &str,
    output: &str,
    state_dir: &Path,
    commit_ms: u64,
    cache_bytes: u64,
    java_cp: &str,
    log: &Path,
) -> Res<Child> {
    let state = state_dir.to_string_lossy().into_owned();
    let mut cmd = if imp == "java" {
        let mut c = Command::new("java");
        let opts = std::env::var("BENCH_JAVA_OPTS").unwrap_or_else(|_| "-Xmx1g".into());
        c.args(opts.split_whitespace())
            .arg("-cp")
            .arg(java_cp)
            .arg("dev.streams.bench.BenchApp")
            .args([
                bootstrap,
                app_id,
                input,
                output,
                &state,
                workload,
                guarantee,
                &commit_ms.to_string(),
                &cache_bytes.to_string(),
                "1",
            ]);
        c
    } else {
        let mut c = Command::new(std::env::current_exe()?);
        c.args([
            "app",
            imp,
            workload,
            guarantee,
            bootstrap,
            app_id,
            input,
            output,
            &state,
            &commit_ms.to_string(),
            &cache_bytes.to_string(),
        ]);
        c
    };
    let out = std::fs::File::create(log)?;
    Ok(cmd
        .stdin(Stdio::piped())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()?)
}

/// What one application launch measured.
pub(crate) struct Measured {
    pub(crate) seconds: f64,
    pub(crate) first_output_s: f64,
    pub(crate) cpu_s: f64,
    pub(crate) broker_cpu_s: f64,
    pub(crate) peak_rss_kib: u64,
}

/// Identifies one application launch.
#[derive(Clone, Copy)]
pub(crate) struct Launch<'a> {
    pub(crate) imp: &'a str,
    pub(crate) workload: &'a str,
    pub(crate) guarantee: &'a str,
    pub(crate) app_id: &'a str,
    pub(crate) input: &'a str,
    pub(crate) output: &'a str,
    pub(crate) state_dir: &'a Path,
    pub(crate) tag: &'a str,
}

/// Launches one application, waits until its group has committed `ends` on every input
/// partition, reads its CPU time and peak RSS and the broker's CPU time, then closes it and
/// waits for it to exit.
pub(crate) fn measure(h: &Harness<'_>, l: &Launch<'_>, ends: &[(i32, i64)]) -> Res<Measured> {
    let (bootstrap, clk_tck) = (h.bootstrap, h.clk_tck);
    let commit_ms = if l.guarantee == "exactly_once_v2" {
        100
    } else {
        1000
    };
    let cache_bytes = 10 * 1024 * 1024;
    let offsets_reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", l.app_id)
        .set("enable.auto.commit", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for (p, _) in ends {
        tpl.add_partition(l.input, *p);
    }
    let tag = l.tag;
    let log = h.out_dir.join(format!("{tag}.log"));
    let broker_cpu = || h.broker_pid.and_then(|p| proc_cpu(p, clk_tck).ok());
    // What the output holds already (a launch that continues an earlier one's work): the
    // first output is the first record beyond it.
    let output_records = || -> i64 {
        ends.iter()
            .filter_map(|(p, _)| {
                offsets_reader
                    .fetch_watermarks(l.output, *p, Duration::from_secs(5))
                    .ok()
            })
            .map(|(_, high)| high)
            .sum()
    };
    let output_before = output_records();
    let broker_cpu0 = broker_cpu();
    let t0 = Instant::now();
    let mut child = spawn_app(
        l.imp,
        l.workload,
        l.guarantee,
        bootstrap,
        l.app_id,
        l.input,
        l.output,
        l.state_dir,
        commit_ms,
        cache_bytes,
        h.java_cp,
        &log,
    )?;
    let pid = child.id();
    let timeout = Duration::from_secs(
        std::env::var("BENCH_RUN_TIMEOUT_S")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(900),
    );
    let mut first_output: Option<f64> = None;
    let mut last = (0.0, 0u64, 0.0);
    let done = loop {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(status) = child.try_wait()? {
            break Err(format!(
                "{tag}: the application exited early ({status}); see {}",
                log.display()
            ));
        }
        if t0.elapsed() > timeout {
            break Err(format!(
                "{tag}: not done within {timeout:?}; see {}",
                log.display()
            ));
        }
        // Usage is sampled before the commit check, so it covers at least the processing.
        if let Ok((cpu, hwm)) = proc_usage(pid, clk_tck) {
            last = (t0.elapsed().as_secs_f64(), hwm, cpu);
        }
        if first_output.is_none() && output_records() > output_before {
            first_output = Some(t0.elapsed().as_secs_f64());
        }
        let Ok(committed) = offsets_reader.committed_offsets(tpl.clone(), Duration::from_secs(5)) else {
            continue;
        };
        let all = ends.iter().all(|(p, end)| {
            matches!(committed.find_partition(l.input, *p).map(|e| e.offset()), Some(Offset::Offset(o)) if o >= *end)
        });
        if all && internal_topics_done(&offsets_reader, l.app_id, l.output) {
            let seconds = t0.elapsed().as_secs_f64();
            let (cpu, hwm) = proc_usage(pid, clk_tck).map_or((last.2, last.1), |u| u);
            let broker = match (broker_cpu0, broker_cpu()) {
                (Some(a), Some(b)) => b - a,
                _ => f64::NAN,
            };
            break Ok((seconds, cpu, hwm, broker));
        }
    };
    drop(child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (seconds, cpu_s, peak_rss_kib, broker_cpu_s) = done?;
    Ok(Measured {
        seconds,
        first_output_s: first_output.unwrap_or(f64::NAN),
        cpu_s,
        broker_cpu_s,
        peak_rss_kib,
    })
}

/// End offsets of every partition of `topic`.
pub(crate) fn end_offsets(bootstrap: &str, topic: &str) -> Res<Vec<(i32, i64)>> {
    let probe: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let meta = probe.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let t = meta.topics().first().ok_or("topic missing")?;
    let mut ends = Vec::new();
    for p in t.partitions() {
        let (_, high) = probe.fetch_watermarks(topic, p.id(), Duration::from_secs(10))?;
        ends.push((p.id(), high));
    }
    Ok(ends)
}

/// Waits until consumer group `group` has no members. Kafka Streams does not leave the group
/// when it closes, so a restarted instance would otherwise wait for its predecessor's session
/// to time out, and the restore measurement would time that instead.
pub(crate) fn wait_for_empty_group(bootstrap: &str, group: &str, timeout: Duration) -> Res<()> {
    let client: BaseConsumer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    let deadline = Instant::now() + timeout;
    loop {
        let list = client.fetch_group_list(Some(group), Duration::from_secs(10))?;
        if list.groups().iter().all(|g| g.members().is_empty()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("group {group} still has members after {timeout:?}").into());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Runs the application of `l` until its group has committed `ends` (its measurements,
/// under the tag `<tag>-fill`, are dropped), closes it and waits until its group is empty,
/// so that the same application can be started again at once.
pub(crate) fn run_untimed(h: &Harness<'_>, l: &Launch<'_>, ends: &[(i32, i64)]) -> Res<()> {
    let tag = format!("{}-fill", l.tag);
    measure(h, &Launch { tag: &tag, ..*l }, ends)?;
    wait_for_empty_group(h.bootstrap, l.app_id, Duration::from_secs(120))
}

/// Appends one record (value `marker`) with key `key` to partition `p` of `topic` for every
/// `(p, key)` of `markers`.
pub(crate) fn append_markers(bootstrap: &str, topic: &str, markers: &[(i32, Vec<u8>)]) -> Res<()> {
    let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", bootstrap).create()?;
    for (p, key) in markers {
        producer
            .send(
                BaseRecord::to(topic)
                    .key(key.as_slice())
                    .payload("marker")
                    .partition(*p),
            )
            .map_err(|(e, _)| e)?;
    }
    producer.flush(Duration::from_secs(30))?;
    Ok(())
}

/// The inputs the cells read.
#[derive(Clone, Copy)]
pub(crate) struct Inputs<'a> {
    /// The input topic of most workloads, what it holds and its end offsets.
    pub(crate) input: &'a str,
    pub(crate) summary: Option<&'a InputSummary>,
    pub(crate) ends: &'a [(i32, i64)],
    /// The restore's input topic.
    pub(crate) restore_input: &'a str,
    /// The aggregation workloads' inputs, by workload.
    pub(crate) aggs: &'a HashMap<String, AggInput>,
}

/// Runs one cell once, measures it and checks its output.
///
/// The `restore` workload runs the count on `restore_input` to its end, closes it, appends
/// one record to every input partition and starts the same application again with an empty
/// state directory: the second launch, measured, restores the whole store from the changelog
/// before it can process (and commit) the new records. Its records are the changelog's. The
/// new records carry the key of their partition's first record, so that their counts, the
/// last outputs of those keys, are right only if the store was restored.
///
/// A Nexmark query's output is reduced to its [`Digest`] (`nexmark.rs`), which the driver
/// compares with the other implementation's after all runs.
///
/// An aggregation workload (`aggN`, `agg.rs`) reads its own input of `inputs.aggs`.
///
/// `inputs.summary` is what `inputs.input` holds (the restore reads its own input's, which
/// every run appends to). The output topic is checked after the application has closed, before it and
/// the application's internal topics are deleted.
pub(crate) fn run_once(h: &Harness<'_>, inputs: &Inputs<'_>, cell: &str, run: usize) -> Res<RunResult> {
    let Inputs {
        input,
        summary: input_summary,
        ends,
        restore_input,
        aggs,
    } = *inputs;
    let bootstrap = h.bootstrap;
    let parts: Vec<&str> = cell.split(':').collect();
    let [imp, workload, guarantee] = parts[..] else {
        return Err(format!("bad cell {cell}: want impl:workload:guarantee").into());
    };
    let query = streams_benches::nexmark::queries::QUERIES.contains(&workload);
    let load = load1();
    let g = if guarantee == "exactly_once_v2" {
        "eos"
    } else {
        "alos"
    };
    let tag = format!("{imp}-{workload}-{g}-{run}");
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let app_id = format!("bench-{tag}-{nonce}");
    let output = format!("{app_id}-out");
    let changelog = format!("{app_id}-counts-changelog");
    let mut digest = None;
    let state_dir = tempfile::tempdir()?;
    let restore = workload == "restore";
    let agg = match agg::entries(workload) {
        Some(_) => Some(
            aggs.get(workload)
                .ok_or("the aggregation's input was not preloaded")?,
        ),
        None => None,
    };
    let (input, ends) = if restore {
        (restore_input, end_offsets(bootstrap, restore_input)?)
    } else if let Some(a) = agg {
        (a.topic.as_str(), a.ends.clone())
    } else {
        (input, ends.to_vec())
    };
    create_topic(bootstrap, &output, ends.len() as i32, &[])?;
    let launch = Launch {
        imp,
        workload: if restore || agg.is_some() {
            "count"
        } else {
            workload
        },
        guarantee,
        app_id: &app_id,
        input,
        output: &output,
        state_dir: state_dir.path(),
        tag: &tag,
    };
    let checked = |summary: &InputSummary| -> Res<(String, f64)> {
        let expect = Expect::of(workload)?;
        let t = Instant::now();
        let check = check_output(bootstrap, &output, expect, summary);
        Ok((check, t.elapsed().as_secs_f64()))
    };
    let result = (|| -> Res<(u64, Measured, (String, f64))> {
        if query {
            let m = measure(h, &launch, &ends)?;
            let t = Instant::now();
            let (check, d) = check_query(bootstrap, &output, workload);
            digest = Some(d);
            return Ok((
                ends.iter().map(|(_, e)| *e as u64).sum(),
                m,
                (check, t.elapsed().as_secs_f64()),
            ));
        }
        if let Some(a) = agg {
            return agg::run(h, &launch, a);
        }
        if !restore {
            let summary = input_summary.ok_or("no summary of the input to check the output against")?;
            let m = measure(h, &launch, &ends)?;
            return Ok((ends.iter().map(|(_, e)| *e as u64).sum(), m, checked(summary)?));
        }
        let mut summary = InputSummary::read(bootstrap, input)?;
        run_untimed(h, &launch, &ends)?;
        let restored: u64 = end_offsets(bootstrap, &changelog)?
            .iter()
            .map(|(_, e)| *e as u64)
            .sum();
        let markers: Vec<(i32, Vec<u8>)> = ends
            .iter()
            .map(|(p, _)| {
                let key = summary.first_key.get(p).cloned();
                (*p, key.unwrap_or_else(|| b"marker".to_vec()))
            })
            .collect();
        append_markers(bootstrap, input, &markers)?;
        for (p, key) in &markers {
            summary.add(*p, key, b"marker");
        }
        let new_ends: Vec<(i32, i64)> = ends.iter().map(|(p, e)| (*p, e + 1)).collect();
        let wiped = tempfile::tempdir()?;
        let again = Launch {
            state_dir: wiped.path(),
            ..launch
        };
        let m = measure(h, &again, &new_ends)?;
        Ok((restored, m, checked(&summary)?))
    })();
    delete_app_topics(bootstrap, &app_id)?;
    let (records, m, (check, check_s)) = result?;
    Ok(RunResult {
        cell: cell.to_owned(),
        run,
        records,
        seconds: m.seconds,
        // The output topic already holds the first launch's records.
        first_output_s: if restore { f64::NAN } else { m.first_output_s },
        cpu_s: m.cpu_s,
        broker_cpu_s: m.broker_cpu_s,
        peak_rss_kib: m.peak_rss_kib,
        load1: load,
        check,
        check_s,
        digest,
    })
}
