//! Pausing the input of a task that cannot take more records (an async processor with its
//! buffer full, see `processor/asynchronous.rs`).
//!
//! A backpressured task stops processing; records polled for it wait in its queue. Once the
//! queue holds [`PAUSE_AT`] records the task's partitions are paused, so the thread stops
//! fetching them; they are resumed once the queue has drained below [`RESUME_BELOW`]
//! (not as soon as the task takes a record: a pause drops what librdkafka had fetched
//! ahead, and pausing and resuming around every record would fetch each again). A
//! partition librdkafka resumed by itself (it does so for kept partitions after an
//! incremental rebalance) is paused again once the queue has grown by another
//! [`PAUSE_AT`].

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};

use crate::model::error::StreamsError;
use crate::runtime::client::errors::kafka_err;
use crate::runtime::tasks::TaskManager;

/// Queued records of a backpressured task at which its partitions are paused.
pub(in crate::runtime) const PAUSE_AT: usize = 1000;
/// Queued records of a paused task below which its partitions are resumed.
pub(in crate::runtime) const RESUME_BELOW: usize = PAUSE_AT / 2;

impl TaskManager {
    /// Pauses the partitions of backpressured tasks whose queue is full, and resumes those
    /// of paused tasks whose queue has drained.
    pub fn apply_backpressure<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
    ) -> Result<(), StreamsError> {
        let tasks = &self.tasks;
        self.backpressured.retain(|id, _| tasks.contains_key(id));
        let mut pause = Vec::new();
        let mut resume = Vec::new();
        for (id, task) in &self.tasks {
            let queued = task.queued();
            match self.backpressured.get(id) {
                Some(_) if queued < RESUME_BELOW => resume.push(*id),
                Some(&at) if queued >= at + PAUSE_AT => pause.push((*id, queued)),
                None if task.is_backpressured() && queued >= PAUSE_AT => pause.push((*id, queued)),
                _ => {}
            }
        }
        for (id, queued) in pause {
            consumer
                .pause(&self.task_partitions(id))
                .map_err(|e| kafka_err("pause", e))?;
            tracing::debug!(task = %id, queued, "input paused: the task takes no records now");
            self.metrics.input_pauses.inc();
            self.backpressured.insert(id, queued);
        }
        for id in resume {
            consumer
                .resume(&self.task_partitions(id))
                .map_err(|e| kafka_err("resume", e))?;
            tracing::debug!(task = %id, "input resumed");
            self.backpressured.remove(&id);
        }
        Ok(())
    }
}
