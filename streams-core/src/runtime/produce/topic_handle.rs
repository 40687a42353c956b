//! Producing through a topic handle kept by the sender: librdkafka's produce call without
//! the topic looked up by name on every record.
//!
//! rust-rdkafka's `send` names the topic of each record: every call copies the name into a
//! new C string, takes the client's lock, looks the topic up among all of the client's
//! topics and counts a reference to it up and down again. A [`TopicHandle`] is that lookup
//! done once (`rd_kafka_topic_new`); a task's record collector keeps one per output topic
//! and a store's changelog sink one for its changelog, and each record goes out with
//! `rd_kafka_producev(RD_KAFKA_VTYPE_RKT, ...)`: the same call rust-rdkafka makes, with
//! the same flags, delivery opaque and headers, so delivery reports reach the producer's
//! context exactly as before.
//!
//! Invariants: a handle holds its producer, so the producer outlives it; the handle is
//! destroyed once, when dropped. Headers handed to librdkafka are librdkafka's once a
//! produce call succeeds and are destroyed here when it fails.

use std::ffi::{CString, c_void};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rdkafka::bindings as rdsys;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Headers as _;
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::Producer;

use super::producer::{StreamProducer, Written};
use crate::model::record::Headers;

/// A topic of one producer, looked up once (see the module doc).
pub(crate) struct TopicHandle {
    producer: Arc<StreamProducer>,
    rkt: NonNull<rdsys::rd_kafka_topic_t>,
    name: String,
}

// SAFETY: librdkafka's topic handles are thread-safe (every operation on one takes the
// locks it needs), and the handle is only destroyed by its single owner, in `drop`.
#[allow(unsafe_code)]
unsafe impl Send for TopicHandle {}
// SAFETY: as for `Send`: `&TopicHandle` only produces through the handle, which librdkafka
// allows from any thread.
#[allow(unsafe_code)]
unsafe impl Sync for TopicHandle {}

/// One record to produce: where in the topic, and its bytes (copied by the produce call).
#[derive(Clone, Copy)]
pub(crate) struct Outgoing<'a> {
    /// The partition, or `None` for the producer's partitioner.
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// Milliseconds since the epoch.
    pub timestamp: i64,
    pub headers: RecordHeaders<'a>,
}

/// The headers of one record as the produce call takes them.
#[derive(Clone, Copy)]
pub(crate) enum RecordHeaders<'a> {
    /// None at all.
    None,
    /// A record's headers as the engine holds them.
    Model(&'a Headers),
    /// Headers already built for librdkafka (a changelog's).
    Kafka(&'a OwnedHeaders),
}

impl TopicHandle {
    /// The handle of `topic` on `producer`, or `None` when librdkafka refuses the name
    /// (it then refuses the records as well: the caller reports that error).
    #[allow(unsafe_code)]
    pub fn new(producer: &Arc<StreamProducer>, topic: &str) -> Option<Self> {
        let name = CString::new(topic).ok()?;
        // SAFETY: the client handle is valid while `producer` lives (held below for the
        // handle's whole life); `name` is NUL-terminated and alive across the call; a null
        // configuration asks for the producer's default topic configuration.
        let rkt = unsafe {
            rdsys::rd_kafka_topic_new(
                producer.client().native_ptr(),
                name.as_ptr(),
                std::ptr::null_mut(),
            )
        };
        Some(Self {
            producer: producer.clone(),
            rkt: NonNull::new(rkt)?,
            name: topic.to_owned(),
        })
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The producer the handle belongs to.
    pub fn producer(&self) -> &Arc<StreamProducer> {
        &self.producer
    }

    /// Hands one record to librdkafka (bytes copied; `opaque` comes back with its delivery
    /// report): librdkafka's refusal (a full queue, an unknown partition, ...) as its code.
    #[allow(unsafe_code)]
    pub fn produce(&self, record: Outgoing<'_>, opaque: usize) -> Result<(), RDKafkaErrorCode> {
        let Outgoing {
            partition,
            key,
            value,
            timestamp,
            headers,
        } = record;
        let bytes = |b: Option<&[u8]>| {
            b.map_or((std::ptr::null_mut(), 0), |b| {
                (b.as_ptr().cast_mut().cast::<c_void>(), b.len())
            })
        };
        let (value_ptr, value_len) = bytes(value);
        let (key_ptr, key_len) = bytes(key);
        let headers = native_headers(headers);
        use rdsys::rd_kafka_vtype_t::*;
        // SAFETY: the client and topic handles are valid while `self` lives; key and value
        // point at `len` readable bytes alive across the call, which librdkafka copies
        // (`RD_KAFKA_MSG_F_COPY`); the argument list is the one rust-rdkafka's `send` passes,
        // each value of the type its tag announces, ended by `RD_KAFKA_VTYPE_END`; the
        // headers (or null) become librdkafka's when the call succeeds.
        let error = unsafe {
            rdsys::rd_kafka_producev(
                self.producer.client().native_ptr(),
                RD_KAFKA_VTYPE_RKT,
                self.rkt.as_ptr(),
                RD_KAFKA_VTYPE_PARTITION,
                partition.unwrap_or(-1),
                RD_KAFKA_VTYPE_MSGFLAGS,
                rdsys::RD_KAFKA_MSG_F_COPY,
                RD_KAFKA_VTYPE_VALUE,
                value_ptr,
                value_len,
                RD_KAFKA_VTYPE_KEY,
                key_ptr,
                key_len,
                RD_KAFKA_VTYPE_OPAQUE,
                std::ptr::without_provenance_mut::<c_void>(opaque),
                RD_KAFKA_VTYPE_TIMESTAMP,
                timestamp,
                RD_KAFKA_VTYPE_HEADERS,
                headers,
                RD_KAFKA_VTYPE_END,
            )
        };
        if error == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Ok(());
        }
        if !headers.is_null() {
            // SAFETY: librdkafka took no ownership of the headers: the call failed.
            unsafe { rdsys::rd_kafka_headers_destroy(headers) };
        }
        Err(error.into())
    }
}

/// How long a send waits for room in a full producer queue before it fails.
const QUEUE_FULL_LIMIT: Duration = Duration::from_secs(30);

/// Sends one record through `topic`'s handle, waiting (bounded) while the producer's queue
/// is full.
pub(crate) fn send(topic: &TopicHandle, written: Written, record: Outgoing<'_>) -> Result<(), KafkaError> {
    let producer = topic.producer();
    // A full queue drains at the broker's pace: wait in short steps (a long sleep would let
    // it run dry and idle the producer), for at most QUEUE_FULL_LIMIT.
    let mut full_since: Option<Instant> = None;
    let result = loop {
        match topic.produce(record, written.opaque()) {
            Ok(()) => break Ok(()),
            Err(RDKafkaErrorCode::QueueFull)
                if full_since.get_or_insert_with(Instant::now).elapsed() < QUEUE_FULL_LIMIT =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(code) => break Err(KafkaError::MessageProduction(code)),
        }
    };
    if let Some(since) = full_since {
        let waited = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        producer
            .context()
            .queue_full_nanos
            .fetch_add(waited, Ordering::Relaxed);
    }
    if let Err(e) = &result {
        producer.context().note_send_error(e);
    }
    result
}

/// Sends one record to `topic` by name (a handle made for this record alone): for the
/// rare sends that keep no handle (dead letters).
pub(crate) fn send_to(
    producer: &Arc<StreamProducer>,
    written: Written,
    topic: &str,
    record: Outgoing<'_>,
) -> Result<(), KafkaError> {
    let handle = TopicHandle::new(producer, topic).ok_or_else(|| unknown_topic(producer, topic))?;
    send(&handle, written, record)
}

/// The error of a topic librdkafka gave no handle for (a name it refuses), noted like a
/// refused send.
pub(crate) fn unknown_topic(producer: &StreamProducer, topic: &str) -> KafkaError {
    tracing::debug!(topic, "librdkafka refused the topic's name");
    let e = KafkaError::MessageProduction(RDKafkaErrorCode::InvalidTopic);
    producer.context().note_send_error(&e);
    e
}

/// `headers` built as librdkafka's headers (null when there are none).
#[allow(unsafe_code)]
fn native_headers(headers: RecordHeaders<'_>) -> *mut rdsys::rd_kafka_headers_t {
    let count = match &headers {
        RecordHeaders::None => 0,
        RecordHeaders::Model(h) => h.len(),
        RecordHeaders::Kafka(h) => h.count(),
    };
    if count == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: a new, owned header list; each added name and value is copied by librdkafka
    // from a pointer and length alive across the call (a null value for a null header).
    unsafe {
        let list = rdsys::rd_kafka_headers_new(count);
        let add = |name: &str, value: Option<&[u8]>| {
            let (v, len) = value.map_or((std::ptr::null(), 0), |v| (v.as_ptr().cast::<c_void>(), v.len()));
            rdsys::rd_kafka_header_add(list, name.as_ptr().cast(), name.len() as isize, v, len as isize);
        };
        match headers {
            RecordHeaders::None => {}
            RecordHeaders::Model(h) => h.iter().for_each(|(k, v)| add(k, v)),
            RecordHeaders::Kafka(h) => h.iter().for_each(|hd| add(hd.key, hd.value)),
        }
        list
    }
}

impl Drop for TopicHandle {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once, here, while the producer it belongs to
        // is still alive (held by `self`).
        unsafe { rdsys::rd_kafka_topic_destroy(self.rkt.as_ptr()) };
    }
}
