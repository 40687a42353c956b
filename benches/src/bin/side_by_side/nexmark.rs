//! The Nexmark workloads (`q0`, `q1`, ... as the workload of a cell): the preload of the
//! event topic, the reduction of a query's output to its [`Digest`], and the comparison of
//! the digests of every run of a query, ours and Kafka Streams', for `table.md`.

use super::*;
use streams_benches::nexmark::Generator;
pub(crate) use streams_benches::nexmark::result::Digest;

/// Fills `topic` (created with `partitions` partitions) with `events` Nexmark events: JSON
/// values, null keys, event `n` in partition `n % partitions`, the event time (starting
/// now, `rate` events per second) as the record's timestamp. A topic of that name left by an
/// earlier run is deleted first.
pub(crate) fn preload_nexmark(
    bootstrap: &str,
    topic: &str,
    events: u64,
    partitions: i32,
    rate: u64,
) -> Res<()> {
    delete_topics(bootstrap, &[topic])?;
    let deadline = Instant::now() + Duration::from_secs(60);
    // Deletion completes in the background: creating fails until it has.
    while let Err(e) = create_topic(bootstrap, topic, partitions, &[]) {
        if Instant::now() > deadline {
            return Err(format!("creating {topic}: {e}").into());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let producer: BaseProducer = streams_benches::bulk_producer_config(bootstrap)
        .set("compression.type", "lz4")
        .create()?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    let generator = Generator::new(now.as_millis() as i64, rate);
    let started = Instant::now();
    let mut bytes = 0u64;
    let mut value = Vec::new();
    let step = (events / 20).max(1);
    for n in 0..events {
        let event = generator.event(n);
        value.clear();
        serde_json::to_writer(&mut value, &event)?;
        bytes += value.len() as u64;
        let rec = BaseRecord::<(), _>::to(topic)
            .payload(&value)
            .partition((n % partitions as u64) as i32)
            .timestamp(event.date_time());
        streams_benches::send_waiting(&producer, rec)?;
        if (n + 1) % step == 0 {
            let done = (n + 1) as f64 / events as f64;
            let bar = "#".repeat((done * 20.0).round() as usize);
            println!(
                "[{bar:<20}] {:>3.0}% {} events, {:.0} events/s",
                done * 100.0,
                n + 1,
                (n + 1) as f64 / started.elapsed().as_secs_f64()
            );
        }
    }
    producer.flush(Duration::from_secs(300))?;
    println!(
        "preloaded {events} Nexmark events ({:.0} B on average, {:.0} s of event time) into {topic} ({partitions} partitions) in {:.1} s",
        bytes as f64 / events.max(1) as f64,
        (generator.timestamp(events) - generator.timestamp(0)) as f64 / 1000.0,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Reads the output of `query` into its digest: `"ok"` unless it is empty or unreadable.
pub(crate) fn check_query(bootstrap: &str, output: &str, query: &str) -> (String, Digest) {
    let mut digest = Digest::new(query);
    let check = match read_topic(bootstrap, output, |_, k, v| digest.add(query, k, v)) {
        Ok(0) => "no output".to_owned(),
        Ok(_) => match &digest {
            Digest::Records { unreadable, .. } if *unreadable > 0 => {
                format!("{unreadable} unreadable records")
            }
            _ => "ok".to_owned(),
        },
        Err(e) => format!("output not readable: {e}"),
    };
    (check, digest)
}

/// The `table.md` section on result equality: per query, whether every checked run (of
/// either implementation) produced the digest of the first one.
pub(crate) fn equality(results: &[RunResult]) -> String {
    let mut s = String::new();
    let mut queries: Vec<&str> = Vec::new();
    for r in results.iter().filter(|r| r.digest.is_some()) {
        let q = r.cell.split(':').nth(1).unwrap_or("");
        if !queries.contains(&q) {
            queries.push(q);
        }
    }
    if queries.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "\nResult equality (every run against the first of the query):\n"
    );
    for q in queries {
        let runs: Vec<&RunResult> = results
            .iter()
            .filter(|r| r.check == "ok" && r.cell.split(':').nth(1) == Some(q))
            .collect();
        let Some((first, rest)) = runs.split_first() else {
            continue;
        };
        let reference = first.digest.as_ref().expect("query runs carry digests");
        let differing: Vec<String> = rest
            .iter()
            .filter_map(|r| {
                let d = r.digest.as_ref()?.diff(reference)?;
                Some(format!(
                    "{} run {} differs from {} run {}: {d}",
                    r.cell, r.run, first.cell, first.run
                ))
            })
            .collect();
        let impls: std::collections::BTreeSet<&str> =
            runs.iter().filter_map(|r| r.cell.split(':').next()).collect();
        let who = impls.into_iter().collect::<Vec<_>>().join(" and ");
        if differing.is_empty() {
            let _ = writeln!(
                s,
                "- {q}: equal over {} runs ({who}): {}",
                runs.len(),
                reference.summary()
            );
        } else {
            let _ = writeln!(s, "- {q}: **{} of {} runs differ**", differing.len(), runs.len());
            for d in differing {
                let _ = writeln!(s, "  - {d}");
            }
        }
    }
    s
}
