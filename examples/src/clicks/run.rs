//! One run of the click analytics on a broker: creates the topics, writes the users and the
//! clicks, runs the application and reads both output topics until each holds exactly the
//! expected result (or nothing moved for the stall timeout).
//!
//! The outputs are read as tables: the last record of each key is its result. The run ends
//! once the results equal the plan's; a result never matching fails it only when no output
//! record came for [`RunOptions::stall_timeout`], never after a fixed total time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use streams_core::serdes::{NullableSerde, Serde, StringSerde, U64Serde};
use streams_core::{KafkaStreams, StreamsConfig};
use streams_dsl::WindowedSerde;

use super::{ClickPlan, ClickTopics, click_topology, per_user_value_serde};
use crate::ExampleError;
use crate::admin::{create_topics, output_reader, read_until};
use crate::splitter::producer;

/// How one run goes.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The broker.
    pub bootstrap: String,
    /// The prefix of the topics, of the application id (`<run id>-app`) and of the output
    /// reader's group (`<run id>-reader`).
    pub run_id: String,
    /// What to generate.
    pub plan: ClickPlan,
    /// How long after its end a window still takes clicks.
    pub grace: Duration,
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
pub struct ClickRun {
    /// The topics it created.
    pub topics: ClickTopics,
    /// Output records read from the per-user topic (updates included).
    pub per_user_records: u64,
    /// Output records read from the per-region topic (updates included).
    pub per_region_records: u64,
    /// The final per-region results, equal to the plan's.
    pub per_region: BTreeMap<(String, i64), u64>,
    /// Distinct per-user windows, equal to the plan's.
    pub per_user_windows: usize,
    /// From the start of the application to the exact results.
    pub elapsed: Duration,
}

/// Runs the click analytics once, as the [module docs](self) say.
pub fn run(options: &RunOptions) -> Result<ClickRun, ExampleError> {
    let topics = ClickTopics::prefixed(&options.run_id);
    let names: Vec<String> = topics.all().iter().map(|t| (*t).to_owned()).collect();
    create_topics(&options.bootstrap, &names, options.partitions)?;
    write_inputs(&options.bootstrap, &topics, &options.plan)?;

    let topology = click_topology(&topics, options.plan.window, options.grace)
        .map_err(|e| ExampleError::Other(format!("building the topology: {e}")))?;
    let config = StreamsConfig::from_properties([
        ("application.id", format!("{}-app", options.run_id)),
        ("bootstrap.servers", options.bootstrap.clone()),
        ("state.dir", options.state_dir.display().to_string()),
        ("num.stream.threads", options.threads.to_string()),
    ])?;
    let mut app = KafkaStreams::new(topology, config)?;
    let started = Instant::now();
    app.start()?;
    let result = read_until_exact(options, &topics);
    if !app.close(Duration::from_secs(30)) {
        tracing::warn!("the click analytics did not close within 30 s");
    }
    let (per_user_records, per_region_records, per_user_windows, per_region) = result?;
    Ok(ClickRun {
        topics,
        per_user_records,
        per_region_records,
        per_region,
        per_user_windows,
        elapsed: started.elapsed(),
    })
}

/// Writes the users table, then the clicks with their event times.
fn write_inputs(bootstrap: &str, topics: &ClickTopics, plan: &ClickPlan) -> Result<(), ExampleError> {
    let p = producer(bootstrap)?;
    let send = |topic: &str, key: &str, value: &str, timestamp: Option<i64>| {
        let mut record = BaseRecord::<str, str>::to(topic).key(key).payload(value);
        if let Some(t) = timestamp {
            record = record.timestamp(t);
        }
        let mut record = Some(record);
        while let Some(r) = record.take() {
            match p.send(r) {
                Ok(()) => {}
                Err((
                    rdkafka::error::KafkaError::MessageProduction(
                        rdkafka::types::RDKafkaErrorCode::QueueFull,
                    ),
                    r,
                )) => {
                    p.poll(Duration::from_millis(10));
                    record = Some(r);
                }
                Err((e, _)) => return Err(ExampleError::Kafka(e)),
            }
        }
        Ok(())
    };
    for (user, region) in plan.table() {
        send(&topics.users, &user, region, None)?;
    }
    for click in plan.generate() {
        send(&topics.clicks, &click.user, &click.page, Some(click.timestamp))?;
    }
    p.flush(Duration::from_secs(60))?;
    Ok(())
}

type Results = (u64, u64, usize, BTreeMap<(String, i64), u64>);

fn read_until_exact(options: &RunOptions, topics: &ClickTopics) -> Result<Results, ExampleError> {
    let expected_user = options.plan.expected_per_user();
    let expected_region = options.plan.expected_per_region();
    let consumer = output_reader(
        &options.bootstrap,
        &format!("{}-reader", options.run_id),
        &[&topics.per_user, &topics.per_region],
        options.partitions,
    )?;
    let windowed = WindowedSerde::new(StringSerde, options.plan.window);
    let user_value = NullableSerde(per_user_value_serde());
    let region_value = NullableSerde(U64Serde);
    type Tables = (
        BTreeMap<(String, i64), (u64, String)>,
        BTreeMap<(String, i64), u64>,
        u64,
        u64,
    );
    // Per user, per region, and the records read of each.
    let mut read: Tables = (BTreeMap::new(), BTreeMap::new(), 0, 0);
    read_until(
        &consumer,
        options.stall_timeout,
        &mut read,
        |(per_user, per_region, user_records, region_records), m| {
            let key = windowed
                .deserialize(m.key().unwrap_or_default())
                .map_err(|e| ExampleError::Other(format!("{}: a bad key: {e}", m.topic())))?;
            let bad = |e| ExampleError::Other(format!("{}: a bad value: {e}", m.topic()));
            let payload = m.payload();
            if m.topic() == topics.per_user {
                *user_records += 1;
                match user_value.deserialize_nullable(payload).map_err(bad)? {
                    Some(v) => per_user.insert((key.key, key.start), v),
                    None => per_user.remove(&(key.key, key.start)),
                };
            } else {
                *region_records += 1;
                match region_value.deserialize_nullable(payload).map_err(bad)? {
                    Some(v) => per_region.insert((key.key, key.start), v),
                    None => per_region.remove(&(key.key, key.start)),
                };
            }
            Ok(())
        },
        |(per_user, per_region, ..)| *per_user == expected_user && *per_region == expected_region,
        |(per_user, per_region, ..)| {
            let wrong = expected_region
                .iter()
                .filter(|(k, v)| per_region.get(*k) != Some(*v))
                .count();
            ExampleError::Other(format!(
                "no output for {:?}: {} of {} per-user windows and {} of {} per-region windows \
                 read, {wrong} per-region results differ from the expected ones",
                options.stall_timeout,
                per_user.len(),
                expected_user.len(),
                per_region.len(),
                expected_region.len(),
            ))
        },
    )?;
    let (per_user, per_region, user_records, region_records) = read;
    Ok((user_records, region_records, per_user.len(), per_region))
}
