//! Records as processors see them, and the raw records the runtime reads from Kafka.

use std::sync::Arc;

use bytes::Bytes;

/// Record headers: an ordered list of `(name, value)` pairs; names may repeat, values may be
/// null, as in Kafka.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(Vec<(String, Option<Bytes>)>);

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// Appends a header.
    pub fn add(&mut self, name: impl Into<String>, value: impl Into<Bytes>) -> &mut Self {
        self.0.push((name.into(), Some(value.into())));
        self
    }

    /// Appends a header with a null value.
    pub fn add_null(&mut self, name: impl Into<String>) -> &mut Self {
        self.0.push((name.into(), None));
        self
    }

    /// The value of the last header called `name`.
    pub fn last(&self, name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// The value of the last header called `name` as UTF-8 text.
    pub fn last_str(&self, name: &str) -> Option<&str> {
        self.last(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// Removes every header called `name`.
    pub fn remove(&mut self, name: &str) -> &mut Self {
        self.0.retain(|(n, _)| n != name);
        self
    }

    /// Every header, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<&[u8]>)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_deref()))
    }

    /// The number of headers.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no headers.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Which parts of a record are null as Kafka sees them: a null key, or a null value (a
/// tombstone).
///
/// A typed record cannot always say so itself: a null value read with `StringSerde` is
/// `""`. A source sets these flags from the bytes it read; they stay while the record
/// passes on unchanged (filters, branches, `peek`, `merge`, repartition topics) and are
/// cleared for the part a processor replaces ([`Record::with_key`],
/// [`Record::with_value`], [`Record::map_value`]). A sink writes a flagged part as null
/// whatever its serde, and the DSL's aggregations and joins skip records whose key or
/// value is null where Kafka Streams does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Nulls {
    /// The key is null.
    pub key: bool,
    /// The value is null.
    pub value: bool,
}

impl Nulls {
    /// Neither part is null.
    pub const NONE: Self = Self {
        key: false,
        value: false,
    };

    /// These marks with the key not null: for a record whose key was replaced.
    pub fn without_key(self) -> Self {
        Self { key: false, ..self }
    }

    /// These marks with the value not null: for a record whose value was replaced.
    pub fn without_value(self) -> Self {
        Self { value: false, ..self }
    }
}

/// A typed record flowing between processors.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<K, V> {
    /// The key.
    pub key: K,
    /// The value.
    pub value: V,
    /// The timestamp in milliseconds since the epoch.
    pub timestamp: i64,
    /// The headers.
    pub headers: Headers,
    /// Whether the key or value is null on the wire (see [`Nulls`]).
    pub nulls: Nulls,
}

impl<K, V> Record<K, V> {
    /// A record with no headers, whose key and value are not null.
    pub fn new(key: K, value: V, timestamp: i64) -> Self {
        Self {
            key,
            value,
            timestamp,
            headers: Headers::new(),
            nulls: Nulls::NONE,
        }
    }

    /// The same record with another key (not null).
    pub fn with_key<K2>(self, key: K2) -> Record<K2, V> {
        Record {
            key,
            value: self.value,
            timestamp: self.timestamp,
            headers: self.headers,
            nulls: self.nulls.without_key(),
        }
    }

    /// The same record with another value (not null).
    pub fn with_value<V2>(self, value: V2) -> Record<K, V2> {
        self.map_value(|_, _| value)
    }

    /// The same record with its value replaced by `f(&key, value)` (not null).
    pub fn map_value<V2>(self, f: impl FnOnce(&K, V) -> V2) -> Record<K, V2> {
        let value = f(&self.key, self.value);
        Record {
            key: self.key,
            value,
            timestamp: self.timestamp,
            headers: self.headers,
            nulls: self.nulls.without_value(),
        }
    }

    /// The same record with another timestamp.
    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = timestamp;
        self
    }

    /// The same record with other headers.
    pub fn with_headers(mut self, headers: Headers) -> Self {
        self.headers = headers;
        self
    }

    /// The same record with its key and value marked null (or not) as `nulls` says.
    pub fn with_nulls(mut self, nulls: Nulls) -> Self {
        self.nulls = nulls;
        self
    }

    /// Whether the key is null on the wire (see [`Nulls`]).
    pub fn key_is_null(&self) -> bool {
        self.nulls.key
    }

    /// Whether the value is null on the wire (a tombstone; see [`Nulls`]).
    pub fn value_is_null(&self) -> bool {
        self.nulls.value
    }
}

/// Where the record being processed came from: its topic, partition and offset.
///
/// Records forwarded from a punctuator have no input record; their metadata is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The source topic.
    pub topic: String,
    /// The source partition.
    pub partition: i32,
    /// The offset in the source partition.
    pub offset: i64,
}

/// A record as read from a topic: bytes, before deserialization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    /// The topic it was read from (shared by the records of one topic).
    pub topic: Arc<str>,
    /// The partition it was read from.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// The key bytes, `None` for a null key.
    pub key: Option<Bytes>,
    /// The value bytes, `None` for a null value (tombstone).
    pub value: Option<Bytes>,
    /// The record's timestamp (ms).
    pub timestamp: i64,
    /// The record's headers.
    pub headers: Headers,
}

/// A record produced by a sink, in bytes, ready for a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputRecord {
    /// The destination topic.
    pub topic: String,
    /// The destination partition, when the sink chose one.
    pub partition: Option<i32>,
    /// The key bytes.
    pub key: Option<Bytes>,
    /// The value bytes.
    pub value: Option<Bytes>,
    /// The timestamp (ms).
    pub timestamp: i64,
    /// The headers.
    pub headers: Headers,
}

/// A record on its way to the record collector, borrowed from the sink that made it: the
/// collector copies what it keeps (the producer copies into its own buffers), so a sink
/// serializes into reused buffers and allocates nothing per record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputRef<'a> {
    /// The destination topic.
    pub topic: &'a str,
    /// The destination partition, when the sink chose one.
    pub partition: Option<i32>,
    /// The key bytes.
    pub key: Option<&'a [u8]>,
    /// The value bytes.
    pub value: Option<&'a [u8]>,
    /// The timestamp (ms).
    pub timestamp: i64,
    /// The headers.
    pub headers: &'a Headers,
}

impl OutputRef<'_> {
    /// An owned copy.
    pub fn to_owned_record(&self) -> OutputRecord {
        OutputRecord {
            topic: self.topic.to_owned(),
            partition: self.partition,
            key: self.key.map(Bytes::copy_from_slice),
            value: self.value.map(Bytes::copy_from_slice),
            timestamp: self.timestamp,
            headers: self.headers.clone(),
        }
    }
}

impl OutputRecord {
    /// This record, borrowed.
    pub fn as_output_ref(&self) -> OutputRef<'_> {
        OutputRef {
            topic: &self.topic,
            partition: self.partition,
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            timestamp: self.timestamp,
            headers: &self.headers,
        }
    }
}
