//! Rebalances while input flows, with every input record's identity checked.
//!
//! Instance A runs alone, instance B joins and later leaves cleanly, while a feeder writes
//! records with unique sequence numbers. Every input record also goes, from the same task,
//! unchanged to an audit topic; afterwards each sequence number must be there (at least
//! once under at-least-once, exactly once in the committed output under exactly-once), so
//! a lost record is caught even when another one is duplicated.
//!
//! Run with the classic protocol (eager `range`, selected by setting the session timeout)
//! and with the consumer protocol of KIP-848 (the default on this broker; the broker's
//! `range` assignor), where tasks whose partitions
//! stay with A keep processing through the rebalances. Each run prints the processing gap
//! of the least affected partition (the longest pause between two audit records, by the
//! broker's append time) for docs/runtime.md; gaps are measured here, never asserted.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use streams_core::serdes::StringSerde;
use streams_core::{GroupProtocol, KafkaStreams, State, StreamsConfig, Topology};
use streams_test_utils::kafka::{self, ConsumeUntil};

mod common;

const KEYS: u64 = 40;

fn topology(input: &str, output: &str, audit: &str) -> Topology {
    let mut b = common::count_builder(input, output);
    b.add_sink("audit", audit, StringSerde, StringSerde, ["src"]);
    b.build().unwrap()
}

fn config(bootstrap: &str, app: &str, state: &Path, protocol: GroupProtocol, eos: bool) -> StreamsConfig {
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
    // The consumer protocol is the default on this broker (Apache Kafka 4.x); a setting only
    // the classic protocol takes selects the classic one; standbys select the streams one.
    match protocol {
        GroupProtocol::Classic => {
            props.push(("consumer.session.timeout.ms", "6000".to_owned()));
            props.push(("consumer.heartbeat.interval.ms", "500".to_owned()));
        }
        GroupProtocol::Streams => {
            props.push(("group.protocol", "streams".to_owned()));
            props.push(("num.standby.replicas", "1".to_owned()));
        }
        _ => {}
    }
    StreamsConfig::from_properties(props).unwrap()
}

fn start(topology: Topology, config: StreamsConfig) -> KafkaStreams {
    common::init_tracing();
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
fn run(test: &str, protocol: GroupProtocol, eos: bool) -> Option<i64> {
    let bootstrap = kafka::require_kafka(test)?;
    let app_id = kafka::unique_name("rebalance");
    let input = kafka::unique_name("rebalance-in");
    let output = kafka::unique_name("rebalance-out");
    let audit = kafka::unique_name("rebalance-audit");
    kafka::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    kafka::create_topic(
        &bootstrap,
        &audit,
        4,
        &[("message.timestamp.type", "LogAppendTime")],
    )
    .unwrap();
    let (state_a, state_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());

    // The feeder writes a round of KEYS records every ~40 ms (1,000 records/s) from one
    // producer, until told to stop; it stops after a whole round and returns the count.
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (bootstrap, input, stop) = (bootstrap.clone(), input.clone(), stop.clone());
        std::thread::spawn(move || {
            let producer: BaseProducer = kafka::producer_config(&bootstrap).create().unwrap();
            let mut seq = 0u64;
            while !stop.load(Ordering::Acquire) {
                for _ in 0..KEYS {
                    let (key, value) = (format!("k{}", seq % KEYS), seq.to_string());
                    producer
                        .send(BaseRecord::to(&input).key(&key).payload(&value))
                        .map_err(|(e, _)| e)
                        .unwrap();
                    seq += 1;
                }
                producer.poll(Duration::ZERO);
                std::thread::sleep(Duration::from_millis(40));
            }
            producer.flush(Duration::from_secs(60)).unwrap();
            seq
        })
    };
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };

    let mut a = start(
        topology(&input, &output, &audit),
        config(&bootstrap, &app_id, state_a.path(), protocol, eos),
    );
    wait_running(&a, "A");
    assert_eq!(a.group_protocol(), Some(protocol));
    std::thread::sleep(Duration::from_secs(3));
    let b_started = now_ms();
    let mut b = start(
        topology(&input, &output, &audit),
        config(&bootstrap, &app_id, state_b.path(), protocol, eos),
    );
    wait_running(&b, "B");
    // Both process for a while, then B leaves cleanly.
    let both = Instant::now();
    while b.processed_records() == 0 && both.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(b.close(Duration::from_secs(60)), "B closes cleanly");
    // Input flows on while A takes B's partitions back.
    std::thread::sleep(Duration::from_secs(3));
    let b_gone = now_ms();
    stop.store(true, Ordering::Release);
    let records_in = feeder.join().unwrap();

    // A finishes the input; under exactly-once the audit is read committed.
    let deadline = Instant::now() + Duration::from_secs(120);
    let records = loop {
        let records = kafka::consume_all(
            &bootstrap,
            &audit,
            ConsumeUntil::Idle(Duration::ZERO),
            Duration::from_secs(60),
            eos,
        )
        .unwrap();
        let distinct: std::collections::HashSet<&[u8]> =
            records.iter().filter_map(|r| r.value.as_deref()).collect();
        if distinct.len() as u64 >= records_in || Instant::now() > deadline {
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
    let missing: Vec<u64> = (0..records_in).filter(|s| !seen.contains_key(s)).collect();
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
        let out = kafka::consume_all(
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
            let expected: Vec<u64> = (1..=records_in / KEYS).collect();
            assert_eq!(c, expected, "{test}: counts of {key}");
        }
    }

    // The longest pause per audit partition, by append time: while A ran alone (the
    // baseline) and from B's start until 3 s after it left (the rebalances).
    let mut times: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for r in &records {
        if let Some(t) = r.timestamp {
            times.entry(r.partition).or_default().push(t);
        }
    }
    // Per partition: the longest pause in [from, to] and when it began, relative to B's start.
    let longest = |from: i64, to: i64| -> Vec<(i64, i64)> {
        times
            .values()
            .map(|t| {
                let mut t: Vec<i64> = t.iter().copied().filter(|&x| x >= from && x <= to).collect();
                t.sort_unstable();
                t.windows(2)
                    .map(|w| (w[1] - w[0], w[0] - b_started))
                    .max()
                    .unwrap_or((0, 0))
            })
            .collect()
    };
    let baseline = longest(0, b_started).into_iter().map(|g| g.0).max().unwrap_or(0);
    let pauses = longest(b_started, b_gone);
    let gaps: Vec<i64> = pauses.iter().map(|g| g.0).collect();
    let at: Vec<i64> = pauses.iter().map(|g| g.1).collect();
    let least = gaps.iter().copied().min().unwrap_or(0);
    eprintln!(
        "{test}: protocol {}, {} records, {} audit records ({duplicated} duplicated); longest pause per partition \
         while B joined and left {gaps:?} ms (starting {at:?} ms after B started), least affected {least} ms; longest pause while A ran alone {baseline} ms",
        protocol.name(),
        records_in,
        records.len()
    );
    Some(least)
}

#[test]
fn classic_protocol_loses_nothing_when_a_member_joins_and_leaves() {
    run(
        "classic_protocol_loses_nothing_when_a_member_joins_and_leaves",
        GroupProtocol::Classic,
        false,
    );
}

#[test]
fn consumer_protocol_loses_nothing_when_a_member_joins_and_leaves() {
    run(
        "consumer_protocol_loses_nothing_when_a_member_joins_and_leaves",
        GroupProtocol::Consumer,
        false,
    );
}

#[test]
fn consumer_protocol_exactly_once_when_a_member_joins_and_leaves() {
    run(
        "consumer_protocol_exactly_once_when_a_member_joins_and_leaves",
        GroupProtocol::Consumer,
        true,
    );
}

#[test]
fn streams_protocol_with_standbys_loses_nothing_when_a_member_joins_and_leaves() {
    run(
        "streams_protocol_with_standbys_loses_nothing_when_a_member_joins_and_leaves",
        GroupProtocol::Streams,
        false,
    );
}

#[test]
fn streams_protocol_with_standbys_exactly_once_when_a_member_joins_and_leaves() {
    run(
        "streams_protocol_with_standbys_exactly_once_when_a_member_joins_and_leaves",
        GroupProtocol::Streams,
        true,
    );
}
