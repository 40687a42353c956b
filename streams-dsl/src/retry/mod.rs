//! Retries with increasing delays and a dead-letter topic, as nodes of a topology: they
//! run on the runtime, with its commits, processing guarantee, metrics and rebalances.
//!
//! A [`RetryLadder`] names the topics; [`add_retry_ladder`] adds one stage per topic to a
//! [`TopologyBuilder`](streams_core::TopologyBuilder), all calling one [`RetryHandler`]:
//!
//! ```text
//! requests ──fail──▶ requests-retry-1 (5m) ──fail──▶ requests-retry-2 (30m) ──fail──▶ requests-dlq
//!    │                     │                               │
//!    ok                    ok                              ok
//! ```
//!
//! - **Main topic** (stage 0): a source and a processor that calls the handler at once.
//!   A retriable failure ([`RetryError::Retriable`]) is forwarded to retry topic 1 with the
//!   retry headers ([`HEADER_ATTEMPT`], [`HEADER_NEXT_AT`] = the due time,
//!   [`HEADER_LAST_ERROR`], and the original topic, partition and offset); a fatal one
//!   ([`RetryError::Fatal`], or a key or value the serdes cannot read) goes to the
//!   dead-letter topic.
//! - **Retry topic `i`** (stage `i`): a source and a processor that writes each record
//!   into a persistent, changelogged store keyed by due time ([`PendingKey`]: byte order is
//!   due-time order), and a wall-clock punctuator that range-scans the due records
//!   (`range(..=now)`), attempts each, forwards failures to the next rung, and deletes the
//!   handled entries. After the last retry topic a failure goes to the dead-letter topic.
//! - **Dead-letter topic**: the record's original key and value bytes and its own headers,
//!   plus the retry headers: [`HEADER_ATTEMPT`] (attempts made), [`HEADER_LAST_ERROR`] and
//!   the original position. A record written back to retry topic 1 with
//!   [`HEADER_ATTEMPT`] `0` (a replay) starts over as attempt 1.
//!
//! ```
//! use std::time::Duration;
//! use streams_core::serdes::StringSerde;
//! use streams_core::Topology;
//! use streams_dsl::retry::{RetryError, RetryLadder, RetryOptions, add_retry_ladder};
//!
//! let ladder = RetryLadder::new("requests", &[Duration::from_secs(300), Duration::from_secs(1800)]);
//! let mut b = Topology::builder();
//! let nodes = add_retry_ladder(
//!     &mut b,
//!     &ladder,
//!     StringSerde,
//!     StringSerde,
//!     |a: &streams_dsl::retry::Attempt<'_, String, String>| {
//!         if a.value().is_empty() {
//!             Err(RetryError::fatal("empty request"))
//!         } else {
//!             Ok(()) // deliver it; Err(RetryError::retriable(..)) to try again later
//!         }
//!     },
//!     &RetryOptions::new().punctuate_every(Duration::from_secs(1)),
//! );
//! assert_eq!(nodes.stores().len(), 2);
//! let topology = b.build()?;
//! assert_eq!(topology.subtopologies().len(), 3); // one per stage
//! # Ok::<(), streams_core::TopologyError>(())
//! ```
//!
//! # Guarantees
//!
//! Every move of a record — to the next topic, into a store, out of it — is a forward or a
//! store write of an ordinary task, so it commits with the task's input offsets:
//!
//! - under `exactly_once_v2` each record goes down the ladder once and ends once,
//!   delivered or dead-lettered; under `at_least_once` nothing is lost, but a crash or a
//!   rebalance can repeat a step, so a record may be attempted again, reach the next topic
//!   twice, or be dead-lettered twice;
//! - a waiting record is in its stage's store and its changelog once its input offset is
//!   committed; when the task moves (rebalance, crash, a new instance), the store is
//!   restored from the changelog and the record keeps its due time;
//! - the handler's own side effects (an HTTP call) are outside any transaction: after a
//!   crash an attempt whose outcome was not committed is made again, whatever the
//!   guarantee. Give deliveries an idempotency key.
//!
//! # Timing, and what a slow handler holds up
//!
//! A record is due at the task's wall-clock time when its attempt failed plus the next
//! stage's delay, and is attempted by the first punctuation at or after that: within about
//! [`RetryOptions::punctuate_every`] (1 s by default) plus one pass of the stream thread's
//! loop, never before. The runtime reads the wall clock once per pass of its loop, so the
//! time of the failure can be up to `poll.ms` and a commit earlier than the real moment:
//! measured from the real failure, a retry can come that much sooner than its delay
//! (irrelevant for delays of minutes, worth knowing for delays under a second). Due records
//! of one task are attempted in due-time order; retried records leave their partition's
//! order, as with any non-blocking retry.
//!
//! Retries never hold up the main topic's partitions behind them: a failed record waits
//! in a store, not at the head of a topic. But **the handler runs on the stream thread**,
//! synchronously. A slow first attempt delays the next records of its task and every other
//! task on the same thread — other stages, and the rest of the application's topology if
//! it shares the application. A punctuation is bounded (at most
//! [`RetryOptions::max_records_per_punctuation`] records, and no new attempt after
//! [`RetryOptions::max_punctuation_time`]), but it holds its thread for that long, plus one
//! attempt. What helps: handler timeouts; more stream threads (`num.stream.threads`): each
//! stage is its own sub-topology, so its tasks spread over the threads; running the ladder
//! as its own application, so it does not share threads with other processing; and a
//! `max.poll.interval.ms` above the longest pass of the loop, or the group evicts the
//! thread.
//!
//! # Module map
//!
//! | file | concern |
//! |---|---|
//! | `ladder.rs` | the topics and delays ([`RetryLadder`]) |
//! | `headers.rs` | the retry headers and how they move ([`moved_headers`]) |
//! | `handler.rs` | what is called per attempt ([`RetryHandler`], [`Attempt`], [`RetryError`]) |
//! | `outcome.rs` | what is reported per step ([`Outcome`], [`OutcomeEvent`], [`RetryListener`]) |
//! | `options.rs` | punctuation bounds, stores, listener ([`RetryOptions`]) |
//! | `pending.rs` | a retry store's keys and values ([`PendingKey`], [`PendingRecord`]) |
//! | `attempt.rs` | one attempt and the routing of its failure, the same at every stage |
//! | `first.rs` | the main topic's processor |
//! | `delayed.rs` | a retry topic's processor: store, punctuator |
//! | `topology.rs` | the nodes and their names ([`add_retry_ladder`], [`retry_topology`]) |

mod attempt;
mod delayed;
mod first;
mod handler;
mod headers;
mod ladder;
mod options;
mod outcome;
mod pending;
mod topology;

pub use handler::{Attempt, RetryError, RetryHandler};
pub use headers::{
    HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, HEADER_ORIGINAL_OFFSET, HEADER_ORIGINAL_PARTITION,
    HEADER_ORIGINAL_TOPIC, HEADER_REPLAYED_FROM, RETRY_HEADERS, due_at_ms, failed_attempts, is_retry_header,
    last_error, moved_headers, original_position,
};
pub use ladder::{RetryLadder, RetryStep};
pub use options::RetryOptions;
pub use outcome::{Outcome, OutcomeEvent, RetryListener};
pub use pending::{PendingKey, PendingKeySerde, PendingRecord, PendingRecordSerde};
pub use topology::{
    PendingStore, RetryNodes, StageNodes, add_retry_ladder, pending_store_name, retry_topology,
};
