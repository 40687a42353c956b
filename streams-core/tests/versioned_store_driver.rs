//! A versioned store in a topology, in the test driver: prices are kept with their
//! history; each order is priced as of its own timestamp, so a late order gets the price
//! that held when it was placed, and an order older than the history retention gets none.
//! Its changelog is Kafka Streams': one record per version, at the version's timestamp.

use std::time::Duration;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::VersionedKeyValueStore;
use streams_core::{ProcessResult, Processor, ProcessorContext, Record, SourceConfig, Stores, Topology};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

type Prices = VersionedKeyValueStore<StringSerde, U64Serde>;

/// Keeps every price update as a version at its record's timestamp.
struct KeepPrice {
    prices: Prices,
}
impl Processor<String, u64> for KeepPrice {
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, r: Record<String, u64>) -> ProcessResult {
        self.prices.put(&r.key, Some(&r.value), r.timestamp)?;
        Ok(())
    }
}

/// Forwards `quantity * price as of the order's time`, or nothing without a price then.
struct PriceOrder {
    prices: Prices,
}
impl Processor<String, u64, String, u64> for PriceOrder {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, u64>,
    ) -> ProcessResult {
        if let Some(price) = self.prices.get_as_of(&r.key, r.timestamp)? {
            let total = r.value * price.value;
            ctx.forward(r.with_value(total))?;
        }
        Ok(())
    }
}

/// The topology of the tests: prices kept in the versioned store `price-history` (60 s of
/// history), orders priced as of their time and written to `totals`.
fn pricing() -> Topology {
    let mut b = Topology::builder();
    let prices = b.source("prices", SourceConfig::new(["prices"], StringSerde, U64Serde));
    let orders = b.source("orders", SourceConfig::new(["orders"], StringSerde, U64Serde));
    let store = b.store(Stores::persistent_versioned_kv(
        "price-history",
        Duration::from_secs(60),
        StringSerde,
        U64Serde,
    ));
    let keep = b.processor("keep", [&prices], {
        let store = store.clone();
        move |ctx| {
            Ok(KeepPrice {
                prices: ctx.store(&store)?,
            })
        }
    });
    let price = b.processor("price", [&orders], {
        let store = store.clone();
        move |ctx| {
            Ok(PriceOrder {
                prices: ctx.store(&store)?,
            })
        }
    });
    b.connect(&keep, &store).connect(&price, &store);
    b.sink(
        "out",
        streams_core::SinkConfig::topic("totals", StringSerde, U64Serde),
        [&price],
    );
    b.build().unwrap()
}

#[test]
fn orders_are_priced_as_of_their_own_time() {
    let driver = TopologyTestDriver::new(pricing(), DriverConfig::default()).unwrap();

    let prices = driver.input_topic("prices", StringSerde, U64Serde);
    let orders = driver.input_topic("orders", StringSerde, U64Serde);
    prices.pipe_at("apple".into(), 10, 1_000).unwrap();
    prices.pipe_at("apple".into(), 20, 100_000).unwrap();
    orders.pipe_at("apple".into(), 2, 101_000).unwrap(); // current price
    orders.pipe_at("apple".into(), 3, 50_000).unwrap(); // late: the price of then
    orders.pipe_at("apple".into(), 4, 500).unwrap(); // before any price
    prices.pipe_at("apple".into(), 30, 200_000).unwrap();
    orders.pipe_at("apple".into(), 5, 120_000).unwrap(); // older than 60 s of history
    let out = driver.output_topic("totals", StringSerde, U64Serde);
    let got = out.read_values_with_timestamps().unwrap();
    assert_eq!(got, [(40, 101_000), (30, 50_000)]);
}

#[test]
fn the_changelog_has_one_record_per_version_at_its_time() {
    let driver = TopologyTestDriver::new(pricing(), DriverConfig::default()).unwrap();
    let prices = driver.input_topic("prices", StringSerde, U64Serde);
    prices.pipe_at("apple".into(), 10, 1_000).unwrap();
    prices.pipe_at("pear".into(), 7, 5_000).unwrap();
    prices.pipe_at("apple".into(), 11, 3_000).unwrap(); // out of order
    // Far enough ahead to remove apple's version at 1 000 when apple is written again.
    prices.pipe_at("apple".into(), 20, 100_000).unwrap();
    let changelog = driver.output_topic(
        "test-driver-price-history-changelog",
        StringSerde,
        streams_core::state::serde::NullableSerde(U64Serde),
    );
    let got: Vec<_> = changelog
        .read_records()
        .unwrap()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    // No record of the stream time, none of the removed version: Kafka Streams' records.
    assert_eq!(
        got,
        [
            ("apple".to_owned(), Some(10), 1_000),
            ("pear".to_owned(), Some(7), 5_000),
            ("apple".to_owned(), Some(11), 3_000),
            ("apple".to_owned(), Some(20), 100_000),
        ]
    );
}
