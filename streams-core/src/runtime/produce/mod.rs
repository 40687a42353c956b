//! Production: the stream thread's producer and what it knows of its sends
//! (`producer.rs`: deliveries and failures, output partition counts), the record collector
//! of the tasks and the changelog sink of the stores (`sinks.rs`), the topic handles they
//! produce through (`topic_handle.rs`), how a producer is made and made again after a
//! fatal error (`producer_recipe.rs`), transactional offset commits (`txn_offsets.rs`) and
//! the records the production handler skipped (`skips.rs`).
//!
//! Uses only `client/`. The producer is shared (`Arc`) between the task manager, which
//! sends and commits through it, and librdkafka's delivery callbacks, which report into
//! its atomics; no lock is taken per record.

pub(in crate::runtime) mod producer;
pub(in crate::runtime) mod producer_recipe;
pub(in crate::runtime) mod sinks;
pub(in crate::runtime) mod skips;
pub(in crate::runtime) mod topic_handle;
pub(in crate::runtime) mod txn_offsets;
