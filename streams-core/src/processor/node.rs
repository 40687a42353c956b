//! The contract between the engine and a node instance.
//!
//! The engine (`engine/`) drives type-erased nodes ([`ErasedNode`]) and hands each call a
//! [`NodeContext`]: everything a node may ask of its task while it runs. This module sits
//! below the engine: it names no engine type, so the engine implements the contract and the
//! topology builds nodes against it without either knowing the other's internals.
//!
//! Records cross edges as `&mut Option<Record<K, V>>` (or, into a source,
//! `&mut Option<RawRecord>`) behind `&mut dyn Any`.

use std::any::Any;
use std::sync::Arc;

use streams_state::{KvStore, Serde, SerdeError, SharedKeyValueStore, StoreBuilder, StoreError};

use super::{Cancellable, PunctuationType, ScheduleId};
use crate::model::TaskId;
use crate::model::error::{ProcessResult, ProcessorError};
use crate::model::record::{OutputRef, RecordMetadata};

/// What a running node may ask of its task. Implemented by the engine; one value lives for
/// the duration of one call into a node.
pub(crate) trait NodeContext {
    /// The node's name.
    fn node_name(&self) -> &str;
    /// The application id.
    fn application_id(&self) -> &str;
    /// The node's task.
    fn task_id(&self) -> TaskId;
    /// Topic, partition and offset of the record being processed; `None` in a punctuator.
    fn record_metadata(&self) -> Option<RecordMetadata>;
    /// The task's stream time.
    fn stream_time(&self) -> i64;
    /// The task's wall-clock time (ms).
    fn wall_clock_time(&self) -> i64;
    /// The timestamp of the record being processed (or of the punctuation running).
    fn timestamp(&self) -> i64;
    /// Asks for a commit once the current record is done.
    fn request_commit(&self);
    /// Schedules this node's punctuator every `interval_ms` of `kind` time.
    fn schedule(&self, interval_ms: i64, kind: PunctuationType) -> Cancellable;
    /// The store `name`, if it is connected to this node or global.
    fn store(&self, name: &str) -> Result<ConnectedStore<'_>, StoreError>;
    /// The node's children, in the order they were added.
    fn children(&self) -> &[usize];
    /// The child named `name`.
    fn child_by_name(&self, name: &str) -> Option<usize>;
    /// Runs child `child` on `record`.
    fn dispatch(&self, child: usize, record: &mut dyn Any) -> ProcessResult;
    /// The run-time name of internal topic `topic` (named relative to the application),
    /// `None` for any other topic.
    fn internal_topic(&self, topic: &str) -> Option<&str>;
    /// The partition count of `topic`, when known.
    fn partitions(&self, topic: &str) -> Option<i32>;
    /// Hands a produced record to the task's record collector. A refusal is also recorded
    /// as a fault of this node (see [`NodeContext::fault`]).
    fn send(&self, record: OutputRef<'_>) -> Result<(), ProcessorError>;
    /// Keeps the current record's offset from being committed while the hold lives;
    /// `None` outside a record (in a punctuator).
    fn hold_offset(&self) -> Option<super::holds::OffsetHold>;
    /// Stops (or resumes) feeding the task records: its node cannot take more now.
    fn set_backpressure(&self, on: bool);
    /// The waker of the thread running the task.
    fn waker(&self) -> super::holds::ThreadWaker;
    /// The value the task's processors share under `name`, if one was set.
    fn task_value(&self, name: &str) -> Option<std::rc::Rc<dyn std::any::Any>>;
    /// Sets the value the task's processors share under `name`.
    fn set_task_value(&self, name: &str, value: std::rc::Rc<dyn std::any::Any>);
    /// The task's processor metadata under `key`.
    fn processor_metadata(&self, key: &str) -> Option<i64>;
    /// Sets the task's processor metadata under `key`.
    fn put_processor_metadata(&self, key: &str, value: i64);
    /// Whether the task runs under exactly-once.
    fn exactly_once(&self) -> bool;
    /// Counts one record as dropped in the task's dropped-records metric.
    fn count_dropped(&self);
    /// Records `fault` for the engine and returns the error to pass up. The engine handles
    /// the record by the fault's own rules whatever the nodes above do with that error:
    /// a processor that swallows it does not make the record succeed.
    fn fault(&self, fault: NodeFault) -> ProcessorError;
}

/// A failure the engine handles by its own handlers (deserialization, production) rather
/// than as a processing error.
#[derive(Debug)]
pub(crate) enum NodeFault {
    /// A source could not deserialize the record's key or value.
    Deserialize {
        /// `"key"` or `"value"`.
        what: &'static str,
        /// The serde's error.
        source: SerdeError,
    },
    /// A sink could not serialize a record for `topic`.
    Serialize {
        /// The destination topic.
        topic: String,
        /// The serde's error.
        source: SerdeError,
    },
}

/// A node instance as the engine drives it.
pub(crate) trait ErasedNode {
    /// Initializes the node.
    fn init(&mut self, cx: &dyn NodeContext) -> ProcessResult;
    /// Processes the record behind `record`.
    fn process(&mut self, cx: &dyn NodeContext, record: &mut dyn Any) -> ProcessResult;
    /// Runs the node's punctuator `id`.
    fn punctuate(&mut self, cx: &dyn NodeContext, id: ScheduleId, timestamp: i64) -> ProcessResult;
    /// Lets the node forward what it holds back before the task's stores flush.
    fn flush(&mut self, cx: &dyn NodeContext) -> ProcessResult {
        let _ = cx;
        Ok(())
    }
    /// Closes the node.
    fn close(&mut self) -> ProcessResult;
}

/// A store as a node reaches it: the shared bytes store and the builder that knows its
/// serdes.
pub(crate) struct ConnectedStore<'a> {
    /// The store's name.
    pub name: &'a str,
    /// The bytes store stack.
    pub store: &'a SharedKeyValueStore,
    /// The builder it was made by.
    pub builder: &'a Arc<dyn StoreBuilder>,
}

impl ConnectedStore<'_> {
    /// The typed handle of this store, if `KS`/`VS` are the serdes it was built with.
    pub fn typed<KS, VS>(&self) -> Result<KvStore<KS, VS>, StoreError>
    where
        KS: Serde + Clone,
        VS: Serde + Clone,
    {
        self.handle::<KvStore<KS, VS>>()
    }

    /// The typed handle of this store as its builder makes it ([`KvStore`],
    /// [`WindowStore`](streams_state::WindowStore), ...), if it is an `H`.
    pub fn handle<H: 'static>(&self) -> Result<H, StoreError> {
        self.builder
            .typed_handle(self.store.clone())
            .downcast::<H>()
            .map(|b| *b)
            .map_err(|_| StoreError::WrongType {
                store: self.name.to_owned(),
                message: format!(
                    "asked for {} but the store is {}",
                    std::any::type_name::<H>(),
                    self.builder.type_name()
                ),
            })
    }
}
