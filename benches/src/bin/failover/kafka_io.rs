//! The driver's side of the broker: the topics of a run, the preload and the paced feed, end
//! and committed offsets, reading a topic to its end, and broker settings.
//!
//! Every input record has key `k%07d` (the key index) and, as value, its sequence number in
//! decimal: the preload writes key `i` with sequence `i` (one record per key), the feed
//! continues the sequence with random keys. The driver picks the partition itself, key index
//! modulo the partition count, so it knows which task (`0_p`) each identity belongs to
//! whatever partitioner the application's producer uses for the output and audit topics.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::ClientContext;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::{Offset, TopicPartitionList};
use streams_test_utils::kafka::{block_on_timeout, create_topic};

use crate::Res;

/// The key of key index `i`.
pub(crate) fn key(i: u32) -> String {
    format!("k{i:07}")
}

/// The key index of a key written by [`key`].
pub(crate) fn key_index(k: &[u8]) -> Option<u32> {
    std::str::from_utf8(k.strip_prefix(b"k")?).ok()?.parse().ok()
}

/// The input partition (and so the task) of key index `i`.
pub(crate) fn partition_of(i: u32, partitions: i32) -> i32 {
    (i % partitions as u32) as i32
}

/// The topics of one run.
pub(crate) struct Topics {
    pub(crate) input: String,
    pub(crate) output: String,
    /// Created with `message.timestamp.type=LogAppendTime`: its timestamps are the broker's.
    pub(crate) audit: String,
}

impl Topics {
    /// Creates fresh topics named `<prefix>-in`, `-out`, `-audit`, each with `partitions`.
    pub(crate) fn create(bootstrap: &str, prefix: &str, partitions: i32) -> Res<Self> {
        let t = Self {
            input: format!("{prefix}-in"),
            output: format!("{prefix}-out"),
            audit: format!("{prefix}-audit"),
        };
        create_topic(bootstrap, &t.input, partitions, &[])?;
        create_topic(bootstrap, &t.output, partitions, &[])?;
        create_topic(
            bootstrap,
            &t.audit,
            partitions,
            &[("message.timestamp.type", "LogAppendTime")],
        )?;
        Ok(t)
    }

    /// Deletes these topics and `extra` (a changelog); missing ones are fine.
    pub(crate) fn delete(&self, bootstrap: &str, extra: &[&str]) {
        let Ok(admin) = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create::<AdminClient<DefaultClientContext>>()
        else {
            return;
        };
        let mut names = vec![self.input.as_str(), self.output.as_str(), self.audit.as_str()];
        names.extend_from_slice(extra);
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let _ = block_on_timeout(admin.delete_topics(&names, &opts), Duration::from_secs(60));
    }
}

/// Counts deliveries that failed.
#[derive(Default)]
pub(crate) struct Deliveries {
    failed: AtomicU64,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if result.is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn producer(bootstrap: &str) -> Res<BaseProducer<Deliveries>> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "500000")
        .set("message.timeout.ms", "300000")
        .create_with_context(Deliveries::default())?)
}

/// Sends one input record, serving delivery reports while the queue is full.
fn send(p: &BaseProducer<Deliveries>, topic: &str, key_index: u32, seq: u64, partitions: i32) -> Res<()> {
    let (k, v) = (key(key_index), seq.to_string());
    let rec = BaseRecord::to(topic)
        .key(&k)
        .payload(&v)
        .partition(partition_of(key_index, partitions));
    Ok(streams_benches::send_waiting(p, rec)?)
}

/// Waits for every record sent and fails when any was not delivered.
fn finish(p: &BaseProducer<Deliveries>, what: &str) -> Res<()> {
    p.flush(Duration::from_secs(300))?;
    match p.context().failed.load(Ordering::Relaxed) {
        0 => Ok(()),
        n => Err(format!("{what}: {n} records not delivered").into()),
    }
}

/// Writes one record per key (`k` with sequence `k`) into `topic`.
pub(crate) fn preload(bootstrap: &str, topic: &str, keys: u32, partitions: i32) -> Res<()> {
    let p = producer(bootstrap)?;
    for i in 0..keys {
        send(&p, topic, i, u64::from(i), partitions)?;
    }
    finish(&p, "preload")
}

/// A paced feed of records with random keys, from sequence number `first_seq` on.
pub(crate) struct Feed {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Res<Vec<u32>>>,
}

impl Feed {
    /// Starts writing `rate` records per second (in steps of 10 ms) to `topic`.
    pub(crate) fn start(
        bootstrap: &str,
        topic: &str,
        keys: u32,
        partitions: i32,
        rate: u32,
        first_seq: u64,
        seed: u64,
    ) -> Res<Self> {
        let p = producer(bootstrap)?;
        let topic = topic.to_owned();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::spawn(move || -> Res<Vec<u32>> {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut sent = Vec::new();
            let started = Instant::now();
            while !stopped.load(Ordering::Relaxed) {
                // Pacing: as many records as the elapsed time asks for.
                let due = (started.elapsed().as_secs_f64() * f64::from(rate)) as usize;
                while sent.len() < due {
                    let k = rng.random_range(0..keys);
                    send(&p, &topic, k, first_seq + sent.len() as u64, partitions)?;
                    sent.push(k);
                }
                p.poll(Duration::from_millis(10));
            }
            finish(&p, "feed")?;
            Ok(sent)
        });
        Ok(Self { stop, handle })
    }

    /// Stops the feed; returns the key index of every record it wrote, in sequence order.
    pub(crate) fn stop(self) -> Res<Vec<u32>> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().map_err(|_| "the feed thread panicked")?
    }
}

fn reader(bootstrap: &str, group: &str) -> Res<BaseConsumer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()?)
}

/// The end offset (high watermark) of every partition of `topic`, in partition order.
pub(crate) fn end_offsets(bootstrap: &str, topic: &str, partitions: i32) -> Res<Vec<i64>> {
    let c = reader(bootstrap, "failover-watermarks")?;
    (0..partitions)
        .map(|p| Ok(c.fetch_watermarks(topic, p, Duration::from_secs(10))?.1))
        .collect()
}

/// Waits until `group` has committed at least `ends` on every partition of `topic`; returns
/// how long that took. Fails after `timeout`, naming what was committed.
pub(crate) fn wait_committed(
    bootstrap: &str,
    group: &str,
    topic: &str,
    ends: &[i64],
    timeout: Duration,
) -> Res<Duration> {
    let c = reader(bootstrap, group)?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_range(topic, 0, ends.len() as i32 - 1);
    let started = Instant::now();
    let mut last = Vec::new();
    while started.elapsed() < timeout {
        if let Ok(committed) = c.committed_offsets(tpl.clone(), Duration::from_secs(10)) {
            last = (0..ends.len() as i32)
                .map(|p| match committed.find_partition(topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => o,
                    _ => -1,
                })
                .collect();
            if last.iter().zip(ends).all(|(c, e)| c >= e) {
                return Ok(started.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(format!("{group} committed {last:?} on {topic}, not {ends:?}, within {timeout:?}").into())
}

/// Reads every partition of `topic` from the beginning to its end, calling `f(partition,
/// key, value, timestamp)` per record; with `read_committed` only committed records. Returns
/// the records read.
pub(crate) fn read_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    read_committed: bool,
    mut f: impl FnMut(i32, &[u8], &[u8], i64),
) -> Res<u64> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "failover-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set(
            "isolation.level",
            streams_test_utils::kafka::isolation_level(read_committed),
        )
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    c.assign(&tpl)?;
    let mut at_end = vec![false; partitions as usize];
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    while !at_end.iter().all(|e| *e) {
        if Instant::now() > deadline {
            return Err(format!("reading {topic}: not at its end after 600 s ({n} records)").into());
        }
        match c.poll(Duration::from_millis(200)) {
            None => {}
            Some(Ok(m)) => {
                n += 1;
                at_end[m.partition() as usize] = false;
                let ts = m.timestamp().to_millis().unwrap_or(-1);
                f(
                    m.partition(),
                    m.key().unwrap_or_default(),
                    m.payload().unwrap_or_default(),
                    ts,
                );
            }
            Some(Err(KafkaError::PartitionEOF(p))) => at_end[p as usize] = true,
            Some(Err(e)) => eprintln!("reading {topic}: {e}"),
        }
    }
    Ok(n)
}

/// A broker setting as the first broker reports it (`None` when it cannot be read).
pub(crate) fn broker_setting(bootstrap: &str, name: &str) -> Option<String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .ok()?;
    let probe = reader(bootstrap, "failover-probe").ok()?;
    let meta = probe.fetch_metadata(None, Duration::from_secs(10)).ok()?;
    let id = meta.brokers().first()?.id();
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let res = block_on_timeout(
        admin.describe_configs([&ResourceSpecifier::Broker(id)], &opts),
        Duration::from_secs(15),
    )?
    .ok()?;
    let resource = res.into_iter().next()?.ok()?;
    resource.get(name).and_then(|e| e.value.clone())
}

/// The load averages (1, 5 and 15 minutes) as `/proc/loadavg` gives them.
pub(crate) fn load_avg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_partition_by_index() {
        assert_eq!(key(42), "k0000042");
        assert_eq!(key_index(key(999_999).as_bytes()), Some(999_999));
        assert_eq!(key_index(b"x1"), None);
        assert_eq!(partition_of(13, 6), 1);
    }
}
