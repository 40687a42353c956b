//! The node graph of one task and the cursor a node runs with.
//!
//! Nodes live in `RefCell`s: while node `i` processes a record it is borrowed mutably, and
//! forwarding borrows its children one at a time. The topology is acyclic (checked when it
//! is built), so a node is never borrowed twice; if it were, the dispatch fails with an
//! error rather than a panic.

use std::any::Any;
use std::cell::RefCell;
use std::time::Instant;

use streams_state::StoreError;

use super::observer::NodeMeta;
use super::shared::Fault;
use super::shared::TaskShared;
use crate::model::TaskId;
use crate::model::error::{ProcessResult, ProcessorError};
use crate::model::record::{OutputRef, RecordMetadata};
use crate::processor::holds::HoldRegistry;
use crate::processor::node::{ConnectedStore, ErasedNode, NodeContext, NodeFault};
use crate::processor::{Cancellable, PunctuationType};

/// The node instances of one task, indexed as in `meta`.
pub(crate) struct Graph {
    pub nodes: Vec<RefCell<Box<dyn ErasedNode>>>,
    pub meta: Vec<NodeMeta>,
}

/// What a node runs with: its index, the graph and the task's shared state. The engine's
/// implementation of [`NodeContext`].
#[derive(Clone, Copy)]
struct NodeCx<'a> {
    node: usize,
    graph: &'a Graph,
    task: &'a TaskShared,
}

impl NodeCx<'_> {
    /// Keeps the first fault of the current call into the graph.
    fn record(&self, fault: Fault) {
        let mut slot = self.task.fault.borrow_mut();
        if slot.is_none() {
            *slot = Some(fault);
        }
    }
}

impl NodeContext for NodeCx<'_> {
    fn node_name(&self) -> &str {
        &self.graph.meta[self.node].name
    }

    fn application_id(&self) -> &str {
        &self.task.app_id
    }

    fn task_id(&self) -> TaskId {
        self.task.task_id
    }

    fn record_metadata(&self) -> Option<RecordMetadata> {
        self.task.record.borrow().as_ref().map(|r| r.metadata())
    }

    fn stream_time(&self) -> i64 {
        self.task.stream_time.get()
    }

    fn wall_clock_time(&self) -> i64 {
        self.task.wall_clock.get()
    }

    fn timestamp(&self) -> i64 {
        self.task.timestamp()
    }

    fn request_commit(&self) {
        self.task.commit_requested.set(true);
    }

    fn schedule(&self, interval_ms: i64, kind: PunctuationType) -> Cancellable {
        self.task.schedule(self.node, interval_ms, kind)
    }

    fn store(&self, name: &str) -> Result<ConnectedStore<'_>, StoreError> {
        let meta = &self.graph.meta[self.node];
        self.task
            .stores
            .iter()
            .chain(&self.task.globals)
            .find(|s| s.name == name)
            .filter(|s| s.global || meta.stores.iter().any(|n| n == name))
            .map(|s| s.connected())
            .ok_or_else(|| StoreError::NotConnected {
                store: name.to_owned(),
                processor: meta.name.clone(),
            })
    }

    fn children(&self) -> &[usize] {
        &self.graph.meta[self.node].children
    }

    fn child_by_name(&self, name: &str) -> Option<usize> {
        self.children()
            .iter()
            .copied()
            .find(|&c| self.graph.meta[c].name == name)
    }

    fn dispatch(&self, child: usize, record: &mut dyn Any) -> ProcessResult {
        let forwarded = &self.graph.meta[self.node].counts.forwarded;
        forwarded.set(forwarded.get() + 1);
        self.graph.process(self.task, child, record)
    }

    fn internal_topic(&self, topic: &str) -> Option<&str> {
        self.task.internal_topics.get(topic).map(String::as_str)
    }

    fn partitions(&self, topic: &str) -> Option<i32> {
        self.task.collector.borrow_mut().partitions(topic)
    }

    fn waker(&self) -> crate::processor::ThreadWaker {
        self.task.waker.clone()
    }

    fn task_value(&self, name: &str) -> Option<std::rc::Rc<dyn std::any::Any>> {
        self.task.values.borrow().get(name).cloned()
    }

    fn set_task_value(&self, name: &str, value: std::rc::Rc<dyn std::any::Any>) {
        self.task.values.borrow_mut().insert(name.to_owned(), value);
    }

    fn processor_metadata(&self, key: &str) -> Option<i64> {
        self.task.processor_metadata.borrow().get(key).copied()
    }

    fn put_processor_metadata(&self, key: &str, value: i64) {
        self.task
            .processor_metadata
            .borrow_mut()
            .insert(key.to_owned(), value);
    }

    fn hold_offset(&self) -> Option<crate::processor::OffsetHold> {
        let r = self.task.record.borrow();
        let r = r.as_ref()?;
        Some(HoldRegistry::hold(
            &self.task.holds,
            r.topic.clone(),
            r.partition,
            r.offset,
        ))
    }

    fn set_backpressure(&self, on: bool) {
        self.task.backpressure.set(on);
    }

    fn exactly_once(&self) -> bool {
        self.task.exactly_once.get()
    }

    fn count_dropped(&self) {
        self.task.dropped.set(self.task.dropped.get() + 1);
    }

    fn send(&self, record: OutputRef<'_>) -> Result<(), ProcessorError> {
        let refused = match self.task.collector.borrow_mut().send(record) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        // `log_and_continue` drops this output record alone, as Kafka Streams' collector
        // does: the input's other outputs (other sinks, changelogs) still go out. Failing
        // the input instead would skip them too, and commit its offset without them.
        if self.task.drop_refused_outputs.get() && !refused.retriable && !refused.transaction_failed {
            tracing::warn!(
                task = %self.task.task_id,
                topic = %refused.topic,
                error = %refused.message,
                "dropping an output record the producer refused (production.exception.handler=log_and_continue)"
            );
            self.count_dropped();
            return Ok(());
        }
        let error: ProcessorError = refused.to_string().into();
        self.record(Fault::Produce {
            node: self.node,
            topic: refused.topic,
            message: refused.message,
            retriable: refused.retriable,
        });
        Err(error)
    }

    fn fault(&self, fault: NodeFault) -> ProcessorError {
        let error: ProcessorError = match &fault {
            NodeFault::Deserialize { what, source } => format!("cannot deserialize {what}: {source}").into(),
            NodeFault::Serialize { topic, source } => format!("cannot produce to `{topic}`: {source}").into(),
        };
        self.record(match fault {
            NodeFault::Deserialize { what, source } => Fault::Deserialize {
                node: self.node,
                what,
                source,
            },
            NodeFault::Serialize { topic, source } => Fault::Produce {
                node: self.node,
                topic,
                message: source.to_string(),
                retriable: false,
            },
        });
        error
    }
}

impl Graph {
    /// Runs node `index` on `record`, counting it (and timing it when the observer asked).
    pub fn process(&self, task: &TaskShared, index: usize, record: &mut dyn Any) -> ProcessResult {
        let meta = &self.meta[index];
        meta.counts.records_in.set(meta.counts.records_in.get() + 1);
        match &meta.timer {
            None => self.run(task, index, |node, cx| node.process(cx, record)),
            Some(timer) => {
                let started = Instant::now();
                let result = self.run(task, index, |node, cx| node.process(cx, record));
                timer(started.elapsed().as_secs_f64());
                result
            }
        }
    }

    /// Runs `f` on node `index`, noting it as the failed node when it fails first.
    pub fn run(
        &self,
        task: &TaskShared,
        index: usize,
        f: impl FnOnce(&mut dyn ErasedNode, &dyn NodeContext) -> ProcessResult,
    ) -> ProcessResult {
        let name = &self.meta[index].name;
        let mut node = self.nodes[index]
            .try_borrow_mut()
            .map_err(|_| format!("node `{name}` re-entered while processing"))?;
        let cx = NodeCx {
            node: index,
            graph: self,
            task,
        };
        let before = task.failed_node.get();
        let result = f(node.as_mut(), &cx);
        match &result {
            // The innermost failing node is the first to see its own error.
            Err(_) if task.failed_node.get().is_none() => task.failed_node.set(Some(index)),
            Err(_) => {}
            // This node handled whatever failed below it.
            Ok(()) if before.is_none() => task.failed_node.set(None),
            Ok(()) => {}
        }
        result
    }
}
