//! One run of the Avro orders on a broker and a registry: creates the topics, writes the
//! orders (Avro, through the registry) and the bad records, runs the application, and reads
//! the totals and the dead letters until both are exactly as planned (or nothing moved for
//! the stall timeout).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::message::{Headers as _, Message};
use rdkafka::producer::Producer;
use streams_core::handlers::headers;
use streams_core::serdes::Serde;
use streams_core::{KafkaStreams, StreamsConfig};
use streams_serde_registry::{SchemaRegistryClient, wire};

use super::{
    CustomerTotal, ORDER_SCHEMA, Order, OrderPlan, OrderTopics, TOTAL_SCHEMA, avro_values, orders_topology,
};
use crate::ExampleError;
use crate::admin::{create_topics, output_reader, read_until};
use crate::splitter::{producer, send};

/// How one run goes.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The broker.
    pub bootstrap: String,
    /// The registry's URL (`schema.registry.url`).
    pub registry: String,
    /// The prefix of the topics, of the application id (`<run id>-app`) and of the reader's
    /// group.
    pub run_id: String,
    /// What to generate.
    pub plan: OrderPlan,
    /// Partitions of the topics.
    pub partitions: i32,
    /// Stream threads.
    pub threads: usize,
    /// The state directory.
    pub state_dir: std::path::PathBuf,
    /// How long the outputs may stay silent before the run fails.
    pub stall_timeout: Duration,
}

/// What a finished run saw.
#[derive(Debug, Clone)]
pub struct OrdersRun {
    /// The topics it created.
    pub topics: OrderTopics,
    /// The final total per customer, equal to the plan's.
    pub totals: BTreeMap<String, CustomerTotal>,
    /// Output records read (updates included).
    pub total_records: u64,
    /// The dead letters: original value bytes and reason, in the order read per partition.
    pub dead_letters: Vec<(Vec<u8>, String)>,
    /// HTTP requests of the run's registry client, which the writer, the application's
    /// serdes and the reader share: one per schema and subject, not one per record.
    pub registry_requests: u64,
    /// From the start of the application to the exact results.
    pub elapsed: Duration,
}

/// A record the application cannot read, and the words its dead letter's reason must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRecord {
    /// Its value bytes.
    pub value: Vec<u8>,
    /// What the reason names.
    pub reason: &'static str,
}

/// One bad record of each kind, made from a real order frame `good` (written with a
/// registered schema's id).
pub fn bad_records(good: &[u8]) -> Vec<BadRecord> {
    let payload = good.get(wire::HEADER_LEN..).unwrap_or_default();
    vec![
        // Plain JSON, as a producer without the registry serializer writes it.
        BadRecord {
            value: br#"{"id":"json-order","customer":"customer-0","cents":5,"items":1}"#.to_vec(),
            reason: "unknown magic byte 0x7b",
        },
        // A schema id the registry never gave out.
        BadRecord {
            value: wire::frame(2_000_000_000, payload),
            reason: "unknown schema id 2000000000",
        },
        // A real header with the payload cut short.
        BadRecord {
            value: good[..good.len().min(wire::HEADER_LEN + 2)].to_vec(),
            reason: "cannot decode payload written with schema id",
        },
        // Shorter than the header.
        BadRecord {
            value: vec![0, 0, 0],
            reason: "payload too short",
        },
    ]
}

/// Runs the orders once, as the [module docs](super) say.
pub fn run(options: &RunOptions) -> Result<OrdersRun, ExampleError> {
    let topics = OrderTopics::prefixed(&options.run_id);
    let names: Vec<String> = topics.all().iter().map(|t| (*t).to_owned()).collect();
    create_topics(&options.bootstrap, &names, options.partitions)?;
    let client = SchemaRegistryClient::from_properties([("schema.registry.url", options.registry.as_str())])
        .map_err(|e| ExampleError::Other(format!("the schema registry client: {e}")))?;
    let bad = write_inputs(&options.bootstrap, &client, &topics, &options.plan)?;

    let application_id = format!("{}-app", options.run_id);
    let topology = orders_topology(&topics, &client, &application_id)?;
    let config = StreamsConfig::from_properties([
        ("application.id", application_id.clone()),
        ("bootstrap.servers", options.bootstrap.clone()),
        ("state.dir", options.state_dir.display().to_string()),
        ("num.stream.threads", options.threads.to_string()),
        (
            "deserialization.exception.handler",
            "dead_letter_queue".to_owned(),
        ),
        ("errors.dead.letter.queue.topic.name", topics.dead_letters.clone()),
    ])?;
    let mut app = KafkaStreams::new(topology, config)?;
    let started = Instant::now();
    app.start()?;
    let result = read_until_exact(options, &client, &topics, &bad);
    if !app.close(Duration::from_secs(30)) {
        tracing::warn!("the orders application did not close within 30 s");
    }
    let (totals, total_records, dead_letters) = result?;
    check_dead_letters(&bad, &dead_letters)?;
    Ok(OrdersRun {
        topics,
        totals,
        total_records,
        dead_letters,
        registry_requests: client.http_requests(),
        elapsed: started.elapsed(),
    })
}

/// Writes the orders (keyed by customer) with the bad records after the middle one, under
/// its key; returns the bad records.
fn write_inputs(
    bootstrap: &str,
    client: &SchemaRegistryClient,
    topics: &OrderTopics,
    plan: &OrderPlan,
) -> Result<Vec<BadRecord>, ExampleError> {
    let serde = avro_values::<Order>(client, &topics.orders, ORDER_SCHEMA)?;
    let p = producer(bootstrap)?;
    let mut bad = Vec::new();
    let middle = plan.orders / 2;
    let mut value = Vec::new();
    for (n, order) in plan.generate().enumerate() {
        value.clear();
        serde
            .serialize_into(&order, &mut value)
            .map_err(|e| ExampleError::Other(format!("serializing order {}: {e}", order.id)))?;
        send(&p, &topics.orders, Some(&order.customer), &value)?;
        if n as u64 == middle {
            bad = bad_records(&value);
            for b in &bad {
                send(&p, &topics.orders, Some(&order.customer), &b.value)?;
            }
        }
    }
    p.flush(Duration::from_secs(60))?;
    Ok(bad)
}

/// Each bad record is dead-lettered exactly once, with its original bytes and its reason.
fn check_dead_letters(bad: &[BadRecord], dead_letters: &[(Vec<u8>, String)]) -> Result<(), ExampleError> {
    let mut left: Vec<&(Vec<u8>, String)> = dead_letters.iter().collect();
    for b in bad {
        let Some(i) = left.iter().position(|(value, _)| *value == b.value) else {
            return Err(ExampleError::Other(format!(
                "the bad record of {} bytes ({}) is not among the dead letters",
                b.value.len(),
                b.reason
            )));
        };
        let (_, reason) = left.swap_remove(i);
        if !reason.contains(b.reason) {
            return Err(ExampleError::Other(format!(
                "a dead letter's reason is `{reason}`, expected it to name `{}`",
                b.reason
            )));
        }
    }
    match left.first() {
        None => Ok(()),
        Some((value, reason)) => Err(ExampleError::Other(format!(
            "{} unexpected dead letters, e.g. {} bytes: {reason}",
            left.len(),
            value.len()
        ))),
    }
}

type Results = (BTreeMap<String, CustomerTotal>, u64, Vec<(Vec<u8>, String)>);

fn read_until_exact(
    options: &RunOptions,
    client: &SchemaRegistryClient,
    topics: &OrderTopics,
    bad: &[BadRecord],
) -> Result<Results, ExampleError> {
    let expected = options.plan.expected();
    let consumer = output_reader(
        &options.bootstrap,
        &format!("{}-reader", options.run_id),
        &[&topics.totals, &topics.dead_letters],
        options.partitions,
    )?;
    let serde = avro_values::<CustomerTotal>(client, &topics.totals, TOTAL_SCHEMA)?;
    // The totals, the dead letters and the total records read.
    let mut read: Results = (BTreeMap::new(), 0, Vec::new());
    read_until(
        &consumer,
        options.stall_timeout,
        &mut read,
        |(totals, total_records, dead_letters), m| {
            let value = m.payload().unwrap_or_default();
            if m.topic() == topics.totals {
                *total_records += 1;
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                let total = serde
                    .deserialize(value)
                    .map_err(|e| ExampleError::Other(format!("{}: a bad total for {key}: {e}", m.topic())))?;
                totals.insert(key, total);
            } else {
                let reason = m
                    .headers()
                    .and_then(|h| h.iter().find(|h| h.key == headers::MESSAGE))
                    .and_then(|h| h.value)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default();
                dead_letters.push((value.to_vec(), reason));
            }
            Ok(())
        },
        |(totals, _, dead_letters)| *totals == expected && dead_letters.len() >= bad.len(),
        |(totals, _, dead_letters)| {
            let wrong = expected
                .iter()
                .filter(|(k, v)| totals.get(*k) != Some(*v))
                .count();
            ExampleError::Other(format!(
                "no output for {:?}: {} of {} customers' totals read, {wrong} differ from the expected \
                 ones; {} of {} dead letters",
                options.stall_timeout,
                totals.len(),
                expected.len(),
                dead_letters.len(),
                bad.len(),
            ))
        },
    )?;
    Ok(read)
}
