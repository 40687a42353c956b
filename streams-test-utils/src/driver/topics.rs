//! Typed input and output topics of the test driver.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytes::Bytes;
use streams_state::{Serde, SerdeError};

use streams_core::{Headers, StreamsError};

use super::DriverInner;

/// A record read from an output topic.
#[derive(Debug, Clone, PartialEq)]
pub struct TestRecord<K, V> {
    /// The key.
    pub key: K,
    /// The value.
    pub value: V,
    /// The timestamp (ms).
    pub timestamp: i64,
    /// The headers.
    pub headers: Headers,
    /// The partition it was written to.
    pub partition: i32,
}

/// Pipes typed records into one topic of a [`TopologyTestDriver`](super::TopologyTestDriver).
/// Each pipe runs the record through the topology before it returns.
pub struct TestInputTopic<KS, VS> {
    io: TopicIo<KS, VS>,
    next_timestamp: Cell<i64>,
}

/// What a typed input or output topic holds: the driver, the topic's name and its serdes.
struct TopicIo<KS, VS> {
    inner: Rc<RefCell<DriverInner>>,
    topic: String,
    key_serde: KS,
    value_serde: VS,
}

impl<KS, VS> TopicIo<KS, VS> {
    fn new(inner: Rc<RefCell<DriverInner>>, topic: &str, key_serde: KS, value_serde: VS) -> Self {
        Self {
            inner,
            topic: topic.to_owned(),
            key_serde,
            value_serde,
        }
    }
}

impl<KS: Serde, VS: Serde> TestInputTopic<KS, VS> {
    pub(crate) fn new(inner: Rc<RefCell<DriverInner>>, topic: &str, key_serde: KS, value_serde: VS) -> Self {
        Self {
            io: TopicIo::new(inner, topic, key_serde, value_serde),
            next_timestamp: Cell::new(0),
        }
    }

    fn ser<S: Serde>(s: &S, v: &S::Target) -> Result<Option<Bytes>, StreamsError> {
        let mut out = Vec::new();
        let present = s
            .serialize_nullable(v, &mut out)
            .map_err(|e: SerdeError| StreamsError::Usage(e.to_string()))?;
        Ok(present.then(|| Bytes::from(out)))
    }

    /// Pipes a record with the topic's next timestamp (the last one given, initially 0).
    pub fn pipe(&self, key: KS::Target, value: VS::Target) -> Result<(), StreamsError> {
        self.pipe_at(key, value, self.next_timestamp.get())
    }

    /// Pipes a record with `timestamp` (ms).
    pub fn pipe_at(&self, key: KS::Target, value: VS::Target, timestamp: i64) -> Result<(), StreamsError> {
        self.pipe_with_headers(key, value, timestamp, Headers::new())
    }

    /// Pipes a record with `timestamp` and `headers`.
    pub fn pipe_with_headers(
        &self,
        key: KS::Target,
        value: VS::Target,
        timestamp: i64,
        headers: Headers,
    ) -> Result<(), StreamsError> {
        self.pipe_serialized(None, key, value, timestamp, headers)
    }

    /// Pipes a record into an explicit partition, as a producer with a custom partitioner
    /// would (e.g. keys `user:hook` partitioned by the user part).
    pub fn pipe_to_partition(
        &self,
        partition: i32,
        key: KS::Target,
        value: VS::Target,
        timestamp: i64,
    ) -> Result<(), StreamsError> {
        self.pipe_serialized(Some(partition), key, value, timestamp, Headers::new())
    }

    /// Pipes a record through the serdes into `partition` (the driver's choice when `None`);
    /// `timestamp` is also that of the next record piped without one.
    fn pipe_serialized(
        &self,
        partition: Option<i32>,
        key: KS::Target,
        value: VS::Target,
        timestamp: i64,
        headers: Headers,
    ) -> Result<(), StreamsError> {
        self.next_timestamp.set(timestamp);
        let k = Self::ser(&self.io.key_serde, &key)?;
        let v = Self::ser(&self.io.value_serde, &value)?;
        self.io
            .inner
            .borrow_mut()
            .pipe(&self.io.topic, partition, k, v, timestamp, headers)
    }

    /// Pipes raw bytes (e.g. an undeserializable record), bypassing the serdes.
    pub fn pipe_raw(
        &self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        timestamp: i64,
    ) -> Result<(), StreamsError> {
        self.io.inner.borrow_mut().pipe(
            &self.io.topic,
            None,
            key.map(Bytes::copy_from_slice),
            value.map(Bytes::copy_from_slice),
            timestamp,
            Headers::new(),
        )
    }
}

/// A record as read through the serdes `KS` and `VS`.
type Read<KS, VS> = TestRecord<<KS as Serde>::Target, <VS as Serde>::Target>;
/// A key and value as read through the serdes `KS` and `VS`.
type Pair<KS, VS> = (<KS as Serde>::Target, <VS as Serde>::Target);

/// Reads typed records from one topic of a [`TopologyTestDriver`](super::TopologyTestDriver),
/// in the order they were produced.
pub struct TestOutputTopic<KS, VS> {
    io: TopicIo<KS, VS>,
    position: Cell<usize>,
}

impl<KS: Serde, VS: Serde> TestOutputTopic<KS, VS> {
    pub(crate) fn new(inner: Rc<RefCell<DriverInner>>, topic: &str, key_serde: KS, value_serde: VS) -> Self {
        Self {
            io: TopicIo::new(inner, topic, key_serde, value_serde),
            position: Cell::new(0),
        }
    }

    /// The next unread record, if any.
    pub fn read_record(&self) -> Result<Option<Read<KS, VS>>, SerdeError> {
        let inner = self.io.inner.borrow();
        let log = inner.log.lock();
        let Some(raw) = log.read_from(&self.io.topic, self.position.get()).first() else {
            return Ok(None);
        };
        self.position.set(self.position.get() + 1);
        Ok(Some(TestRecord {
            key: self.io.key_serde.deserialize_nullable(raw.key.as_deref())?,
            value: self.io.value_serde.deserialize_nullable(raw.value.as_deref())?,
            timestamp: raw.timestamp,
            headers: raw.headers.clone(),
            partition: raw.partition,
        }))
    }

    /// The next unread value, if any.
    pub fn read_value(&self) -> Result<Option<VS::Target>, SerdeError> {
        Ok(self.read_record()?.map(|r| r.value))
    }

    /// The next unread key and value, if any.
    pub fn read_key_value(&self) -> Result<Option<Pair<KS, VS>>, SerdeError> {
        Ok(self.read_record()?.map(|r| (r.key, r.value)))
    }

    /// Every unread record.
    pub fn read_records(&self) -> Result<Vec<Read<KS, VS>>, SerdeError> {
        std::iter::from_fn(|| self.read_record().transpose()).collect()
    }

    /// Every unread key and value.
    pub fn read_key_values(&self) -> Result<Vec<Pair<KS, VS>>, SerdeError> {
        Ok(self
            .read_records()?
            .into_iter()
            .map(|r| (r.key, r.value))
            .collect())
    }

    /// Every unread value with its record's timestamp.
    pub fn read_values_with_timestamps(&self) -> Result<Vec<(VS::Target, i64)>, SerdeError> {
        Ok(self
            .read_records()?
            .into_iter()
            .map(|r| (r.value, r.timestamp))
            .collect())
    }

    /// The number of unread records.
    pub fn queue_size(&self) -> usize {
        let inner = self.io.inner.borrow();
        let len = inner.log.lock().len(&self.io.topic);
        len.saturating_sub(self.position.get())
    }

    /// Whether every record has been read.
    pub fn is_empty(&self) -> bool {
        self.queue_size() == 0
    }
}
