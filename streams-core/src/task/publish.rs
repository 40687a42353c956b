//! Publishing a task's counts and gauges to its metrics, about once a second and never
//! per record: the task counts in plain fields, this moves the differences to the registry.

use super::Task;
use crate::metrics::TaskMetrics;
use crate::metrics::handles::Published;

impl Task {
    /// The task's metrics, when it records them.
    pub fn metrics_mut(&mut self) -> Option<&mut TaskMetrics> {
        self.metrics.as_mut()
    }

    /// Publishes node counts, task counters and store gauges. Returns what was added since
    /// the last call, for the thread's totals (zero without metrics).
    pub fn publish_metrics(&mut self) -> Published {
        let Some(m) = self.metrics.as_mut() else {
            return Published::default();
        };
        for meta in &self.graph.meta {
            if let Some(n) = &meta.metrics {
                n.publish();
            }
        }
        let c = self.counters;
        let last = m.published;
        let delta = Published {
            processed: c.processed - last.processed,
            dropped: c.dropped - last.dropped,
            punctuations: c.punctuations - last.punctuations,
            dead_lettered: std::array::from_fn(|i| c.dead_lettered_by[i] - last.dead_lettered[i]),
        };
        m.process_records.inc_by(delta.processed);
        m.dropped_records.inc_by(delta.dropped);
        m.punctuations.inc_by(delta.punctuations);
        m.published = Published {
            processed: c.processed,
            dropped: c.dropped,
            punctuations: c.punctuations,
            dead_lettered: c.dead_lettered_by,
        };
        let mut cached = 0u64;
        for slot in &self.shared.stores {
            if let Ok(store) = slot.store.try_borrow() {
                cached += store.stats().cached_bytes.unwrap_or(0);
            }
        }
        m.cache_size.set(i64::try_from(cached).unwrap_or(i64::MAX));
        delta
    }
}
