//! A stream thread's fetch queue: consumed records taken from librdkafka a batch at a time.
//!
//! rust-rdkafka's `poll` hands out one message per call, and each call costs a queue lock,
//! an event object, an `Arc` and clock reads: on a pinned map or count that is a fifth of
//! the thread's time. A [`FetchQueue`] is a librdkafka queue of the thread's own to which
//! every partition the thread is assigned sends its fetched messages ([`FetchRoute::route`],
//! librdkafka's queue forwarding); [`FetchQueue::take`] then moves everything waiting
//! there into the batch with one `rd_kafka_consume_batch_queue` call.
//!
//! Invariants:
//! - Only messages and per-partition fetch errors arrive here. The consumer's own queue
//!   still carries the rebalances, errors, logs and statistics. A rebalance must never
//!   reach this queue: librdkafka serves one found by a batch consume by unassigning
//!   everything.
//! - A partition is routed *before* it is assigned: the rebalance callback routes the
//!   partitions it is about to assign ([`FetchRoute::route`]), so every message fetched for
//!   the assignment arrives here, none on the consumer's queue. Routing after the
//!   assignment would race librdkafka's fetcher: messages it fetched in between would sit
//!   on the consumer's queue, and taken after newer ones from this queue they would look
//!   like re-deliveries to the task, which drops them.
//! - A forwarding the application sets is kept by librdkafka when it (re)starts fetching the
//!   partition, and messages of a revoked, paused or sought partition that are still queued
//!   here are discarded by librdkafka's version barrier, as on the consumer's queue.
//! - The queue borrows its consumer, so it is destroyed before the consumer is; its
//!   [`FetchRoute`] (in the consumer's context) points at it only while it exists.

use std::ffi::{CStr, CString, c_int};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Duration;

use rdkafka::TopicPartitionList;
use rdkafka::bindings as rdsys;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::model::record::RawRecord;
use crate::runtime::client::consumed::{TopicNames, raw_record};

/// Where a consumer's rebalance callback routes the partitions it assigns: the thread's
/// [`FetchQueue`] while one exists, nowhere otherwise (the partitions' messages then stay
/// on the consumer's queue). Kept in the consumer's context; set and cleared by the queue.
#[derive(Debug, Default)]
pub(crate) struct FetchRoute(AtomicPtr<rdsys::rd_kafka_queue_t>);

impl FetchRoute {
    /// Sends the fetched messages of every partition of `partitions` to the thread's fetch
    /// queue, if it has one. Call it before assigning them (see the module doc). A
    /// partition routed before stays routed; one librdkafka does not know (a topic name
    /// with a NUL byte) is left on the consumer's queue.
    #[allow(unsafe_code)]
    pub fn route<C: ConsumerContext + 'static>(
        &self,
        consumer: &BaseConsumer<C>,
        partitions: &TopicPartitionList,
    ) {
        let queue = self.0.load(Ordering::Acquire);
        if queue.is_null() {
            return;
        }
        let client = consumer.client().native_ptr();
        for e in partitions.elements() {
            let Ok(topic) = CString::new(e.topic()) else {
                continue;
            };
            // SAFETY: `queue` is the live queue of the thread's `FetchQueue`, which clears
            // this pointer before it destroys the queue (on the same thread, the only one
            // that runs this consumer's callbacks); `client` is valid while the consumer is
            // borrowed; `topic` is NUL-terminated and alive across the call. The partition's
            // queue handle librdkafka returns is owned here and destroyed right after the
            // forwarding, which keeps its own references to both queues.
            unsafe {
                let partition = rdsys::rd_kafka_queue_get_partition(client, topic.as_ptr(), e.partition());
                if !partition.is_null() {
                    rdsys::rd_kafka_queue_forward(partition, queue);
                    rdsys::rd_kafka_queue_destroy(partition);
                }
            }
        }
    }
}

/// A stream thread's own queue of fetched messages (see the module doc).
pub(crate) struct FetchQueue<'c, C: ConsumerContext + 'static> {
    queue: NonNull<rdsys::rd_kafka_queue_t>,
    /// The route the consumer's callbacks use, pointing at this queue until it is dropped.
    route: &'c FetchRoute,
    /// The messages of one `take`, as librdkafka hands them over (destroyed before it
    /// returns).
    messages: Vec<*mut rdsys::rd_kafka_message_t>,
    /// The topic of each topic handle met in one `take` (a handle stays alive while a
    /// message of the batch refers to it, so it names one topic for the whole batch).
    handles: Vec<(*const rdsys::rd_kafka_topic_t, Arc<str>)>,
    consumer: std::marker::PhantomData<&'c BaseConsumer<C>>,
}

impl<'c, C: ConsumerContext + 'static> FetchQueue<'c, C> {
    /// A new, empty queue of `consumer`'s client, taking at most `batch` messages per
    /// [`take`](Self::take), to which `route` sends the partitions assigned from now on
    /// until the queue is dropped.
    #[allow(unsafe_code)]
    pub fn new(consumer: &'c BaseConsumer<C>, route: &'c FetchRoute, batch: usize) -> Option<Self> {
        // SAFETY: the client handle is valid while `consumer` is borrowed; the queue
        // librdkafka returns is owned here and destroyed once, in `drop`.
        let queue = NonNull::new(unsafe { rdsys::rd_kafka_queue_new(consumer.client().native_ptr()) })?;
        route.0.store(queue.as_ptr(), Ordering::Release);
        Some(Self {
            queue,
            route,
            messages: Vec::with_capacity(batch.max(1)),
            handles: Vec::new(),
            consumer: std::marker::PhantomData,
        })
    }

    /// Moves up to `max` messages waiting here (at most the batch size given to `new`)
    /// into `out` as raw records, waiting up to `timeout` for the first one, and returns
    /// how many it moved and the fetch errors met among them (a record is never dropped
    /// for an error beside it).
    pub fn take(
        &mut self,
        timeout: Duration,
        max: usize,
        topics: &mut TopicNames,
        out: &mut Vec<RawRecord>,
    ) -> (usize, Vec<KafkaError>) {
        let max = max.min(self.messages.capacity());
        if max == 0 {
            return (0, Vec::new());
        }
        // librdkafka's batch consume waits until the batch is full or the time is up:
        // waiting is for one message, the rest is taken without waiting.
        let mut moved = 0;
        let mut errors = Vec::new();
        if !timeout.is_zero() {
            moved = self.take_once(timeout, 1, topics, out, &mut errors);
            if moved == 0 && errors.is_empty() {
                return (0, errors);
            }
        }
        moved += self.take_once(Duration::ZERO, max - moved.min(max), topics, out, &mut errors);
        (moved, errors)
    }

    /// One `rd_kafka_consume_batch_queue` call (see [`take`](Self::take)): returns how
    /// many records it moved into `out`, and adds the fetch errors it met to `errors`.
    #[allow(unsafe_code)]
    fn take_once(
        &mut self,
        timeout: Duration,
        max: usize,
        topics: &mut TopicNames,
        out: &mut Vec<RawRecord>,
        errors: &mut Vec<KafkaError>,
    ) -> usize {
        if max == 0 {
            return 0;
        }
        let timeout_ms = c_int::try_from(timeout.as_millis()).unwrap_or(c_int::MAX);
        // SAFETY: the queue is valid until `drop`; librdkafka writes at most `max` message
        // pointers into the vector's spare capacity (`max` is at most its capacity) and
        // returns how many, or -1 with none written.
        let n = unsafe {
            rdsys::rd_kafka_consume_batch_queue(
                self.queue.as_ptr(),
                timeout_ms,
                self.messages.as_mut_ptr(),
                max,
            )
        };
        let n = usize::try_from(n).unwrap_or(0).min(max);
        // SAFETY: librdkafka initialised the first `n` slots.
        unsafe { self.messages.set_len(n) };
        let mut moved = 0;
        for &m in &self.messages {
            // SAFETY: each pointer is a message librdkafka handed over, valid until it is
            // destroyed right after it is read, and read by this thread alone.
            let message = unsafe { &*m };
            if message.err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                let topic = topic_of(&mut self.handles, message, topics);
                out.push(raw_record(message, topic));
                moved += 1;
            } else {
                errors.push(fetch_error(message));
            }
            // SAFETY: destroyed once; nothing read from it after this point (the record
            // holds copies of its bytes).
            unsafe { rdsys::rd_kafka_message_destroy(m) };
        }
        // Empty between calls: no pointer outlives its message.
        self.messages.clear();
        self.handles.clear();
        moved
    }
}

/// The shared name of the topic of message `m`, found first among the topic handles met
/// in this batch (`handles`: a handle stays alive while a message of the batch refers to
/// it, so it names one topic for the whole batch).
#[allow(unsafe_code)]
fn topic_of(
    handles: &mut Vec<(*const rdsys::rd_kafka_topic_t, Arc<str>)>,
    m: &rdsys::rd_kafka_message_t,
    topics: &mut TopicNames,
) -> Arc<str> {
    if let Some((_, t)) = handles.iter().find(|(h, _)| *h == m.rkt.cast_const()) {
        return t.clone();
    }
    // SAFETY: `m` is a live message; librdkafka documents its topic handle as valid, and
    // the handle's name as a NUL-terminated string, while the message lives.
    let name = unsafe { CStr::from_ptr(rdsys::rd_kafka_topic_name(m.rkt)) };
    let t = topics.get(&name.to_string_lossy());
    handles.push((m.rkt.cast_const(), t.clone()));
    t
}

/// The error a message with an error code stands for, as rust-rdkafka's `poll` reports it.
fn fetch_error(m: &rdsys::rd_kafka_message_t) -> KafkaError {
    let code: RDKafkaErrorCode = m.err.into();
    if code == RDKafkaErrorCode::PartitionEOF {
        KafkaError::PartitionEOF(m.partition)
    } else {
        KafkaError::MessageConsumption(code)
    }
}

impl<C: ConsumerContext + 'static> Drop for FetchQueue<'_, C> {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // No callback routes a partition here any more.
        self.route.0.store(std::ptr::null_mut(), Ordering::Release);
        // SAFETY: the queue was created in `new` and is destroyed once, here, while its
        // consumer is still alive. Partitions still forwarding to it keep their own
        // references, which librdkafka drops with the partitions.
        unsafe { rdsys::rd_kafka_queue_destroy(self.queue.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use rdkafka::ClientConfig;
    use rdkafka::mocking::MockCluster;

    use super::*;

    use crate::runtime::client::consumed::mock_messages::{self, Message};

    /// The key, value and header of message `i`: null and empty keys and values, and
    /// headers on some (one null).
    fn message(i: usize) -> Message {
        let bytes = |len: usize| (0..len).map(|j| (i * 7 + j) as u8).collect::<Vec<u8>>();
        let key = match i % 5 {
            0 => None,
            1 => Some(Vec::new()),
            _ => Some(bytes(1 + i % 30)),
        };
        let value = match i % 4 {
            0 => None,
            1 => Some(Vec::new()),
            _ => Some(bytes(1 + i % 3000)),
        };
        let header = match i % 6 {
            0 => Some(Some(bytes(i % 9))),
            1 => Some(None),
            _ => None,
        };
        (key, value, header)
    }

    /// Partitions routed before they are assigned deliver every record through the fetch
    /// queue, in batches, in order within each partition and with the bytes it was written
    /// with; the consumer's queue hands out none. A route whose queue is gone routes
    /// nothing.
    #[test]
    fn routed_partitions_deliver_every_record_in_order_through_the_fetch_queue() {
        const N: usize = 3000;
        let cluster = MockCluster::new(1).unwrap();
        cluster.create_topic("in", 2, 1).unwrap();
        mock_messages::produce(&cluster.bootstrap_servers(), "in", 2, N, message);
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap_servers())
            .set("group.id", "fetch-queue")
            .set("auto.offset.reset", "earliest")
            // Small fetches: the records arrive over many fetches.
            .set("max.partition.fetch.bytes", "20000")
            .set("queued.max.messages.kbytes", "64")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        for p in 0..2 {
            tpl.add_partition_offset("in", p, rdkafka::Offset::Beginning)
                .unwrap();
        }
        let route = FetchRoute::default();
        let mut queue = FetchQueue::new(&consumer, &route, 500).unwrap();
        route.route(&consumer, &tpl);
        consumer.assign(&tpl).unwrap();
        let mut topics = TopicNames::default();
        let mut records = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut batches = 0;
        while records.len() < N && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::ZERO) {
                panic!(
                    "a record on the consumer's queue: {:?}",
                    m.map(|m| rdkafka::Message::offset(&m))
                );
            }
            let (n, errors) = queue.take(Duration::from_millis(100), 500, &mut topics, &mut records);
            assert!(errors.is_empty(), "{errors:?}");
            assert!(n <= 500);
            batches += usize::from(n > 0);
        }
        assert_eq!(records.len(), N);
        assert!(batches * 2 < N, "records came one at a time ({batches} batches)");
        drop(queue);
        assert!(
            route.0.load(Ordering::Acquire).is_null(),
            "the route outlived its queue"
        );
        let mut next = [0_i64; 2];
        for r in &records {
            let p = r.partition as usize;
            assert_eq!(r.offset, next[p], "partition {p} out of order");
            next[p] += 1;
            let i = r.offset as usize * 2 + p;
            let (key, value, header) = message(i);
            assert_eq!(&*r.topic, "in");
            assert_eq!(r.key.as_deref(), key.as_deref(), "key of record {i}");
            assert_eq!(r.value.as_deref(), value.as_deref(), "value of record {i}");
            match header {
                Some(Some(h)) => assert_eq!(r.headers.last("h"), Some(&h[..]), "header of record {i}"),
                Some(None) => assert!(
                    r.headers.iter().any(|(k, v)| k == "h" && v.is_none()),
                    "null header of record {i}"
                ),
                None => assert_eq!(r.headers.iter().count(), 0, "headers of record {i}"),
            }
        }
    }
}
