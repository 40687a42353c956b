//! Retries with a ladder of delayed retry topics and a dead-letter topic (the seed article
//! "retries, DLQ and Kafka notes"): what the examples add around the framework's
//! [`streams_dsl::retry`] block.
//!
//! The ladder itself runs as topology nodes on the runtime (`streams_dsl::retry`,
//! re-exported here): the main topic's records are attempted at once; a failure is
//! forwarded to retry topic 1, where it waits in a changelogged store keyed by due time
//! until a wall-clock punctuator attempts it; after the last retry topic, or on a fatal
//! error, the record goes to the dead-letter topic with its original bytes and the retry
//! headers ([`HEADER_ATTEMPT`], [`HEADER_NEXT_AT`], [`HEADER_LAST_ERROR`], the original
//! topic, partition and offset):
//!
//! ```text
//! web_hook_requests ──fail──▶ web_hook_requests-retry-1 (5m) ──fail──▶ -retry-2 (30m)
//!        │                            │                                    │
//!        ok                           ok                                  fail
//!                                                  -retry-3 (1h) ◀─────────┘
//!                                                        │ fail
//!                                                        ▼
//!                                              web_hook_requests-dlq
//! ```
//!
//! Here, around it:
//!
//! | file | concern |
//! |---|---|
//! | `delays.rs` | delays as text ([`parse_duration`], [`parse_delays`]), the [`production_ladder`] |
//! | `record.rs` | a record read with rdkafka, owned ([`RetryRecord`]), for the dead-letter tool |
//! | `forwarder.rs` | the producer the dead-letter tool and the web-hook producer write with |
//! | `stats.rs` | counts of the ladder's outcomes, fed by its listener ([`DeliveryCounters`]) |
//! | [`dlq`] | the dead-letter tool: list, purge, replay into the first retry topic |

mod delays;
pub mod dlq;
mod forwarder;
mod record;
mod stats;

pub use delays::{PRODUCTION_DELAYS, parse_delays, parse_duration, production_ladder};
pub(crate) use forwarder::Forwarder;
pub use record::{RetryRecord, now_ms};
pub use stats::{DeliveryCounters, DeliveryStats, StageStats};
pub use streams_dsl::retry::{
    Attempt, HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, HEADER_ORIGINAL_OFFSET,
    HEADER_ORIGINAL_PARTITION, HEADER_ORIGINAL_TOPIC, HEADER_REPLAYED_FROM, Outcome, OutcomeEvent,
    RETRY_HEADERS, RetryError, RetryHandler, RetryLadder, RetryListener, RetryOptions, RetryStep,
};
