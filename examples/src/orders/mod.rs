//! Avro through a Schema Registry, end to end: orders in, running totals per customer out,
//! and the records that are not Avro of a known schema in a dead-letter topic with their
//! original bytes.
//!
//! ```text
//! orders (customer -> Order, Avro) --group_by_key--> aggregate per customer
//!   (RocksDB store `totals`, its changelog Avro too) --to_stream--> totals (customer -> CustomerTotal, Avro)
//! records that cannot be read (wrong magic byte, unknown schema id, truncated)
//!   --deserialization.exception.handler=dead_letter_queue--> dead letters (original bytes, reason header)
//! ```
//!
//! Every serde here is a registry serde in the Confluent wire format
//! ([`streams_serde_registry::AvroSerde`]), made for its topic: the input, the store's
//! changelog (`<application id>-totals-changelog`) and the output each have their subject
//! (`<topic>-value`), as Confluent's serializers would name them. So the topics can be read
//! and written by any Confluent client in any language.
//!
//! [`OrderPlan`] generates the orders (seeded) and the totals they must add up to; [`run`]
//! writes them together with one bad record of each kind, runs the application, and reads
//! the totals and the dead letters until both are exactly as planned.

mod run;

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use streams_core::Topology;
use streams_core::serdes::{NullableSerde, StringSerde};
use streams_dsl::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};
use streams_serde_registry::{AvroSerde, RecordPart, SchemaRegistryClient, SerdeConfig};

use crate::ExampleError;

pub use run::{BadRecord, OrdersRun, RunOptions, bad_records, run};

/// The orders' Avro schema.
pub const ORDER_SCHEMA: &str = r#"{"type":"record","name":"Order","namespace":"streams.examples.orders",
 "fields":[{"name":"id","type":"string"},{"name":"customer","type":"string"},
           {"name":"cents","type":"long"},{"name":"items","type":"int"}]}"#;

/// The totals' Avro schema (the store's and the output's).
pub const TOTAL_SCHEMA: &str = r#"{"type":"record","name":"CustomerTotal","namespace":"streams.examples.orders",
 "fields":[{"name":"customer","type":"string"},{"name":"orders","type":"long"},
           {"name":"cents","type":"long"},{"name":"items","type":"long"}]}"#;

/// An order: the input topic's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The order's id.
    pub id: String,
    /// Who placed it (also the record's key).
    pub customer: String,
    /// Its amount in cents.
    pub cents: i64,
    /// How many items it holds.
    pub items: i32,
}

/// The running total of one customer's orders: the store's and the output topic's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerTotal {
    /// The customer.
    pub customer: String,
    /// Orders counted.
    pub orders: i64,
    /// Their amounts, in cents.
    pub cents: i64,
    /// Their items.
    pub items: i64,
}

impl CustomerTotal {
    /// This total with `order` added.
    pub fn with_order(mut self, order: &Order) -> Self {
        self.customer.clone_from(&order.customer);
        self.orders += 1;
        self.cents += order.cents;
        self.items += i64::from(order.items);
        self
    }
}

/// The topics of one run.
#[derive(Debug, Clone)]
pub struct OrderTopics {
    /// Orders: key customer, value [`Order`] (Avro).
    pub orders: String,
    /// Totals: key customer, value [`CustomerTotal`] (Avro).
    pub totals: String,
    /// Dead letters: the records that could not be read, as they were.
    pub dead_letters: String,
}

impl OrderTopics {
    /// The topics named `<prefix>-orders`, `-totals` and `-dead-letters`.
    pub fn prefixed(prefix: &str) -> Self {
        Self {
            orders: format!("{prefix}-orders"),
            totals: format!("{prefix}-totals"),
            dead_letters: format!("{prefix}-dead-letters"),
        }
    }

    /// All three names.
    pub fn all(&self) -> [&str; 3] {
        [&self.orders, &self.totals, &self.dead_letters]
    }
}

/// The registry serde of `T` (Avro, `schema`) for the values of `topic`.
pub fn avro_values<T: Serialize + serde::de::DeserializeOwned>(
    client: &SchemaRegistryClient,
    topic: &str,
    schema: &str,
) -> Result<AvroSerde<T>, ExampleError> {
    AvroSerde::new(
        client.clone(),
        SerdeConfig::default(),
        topic,
        RecordPart::Value,
        schema,
    )
    .map_err(|e| ExampleError::Other(format!("the Avro serde of {topic}: {e}")))
}

/// The topology of the [module docs](self), for the application `application_id` (which
/// names the store's changelog topic and so its subject).
pub fn orders_topology(
    topics: &OrderTopics,
    client: &SchemaRegistryClient,
    application_id: &str,
) -> Result<Topology, ExampleError> {
    let orders = Arc::new(avro_values::<Order>(client, &topics.orders, ORDER_SCHEMA)?);
    let changelog = format!("{application_id}-totals-changelog");
    let stored = avro_values::<CustomerTotal>(client, &changelog, TOTAL_SCHEMA)?;
    let totals = Arc::new(avro_values::<CustomerTotal>(
        client,
        &topics.totals,
        TOTAL_SCHEMA,
    )?);
    let builder = StreamsBuilder::new();
    builder
        .stream([topics.orders.as_str()], Consumed::with(StringSerde, orders))
        .group_by_key(Grouped::as_("by-customer"))
        .aggregate(
            CustomerTotal::default,
            |_, order: Order, total: CustomerTotal| total.with_order(&order),
            Materialized::as_("totals").with_value_serde(stored),
        )
        .to_stream()
        .to(&topics.totals, Produced::with(StringSerde, NullableSerde(totals)));
    builder
        .build()
        .map_err(|e| ExampleError::Other(format!("building the topology: {e}")))
}

/// Seeded orders of a number of customers, and the totals they add up to.
#[derive(Debug, Clone)]
pub struct OrderPlan {
    /// How many customers.
    pub customers: u32,
    /// How many orders.
    pub orders: u64,
    /// The generator's seed.
    pub seed: u64,
}

impl OrderPlan {
    /// `orders` orders over `customers` customers, with a fixed seed.
    pub fn new(customers: u32, orders: u64) -> Self {
        Self {
            customers: customers.max(1),
            orders,
            seed: 0x0DE5,
        }
    }

    /// The orders, in the order they are written.
    pub fn generate(&self) -> impl Iterator<Item = Order> + '_ {
        let mut rng = StdRng::seed_from_u64(self.seed);
        (0..self.orders).map(move |n| Order {
            id: format!("order-{n}"),
            customer: format!("customer-{}", rng.random_range(0..self.customers)),
            cents: rng.random_range(1..100_000),
            items: rng.random_range(1..10),
        })
    }

    /// The final total per customer.
    pub fn expected(&self) -> BTreeMap<String, CustomerTotal> {
        let mut totals: BTreeMap<String, CustomerTotal> = BTreeMap::new();
        for order in self.generate() {
            let total = totals
                .remove(&order.customer)
                .unwrap_or_default()
                .with_order(&order);
            totals.insert(order.customer.clone(), total);
        }
        totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_totals_add_up_to_the_orders() {
        let plan = OrderPlan::new(7, 1000);
        let expected = plan.expected();
        assert_eq!(expected.len(), 7);
        assert_eq!(expected.values().map(|t| t.orders).sum::<i64>(), 1000);
        let cents: i64 = plan.generate().map(|o| o.cents).sum();
        assert_eq!(expected.values().map(|t| t.cents).sum::<i64>(), cents);
        assert!(expected.iter().all(|(c, t)| &t.customer == c));
    }
}
