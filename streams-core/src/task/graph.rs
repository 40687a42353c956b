//! The node graph of one task and the cursor a node runs with.
//!
//! Nodes live in `RefCell`s: while node `i` processes a record it is borrowed mutably, and
//! forwarding borrows its children one at a time. The topology is acyclic (checked when it
//! is built), so a node is never borrowed twice; if it were, the dispatch fails with an
//! error rather than a panic.

use std::any::Any;
use std::cell::RefCell;
use std::time::Instant;

use super::nodes::ErasedNode;
use super::shared::TaskShared;
use crate::error::{ProcessResult, ProcessorError};
use crate::metrics::NodeMetrics;

/// The static facts of a node within a task.
pub(crate) struct NodeMeta {
    pub name: String,
    pub children: Vec<usize>,
    pub stores: Vec<String>,
    /// Present when the task records metrics.
    pub metrics: Option<NodeMetrics>,
}

/// The node instances of one task, indexed as in `meta`.
pub(crate) struct Graph {
    pub nodes: Vec<RefCell<Box<dyn ErasedNode>>>,
    pub meta: Vec<NodeMeta>,
}

/// A failure inside node `node`, carried up through the nodes that forwarded to it so the
/// innermost node's name survives.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub(crate) struct NodeFailure {
    pub node: String,
    #[source]
    pub source: ProcessorError,
}

/// What a node runs with: its index, the graph and the task's shared state.
#[derive(Clone, Copy)]
pub(crate) struct NodeCx<'a> {
    pub node: usize,
    pub graph: &'a Graph,
    pub task: &'a TaskShared,
}

impl<'a> NodeCx<'a> {
    pub fn name(&self) -> &'a str {
        &self.graph.meta[self.node].name
    }

    pub fn children(&self) -> &'a [usize] {
        &self.graph.meta[self.node].children
    }

    pub fn child_by_name(&self, name: &str) -> Option<usize> {
        self.children()
            .iter()
            .copied()
            .find(|&c| self.graph.meta[c].name == name)
    }

    /// Runs node `child` on `record` (an `Option<Record<K, V>>` or, for sources, an
    /// `Option<RawRecord>`).
    pub fn dispatch(&self, child: usize, record: &mut dyn Any) -> ProcessResult {
        if let Some(m) = &self.graph.meta[self.node].metrics {
            m.forwarded.set(m.forwarded.get() + 1);
        }
        self.graph.process(self.task, child, record)
    }
}

impl Graph {
    /// Runs node `index` on `record`, counting it (and timing it at DEBUG) when the task
    /// records metrics.
    pub fn process(&self, task: &TaskShared, index: usize, record: &mut dyn Any) -> ProcessResult {
        let Some(m) = &self.meta[index].metrics else {
            return self.run(task, index, |node, cx| node.process(cx, record));
        };
        m.records_in.set(m.records_in.get() + 1);
        match &m.latency {
            None => self.run(task, index, |node, cx| node.process(cx, record)),
            Some(h) => {
                let started = Instant::now();
                let result = self.run(task, index, |node, cx| node.process(cx, record));
                h.observe(started.elapsed().as_secs_f64());
                result
            }
        }
    }

    /// Runs `f` on node `index`, tagging an error with the node's name unless a node below
    /// already did.
    pub fn run(
        &self,
        task: &TaskShared,
        index: usize,
        f: impl FnOnce(&mut dyn ErasedNode, NodeCx<'_>) -> ProcessResult,
    ) -> ProcessResult {
        let name = &self.meta[index].name;
        let mut node = self.nodes[index]
            .try_borrow_mut()
            .map_err(|_| format!("node `{name}` re-entered while processing"))?;
        f(
            node.as_mut(),
            NodeCx {
                node: index,
                graph: self,
                task,
            },
        )
        .map_err(|e| {
            if e.is::<NodeFailure>() {
                e
            } else {
                Box::new(NodeFailure {
                    node: name.clone(),
                    source: e,
                }) as _
            }
        })
    }
}
