//! Operator options, as Kafka Streams' `Consumed`, `Produced`, `Grouped` and `Materialized`:
//! serdes, names and store settings.

use std::sync::Arc;

use streams_core::state::KeyValueStoreBuilder;
use streams_core::{OffsetReset, RawRecord, Stores, StreamPartitioner};
use streams_state::Serde;

use crate::dyn_serde::{DynSerde, dyn_serde};
use crate::timestamped::PlainValues;

/// The setters of the options with a name and serdes of `K` and `V` ([`Grouped`],
/// [`Materialized`]): `named` (documented `$named_doc`), `with_key_serde`, `with_value_serde`.
macro_rules! name_and_serde_setters {
    ($named_doc:literal) => {
        #[doc = $named_doc]
        pub fn named(mut self, name: impl Into<String>) -> Self {
            self.name = Some(name.into());
            self
        }

        /// Sets the key serde.
        pub fn with_key_serde(mut self, serde: impl Serde<Target = K>) -> Self {
            self.key_serde = Some(dyn_serde(serde));
            self
        }

        /// Sets the value serde.
        pub fn with_value_serde(mut self, serde: impl Serde<Target = V>) -> Self {
            self.value_serde = Some(dyn_serde(serde));
            self
        }
    };
}

/// Extracts a record's timestamp from the raw record and its partition's time.
pub(crate) type TimestampExtractor = Arc<dyn Fn(&RawRecord, i64) -> i64 + Send + Sync>;

/// How a stream reads its topics: serdes, the source's name, the offset reset and the
/// timestamp extractor.
#[derive(Clone)]
pub struct Consumed<KS, VS> {
    pub(crate) key_serde: KS,
    pub(crate) value_serde: VS,
    pub(crate) name: Option<String>,
    pub(crate) offset_reset: OffsetReset,
    pub(crate) extractor: Option<TimestampExtractor>,
}

impl<KS: Serde + Clone, VS: Serde + Clone> Consumed<KS, VS> {
    /// Reads keys with `key_serde` and values with `value_serde`.
    pub fn with(key_serde: KS, value_serde: VS) -> Self {
        Self {
            key_serde,
            value_serde,
            name: None,
            offset_reset: OffsetReset::default(),
            extractor: None,
        }
    }

    /// Names the source node.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Where to start without a committed offset (Kafka Streams' `Consumed.withOffsetResetPolicy`);
    /// the default is [`OffsetReset::Earliest`].
    pub fn offset_reset(mut self, reset: OffsetReset) -> Self {
        self.offset_reset = reset;
        self
    }

    /// Takes each record's timestamp from `f(record, partition_time)` instead of the
    /// timestamp the record carries (Kafka Streams' `Consumed.withTimestampExtractor`);
    /// `partition_time` is the largest timestamp seen so far on the record's partition. The
    /// timestamp drives stream time, windows and the timestamps of records written
    /// downstream. A negative result drops the record.
    pub fn with_timestamp_extractor(
        mut self,
        f: impl Fn(&RawRecord, i64) -> i64 + Send + Sync + 'static,
    ) -> Self {
        self.extractor = Some(Arc::new(f));
        self
    }

    /// As [`with_timestamp_extractor`](Self::with_timestamp_extractor), with the key and
    /// value read by this `Consumed`'s serdes, as Kafka Streams hands its extractor the
    /// deserialized record: `f(key, value, partition_time)`. A record whose key or value
    /// cannot be read keeps its own timestamp here; the source then reports it to the
    /// deserialization handler.
    pub fn with_typed_timestamp_extractor(
        self,
        f: impl Fn(&KS::Target, &VS::Target, i64) -> i64 + Send + Sync + 'static,
    ) -> Self
    where
        KS: Send + Sync + 'static,
        VS: Send + Sync + 'static,
    {
        let (ks, vs) = (self.key_serde.clone(), self.value_serde.clone());
        self.with_timestamp_extractor(move |raw, partition_time| {
            let key = ks.deserialize_nullable(raw.key.as_deref());
            let value = vs.deserialize_nullable(raw.value.as_deref());
            match (key, value) {
                (Ok(k), Ok(v)) => f(&k, &v, partition_time),
                _ => raw.timestamp,
            }
        })
    }
}

/// Chooses the partition of each record a sink writes; shared by the clones of a
/// [`Produced`].
pub(crate) type SharedPartitioner<K, V> = Arc<dyn StreamPartitioner<K, V>>;

/// How a stream is written to a topic: serdes, the sink's name and its partitioner.
pub struct Produced<KS: Serde, VS: Serde> {
    pub(crate) key_serde: KS,
    pub(crate) value_serde: VS,
    pub(crate) name: Option<String>,
    pub(crate) partitioner: Option<SharedPartitioner<KS::Target, VS::Target>>,
}

impl<KS: Serde + Clone, VS: Serde + Clone> Clone for Produced<KS, VS> {
    fn clone(&self) -> Self {
        Self {
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            name: self.name.clone(),
            partitioner: self.partitioner.clone(),
        }
    }
}

impl<KS: Serde + Clone, VS: Serde + Clone> Produced<KS, VS> {
    /// Writes keys with `key_serde` and values with `value_serde`.
    pub fn with(key_serde: KS, value_serde: VS) -> Self {
        Self {
            key_serde,
            value_serde,
            name: None,
            partitioner: None,
        }
    }

    /// Chooses each record's partition with `partitioner` (Kafka Streams'
    /// `Produced.withStreamPartitioner`): it gets the topic, the record and the topic's
    /// partition count; where it answers `None` the default applies (murmur2 of the key
    /// bytes, as Kafka's Java clients).
    pub fn with_partitioner(mut self, partitioner: impl StreamPartitioner<KS::Target, VS::Target>) -> Self {
        self.partitioner = Some(Arc::new(partitioner));
        self
    }

    /// Names the sink node.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// How a stream is grouped: the serdes of its repartition topic (when one is needed) and
/// the name that the repartition topic and the grouping's nodes derive from.
pub struct Grouped<K, V> {
    pub(crate) key_serde: Option<DynSerde<K>>,
    pub(crate) value_serde: Option<DynSerde<V>>,
    pub(crate) name: Option<String>,
    pub(crate) partitions: Option<std::num::NonZeroU16>,
}

impl<K, V> Default for Grouped<K, V> {
    fn default() -> Self {
        Self {
            key_serde: None,
            value_serde: None,
            name: None,
            partitions: None,
        }
    }
}

impl<K: 'static, V: 'static> Grouped<K, V> {
    /// Serdes from upstream, no name.
    pub fn new() -> Self {
        Self::default()
    }

    /// Named `name`, serdes from upstream.
    pub fn as_(name: impl Into<String>) -> Self {
        Self::default().named(name)
    }

    /// With both serdes.
    pub fn with<KS, VS>(key_serde: KS, value_serde: VS) -> Self
    where
        KS: Serde<Target = K>,
        VS: Serde<Target = V>,
    {
        Self {
            key_serde: Some(dyn_serde(key_serde)),
            value_serde: Some(dyn_serde(value_serde)),
            name: None,
            partitions: None,
        }
    }

    /// Gives the repartition topic (if this grouping or `repartition` makes one) `n`
    /// partitions instead of the count of the topics upstream (Kafka Streams'
    /// `Repartitioned.withNumberOfPartitions`).
    pub fn with_number_of_partitions(mut self, n: std::num::NonZeroU16) -> Self {
        self.partitions = Some(n);
        self
    }

    name_and_serde_setters!("Sets the name.");
}

/// How a table or an aggregation is kept in a key-value store: its name, serdes, and
/// whether it is persistent (RocksDB, the default), cached (default) and change-logged
/// (default).
///
/// An aggregation (`count`, `aggregate`, `reduce`, windowed or not, of a grouped stream or
/// table) over a cached store forwards a key's update when the cache writes it down (at a
/// commit, or when the thread's cache budget evicts it): the updates of a key between two
/// commits reach downstream once, as in Kafka Streams. Without caching, every update is
/// forwarded at once. Other cached DSL stores (tables read from topics, session
/// aggregations, materialized table operators) forward every update at once; their cache
/// batches writes to the store and the changelog.
pub struct Materialized<K, V> {
    pub(crate) name: Option<String>,
    pub(crate) key_serde: Option<DynSerde<K>>,
    pub(crate) value_serde: Option<DynSerde<V>>,
    pub(crate) retention: Option<std::time::Duration>,
    persistent: bool,
    caching: bool,
    logging: bool,
}

impl<K, V> Default for Materialized<K, V> {
    fn default() -> Self {
        Self {
            name: None,
            key_serde: None,
            value_serde: None,
            retention: None,
            persistent: true,
            caching: true,
            logging: true,
        }
    }
}

impl<K, V> Materialized<K, V> {
    /// Whether nothing is set: Kafka Streams' aggregation called without a `Materialized`
    /// (`count()`), which takes one value fewer of its name counter than one with an
    /// unnamed `Materialized` (`count(Materialized.with(..))`).
    pub(crate) fn is_default(&self) -> bool {
        self.name.is_none()
            && self.key_serde.is_none()
            && self.value_serde.is_none()
            && self.retention.is_none()
            && self.persistent
            && self.caching
            && self.logging
    }
}

impl<K: 'static> Materialized<K, u64> {
    /// This, with the `u64` serde of a count as its value serde unless one is set.
    pub(crate) fn or_count_serde(self) -> Self {
        if self.value_serde.is_none() {
            self.with_value_serde(streams_core::serdes::U64Serde)
        } else {
            self
        }
    }
}

impl<K: 'static, V: 'static> Materialized<K, V> {
    /// Unnamed (the store's name follows the naming rule), serdes from upstream.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store named `name`.
    pub fn as_(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// With both serdes.
    pub fn with<KS, VS>(key_serde: KS, value_serde: VS) -> Self
    where
        KS: Serde<Target = K>,
        VS: Serde<Target = V>,
    {
        Self::default()
            .with_key_serde(key_serde)
            .with_value_serde(value_serde)
    }

    name_and_serde_setters!("Sets the store's name.");

    /// Keeps the store in memory instead of RocksDB.
    pub fn in_memory(mut self) -> Self {
        self.persistent = false;
        self
    }

    /// No write-back cache in front of the store.
    pub fn without_caching(mut self) -> Self {
        self.caching = false;
        self
    }

    /// No changelog: the store is not restored after a failure.
    pub fn without_logging(mut self) -> Self {
        self.logging = false;
        self
    }

    /// Whether the store writes a changelog.
    pub(crate) fn is_logged(&self) -> bool {
        self.logging
    }

    /// How long a windowed aggregation keeps a window after it started (Kafka Streams'
    /// `Materialized.withRetention`); the default is the window size (for sliding windows
    /// twice the time difference) plus the grace period, also the least accepted. A session
    /// aggregation keeps a session this long after it ended; default and least: the
    /// inactivity gap plus the grace period.
    pub fn with_retention(mut self, retention: std::time::Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// The builder of a DSL key-value store called `name` with the given serdes, whose
    /// values carry timestamps (see the `timestamped` module).
    pub(crate) fn store(
        &self,
        name: &str,
        key_serde: DynSerde<K>,
        value_serde: DynSerde<V>,
    ) -> KeyValueStoreBuilder<DynSerde<K>, DynSerde<V>> {
        self.store_of(name, key_serde, PlainValues::registered(value_serde))
    }

    /// The window-store builder with these settings for a windowed aggregation, kept for
    /// `retention_ms`, with windows `window_ms` long.
    pub(crate) fn window_store_of<KS: Serde + Clone, VS: Serde + Clone>(
        &self,
        name: &str,
        retention_ms: i64,
        window_ms: i64,
        key_serde: KS,
        value_serde: VS,
    ) -> streams_state::WindowStoreBuilder<KS, VS> {
        let ms = |n: i64| std::time::Duration::from_millis(n.max(0).unsigned_abs());
        let (retention, size) = (ms(retention_ms), ms(window_ms));
        let b = if self.persistent {
            Stores::persistent_window_store(name, retention, size, false, key_serde, value_serde)
        } else {
            Stores::in_memory_window_store(name, retention, size, false, key_serde, value_serde)
        };
        let b = if self.caching { b.with_caching() } else { b };
        if self.logging { b } else { b.without_logging() }
    }

    /// The store builder with these settings for other serdes (windowed stores).
    pub(crate) fn store_of<KS: Serde + Clone, VS: Serde + Clone>(
        &self,
        name: &str,
        key_serde: KS,
        value_serde: VS,
    ) -> KeyValueStoreBuilder<KS, VS> {
        let b = if self.persistent {
            Stores::persistent_kv(name, key_serde, value_serde)
        } else {
            Stores::in_memory_kv(name, key_serde, value_serde)
        };
        let b = if self.caching { b.with_caching() } else { b };
        if self.logging { b } else { b.without_logging() }
    }

    /// The session-store builder with these settings for a session aggregation, kept for
    /// `retention`; cached only if `cache` allows it too.
    pub(crate) fn session_store_of<KS: Serde + Clone, VS: Serde + Clone>(
        &self,
        name: &str,
        retention: std::time::Duration,
        key_serde: KS,
        value_serde: VS,
        cache: bool,
    ) -> streams_state::SessionStoreBuilder<KS, VS> {
        let b = if self.persistent {
            Stores::persistent_session_store(name, retention, key_serde, value_serde)
        } else {
            Stores::in_memory_session_store(name, retention, key_serde, value_serde)
        };
        let b = if self.caching && cache {
            b.with_caching()
        } else {
            b
        };
        if self.logging { b } else { b.without_logging() }
    }
}

#[cfg(test)]
mod tests {
    use streams_state::serde::{StringSerde, U64Serde};

    use super::*;

    #[test]
    fn materialized_defaults_to_a_cached_logged_persistent_store() {
        use streams_state::StoreBuilder;
        let m = Materialized::<String, u64>::as_("counts");
        let b = m.store("counts", dyn_serde(StringSerde), dyn_serde(U64Serde));
        assert!(b.persistent());
        assert!(b.logging_config().is_some());
        let b = Materialized::<String, u64>::new()
            .in_memory()
            .without_logging()
            .store("x", dyn_serde(StringSerde), dyn_serde(U64Serde));
        assert!(!b.persistent());
        assert!(b.logging_config().is_none());
    }
}
