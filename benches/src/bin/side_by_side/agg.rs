//! The keyed aggregation over a store that already holds N entries: the workloads `agg100k`,
//! `agg1m`, `agg10m` and `agg50m` (N = 100,000 ... 50,000,000).
//!
//! Each size has its own input topic, `<input>-<workload>`, which the driver fills once per
//! harness run ([`preload`]):
//! - the *fill*: N records, one per key, the keys in a pseudo-random order (a key is the hex
//!   of a bijective mix of its index, so no two collide and their byte order is not their
//!   arrival order);
//! - then the *measured* records (`AGG_RECORDS`, default 3,000,000), each on a key drawn
//!   uniformly from the N keys: every record reads and updates one existing entry of a
//!   store of N entries.
//!
//! A run ([`run`]) starts the count (the `count` workload of both implementations) over the
//! fill and lets it finish and close untimed, waits until the group is empty, then starts
//! the same application again on the same state directory: the measured launch continues
//! from the committed end of the fill with its store on disk, and is timed until it has
//! committed the end of the measured records. Its records are the measured ones; its first
//! output is the first record it adds to the output topic. The check compares the last
//! count of every key in the output with the whole input, as for the count.

use super::*;

/// The number of entries of an aggregation workload's store, or `None` for other workloads.
pub(crate) fn entries(workload: &str) -> Option<u64> {
    match workload {
        "agg100k" => Some(100_000),
        "agg1m" => Some(1_000_000),
        "agg10m" => Some(10_000_000),
        "agg50m" => Some(50_000_000),
        _ => None,
    }
}

/// One aggregation workload's input, as the driver preloaded it.
pub(crate) struct AggInput {
    pub(crate) topic: String,
    /// The end offsets of the fill, per partition.
    fill_ends: Vec<(i32, i64)>,
    /// The end offsets of the whole input.
    pub(crate) ends: Vec<(i32, i64)>,
    /// The number of measured records (after the fill).
    measured: u64,
    summary: InputSummary,
}

/// SplitMix64's finaliser: a bijection on `u64`, so distinct indexes give distinct keys.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn key(index: u64) -> String {
    format!("{:016x}", mix(index))
}

/// Creates `<input>-<workload>` (deleting an older one) with `partitions` partitions and
/// fills it with the fill and the measured records of `workload`, then reads it back for
/// the output checks.
pub(crate) fn preload(bootstrap: &str, input: &str, workload: &str, partitions: i32) -> Res<AggInput> {
    let n = entries(workload).ok_or_else(|| format!("{workload} is not an aggregation workload"))?;
    let measured: u64 = match std::env::var("AGG_RECORDS") {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("AGG_RECORDS is a record count, not '{v}'"))?,
        Err(_) => 3_000_000,
    };
    let value_bytes: usize = match std::env::var("VALUE_BYTES") {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("VALUE_BYTES is a byte count, not '{v}'"))?,
        Err(_) => 100,
    };
    let value = filler_value(value_bytes);
    let topic = format!("{input}-{workload}");
    delete_topics(bootstrap, &[&topic])?;
    // Topic deletion completes in the background: retry the creation until it is gone.
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(e) = create_topic(bootstrap, &topic, partitions, &[]) {
        if Instant::now() > deadline {
            return Err(format!("creating {topic}: {e}").into());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let producer = streams_benches::bulk_producer(bootstrap)?;
    let started = Instant::now();
    let send = |k: &str| -> Res<()> {
        streams_benches::send_waiting(&producer, BaseRecord::to(&topic).key(k).payload(&value))?;
        Ok(())
    };
    for i in 0..n {
        send(&key(i))?;
    }
    producer.flush(Duration::from_secs(300))?;
    let fill_ends = end_offsets(bootstrap, &topic)?;
    for draw in draws().take(measured as usize) {
        send(&key((draw >> 20) % n))?;
    }
    producer.flush(Duration::from_secs(300))?;
    let ends = end_offsets(bootstrap, &topic)?;
    println!(
        "preloaded {n} fill records (one per key) and {measured} records on random keys of them into {topic} \
         ({partitions} partitions) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let summary = InputSummary::read(bootstrap, &topic)?;
    if summary.records != n + measured || summary.per_key.len() as u64 != n {
        return Err(format!(
            "{topic} holds {} records over {} keys, not {} over {n}",
            summary.records,
            summary.per_key.len(),
            n + measured
        )
        .into());
    }
    println!("{topic}: read back in {:.1} s", t.elapsed().as_secs_f64());
    Ok(AggInput {
        topic,
        fill_ends,
        ends,
        measured,
        summary,
    })
}

/// Runs one aggregation cell once (see the module documentation): the records measured,
/// the measured launch, and the output check with its duration.
pub(crate) fn run(
    h: &Harness<'_>,
    launch: &Launch<'_>,
    input: &AggInput,
) -> Res<(u64, Measured, (String, f64))> {
    run_untimed(h, launch, &input.fill_ends)?;
    let m = measure(h, launch, &input.ends)?;
    let t = Instant::now();
    let check = check_output(h.bootstrap, launch.output, Expect::Count, &input.summary);
    Ok((input.measured, m, (check, t.elapsed().as_secs_f64())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_keys() {
        assert_eq!(entries("agg10m"), Some(10_000_000));
        assert_eq!(entries("count"), None);
        let keys: std::collections::HashSet<String> = (0..100_000).map(key).collect();
        assert_eq!(keys.len(), 100_000);
        assert!(keys.iter().all(|k| k.len() == 16));
        // The draws start one step after the seed, as the preloads always drew them.
        let first = 0x2545_f491_4f6c_dd1d_u64
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        assert_eq!(draws().next(), Some(first));
    }
}
