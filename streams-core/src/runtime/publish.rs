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
        for task in self.tasks.values_mut() {
            let d = task.publish_metrics();
            self.metrics.process_records.inc_by(d.processed);
            for (c, n) in self.metrics.dead_letters.iter().zip(d.dead_lettered) {
                c.inc_by(n);
            }
            let next: std::collections::HashMap<(String, i32), i64> = task
                .committable_offsets()
                .into_iter()
                .map(|(t, p, o)| ((t, p), o))
                .collect();
            let topology = self.settings.topology.clone();
            let Some(sub) = topology.subtopology(task.id().subtopology) else {
                continue;
            };
            let partition = task.id().partition;
            for topic in &sub.source_topics {
                let Some(&high) = high.get(&(topic.clone(), partition)) else {
                    continue;
                };
                let position = next.get(&(topic.clone(), partition)).copied().or_else(|| {
                    positions
                        .as_ref()
                        .and_then(|p| p.find_partition(topic, partition))
                        .and_then(|e| match e.offset() {
                            Offset::Offset(o) => Some(o),
                            _ => None,
                        })
                });
                if let (Some(position), Some(m)) = (position, task.metrics_mut())
                    && high >= 0
                {
                    m.set_lag(topic, partition, (high - position).max(0));
                }
            }
        }
        if let Ok(d) = self.tracker.state.lock() {
            self.metrics
                .producer_errors
                .inc_by(d.failed.saturating_sub(self.failed_published));
            self.failed_published = d.failed;
        }
    }
}
