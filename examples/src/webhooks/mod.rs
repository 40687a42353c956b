//! Web hooks with a range join (the seed article "Processor API range join"): every event
//! of a user triggers each of the user's web hooks registered for that event type.
//!
//! - `web_hooks` (key `%020d(user_id):webhook_id`, JSON [`WebHook`], null value deletes) is
//!   materialized by [`WebHookMaterializer`] into the persistent (RocksDB) store
//!   [`STORE`] (`web_hooks_store`).
//! - `event_logs` (key `%020d(user_id)`, JSON [`EventLog`]) is joined by
//!   [`EventLogProcessor`]: one prefix scan over `%020d(user_id):` finds the user's hooks,
//!   and one [`WebHookRequest`] per hook whose `event_id` matches goes to
//!   `web_hook_requests` (key `%020d(user_id):webhook_id`).
//! - The zero padding makes byte order numeric order and keeps user `1`'s prefix from
//!   matching user `10`'s hooks.
//! - Both input topics are partitioned on the user id: [`WebHookProducer`] writes a hook
//!   to partition [`user_partition`] (murmur2 of the key's user part, as Kafka's Java
//!   default partitioner would place the event of that user), so a user's hooks and events
//!   meet in the same task. The runtime checks at start that the two topics have the same
//!   partition count.
//!
//! The requests are then delivered over HTTP by [`HttpDelivery`] under a retry ladder of
//! delayed topics and a dead-letter topic ([`streams_dsl::retry`]), run as a second streams
//! application ([`delivery_topology`]); [`WebHookPipeline`] runs both.
//!
//! One concern per file, all re-exported here:
//!
//! | file | concern |
//! |---|---|
//! | `records.rs` | the JSON records: [`WebHook`], [`EventLog`], [`WebHookRequest`] |
//! | `topics.rs` | topic names ([`WebHookTopics`]), keys and the user partitioning |
//! | `join.rs` | the range join: its processors, [`topology`], [`expected_requests`] |
//! | `producer.rs` | registering hooks and sending events ([`WebHookProducer`]) |
//! | `delivery.rs` | the HTTP delivery and its retry ladder ([`HttpDelivery`], [`delivery_topology`]) |
//! | `async_delivery.rs` | the delivery through an async processor, many users at once ([`AsyncHttpDelivery`], [`async_delivery_topology`]) |
//! | `pipeline.rs` | both applications and their settings ([`WebHookPipeline`], [`PipelineConfig`]) |
//! | `http.rs` | the accept loop of the example's HTTP servers |
//! | [`receiver`] | a local HTTP server that receives deliveries, for the demo and the tests |
//! | [`query`] | the store served over HTTP from any instance (`GET /users/{id}/hooks`) |
//! | `query_request.rs` | reading that request (path, `after`, `limit`) or refusing it |

mod async_delivery;
mod delivery;
mod http;
mod join;
mod pipeline;
mod producer;
pub mod query;
mod query_request;
pub mod receiver;
mod records;
mod topics;

pub use async_delivery::{
    AsyncHttpDelivery, DeliveryReport, async_delivery_topology, delivery_report, load_requests,
};
pub use delivery::{HttpDelivery, delivery_topology};
pub use join::{EventLogProcessor, STORE, WebHookMaterializer, expected_requests, topology};
pub use pipeline::{DELIVERY_MAX_POLL_RECORDS, PipelineConfig, WebHookPipeline};
pub use producer::WebHookProducer;
pub use records::{EventLog, WebHook, WebHookRequest};
pub use topics::{
    EVENT_LOGS, WEB_HOOK_REQUESTS, WEB_HOOKS, WebHookTopics, hook_key, user_key, user_partition,
};
