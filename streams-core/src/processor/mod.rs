//! The Processor API: what a user implements ([`Processor`]) and what it is handed
//! ([`ProcessorContext`]).
//!
//! Processing is synchronous and depth-first: `ctx.forward(record)` runs every child (in the
//! order the children were added to the topology), and their children, before it returns.
//! A processor instance belongs to one task on one thread; it need not be `Send`.

pub mod asynchronous;
mod context;
pub(crate) mod holds;
pub(crate) mod node;
mod store_access;
mod store_ref;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// The attribute for implementing [`AsyncProcessor`] (re-exported from `async-trait`).
pub use async_trait::async_trait;
pub use asynchronous::{AsyncNode, AsyncOptions, AsyncProcessor};
pub use context::{Child, ProcessorContext};
pub use holds::{OffsetHold, ThreadWaker};
pub use store_access::StoreAccess;
pub use store_ref::{
    ConnectableStore, SessionStoreRef, StoreRef, TypedStoreRef, VersionedStoreRef, WindowStoreRef,
};

use crate::model::error::ProcessResult;
use crate::model::record::Record;

/// A node of the topology that receives records of type `Record<KIn, VIn>` and forwards
/// records of type `Record<KOut, VOut>` to its children.
///
/// ```
/// use streams_core::{ProcessResult, Processor, ProcessorContext, Record};
///
/// /// Forwards the length of every value.
/// struct Len;
/// impl Processor<String, String, String, u64> for Len {
///     fn process(&mut self, ctx: &mut ProcessorContext<'_, String, u64>, r: Record<String, String>) -> ProcessResult {
///         let len = r.value.len() as u64;
///         ctx.forward(r.with_value(len))
///     }
/// }
/// ```
pub trait Processor<KIn, VIn, KOut = (), VOut = ()>: 'static {
    /// Called once when the task starts, before any record: look up stores, schedule
    /// punctuators. A store not connected to this processor is an error here.
    fn init(&mut self, ctx: &mut ProcessorContext<'_, KOut, VOut>) -> ProcessResult {
        let _ = ctx;
        Ok(())
    }

    /// Processes one record.
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, KOut, VOut>,
        record: Record<KIn, VIn>,
    ) -> ProcessResult;

    /// Called when a punctuator scheduled with [`ProcessorContext::schedule`] fires, with the
    /// schedule's id and the stream time or wall-clock time (ms) it fired at.
    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, KOut, VOut>,
        schedule: ScheduleId,
        timestamp: i64,
    ) -> ProcessResult {
        let _ = (ctx, schedule, timestamp);
        Ok(())
    }

    /// Called when the task flushes its stores (before every commit, and before it closes
    /// after a clean commit), for every node in topological order, upstream first, before
    /// any store is flushed. A processor that holds updates back forwards them here, so
    /// they are sent before the commit that covers their input and reach downstream
    /// processors before those flush in turn. The DSL's aggregations over a cached store
    /// do so: they forward an aggregate when the cache writes it down, as Kafka Streams
    /// does, instead of at every update.
    fn flush(&mut self, ctx: &mut ProcessorContext<'_, KOut, VOut>) -> ProcessResult {
        let _ = ctx;
        Ok(())
    }

    /// Called once when the task closes.
    fn close(&mut self) -> ProcessResult {
        Ok(())
    }
}

/// Which clock drives a punctuator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PunctuationType {
    /// Stream time: the largest record timestamp the task has seen. Advances only with data.
    StreamTime,
    /// Wall-clock time of the machine (the test driver's mock clock in tests).
    WallClock,
}

/// Identifies one schedule of one processor, as returned by [`ProcessorContext::schedule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScheduleId(pub(crate) u64);

/// A scheduled punctuator; [`cancel`](Cancellable::cancel) stops it.
#[derive(Debug, Clone)]
pub struct Cancellable {
    id: ScheduleId,
    cancelled: Rc<Cell<bool>>,
}

impl Cancellable {
    pub(crate) fn new(id: ScheduleId, cancelled: Rc<Cell<bool>>) -> Self {
        Self { id, cancelled }
    }

    /// The id [`Processor::punctuate`] is called with.
    pub fn id(&self) -> ScheduleId {
        self.id
    }

    /// Stops the punctuator; it will not fire again.
    pub fn cancel(&self) {
        self.cancelled.set(true);
    }
}

/// The interval of a schedule in milliseconds, at least 1.
pub(crate) fn interval_ms(interval: Duration) -> i64 {
    i64::try_from(interval.as_millis()).unwrap_or(i64::MAX).max(1)
}
