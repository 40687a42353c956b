//! The processor metadata of the driver's tasks: what a commit writes with the input
//! offsets, and what a task created from committed offsets starts with. Restarts are
//! simulated with these as the stores are, by copying from one driver to the next.

use std::collections::BTreeMap;

use super::TopologyTestDriver;

impl TopologyTestDriver {
    /// The processor metadata of the task for partition 0, as its next commit would write
    /// it with the input offsets (see
    /// [`ProcessorContext::processor_metadata`](streams_core::ProcessorContext::processor_metadata)).
    pub fn processor_metadata(&self) -> BTreeMap<String, i64> {
        let inner = self.inner.borrow();
        inner
            .tasks
            .values()
            .find(|t| t.id().partition <= 0)
            .map(|t| t.processor_metadata())
            .unwrap_or_default()
    }

    /// Gives the task for partition 0 the processor metadata `committed`, as a task created
    /// from committed offsets starts with the metadata committed with them. Call before
    /// piping records.
    pub fn resume_processor_metadata(&self, committed: &BTreeMap<String, i64>) {
        let inner = self.inner.borrow();
        if let Some(task) = inner.tasks.values().find(|t| t.id().partition <= 0) {
            task.resume_processor_metadata(committed);
        }
    }
}
