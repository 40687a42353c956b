//! Example programs built on the streams framework; the binaries live in `src/bin`.
//!
//! - [`file_aggregation`]: ~100k out-of-order per-line results aggregated into one ordered
//!   result file with range scans over a RocksDB store (`file-aggregation-demo`).
//! - [`count`]: a keyed count over a RocksDB store, used by the crash tests (`count-app`).
//! - [`webhooks`]: a range join of events with each user's web hooks (prefix scan over a
//!   RocksDB store), delivered over HTTP (`webhook-join`).
//! - [`retry`]: non-blocking retries through delayed retry topics and a dead-letter topic,
//!   and the dead-letter tool's functions (`dlq-tool`).

pub mod count;
pub mod file_aggregation;
pub mod retry;
pub mod splitter;
pub mod webhooks;

pub use splitter::ExampleError;
