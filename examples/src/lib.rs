//! Example programs built on the streams framework; the binaries live in `src/bin`.
//!
//! - [`file_aggregation`]: ~100k out-of-order per-line results aggregated into one ordered
//!   result file with range scans over a RocksDB store (`file-aggregation-demo`).
//! - [`clicks`]: clicks per user and per region in event-time windows, written with the
//!   DSL: a global-table join, a windowed aggregation and a table re-grouped with an adder
//!   and a subtractor (`click-analytics`).
//! - [`count`]: a keyed count over a RocksDB store, used by the crash tests (`count-app`);
//!   [`smoke`]: the fault suite's DSL topology around the same count (`count-app --smoke`).
//! - [`webhooks`]: a range join of events with each user's web hooks (prefix scan over a
//!   RocksDB store), delivered over HTTP under the framework's retry ladder
//!   (`webhook-join`).
//! - [`orders`]: Avro orders through a Schema Registry, totals per customer in an Avro
//!   store, and unreadable records in a dead-letter topic with their original bytes
//!   (`avro-orders`).
//! - [`retry`]: around the framework's retry ladder (`streams_dsl::retry`): delays as text,
//!   counts of outcomes, and the dead-letter tool's functions (`dlq-tool`).
//!
//! Every binary runs on the broker given with `--bootstrap-servers`, and without it on a
//! local single-node Apache Kafka that it starts (or finds running) through
//! `scripts/kafka.sh` ([`local_kafka`]); `avro-orders` likewise finds or starts a local
//! schema registry ([`local_registry`]). [`admin`] creates and deletes their topics; the
//! long-running ones stop cleanly on SIGINT or SIGTERM ([`shutdown`]).

pub mod admin;
pub mod cli;
pub mod clicks;
pub mod count;
pub mod file_aggregation;
pub mod local_kafka;
pub mod local_registry;
pub mod logging;
pub mod orders;
pub mod retry;
pub mod shutdown;
pub mod smoke;
pub mod splitter;
pub mod webhooks;

pub use splitter::ExampleError;

/// What the binaries' `main` returns: an [`ExampleError`] whose `Debug` form, which Rust
/// prints when `main` fails (`Error: ...`, exit code 1), is its message.
pub struct MainError(pub ExampleError);

impl<E: Into<ExampleError>> From<E> for MainError {
    fn from(e: E) -> Self {
        Self(e.into())
    }
}

impl std::fmt::Debug for MainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}
