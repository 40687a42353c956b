//! Rebalances while input flows, with every input record's identity checked.
//!
//! Instance A runs alone, instance B joins and later leaves cleanly, while a feeder writes
//! records with unique sequence numbers. Every input record also goes, from the same task,
//! unchanged to an audit topic; afterwards each sequence number must be there (at least
//! once under at-least-once, exactly once in the committed output under exactly-once), so
//! a lost record is caught even when another one is duplicated.
//!
//! Run with the classic protocol (eager `range`) and with the consumer protocol of KIP-848
//! (`group.protocol=consumer`, the broker's `range` assignor), where tasks whose partitions
//! stay with A keep processing through the rebalances. Each run prints the processing gap
//! of the least affected partition (the longest pause between two audit records, by the
//! broker's append time) for docs/runtime.md; gaps are measured here, never asserted.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::testing::{self, ConsumeUntil, ProduceRecord};
use streams_core::{KafkaStreams, State, Stores, StreamsConfig, Topology};

mod common;

const KEYS: u64 = 40;
const RECORDS: u64 = 12_000;

fn topology(input: &str, output: &str, audit: &str) -> Topology {
    let mut b = Topology::builder();
    b.add_source("src", [input], StringSerde, StringSerde)
        .add_processor("count", common::Count::default, ["src"])
        .add_state_store(
            Stores::persistent_kv("counts", StringSerde, U64Serde).with_caching(),
            ["count"],
        )
        .add_sink("out", output, StringSerde, U64Serde, ["count"])
        .add_sink("audit", audit, StringSerde, StringSerde, ["src"]);
    b.build().unwrap()
}

fn config(bootstrap: &str, app: &str, state: &Path, consumer_protocol: bool, eos: bool) -> StreamsConfig {
    let dir = state.display().to_string();
    let mut props = vec![
        ("application.id", app.to_owned()),
        ("bootstrap.servers", bootstrap.to_owned()),
        ("state.dir", dir),
        ("commit.interval.ms", "100".to_owned()),
        (
            "processing.guarantee",
            if eos { "exactly_once_v2" } else { "at_least_once" }.to_owned(),
        ),
    ];
    if consumer_protocol {
        props.push(("main.consumer.group.protocol", "consumer".to_owned()));
    } else {
        props.push(("consumer.session.timeout.ms", "6000".to_owned()));
        props.push(("consumer.heartbeat.interval.ms", "500".to_owned()));
    }
    StreamsConfig::from_properties(props).unwrap()
}

fn start(topology: Topology, config: StreamsConfig) -> KafkaStreams {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut app = KafkaStreams::new(topology, config).unwrap();
    app.start().unwrap();
    app
}

fn wait_running(app: &KafkaStreams, who: &str) {
    assert!(
        app.wait_for_state(State::Running, Duration::from_secs(90)),
        "{who}: state {:?}",
        app.state()
    );
}

/// Runs A alone, A with B, A alone again while the feeder writes; checks every identity.
/// Returns the longest pause of the least affected audit partition, in ms.
fn run(test: &str, consumer_protocol: bool, eos: bool) -> Option<i64> {
    let bootstrap = testing::require_kafka(test)?;
    let app_id = testing::unique_name("rebalance");
    let input = testing::unique_name("rebalance-in");
    let output = testing::unique_name("rebalance-out");
    let audit = testing::unique_name("rebalance-audit");
    testing::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    testing::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    testing::create_topic(
        &bootstrap,
        &audit,
        4,
        &[("message.timestamp.type", "LogAppendTime")],
    )
    .unwrap();
    let (state_a, state_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());

    let done = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (bootstrap, input, done) = (bootstrap.clone(), input.clone(), done.clone());
        std::thread::spawn(move || {
            // 12,000 records in batches of 200, a batch about every 100 ms: input flows
            // for the ~10 s in which B joins and leaves.
            let mut seq = 0;
            while seq < RECORDS {
                let batch: Vec<ProduceRecord> = (seq..(seq + 200).min(RECORDS))
                    .map(|i| ProduceRecord::new(format!("k{}", i % KEYS), i.to_string()))
                    .collect();
                seq += batch.len() as u64;
                testing::produce(&bootstrap, &input, &batch, Duration::from_secs(60)).unwrap();
                std::thread::sleep(Duration::from_millis(100));
            }
            done.store(true, Ordering::Release);
        })
    };

    let mut a = start(
        topology(&input, &output, &audit),
        config(&bootstrap, &app_id, state_a.path(), consumer_protocol, eos),
    );
    wait_running(&a, "A");
    std::thread::sleep(Duration::from_secs(2));
    let mut b = start(
        topology(&input, &output, &audit),
        config(&bootstrap, &app_id, state_b.path(), consumer_protocol, eos),
    );
    wait_running(&b, "B");
    // Both process for a while, then B leaves cleanly.
    let both = Instant::now();
    while b.processed_records() == 0 && both.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(b.close(Duration::from_secs(60)), "B closes cleanly");
    feeder.join().unwrap();
    assert!(done.load(Ordering::Acquire));

    // A finishes the input; under exactly-once the audit is read committed.
    let deadline = Instant::now() + Duration::from_secs(120);
    let records = loop {
        let records = testing::consume_all(
            &bootstrap,
            &audit,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            eos,
        )
        .unwrap();
        let distinct: std::collections::HashSet<&[u8]> =
            records.iter().filter_map(|r| r.value.as_deref()).collect();
        if distinct.len() as u64 >= RECORDS || Instant::now() > deadline {
            break records;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(a.state(), State::Running, "A went on");
    assert!(a.close(Duration::from_secs(60)));

    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    for r in &records {
        let seq: u64 = r.value_str().unwrap().parse().unwrap();
        *seen.entry(seq).or_default() += 1;
    }
    let missing: Vec<u64> = (0..RECORDS).filter(|s| !seen.contains_key(s)).collect();
    assert!(
        missing.is_empty(),
        "{test}: {} records lost, first {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    let duplicated = seen.values().filter(|&&n| n > 1).count();
    if eos {
        assert_eq!(duplicated, 0, "{test}: duplicates in the committed audit");
        // Every count of every key exactly once in the committed output.
        let out = testing::consume_all(
            &bootstrap,
            &output,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            true,
        )
        .unwrap();
        let mut counts: HashMap<String, Vec<u64>> = HashMap::new();
        for r in &out {
            counts
                .entry(r.key_str().unwrap())
                .or_default()
                .push(u64::from_be_bytes(
                    r.value.as_deref().unwrap().try_into().unwrap(),
                ));
        }
        assert_eq!(counts.len() as u64, KEYS);
        for (key, mut c) in counts {
            c.sort_unstable();
            let expected: Vec<u64> = (1..=RECORDS / KEYS).collect();
            assert_eq!(c, expected, "{test}: counts of {key}");
        }
    }

    // The longest pause per audit partition, by append time, while the input flowed.
    let mut times: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for r in &records {
        if let Some(t) = r.timestamp {
            times.entry(r.partition).or_default().push(t);
        }
    }
    let gaps: Vec<i64> = times
        .values()
        .map(|t| t.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0))
        .collect();
    let least = gaps.iter().copied().min().unwrap_or(0);
    eprintln!(
        "{test}: protocol {}, {} audit records ({duplicated} duplicated), longest pause per partition {gaps:?} ms, least affected {least} ms",
        if consumer_protocol { "consumer" } else { "classic" },
        records.len()
    );
    Some(least)
}

#[test]
fn classic_protocol_loses_nothing_when_a_member_joins_and_leaves() {
    run(
        "classic_protocol_loses_nothing_when_a_member_joins_and_leaves",
        false,
        false,
    );
}

#[test]
fn consumer_protocol_loses_nothing_when_a_member_joins_and_leaves() {
    run(
        "consumer_protocol_loses_nothing_when_a_member_joins_and_leaves",
        true,
        false,
    );
}

#[test]
fn consumer_protocol_exactly_once_when_a_member_joins_and_leaves() {
    run(
        "consumer_protocol_exactly_once_when_a_member_joins_and_leaves",
        true,
        true,
    );
}
