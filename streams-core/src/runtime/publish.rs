//! Publishing a thread's metrics about once a second: every task's counts and gauges,
//! the lag of each input partition and the producer's failures.

use rdkafka::Offset;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};

use super::tasks::TaskManager;

impl TaskManager {
    /// Publishes every task's counts and gauges, the lag of each input partition (end
    /// offset `high` from the consumer's statistics minus the task's next offset) and the
    /// producer's failures. Run about once a second.
    pub fn publish_metrics<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        high: &std::collections::HashMap<(String, i32), i64>,
    ) {
        let positions = consumer.position().ok();
        let topology = self.settings.factory.topology().clone();
        for task in self.tasks.values_mut() {
            self.metrics.add(&task.publish());
            let Some(sub) = topology.subtopology(task.id().subtopology) else {
                continue;
            };
            let partition = task.id().partition;
            let next = task.committable_offsets();
            for topic in &sub.source_topics {
                let Some(&high) = high.get(&(topic.clone(), partition)) else {
                    continue;
                };
                let processed = next
                    .iter()
                    .find(|(t, p, _)| t == topic && *p == partition)
                    .map(|(_, _, o)| *o);
                let position = processed.or_else(|| {
                    positions
                        .as_ref()
                        .and_then(|p| p.find_partition(topic, partition))
                        .and_then(|e| match e.offset() {
                            Offset::Offset(o) => Some(o),
                            _ => None,
                        })
                });
                if let Some(position) = position
                    && high >= 0
                {
                    task.observe_lag(topic, partition, (high - position).max(0));
                }
            }
        }
        if let Ok(d) = self.tracker.state.lock() {
            self.metrics
                .producer_errors
                .inc_by(d.failed.saturating_sub(self.failed_published));
            self.failed_published = d.failed;
        }
        let waited = self
            .tracker
            .queue_full_nanos
            .load(std::sync::atomic::Ordering::Relaxed);
        let seconds = waited.saturating_sub(self.queue_full_published) as f64 / 1e9;
        self.metrics.produce_queue_full_seconds.inc_by(seconds);
        self.metrics.blocked_seconds.inc_by(seconds);
        self.queue_full_published = waited;
    }
}
