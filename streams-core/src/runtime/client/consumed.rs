//! Consumed messages as the tasks take them: [`RawRecord`]s whose key and value bytes are
//! copied into the thread's payload arena (`payloads.rs`) and whose topic names are shared.
//! A leaf of the runtime: used by the stream thread, the global thread and the producer (a
//! failed record handed to the production handler).

use std::ffi::CStr;
use std::sync::Arc;

use bytes::Bytes;
use rdkafka::bindings as rdsys;
use rdkafka::message::Message;

use crate::model::record::{Headers, RawRecord};

/// Interns the topic names of one consumer's records: a handful of topics, so a scan beats
/// hashing, and each record shares its topic's name instead of allocating a copy.
#[derive(Default)]
pub(crate) struct TopicNames(Vec<Arc<str>>);

impl TopicNames {
    /// The shared name of `topic`.
    pub fn get(&mut self, topic: &str) -> Arc<str> {
        if let Some(t) = self.0.iter().find(|t| ***t == *topic) {
            return t.clone();
        }
        let t: Arc<str> = Arc::from(topic);
        self.0.push(t.clone());
        t
    }
}

/// A consumed message as the tasks take it (bytes copied out of librdkafka's buffers: key
/// and value into this thread's payload arena, so the records of a batch share a few
/// chunks instead of allocating two buffers each; see `payloads.rs`).
#[allow(unsafe_code)]
pub(crate) fn to_raw(m: &rdkafka::message::BorrowedMessage<'_>, topics: &mut TopicNames) -> RawRecord {
    let topic = topics.get(m.topic());
    // SAFETY: the message rust-rdkafka lends is alive and unchanged while `m` is borrowed.
    raw_record(unsafe { &*m.ptr() }, topic)
}

/// The raw record of librdkafka's message `m` (see [`to_raw`]), whose topic is `topic`:
/// key and value copied into the thread's payload arena, header names read as UTF-8
/// (invalid bytes replaced, never a panic), header values copied, and a missing timestamp
/// (none, or -1) read as 0. The one conversion of a consumed message, for messages
/// rust-rdkafka lends ([`to_raw`]) and for those a batch consume hands over
/// (`fetch_queue.rs`).
#[allow(unsafe_code)]
pub(crate) fn raw_record(m: &rdsys::rd_kafka_message_t, topic: Arc<str>) -> RawRecord {
    // SAFETY (both blocks): `m` is a live message; librdkafka documents its key and
    // payload as `key_len` and `len` readable bytes when not null, and fills the
    // timestamp's type through a pointer to a live local.
    let bytes = |ptr: *mut std::ffi::c_void, len: usize| -> Option<&[u8]> {
        (!ptr.is_null()).then(|| unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
    };
    let (key, value) = crate::runtime::client::payloads::with_arena(|a| {
        (
            bytes(m.key, m.key_len).map(|k| a.copy(k)),
            bytes(m.payload, m.len).map(|v| a.copy(v)),
        )
    });
    let mut kind = rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
    let timestamp = unsafe { rdsys::rd_kafka_message_timestamp(m, &mut kind) };
    let timestamp = match kind {
        rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE => 0,
        _ if timestamp == -1 => 0,
        _ => timestamp,
    };
    RawRecord {
        topic,
        partition: m.partition,
        offset: m.offset,
        key,
        value,
        timestamp,
        headers: headers(m),
    }
}

/// The headers of `m`, names read as UTF-8 (invalid bytes replaced), values copied.
#[allow(unsafe_code)]
fn headers(m: &rdsys::rd_kafka_message_t) -> Headers {
    let mut out = Headers::new();
    let mut list: *mut rdsys::rd_kafka_headers_t = std::ptr::null_mut();
    // SAFETY: `m` is a live message; librdkafka writes a pointer to the headers it owns
    // (valid while `m` lives) or reports that there are none.
    let found = unsafe { rdsys::rd_kafka_message_headers(m, &mut list) };
    if found != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || list.is_null() {
        return out;
    }
    for idx in 0.. {
        let (mut name, mut value, mut size) = (std::ptr::null(), std::ptr::null(), 0_usize);
        // SAFETY: `list` is valid while `m` lives; librdkafka writes the header's name (a
        // NUL-terminated string), value and size through pointers to live locals, or
        // reports that `idx` is past the last header.
        let got = unsafe { rdsys::rd_kafka_header_get_all(list, idx, &mut name, &mut value, &mut size) };
        if got != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
            break;
        }
        // SAFETY: as above: the name is NUL-terminated and the value `size` bytes long.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        if value.is_null() {
            out.add_null(name);
        } else {
            let v = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) };
            out.add(name, Bytes::copy_from_slice(v));
        }
    }
    out
}

/// Test support: messages written to librdkafka's mock cluster for the consuming tests.
#[cfg(test)]
pub(crate) mod mock_messages {
    use std::time::Duration;

    use rdkafka::ClientConfig;
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    /// A message's key, value and header `h` (absent, null, or bytes).
    pub(crate) type Message = (Option<Vec<u8>>, Option<Vec<u8>>, Option<Option<Vec<u8>>>);

    /// Writes messages `message(0..n)` to `topic` on the mock cluster at `bootstrap`,
    /// message `i` to partition `i % partitions`, and waits until they are written.
    pub(crate) fn produce(
        bootstrap: &str,
        topic: &str,
        partitions: usize,
        n: usize,
        message: impl Fn(usize) -> Message,
    ) {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .unwrap();
        for i in 0..n {
            let (key, value, header) = message(i);
            let mut r: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic).partition((i % partitions) as i32);
            if let Some(k) = &key {
                r = r.key(&k[..]);
            }
            if let Some(v) = &value {
                r = r.payload(&v[..]);
            }
            if let Some(h) = &header {
                r = r.headers(OwnedHeaders::new().insert(Header {
                    key: "h",
                    value: h.as_deref(),
                }));
            }
            producer.send(r).map_err(|(e, _)| e).unwrap();
        }
        producer.flush(Duration::from_secs(10)).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use rdkafka::ClientConfig;
    use rdkafka::TopicPartitionList;
    use rdkafka::consumer::{BaseConsumer, Consumer};

    use super::*;

    use super::mock_messages::Message;

    /// The key, value and header bytes of a message `i` of `to_raw_keeps_every_records_bytes`:
    /// null and empty keys and values, sizes around and above the arena's large-payload
    /// limit, and headers on some.
    fn message(i: usize) -> Message {
        let bytes = |len: usize| (0..len).map(|j| (i * 31 + j) as u8).collect::<Vec<u8>>();
        let key = match i % 7 {
            0 => None,
            1 => Some(Vec::new()),
            _ => Some(bytes(1 + i % 40)),
        };
        let value = match i % 11 {
            0 => None,
            1 => Some(Vec::new()),
            2 => Some(bytes(crate::runtime::client::payloads::LARGE_BYTES + 1 + i)),
            _ => Some(bytes(50 + (i * 37) % 400)),
        };
        let header = i.is_multiple_of(5).then(|| Some(bytes(3 + i % 9)));
        (key, value, header)
    }

    /// Records copied out of consumed messages (several arena chunks' worth, every record
    /// kept alive) hold exactly their messages' bytes, and null stays distinct from empty.
    #[test]
    fn to_raw_keeps_every_records_bytes() {
        use rdkafka::mocking::MockCluster;

        const N: usize = 1500;
        let cluster = MockCluster::new(1).unwrap();
        cluster.create_topic("in", 1, 1).unwrap();
        super::mock_messages::produce(&cluster.bootstrap_servers(), "in", 1, N, message);
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap_servers())
            .set("group.id", "to-raw")
            .set("auto.offset.reset", "earliest")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("in", 0, rdkafka::Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).unwrap();
        let mut topics = TopicNames::default();
        let mut records = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while records.len() < N && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                records.push(to_raw(&m.unwrap(), &mut topics));
            }
        }
        assert_eq!(records.len(), N);
        for (i, r) in records.iter().enumerate() {
            let (key, value, header) = message(i);
            assert_eq!(r.offset, i as i64);
            assert_eq!(&*r.topic, "in");
            assert_eq!(r.key.as_deref(), key.as_deref(), "key of record {i}");
            assert_eq!(r.value.as_deref(), value.as_deref(), "value of record {i}");
            assert_eq!(
                r.headers.last("h"),
                header.flatten().as_deref(),
                "header of record {i}"
            );
        }
    }
}
