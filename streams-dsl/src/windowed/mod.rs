//! Windowed aggregation: [`KGroupedStream::windowed_by`](crate::KGroupedStream::windowed_by)
//! with [`TimeWindows`] (tumbling, hopping) or [`SlidingWindows`], then `count`, `reduce`
//! or `aggregate` per key and window into a window store, with [`Windowed`] keys and Kafka
//! Streams' semantics.
//!
//! Invariants:
//! - Windows never start before 0 and records with negative timestamps fall into no window
//!   (Kafka's `windowsFor`); sliding windows are created by Kafka's rules (`sliding_agg`).
//! - Each aggregation keeps its own observed stream time: the largest timestamp it has
//!   processed. A time window is closed when `end + grace <= observed`, a sliding window
//!   (inclusive end) when `end + grace < observed`; a record is dropped from closed windows.
//! - The aggregates live in a window store (`streams_state::window`): each window's
//!   aggregate with the largest timestamp of the records in it ([`ValueAndTimestamp`]),
//!   which is the timestamp of the forwarded updates. Its retention (`size + grace` for
//!   time windows, `2 * difference + grace` for sliding windows, or `Materialized`'s)
//!   drops old windows by segment; a window older than the retention behind the latest
//!   window written is not read any more, as in Kafka Streams.
//! - With [`EmitStrategy::on_window_close`] nothing is forwarded on update; each window's
//!   final aggregate is forwarded once, after the record that closed it, and the close
//!   time already emitted is kept in the task's processor metadata under the store's
//!   name, committed with the input offsets as Kafka Streams commits it, so a restart
//!   (or a hand-over to or from Kafka Streams) does not repeat final results.
//! - Sessions ([`SessionWindows`], through
//!   [`KGroupedStream::windowed_by_session`](crate::KGroupedStream::windowed_by_session))
//!   live in a session store instead, one entry per key and session `[start, end]`, with
//!   Kafka Streams' merging rules (`session_agg`); their keys are written to topics with
//!   [`SessionWindowedSerde`], which keeps both ends.

mod common;
mod serde;
mod session;
mod session_agg;
mod session_windows;
mod sliding_agg;
mod stream;
mod time_agg;
mod windows;

pub(crate) use common::NO_TIMESTAMP;
pub(crate) use common::{AggStore, CoreParams};
pub(crate) use time_agg::TimeWindowAggregate;
pub(crate) use windows::millis;

pub use self::serde::{Windowed, WindowedSerde};
pub use session::SessionWindowedKStream;
pub use session_windows::{SessionWindowedSerde, SessionWindows};
pub use stream::{SlidingWindowedKStream, TimeWindowedKStream};
pub use streams_state::{ValueAndTimestamp, ValueAndTimestampSerde};
pub use windows::{EmitStrategy, SlidingWindows, TimeWindows};
