//! The DSL's key-value stores keep each value with its timestamp, as Kafka Streams'
//! `TimestampedKeyValueStore`: the bytes of a value are its timestamp (8 bytes,
//! big-endian) then the value's own bytes, the layout of
//! [`ValueAndTimestampSerde`](crate::ValueAndTimestampSerde).
//!
//! A DSL store is still registered, and asked for, as `KvStore<DynSerde<K>, DynSerde<V>>`:
//! its value serde reads past the timestamp and returns the plain value (Kafka Streams'
//! `keyValueStore()` query of a timestamped store), and writes a value with timestamp
//! [`NO_TIMESTAMP`]. [`timestamped`] turns such a handle into one that reads and writes
//! [`ValueAndTimestamp`]s (Kafka Streams' `timestampedKeyValueStore()` query); the DSL's
//! processors use that view.
//!
//! Invariants:
//! - every DSL key-value store is built by `Materialized::store`, whose value serde is a
//!   [`PlainValues`]; [`TimestampedValues`] relies on it (it is only made by [`timestamped`]
//!   from a DSL store's handle);
//! - the stored timestamp is the timestamp the DSL forwarded with the value: the record's
//!   for a table source, `filter` and `map_values`; the largest of the key's records so far
//!   for an aggregation (Kafka Streams' rules).

use streams_core::KvStore;
use streams_state::{Serde, SerdeError, ValueAndTimestamp};

use crate::dyn_serde::{DynSerde, dyn_serde};
use crate::windowed::NO_TIMESTAMP;

/// Bytes of the timestamp in front of each value.
const TS_LEN: usize = 8;

/// The value serde a DSL key-value store is registered with: the plain values of
/// timestamped bytes (see the [module docs](self)).
pub(crate) struct PlainValues<V>(pub DynSerde<V>);

impl<V> PlainValues<V> {
    /// The registered serde of a store whose values `inner` reads.
    pub fn registered(inner: DynSerde<V>) -> DynSerde<V>
    where
        V: 'static,
    {
        dyn_serde(PlainValues(inner))
    }
}

impl<V: 'static> Serde for PlainValues<V> {
    type Target = V;

    fn serialize_into(&self, value: &V, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(&NO_TIMESTAMP.to_be_bytes());
        self.0.serialize_into(value, out)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<V, SerdeError> {
        let Some(rest) = bytes.get(TS_LEN..) else {
            return Err(short(bytes));
        };
        self.0.deserialize(rest)
    }

    /// The bytes are timestamped, so that readers holding only the store's builder (the
    /// interactive queries) drop the timestamp before reading a value.
    fn is_value_and_timestamp(&self) -> bool {
        true
    }
}

fn short(bytes: &[u8]) -> SerdeError {
    SerdeError::new(
        "TimestampedValues",
        format!("needs at least 8 bytes of timestamp, got {}", bytes.len()),
    )
}

/// The [`ValueAndTimestamp`]s of a DSL key-value store (made by [`timestamped`]): the same
/// bytes as [`ValueAndTimestampSerde`](crate::ValueAndTimestampSerde) over the store's value serde.
pub struct TimestampedValues<V>(DynSerde<V>);

impl<V> Clone for TimestampedValues<V> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<V: 'static> Serde for TimestampedValues<V> {
    type Target = ValueAndTimestamp<V>;

    fn serialize_into(&self, value: &ValueAndTimestamp<V>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        let start = out.len();
        // The registered serde writes a placeholder timestamp, then the value.
        self.0.serialize_into(&value.value, out)?;
        let Some(ts) = out.get_mut(start..start + TS_LEN) else {
            return Err(short(&out[start..]));
        };
        ts.copy_from_slice(&value.timestamp.to_be_bytes());
        Ok(())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<ValueAndTimestamp<V>, SerdeError> {
        let Some(ts) = bytes.get(..TS_LEN) else {
            return Err(short(bytes));
        };
        let mut arr = [0u8; TS_LEN];
        arr.copy_from_slice(ts);
        Ok(ValueAndTimestamp {
            value: self.0.deserialize(bytes)?,
            timestamp: i64::from_be_bytes(arr),
        })
    }

    fn is_value_and_timestamp(&self) -> bool {
        true
    }
}

/// A DSL key-value store's handle reading and writing values with their timestamps (Kafka
/// Streams' `timestampedKeyValueStore()` query). `store` must be a DSL store, as the test
/// driver or the interactive queries return it:
/// `driver.kv_store::<DynSerde<K>, DynSerde<V>>(name)`.
///
/// ```
/// use streams_core::serdes::{StringSerde, U64Serde};
/// use streams_dsl::{Consumed, DynSerde, Grouped, Materialized, StreamsBuilder, timestamped};
/// use streams_test_utils::{DriverConfig, TopologyTestDriver};
///
/// let b = StreamsBuilder::new();
/// b.stream(["words"], Consumed::with(StringSerde, StringSerde))
///     .group_by_key(Grouped::new())
///     .count(Materialized::as_("counts"));
/// let driver = TopologyTestDriver::new(b.build()?, DriverConfig::default())?;
/// let input = driver.input_topic("words", StringSerde, StringSerde);
/// input.pipe_at("a".to_string(), "x".to_string(), 20)?;
/// input.pipe_at("a".to_string(), "y".to_string(), 10)?;
/// let counts = driver.kv_store::<DynSerde<String>, DynSerde<u64>>("counts")?;
/// assert_eq!(counts.get(&"a".to_string())?, Some(2));
/// let stamped = timestamped(&counts).get(&"a".to_string())?.unwrap();
/// assert_eq!((stamped.value, stamped.timestamp), (2, 20));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn timestamped<K: 'static, V: 'static>(
    store: &KvStore<DynSerde<K>, DynSerde<V>>,
) -> KvStore<DynSerde<K>, TimestampedValues<V>> {
    store.with_value_serde(TimestampedValues(store.value_serde().clone()))
}

/// The layout of a DSL store's values, for tests: `ValueAndTimestampSerde` of the inner
/// serde.
#[cfg(test)]
fn layout<V: 'static>(inner: DynSerde<V>) -> crate::ValueAndTimestampSerde<DynSerde<V>> {
    crate::ValueAndTimestampSerde(inner)
}

#[cfg(test)]
mod tests {
    use streams_state::serde::StringSerde;

    use super::*;

    #[test]
    fn plain_and_timestamped_views_share_kafka_streams_layout() {
        let inner = dyn_serde(StringSerde);
        let plain = PlainValues::registered(inner.clone());
        let stamped = TimestampedValues(plain.clone());
        let v = ValueAndTimestamp::new("ab".to_owned(), 258);
        let bytes = stamped.serialize(&v).unwrap();
        assert_eq!(bytes, layout(inner.clone()).serialize(&v).unwrap());
        assert_eq!(stamped.deserialize(&bytes).unwrap(), v);
        assert_eq!(plain.deserialize(&bytes).unwrap(), "ab");
        let written = plain.serialize(&"c".to_owned()).unwrap();
        assert_eq!(
            layout(inner).deserialize(&written).unwrap(),
            ValueAndTimestamp::new("c".to_owned(), NO_TIMESTAMP)
        );
        assert!(plain.deserialize(b"short").is_err());
        assert!(stamped.deserialize(b"short").is_err());
    }

    #[test]
    fn dsl_stores_say_their_values_are_timestamped() {
        use streams_state::StoreBuilder;
        let b = crate::Materialized::<String, String>::as_("s").store(
            "s",
            dyn_serde(StringSerde),
            dyn_serde(StringSerde),
        );
        assert!(b.layout().timestamped());
    }
}
