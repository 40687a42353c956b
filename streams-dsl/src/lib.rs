//! The KStream / KTable DSL, compiled down to the Processor API of `streams-core`.
//!
//! A [`StreamsBuilder`] turns DSL calls into nodes of a Processor-API topology as they are
//! made: there is no second runtime, and [`StreamsBuilder::build`] returns an ordinary
//! [`Topology`](streams_core::Topology) for `KafkaStreams` or streams-test-utils'
//! `TopologyTestDriver`.
//!
//! - [`KStream`]: `filter`, `map`, `flat_map`, `select_key`, `peek`, `split`, `merge`,
//!   `to`, `process`, stream-table `join`/`left_join`, grouping, windowed stream-stream
//!   joins ([`stream_join`]: `join_stream`, `left_join_stream`, `outer_join_stream`);
//! - [`KGroupedStream`]: `count`, `reduce`, `aggregate` into materialized stores, and
//!   per tumbling, hopping ([`TimeWindows`]), sliding ([`SlidingWindows`]) or session
//!   ([`SessionWindows`]) window, with every update or only final results ([`EmitStrategy`]);
//!   `cogroup` with other grouped streams into one aggregate per key ([`CogroupedKStream`]);
//! - [`KTable`]: `filter`, `map_values`, `to_stream`, table-table `join`, `left_join`,
//!   `outer_join`, foreign-key `join_foreign`/`left_join_foreign` (the tables need not be
//!   co-partitioned), `suppress` ([`Suppressed`]), re-grouping with `group_by`;
//! - [`KGroupedTable`]: `count`, `reduce` and `aggregate` with an adder and a subtractor,
//!   kept correct as rows change groups (table nodes forward old values on demand).
//! - [`retry`]: retries with increasing delays and a dead-letter topic, as topology nodes
//!   (a retry ladder of delayed topics, changelogged stores and wall-clock punctuators).
//!
//! Every node, store and repartition topic is named by the rule in [`naming`]: from the
//! closest user-given name, never from a global counter.
//!
//! # Null keys and values
//!
//! A record remembers which of its key and value were null on the wire
//! ([`Nulls`](streams_core::Nulls)), whatever its serde read for them (`""` for
//! `StringSerde`). As in Kafka Streams, these operators skip such records, log a warning
//! and count them in the task's dropped-records metric:
//!
//! | operator | skips a record whose |
//! |---|---|
//! | `count`, `reduce`, `aggregate` of a [`KGroupedStream`], and its cogroups | key or value is null |
//! | sliding-window aggregations | key or value is null |
//! | time-window and session aggregations | key is null (a null value is aggregated) |
//! | stream-stream joins | key or value is null; a null key with a value on a side that emits unmatched records is emitted unmatched at once |
//! | stream-table joins | key or value is null; a left join joins a null key with a value with `None` |
//! | stream-global-table joins | value is null |
//! | [`StreamsBuilder::table`], [`StreamsBuilder::global_table`] | key is null (a null value deletes) |
//!
//! Everything else passes nulls on, and a sink writes them as null. Repartition topics
//! leave null keys out, except before a left join. A function given a null sees the
//! serde's reading of it; what it returns is not null.

mod branch;
mod builder;
mod cache_forward;
mod change;
mod cogroup;
mod cogroup_windowed;
mod dyn_serde;
mod error;
mod fk_join;
mod global_table;
mod grouped;
mod kstream;
mod ktable;
pub mod naming;
mod nulls;
pub mod optimization;
mod options;
mod processors;
pub mod retry;
mod shared;
mod store_access;
pub mod stream_join;
mod suppress;
mod table_grouped;
mod table_join;
mod table_lookup;
mod timestamped;
mod windowed;

/// The DSL guide (`docs/dsl.md`), whose examples are compiled as tests.
#[doc = include_str!("../../docs/dsl.md")]
pub mod guide {}

pub use branch::BranchedKStream;
pub use builder::StreamsBuilder;
pub use cogroup::CogroupedKStream;
pub use cogroup_windowed::TimeWindowedCogroupedKStream;
pub use dyn_serde::{DynSerde, dyn_serde};
pub use error::{DslError, DslIssue};
pub use global_table::GlobalKTable;
pub use grouped::KGroupedStream;
pub use kstream::KStream;
pub use ktable::KTable;
pub use naming::Naming;
pub use optimization::{InvalidOptimization, Optimizations};
pub use options::{Consumed, Grouped, Materialized, Produced};
pub use store_access::TableStoreRef;
pub use stream_join::{JoinWindows, StreamJoined};
pub use suppress::{BufferConfig, SuppressError, Suppressed};
pub use table_grouped::KGroupedTable;
pub use timestamped::{TimestampedValues, timestamped};
pub use windowed::{
    EmitStrategy, SessionWindowedKStream, SessionWindowedSerde, SessionWindows, SlidingWindowedKStream,
    SlidingWindows, TimeWindowedKStream, TimeWindows, ValueAndTimestamp, ValueAndTimestampSerde, Windowed,
    WindowedSerde,
};
