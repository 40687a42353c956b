//! Non-blocking retries with a ladder of delayed retry topics and a dead-letter topic (the
//! seed article "retries, DLQ and Kafka notes"), as an ordinary Kafka consumer application
//! on rdkafka, not a streams topology.
//!
//! A [`RetryLadder`] names the main topic, its retry topics and its dead-letter topic:
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
//! [`RetryConsumers::start`] runs one consumer thread per topic of the ladder (its own
//! consumer group, its own producer). Every consumer hands each record to the same
//! [`Handler`]. A record that fails goes to the next topic of the ladder with the headers
//! [`HEADER_ATTEMPT`], [`HEADER_NEXT_AT`], [`HEADER_LAST_ERROR`] and
//! [`HEADER_ORIGINAL_TOPIC`]; after the last retry topic, to the dead-letter topic.
//!
//! Retries never block live traffic: the main consumer never waits; a retry consumer whose
//! next record is not yet due pauses that partition and keeps polling (so it stays in its
//! group, and its other partitions keep flowing) until the record's [`HEADER_NEXT_AT`]
//! time, in its own thread. Handling is at least once: offsets are committed (manually,
//! after the batch's forwards were acknowledged) once records are handled, so a crash or a
//! rebalance can repeat a delivery, never lose one.
//!
//! The dead-letter topic is managed by the functions of [`dlq`] (the `dlq-tool` binary):
//! list, purge, and replay into the first retry topic.
//!
//! One concern per file, all re-exported here:
//!
//! | file | concern |
//! |---|---|
//! | `ladder.rs` | the topics and delays of a ladder ([`RetryLadder`]) |
//! | `delays.rs` | delays as text ([`parse_duration`], [`parse_delays`]) |
//! | `record.rs` | the records moved and the retry headers ([`RetryRecord`]) |
//! | `handler.rs` | what is called per record and what is reported ([`Handler`], [`Outcome`]) |
//! | `options.rs` | the consumers' settings ([`RetryOptions`]) |
//! | `forwarder.rs` | the producer that moves records down the ladder |
//! | `commit.rs` | a stage's handled offsets and their commit |
//! | `stage.rs` | the loop of one consumer: attempt, forward, wait for due records |
//! | `consumers.rs` | the running ladder's handle ([`RetryConsumers`]) |
//! | `stats.rs` | what the consumers did ([`DeliveryStats`]) |
//! | [`dlq`] | the dead-letter tool |

mod commit;
mod consumers;
mod delays;
pub mod dlq;
mod forwarder;
mod handler;
mod ladder;
mod options;
mod record;
mod stage;
mod stats;

pub use consumers::RetryConsumers;
pub use delays::{parse_delays, parse_duration};
pub(crate) use forwarder::Forwarder;
pub use handler::{HandleError, Handler, Listener, Outcome, OutcomeEvent};
pub use ladder::{RetryLadder, RetryStep};
pub use options::RetryOptions;
pub use record::{
    HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, HEADER_ORIGINAL_OFFSET, HEADER_ORIGINAL_PARTITION,
    HEADER_ORIGINAL_TOPIC, HEADER_REPLAYED_FROM, RETRY_HEADERS, RetryRecord, now_ms,
};
pub use stats::{DeliveryStats, StageStats};
