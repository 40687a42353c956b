//! Async processors on the test driver: per-key order, concurrency, and the limits.
//!
//! The processor sleeps a pseudo-random 0–4 ms per record and records, under a lock, which
//! keys are in flight: two records of one key must never overlap, records of different keys
//! must, and never more than `max_in_flight` at once. Outputs must keep each key's input
//! order, and every input must come out exactly once.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use streams_core::processor::{AsyncNode, AsyncOptions, AsyncProcessor};
use streams_core::serdes::{U32Serde, U64Serde};
use streams_core::{ProcessorError, Record, Topology};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

#[derive(Default)]
struct Probe {
    in_flight: HashSet<u32>,
    now: usize,
    max: usize,
    overlaps: usize,
}

/// Echoes each record after a short sleep, watching concurrency.
struct Slow(Arc<Mutex<Probe>>);

#[async_trait::async_trait]
impl AsyncProcessor<u32, u64, u32, u64> for Slow {
    async fn process(&self, r: Record<u32, u64>) -> Result<Vec<Record<u32, u64>>, ProcessorError> {
        {
            let mut p = self.0.lock().unwrap();
            if !p.in_flight.insert(r.key) {
                p.overlaps += 1;
            }
            p.now += 1;
            p.max = p.max.max(p.now);
        }
        tokio::time::sleep(Duration::from_millis(r.value * 7919 % 5)).await;
        {
            let mut p = self.0.lock().unwrap();
            p.in_flight.remove(&r.key);
            p.now -= 1;
        }
        Ok(vec![r])
    }
}

fn topology(probe: Arc<Mutex<Probe>>, options: AsyncOptions) -> Topology {
    let mut b = Topology::builder();
    b.add_source("src", ["in"], U32Serde, U64Serde)
        .add_processor(
            "slow",
            AsyncNode::supplier(Arc::new(Slow(probe)), options),
            ["src"],
        )
        .add_sink("out", "out", U32Serde, U64Serde, ["slow"]);
    b.build().unwrap()
}

/// Pipes `n` records over `keys` keys and advances the wall clock until all came out.
fn run(n: u64, keys: u32, options: AsyncOptions) -> (Vec<(u32, u64)>, Probe) {
    let probe = Arc::new(Mutex::new(Probe::default()));
    let driver = TopologyTestDriver::new(topology(probe.clone(), options), DriverConfig::default()).unwrap();
    let input = driver.input_topic("in", U32Serde, U64Serde);
    let output = driver.output_topic("out", U32Serde, U64Serde);
    for seq in 0..n {
        input.pipe((seq % u64::from(keys)) as u32, seq).unwrap();
    }
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while (out.len() as u64) < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} outputs after 60 s",
            out.len()
        );
        // Completions are forwarded by the node's punctuator.
        driver.advance_wall_clock(Duration::from_millis(1)).unwrap();
        out.extend(output.read_key_values().unwrap());
        std::thread::sleep(Duration::from_millis(1));
    }
    let p = std::mem::take(&mut *probe.lock().unwrap());
    (out, p)
}

#[test]
fn records_of_one_key_never_overlap_and_keep_their_order_while_keys_run_concurrently() {
    let (out, probe) = run(2_000, 20, AsyncOptions::new(8).with_max_buffered(4_000));
    assert_eq!(probe.overlaps, 0, "two records of one key were in flight at once");
    assert!(probe.max > 1, "records of different keys never ran concurrently");
    assert!(
        probe.max <= 8,
        "{} futures at once, above max_in_flight 8",
        probe.max
    );
    let mut per_key: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (k, seq) in &out {
        per_key.entry(*k).or_default().push(*seq);
    }
    let mut all: Vec<u64> = out.iter().map(|(_, s)| *s).collect();
    all.sort_unstable();
    assert_eq!(all, (0..2_000).collect::<Vec<_>>(), "every input exactly once");
    for (k, seqs) in per_key {
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "key {k} out of order: {seqs:?}"
        );
    }
}

#[test]
fn a_full_buffer_holds_records_back_until_some_complete() {
    // Buffer of 4, 1 in flight: records wait in the task, then all come out in order.
    let (out, probe) = run(200, 3, AsyncOptions::new(1).with_max_buffered(4));
    assert_eq!(probe.max, 1);
    let seqs: Vec<u64> = out.iter().map(|(_, s)| *s).collect();
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..200).collect::<Vec<_>>());
    // One at a time, completions come out in input order.
    assert_eq!(seqs, sorted);
}
