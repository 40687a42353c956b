//! Async processors: work on records off the task thread (an HTTP call, a lookup in a
//! remote service), many records at once, with per-key order kept.
//!
//! An [`AsyncProcessor`] returns a future per record; [`AsyncNode`] wraps it into an
//! ordinary processor node of the topology. On its task's thread the node:
//!
//! - **starts** a record's future on the framework's tokio runtime (a multi-thread runtime
//!   of its own, threads named `streams-async`) once no earlier record of the same key is
//!   unfinished and fewer than [`AsyncOptions::max_in_flight`] futures of the task run;
//!   otherwise the record waits, in order, in the node;
//! - **keeps per-key order**: records of one key never overlap and complete in input order;
//!   records of different keys run concurrently;
//! - **forwards** a completed record's outputs downstream on the task thread (so everything
//!   after the node — stores, sinks — runs as usual): at-least-once in completion order;
//!   under exactly-once in input order, so that a transaction never commits the outputs of
//!   a record later than one whose offset it does not commit;
//! - **holds offsets**: an unfinished record's offset is held back from commits
//!   ([`OffsetHold`]): a commit covers its input partition only up to the oldest
//!   unfinished record. A crash, or a rebalance that moves the task, makes the unfinished
//!   records be processed again (their futures' side effects may happen twice: async work
//!   is at-least-once by nature). Records in flight at a commit stay in flight; their
//!   outputs go into a later commit, with their offsets;
//! - **pushes back**: with [`AsyncOptions::max_buffered`] records accepted and unfinished
//!   the task stops taking records (the runtime pauses its partitions once its queue
//!   fills) until some complete.
//!
//! A completion wakes the task's stream thread, which forwards it within about 5 ms even
//! when no record arrives. A future that fails fails the task (as a processor error in a
//! punctuator would): handle expected failures inside the future, e.g. by returning a
//! record for a dead-letter topic.
//!
//! **State stores**: a future cannot reach the task's stores (they belong to the task
//! thread and are not `Send`). Read what the work needs before the node (a processor
//! upstream can put it in the record) and write what it returns after it (a processor
//! downstream).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::holds::{OffsetHold, ThreadWaker};
use super::{Cancellable, Processor, ProcessorContext, PunctuationType, ScheduleId};
use crate::model::error::{ProcessResult, ProcessorError};
use crate::model::record::Record;

/// Work on one record that completes later: returns the records to forward.
///
/// ```
/// use streams_core::processor::AsyncProcessor;
/// use streams_core::{ProcessorError, Record};
///
/// /// Looks up each user's name (an HTTP call in a real application).
/// struct Names;
///
/// #[streams_core::processor::async_trait]
/// impl AsyncProcessor<u64, String, u64, String> for Names {
///     async fn process(&self, r: Record<u64, String>) -> Result<Vec<Record<u64, String>>, ProcessorError> {
///         tokio::time::sleep(std::time::Duration::from_millis(5)).await;
///         let name = format!("user-{}", r.key);
///         Ok(vec![r.with_value(name)])
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait AsyncProcessor<KIn, VIn, KOut = (), VOut = ()>: Send + Sync + 'static {
    /// Works on `record`; runs on the framework's tokio runtime, concurrently with other
    /// keys' records. The records returned are forwarded downstream on the task thread.
    async fn process(&self, record: Record<KIn, VIn>) -> Result<Vec<Record<KOut, VOut>>, ProcessorError>;
}

/// How many records an [`AsyncNode`] works on at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AsyncOptions {
    /// The most futures of one task running at once (default 16).
    pub max_in_flight: usize,
    /// The most records of one task accepted and unfinished, in flight or waiting behind
    /// an earlier record of their key, before the task stops taking records (default
    /// 4 × `max_in_flight`).
    pub max_buffered: usize,
}

impl Default for AsyncOptions {
    fn default() -> Self {
        Self::new(16)
    }
}

impl AsyncOptions {
    /// At most `max_in_flight` futures per task (at least 1), and 4 times as many records
    /// buffered.
    pub fn new(max_in_flight: usize) -> Self {
        let max_in_flight = max_in_flight.max(1);
        Self {
            max_in_flight,
            max_buffered: max_in_flight.saturating_mul(4),
        }
    }

    /// Stops taking records with `n` accepted and unfinished (at least `max_in_flight`).
    #[must_use]
    pub fn with_max_buffered(mut self, n: usize) -> Self {
        self.max_buffered = n.max(self.max_in_flight);
        self
    }
}

/// The framework's runtime for async processors.
fn runtime() -> Result<&'static tokio::runtime::Runtime, ProcessorError> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("streams-async")
        .enable_all()
        .build()
        .map_err(|e| ProcessorError::from(format!("cannot start the async processors' runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// What a future sends back.
type Outcome<K, V> = Result<Vec<Record<K, V>>, ProcessorError>;

/// One accepted record.
struct Entry<KIn, VIn, KOut, VOut> {
    key: KIn,
    /// The record, until its future starts.
    record: Option<Record<KIn, VIn>>,
    /// The outcome, once its future completed.
    outcome: Option<Outcome<KOut, VOut>>,
    /// Keeps the record's offset from being committed until it is forwarded.
    _hold: Option<OffsetHold>,
}

/// The processor node around an [`AsyncProcessor`]: see the [module docs](self).
///
/// Add it like any processor, e.g.
/// `builder.add_processor("deliver", AsyncNode::supplier(Arc::new(p), AsyncOptions::new(64)), ["src"])`.
pub struct AsyncNode<P, KIn, VIn, KOut, VOut> {
    processor: Arc<P>,
    options: AsyncOptions,
    waker: ThreadWaker,
    done_tx: Sender<(u64, Outcome<KOut, VOut>)>,
    done_rx: Receiver<(u64, Outcome<KOut, VOut>)>,
    entries: HashMap<u64, Entry<KIn, VIn, KOut, VOut>>,
    /// Accepted records by key, oldest first; the first one is running or ready.
    by_key: HashMap<KIn, VecDeque<u64>>,
    /// Records first of their key, waiting for a free slot.
    ready: VecDeque<u64>,
    /// Every unfinished record in input order (for in-order forwarding).
    order: VecDeque<u64>,
    in_flight: usize,
    next: u64,
    schedule: Option<Cancellable>,
}

impl<P, KIn, VIn, KOut, VOut> AsyncNode<P, KIn, VIn, KOut, VOut>
where
    P: AsyncProcessor<KIn, VIn, KOut, VOut>,
    KIn: Hash + Eq + Clone + Send + 'static,
    VIn: Send + 'static,
    KOut: Clone + Send + 'static,
    VOut: Clone + Send + 'static,
{
    /// A node running `processor` with `options`.
    pub fn new(processor: Arc<P>, options: AsyncOptions) -> Self {
        let (done_tx, done_rx) = mpsc::channel();
        Self {
            processor,
            options,
            waker: ThreadWaker::default(),
            done_tx,
            done_rx,
            entries: HashMap::new(),
            by_key: HashMap::new(),
            ready: VecDeque::new(),
            order: VecDeque::new(),
            in_flight: 0,
            next: 0,
            schedule: None,
        }
    }

    /// A supplier of nodes sharing `processor`, for [`add_processor`](crate::TopologyBuilder::add_processor).
    pub fn supplier(processor: Arc<P>, options: AsyncOptions) -> impl Fn() -> Self + Send + Sync + 'static {
        move || Self::new(processor.clone(), options)
    }

    /// How many accepted records are unfinished.
    fn buffered(&self) -> usize {
        self.entries.len()
    }

    /// Starts ready records while slots are free.
    fn start_ready(&mut self) -> ProcessResult {
        while self.in_flight < self.options.max_in_flight {
            let Some(seq) = self.ready.pop_front() else { break };
            let Some(record) = self.entries.get_mut(&seq).and_then(|e| e.record.take()) else {
                continue;
            };
            let processor = self.processor.clone();
            let done = self.done_tx.clone();
            let waker = self.waker.clone();
            runtime()?.spawn(async move {
                let outcome = processor.process(record).await;
                // The node is gone (its task closed): nothing waits for the outcome.
                let _ = done.send((seq, outcome));
                waker.wake();
            });
            self.in_flight += 1;
        }
        Ok(())
    }

    /// Takes the outcomes that arrived, starts the records they unblock and forwards what
    /// may be forwarded.
    fn complete(&mut self, ctx: &mut ProcessorContext<'_, KOut, VOut>) -> ProcessResult {
        let in_order = ctx.is_exactly_once();
        let mut finished = Vec::new();
        while let Ok((seq, outcome)) = self.done_rx.try_recv() {
            self.in_flight -= 1;
            let Some(entry) = self.entries.get_mut(&seq) else {
                continue;
            };
            entry.outcome = Some(outcome);
            let key = entry.key.clone();
            if let Some(queue) = self.by_key.get_mut(&key) {
                queue.pop_front();
                match queue.front() {
                    Some(&next) => self.ready.push_back(next),
                    None => {
                        self.by_key.remove(&key);
                    }
                }
            }
            finished.push(seq);
        }
        self.start_ready()?;
        if in_order {
            while let Some(&seq) = self.order.front() {
                if self.entries.get(&seq).is_none_or(|e| e.outcome.is_none()) {
                    break;
                }
                self.order.pop_front();
                self.forward(ctx, seq)?;
            }
        } else {
            for seq in finished {
                self.forward(ctx, seq)?;
            }
            let entries = &self.entries;
            self.order.retain(|s| entries.contains_key(s));
        }
        ctx.set_backpressure(self.buffered() >= self.options.max_buffered);
        if self.entries.is_empty()
            && let Some(s) = self.schedule.take()
        {
            s.cancel();
        }
        Ok(())
    }

    /// Forwards the outputs of the completed record `seq` and releases its offset.
    fn forward(&mut self, ctx: &mut ProcessorContext<'_, KOut, VOut>, seq: u64) -> ProcessResult {
        let Some(entry) = self.entries.remove(&seq) else {
            return Ok(());
        };
        for r in entry.outcome.unwrap_or_else(|| Ok(Vec::new()))? {
            ctx.forward(r)?;
        }
        Ok(())
    }
}

impl<P, KIn, VIn, KOut, VOut> Processor<KIn, VIn, KOut, VOut> for AsyncNode<P, KIn, VIn, KOut, VOut>
where
    P: AsyncProcessor<KIn, VIn, KOut, VOut>,
    KIn: Hash + Eq + Clone + Send + 'static,
    VIn: Send + 'static,
    KOut: Clone + Send + 'static,
    VOut: Clone + Send + 'static,
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, KOut, VOut>) -> ProcessResult {
        runtime()?;
        self.waker = ctx.waker();
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, KOut, VOut>,
        record: Record<KIn, VIn>,
    ) -> ProcessResult {
        self.complete(ctx)?;
        let seq = self.next;
        self.next += 1;
        let key = record.key.clone();
        self.entries.insert(
            seq,
            Entry {
                key: key.clone(),
                record: Some(record),
                outcome: None,
                _hold: ctx.hold_offset(),
            },
        );
        self.order.push_back(seq);
        let queue = self.by_key.entry(key).or_default();
        queue.push_back(seq);
        if queue.len() == 1 {
            self.ready.push_back(seq);
        }
        self.start_ready()?;
        ctx.set_backpressure(self.buffered() >= self.options.max_buffered);
        // Completions are also taken on every record; the punctuator takes them when no
        // record comes, and runs only while records are unfinished (`complete` cancels it
        // once none is): an idle node neither punctuates nor makes its task commit.
        if self.schedule.is_none() {
            self.schedule = Some(ctx.schedule(Duration::from_millis(1), PunctuationType::WallClock));
        }
        Ok(())
    }

    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, KOut, VOut>,
        _: ScheduleId,
        _: i64,
    ) -> ProcessResult {
        self.complete(ctx)
    }

    fn close(&mut self) -> ProcessResult {
        if let Some(s) = self.schedule.take() {
            s.cancel();
        }
        // Unfinished records were not committed: they are processed again by whoever
        // owns the task next. Their futures run on, and their outcomes are dropped.
        self.entries.clear();
        self.by_key.clear();
        self.ready.clear();
        self.order.clear();
        Ok(())
    }
}
