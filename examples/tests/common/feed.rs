//! The input of the multi-instance tests: a feeder thread writes key/sequence records at a
//! steady rate (each key's sequence numbers 0, 1, 2, ... are the records' identities) and
//! remembers where each one went; then the wait until the group has committed them all.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use streams_test_utils::kafka;

use super::Position;
use super::instance::{Instance, Run, check_all_alive, stalled};

/// The wait for the instances to process every input record fails once the group's
/// committed offsets have not moved for this long.
pub const IDLE_LIMIT: Duration = Duration::from_secs(120);

/// How the feeder writes.
#[derive(Debug, Clone, Copy)]
pub struct FeedPlan {
    /// Keys `k00`, `k01`, ..., written in turn.
    pub keys: usize,
    /// A batch of this many records ...
    pub batch: usize,
    /// ... this often.
    pub every: Duration,
    /// The producer's `message.timeout.ms`: how long librdkafka retries a record (within
    /// the idempotent producer's guarantees) before it reports it failed.
    pub message_timeout: Duration,
}

impl FeedPlan {
    /// `keys` keys, a batch of `batch` records every 100 ms, each record retried for up to
    /// [`kafka::DEFAULT_TIMEOUT`].
    pub const fn new(keys: usize, batch: usize) -> Self {
        Self {
            keys,
            batch,
            every: Duration::from_millis(100),
            message_timeout: kafka::DEFAULT_TIMEOUT,
        }
    }

    /// Each record retried for up to `message_timeout`.
    pub const fn retrying_for(self, message_timeout: Duration) -> Self {
        Self {
            message_timeout,
            ..self
        }
    }
}

/// What the feeder wrote: where each identity `key/sequence` went, the end offset of each
/// input partition, how many records each key got, and the records written again after a
/// failed delivery.
pub struct Fed {
    pub at: HashMap<String, Position>,
    pub ends: BTreeMap<i32, i64>,
    pub per_key: Vec<u64>,
    pub rewritten: usize,
    /// The first delivery errors (a few), with the identity they were about.
    pub errors: Vec<String>,
}

impl Fed {
    pub fn records(&self) -> usize {
        self.at.len()
    }
}

/// The key of index `k`.
pub fn key(k: usize) -> String {
    format!("k{k:02}")
}

/// The feeder's delivery reports of the records in flight, by index in the batch.
pub struct Acks(Mutex<Vec<Option<Result<Position, KafkaError>>>>);

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, index: usize) {
        let report = match result {
            Ok(message) => Ok((message.partition(), message.offset())),
            Err((error, _)) => Err(error.clone()),
        };
        self.0.lock().unwrap()[index] = Some(report);
    }
}

/// A feeder thread writing to the input until it is stopped (or dropped: a test that
/// fails leaves no feeder writing).
pub struct Feeder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Fed>>,
}

impl Feeder {
    /// Starts writing to `input` as `plan` says.
    pub fn start(bootstrap: &str, input: &str, plan: FeedPlan) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (bootstrap, input, stop) = (bootstrap.to_owned(), input.to_owned(), stop.clone());
            std::thread::spawn(move || feed(&bootstrap, &input, plan, &stop))
        };
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops it once the batch in flight is acknowledged: what it wrote.
    pub fn stop(mut self) -> Fed {
        self.stop.store(true, Ordering::Release);
        self.thread.take().unwrap().join().expect("feeder")
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Writes batches of records, key after key, each with its key's next sequence number,
/// until `stop` is set; each batch is acknowledged before the next. One idempotent producer
/// (`kafka::produce` makes one per call, too slow for this rate).
///
/// A record whose delivery failed is written again (same identity) until it is
/// acknowledged: with the idempotent producer and a `message_timeout` longer than any
/// fault, librdkafka only reports a failure for a record it did not write. A timed-out or
/// fatal report, whose record may or may not have been written, fails the feeder: writing
/// it again could put the same identity in the input twice.
fn feed(bootstrap: &str, input: &str, plan: FeedPlan, stop: &AtomicBool) -> Fed {
    let producer: BaseProducer<Acks> = kafka::producer_config(bootstrap)
        .set("message.timeout.ms", plan.message_timeout.as_millis().to_string())
        .create_with_context(Acks(Mutex::new(Vec::new())))
        .unwrap();
    let mut fed = Fed {
        at: HashMap::new(),
        ends: BTreeMap::new(),
        per_key: vec![0; plan.keys],
        rewritten: 0,
        errors: Vec::new(),
    };
    let mut next = 0;
    let mut due = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let mut ids: Vec<(String, String)> = (0..plan.batch)
            .map(|_| {
                let k = next % plan.keys;
                next += 1;
                fed.per_key[k] += 1;
                (key(k), (fed.per_key[k] - 1).to_string())
            })
            .collect();
        while !ids.is_empty() {
            ids = write(&producer, input, plan, ids, &mut fed);
            if !ids.is_empty() {
                fed.rewritten += ids.len();
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        due += plan.every;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        } else {
            due = now;
        }
    }
    fed
}

/// Writes the records `ids` and waits for their delivery reports; records those delivered
/// in `fed` and returns those that failed (definitely not written).
fn write(
    producer: &BaseProducer<Acks>,
    input: &str,
    plan: FeedPlan,
    ids: Vec<(String, String)>,
    fed: &mut Fed,
) -> Vec<(String, String)> {
    *producer.context().0.lock().unwrap() = vec![None; ids.len()];
    for (index, (k, s)) in ids.iter().enumerate() {
        let mut record = BaseRecord::with_opaque_to(input, index).key(k).payload(s);
        while let Err((e, returned)) = producer.send(record) {
            assert!(
                matches!(e, KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)),
                "producing {k}/{s}: {e}"
            );
            record = returned;
            producer.poll(Duration::from_millis(10));
        }
    }
    producer
        .flush(plan.message_timeout + Duration::from_secs(30))
        .expect("input acknowledged");
    let acks = std::mem::take(&mut *producer.context().0.lock().unwrap());
    let mut failed = Vec::new();
    for ((k, s), ack) in ids.into_iter().zip(acks) {
        let (partition, offset) = match ack {
            Some(Ok(at)) => at,
            Some(Err(e)) if !outcome_unknown(&e) => {
                if fed.errors.len() < 10 {
                    fed.errors.push(format!("{k}/{s}: {e}"));
                }
                failed.push((k, s));
                continue;
            }
            other => panic!(
                "producing {k}/{s}: {other:?}: the record may or may not have been written, and \
                 writing it again could duplicate its identity in the input"
            ),
        };
        fed.at.insert(format!("{k}/{s}"), (partition, offset));
        let end = fed.ends.entry(partition).or_default();
        *end = (*end).max(offset + 1);
    }
    failed
}

/// Whether a delivery error leaves unknown whether the record was written: it timed out
/// (possibly in flight), or the idempotent producer failed fatally.
fn outcome_unknown(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::MessageTimedOut | RDKafkaErrorCode::Fatal) | None
    )
}

/// The offsets the group has committed on the input, per partition (0 where none).
pub fn committed(run: &Run) -> kafka::TestResult<BTreeMap<i32, i64>> {
    read_committed(&mut committed_reader(run), Duration::from_secs(30))
}

/// A reader of the group's committed input offsets, for waits that read them again and
/// again (see [`kafka::CommittedReader`]).
pub fn committed_reader(run: &Run) -> kafka::CommittedReader {
    kafka::CommittedReader::new(&run.bootstrap, &run.app, &run.topics.input)
}

/// One read of `reader`: the committed input offsets per partition (0 where none).
pub fn read_committed(
    reader: &mut kafka::CommittedReader,
    timeout: Duration,
) -> kafka::TestResult<BTreeMap<i32, i64>> {
    Ok(reader
        .read(timeout)?
        .into_iter()
        .map(|(p, o)| (p, o.unwrap_or(0)))
        .collect())
}

/// Input records whose offsets the group has not committed yet, per partition (only those
/// behind), and in all.
pub fn behind(run: &Run, ends: &BTreeMap<i32, i64>) -> (BTreeMap<i32, i64>, i64) {
    let committed = committed(run).unwrap();
    let behind: BTreeMap<i32, i64> = ends
        .iter()
        .map(|(p, end)| (*p, end - committed.get(p).copied().unwrap_or(0)))
        .filter(|(_, n)| *n != 0)
        .collect();
    let total = behind.values().sum();
    (behind, total)
}

/// Waits until the group has committed at least `records` input offsets in all, checking
/// every 200 ms that `instance` is alive; fails after 60 s, naming `test` and the log.
pub fn wait_committed(test: &str, run: &Run, records: i64, instance: &mut Instance) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut reader = committed_reader(run);
    while read_committed(&mut reader, Duration::from_secs(10))
        .map_or(true, |c| c.values().sum::<i64>() < records)
    {
        assert!(
            Instant::now() < deadline,
            "{test}: nothing committed in 60 s; see {}",
            instance.log.display()
        );
        instance.check_alive();
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until the group has committed the offset of every input record; fails when the
/// number of records left has not changed for [`IDLE_LIMIT`], or an instance exits by
/// itself or loses a stream thread.
pub fn wait_processed(run: &Run, ends: &BTreeMap<i32, i64>, instances: &mut [Instance]) {
    let mut last = None;
    let mut moved = Instant::now();
    loop {
        let (per_partition, left) = behind(run, ends);
        if left == 0 {
            return;
        }
        if last != Some(left) {
            last = Some(left);
            moved = Instant::now();
        }
        if moved.elapsed() >= IDLE_LIMIT {
            stalled(
                instances,
                &format!(
                    "no progress for {IDLE_LIMIT:?}: {left} input records not committed, per \
                     partition {per_partition:?} (end offsets {ends:?})"
                ),
            );
        }
        check_all_alive(instances);
        std::thread::sleep(Duration::from_millis(500));
    }
}
