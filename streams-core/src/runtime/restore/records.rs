//! Changelog records as a store holds them: what a restoration (and a standby's tailing)
//! writes for each record read, by the store's [`SourceValues`].

use bytes::Bytes;
use rdkafka::Message;
use streams_state::versioned::changelog as versioned;
use streams_state::{ChangelogRecord, KeyValueStore, ValueAndTimestamp};

use crate::model::error::StreamsError;
use crate::topology::SourceValues;

/// The record to restore from changelog record `m` into a store holding `values`: for a
/// timestamped store, the value behind the record's timestamp (how Kafka Streams restores
/// a timestamped store from the plain values of its changelog, or of a source topic); for
/// a versioned store, the entry of the version at the record's timestamp.
pub(crate) fn changelog_record<M: Message>(m: &M, values: SourceValues) -> ChangelogRecord {
    let key = m.key().unwrap_or_default();
    let ts = || m.timestamp().to_millis().unwrap_or(-1);
    let (key, value) = match (values, m.payload()) {
        (SourceValues::Timestamped, Some(v)) => (
            Bytes::copy_from_slice(key),
            Some(Bytes::from(ValueAndTimestamp::new(v, ts()).to_bytes())),
        ),
        (SourceValues::Versioned, v) => match versioned::from_changelog(key, v, ts()) {
            Some((entry, stored)) => (Bytes::from(entry), Some(Bytes::from(stored))),
            // A key of 4 GiB: restored as it is, and never read as a version.
            None => (Bytes::copy_from_slice(key), v.map(Bytes::copy_from_slice)),
        },
        (_, v) => (Bytes::copy_from_slice(key), v.map(Bytes::copy_from_slice)),
    };
    ChangelogRecord {
        key,
        value,
        offset: m.offset(),
    }
}

/// `batch`, restored into `store` holding `values`, with a versioned store's observed
/// stream time raised to the newest version in it: the stream time is not logged (Kafka
/// Streams' changelog has none), so a restore derives it from the versions, as Kafka
/// Streams' does.
pub(crate) fn with_stream_time(
    store: &dyn KeyValueStore,
    values: SourceValues,
    batch: &mut Vec<ChangelogRecord>,
) -> Result<(), StreamsError> {
    if values != SourceValues::Versioned {
        return Ok(());
    }
    let Some((newest, offset)) = batch
        .iter()
        .filter_map(|r| Some((versioned::entry_time(&r.key)?, r.offset)))
        .max()
    else {
        return Ok(());
    };
    let current = store
        .get(versioned::stream_time_key())?
        .and_then(|b| versioned::decode_stream_time(&b));
    if current.is_none_or(|c| c < newest) {
        batch.push(ChangelogRecord {
            key: Bytes::from_static(versioned::stream_time_key()),
            value: Some(Bytes::copy_from_slice(&versioned::encode_stream_time(newest))),
            offset,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;

    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use streams_state::serde::{StringSerde, U64Serde};
    use streams_state::{InMemoryKeyValueStore, SharedKeyValueStore, Stores};
    use streams_test_utils::kafka;

    use crate::engine::TaskStore;
    use crate::runtime::restore::tests::{assigned, restore_all};
    use crate::runtime::restore::{Restoration, RestoreConsumers};
    use crate::topology::SourceValues;

    /// A versioned store restores from Kafka Streams' changelog records (key, value at the
    /// version's timestamp): every version, and the stream time of the newest, so that
    /// history older than the retention is gone after the restore as before it.
    #[test]
    fn a_versioned_store_restores_its_versions_and_stream_time_from_kafka_streams_records() {
        let Some(bootstrap) = kafka::require_kafka("restore") else {
            return;
        };
        let topic = kafka::unique_name("restore-versioned");
        kafka::create_topic(&bootstrap, &topic, 1, &[]).unwrap();
        let producer: BaseProducer = kafka::producer_config(&bootstrap).create().unwrap();
        let price = |key: &str, value: Option<u64>, at: i64| {
            let bytes = value.map(|v| v.to_be_bytes());
            let mut r = BaseRecord::<str, [u8]>::to(&topic)
                .partition(0)
                .key(key)
                .timestamp(at);
            if let Some(b) = &bytes {
                r = r.payload(&b[..]);
            }
            producer.send(r).unwrap();
        };
        price("apple", Some(10), 1_000);
        price("apple", Some(12), 5_000);
        price("apple", Some(11), 3_000); // out of order
        price("pear", Some(7), 90_000);
        price("apple", None, 95_000); // a tombstone version
        producer.flush(Duration::from_secs(30)).unwrap();

        let consumers = RestoreConsumers {
            reader: assigned(&bootstrap, "read_committed"),
            ends: None,
            log_ends: None,
            standby: crate::runtime::restore::StandbyReader::unused(),
        };
        let mut stores = vec![TaskStore {
            name: "prices".into(),
            changelog: Some(topic.clone()),
            from_source: None,
            values: SourceValues::Versioned,
            restore_until: None,
            store: Box::new(InMemoryKeyValueStore::new("prices")),
        }];
        let mut restoration = Restoration::new(0, &stores);
        let restored = restore_all(&mut restoration, &consumers, &mut stores);
        assert_eq!(restored, 5);

        let store = stores.pop().unwrap().store;
        let shared: SharedKeyValueStore = Rc::new(RefCell::new(store));
        let prices = Stores::in_memory_versioned_kv("prices", Duration::from_secs(60), StringSerde, U64Serde)
            .open(shared);
        let apple = "apple".to_owned();
        assert_eq!(prices.observed_stream_time().unwrap(), 95_000);
        assert_eq!(prices.get(&apple).unwrap(), None, "the tombstone is the latest");
        let as_of = |t| prices.get_as_of(&apple, t).unwrap().map(|r| r.value);
        assert_eq!(as_of(40_000), Some(12), "within the 60 s of history");
        assert_eq!(as_of(4_000), None, "older than the history the stream time keeps");
        assert_eq!(prices.get(&"pear".to_owned()).unwrap().map(|r| r.value), Some(7));
    }
}
