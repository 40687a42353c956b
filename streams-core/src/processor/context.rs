//! The context a processor is handed: forwarding, stores, record metadata, scheduling.

use std::marker::PhantomData;
use std::time::Duration;

use streams_state::{KvStore, Serde, StoreError, TypedStoreBuilder};

use super::node::NodeContext;
use super::store_access::StoreAccess;
use super::{Cancellable, PunctuationType, TypedStoreRef};
use crate::model::TaskId;
use crate::model::error::{ProcessResult, ProcessorError};
use crate::model::record::{Record, RecordMetadata};

/// What a processor can do besides computing: forward records to its children, reach the
/// stores connected to it, read the current record's metadata, schedule punctuators and
/// request a commit.
///
/// `K` and `V` are the types of the records this processor forwards.
pub struct ProcessorContext<'a, K, V> {
    cx: &'a dyn NodeContext,
    _out: PhantomData<fn(K, V)>,
}

impl<'a, K, V> ProcessorContext<'a, K, V> {
    pub(crate) fn new(cx: &'a dyn NodeContext) -> Self {
        Self {
            cx,
            _out: PhantomData,
        }
    }

    /// Keeps the current record's offset from being committed while the returned hold
    /// lives: for work on the record that outlives this call. `None` in a punctuator.
    pub fn hold_offset(&self) -> Option<super::OffsetHold> {
        self.cx.hold_offset()
    }

    /// Stops (`true`) or resumes feeding this task records: for a processor that cannot
    /// take more now. The task's other work (punctuators, commits) goes on.
    pub fn set_backpressure(&self, on: bool) {
        self.cx.set_backpressure(on);
    }

    /// Wakes the thread running this task from any thread, e.g. when work the processor
    /// started elsewhere completes and a punctuator should pick it up without waiting for
    /// the next record or poll timeout.
    pub fn waker(&self) -> super::ThreadWaker {
        self.cx.waker()
    }

    /// A value the processors of this task share: the first call with `name` makes it with
    /// `make`, and every later call in the task (from any of its processors) returns the
    /// same value. For processors that must agree on something no record carries, as the
    /// two sides of a stream-stream join agree on one stream time. The value lives as long
    /// as the task; another task (another partition, or this one created again) has its
    /// own. Fails when `name` already holds a value of another type.
    pub fn task_shared<T: 'static>(
        &self,
        name: &str,
        make: impl FnOnce() -> T,
    ) -> Result<std::rc::Rc<T>, ProcessorError> {
        if let Some(value) = self.cx.task_value(name) {
            return value.downcast::<T>().map_err(|_| {
                format!(
                    "the task's shared value `{name}` is not a {}",
                    std::any::type_name::<T>()
                )
                .into()
            });
        }
        let value = std::rc::Rc::new(make());
        self.cx.set_task_value(name, value.clone());
        Ok(value)
    }

    /// The value the task's processors committed under `key` with its input offsets, as
    /// Kafka Streams' processor metadata: emit-final windowed aggregations keep the last
    /// window close time they emitted there, under their store's name.
    ///
    /// The task commits all of its metadata with the offset of each of its input partitions
    /// (Kafka Streams' offset metadata, version 2). A task created from committed offsets,
    /// here or by a Kafka Streams application, starts with the metadata committed for its
    /// partitions, the largest value of each key.
    pub fn processor_metadata(&self, key: &str) -> Option<i64> {
        self.cx.processor_metadata(key)
    }

    /// Sets the task's processor metadata under `key`: committed with the next commit of
    /// the task's input offsets (see [`ProcessorContext::processor_metadata`]).
    pub fn put_processor_metadata(&mut self, key: &str, value: i64) {
        self.cx.put_processor_metadata(key, value);
    }

    /// Counts the record being processed as dropped in the task's dropped-records metric
    /// (`streams_task_dropped_records_total`), as a processor that skips a record it cannot
    /// use does: a null key or value, a record too late for its window.
    pub fn count_dropped(&self) {
        self.cx.count_dropped();
    }

    /// Whether the task runs under exactly-once (`exactly_once_v2`).
    pub fn is_exactly_once(&self) -> bool {
        self.cx.exactly_once()
    }

    /// The name of this processor's node.
    pub fn node_name(&self) -> &str {
        self.cx.node_name()
    }

    /// The application id (`application.id`).
    pub fn application_id(&self) -> &str {
        self.cx.application_id()
    }

    /// The task this processor instance belongs to.
    pub fn task_id(&self) -> TaskId {
        self.cx.task_id()
    }

    /// Topic, partition and offset of the record being processed; `None` in a punctuator.
    pub fn record_metadata(&self) -> Option<RecordMetadata> {
        self.cx.record_metadata()
    }

    /// The task's stream time: the largest timestamp seen so far (`i64::MIN` before any).
    pub fn stream_time(&self) -> i64 {
        self.cx.stream_time()
    }

    /// The task's wall-clock time in ms (the driver's mock time in tests).
    pub fn wall_clock_time(&self) -> i64 {
        self.cx.wall_clock_time()
    }

    /// Asks the runtime to commit as soon as the current record is done.
    pub fn request_commit(&mut self) {
        self.cx.request_commit();
    }

    /// Schedules [`Processor::punctuate`](super::Processor::punctuate) every `interval`
    /// of `kind` time. The first call comes one interval after now (for stream time: after
    /// the stream time when scheduled, or the first record's timestamp if none was seen).
    pub fn schedule(&mut self, interval: Duration, kind: PunctuationType) -> Cancellable {
        self.cx.schedule(super::interval_ms(interval), kind)
    }

    /// The stores connected to this processor, without its output types: for code that
    /// opens stores on a processor's behalf (a DSL table's lookup, for one).
    pub fn stores(&self) -> StoreAccess<'a> {
        StoreAccess::new(self.cx)
    }

    /// The typed handle of the key-value store `name`; see [`StoreAccess::kv_store`].
    pub fn kv_store<KS, VS>(&self, name: &str) -> Result<KvStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        self.stores().kv_store(name)
    }

    /// The typed handle of `store`, of any kind of store; see [`StoreAccess::store`].
    pub fn store<B: TypedStoreBuilder>(&self, store: &TypedStoreRef<B>) -> Result<B::Handle, StoreError> {
        self.stores().store(store)
    }
}

impl<K: Clone + 'static, V: Clone + 'static> ProcessorContext<'_, K, V> {
    /// Forwards `record` to every child, depth-first, in the order the children were added.
    /// Returns once every child (and its descendants) processed it.
    pub fn forward(&mut self, record: Record<K, V>) -> ProcessResult {
        let children = self.cx.children();
        let Some((last, rest)) = children.split_last() else {
            return Ok(());
        };
        for &child in rest {
            self.cx.dispatch(child, &mut Some(record.clone()))?;
        }
        self.cx.dispatch(*last, &mut Some(record))
    }

    /// Forwards `record` to the child named `child` only. Looks the name up on every
    /// call; a processor that routes every record resolves its children once with
    /// [`child`](Self::child) and uses [`forward_to_child`](Self::forward_to_child).
    pub fn forward_to(&mut self, child: &str, record: Record<K, V>) -> ProcessResult {
        let child = self.child(child)?;
        self.forward_to_child(child, record)
    }

    /// Forwards `record` to `child` only (resolved by [`child`](Self::child)).
    pub fn forward_to_child(&mut self, child: Child, record: Record<K, V>) -> ProcessResult {
        if !self.cx.children().contains(&child.0) {
            return Err(format!("{child:?} is not a child of `{}`", self.cx.node_name()).into());
        }
        self.cx.dispatch(child.0, &mut Some(record))
    }
}

impl<K, V> ProcessorContext<'_, K, V> {
    /// The child named `name`, to forward to with
    /// [`forward_to_child`](Self::forward_to_child). Resolve children in the processor's
    /// supplier (or `init`) and keep them: the lookup is by name, the forward is not.
    pub fn child(&self, name: &str) -> Result<Child, ProcessorError> {
        self.cx
            .child_by_name(name)
            .map(Child)
            .ok_or_else(|| format!("`{name}` is not a child of `{}`", self.cx.node_name()).into())
    }
}

/// One child of a processor, resolved once by [`ProcessorContext::child`]. It stands for
/// the same child in every task of the processor's sub-topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Child(usize);
