//! Publishing a thread's metrics about once a second: every task's counts and gauges,
//! the lag of each input partition and the producer's failures.

use std::collections::HashMap;

use crate::runtime::tasks::TaskManager;

/// What the consumer's statistics say of one assigned partition (librdkafka's numbers,
/// about once a second).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FetchPosition {
    /// The high watermark.
    pub high: i64,
    /// The last stable offset (the end under `read_committed`).
    pub stable: i64,
    /// The next offset to fetch: past control records (transaction markers), which are
    /// never delivered.
    pub next: i64,
    /// Messages fetched but not yet delivered to the application.
    pub queued: i64,
}

impl FetchPosition {
    /// The partition's end for a consumer reading `read_committed` or not.
    fn end(&self, read_committed: bool) -> i64 {
        if read_committed { self.stable } else { self.high }
    }
}

/// The lag of a partition: records between `end` and the first record not yet processed.
/// `processed` is the offset after the last record processed; when nothing fetched waits
/// (`queued == 0`), the fetch position counts too, so a partition whose log ends in a
/// transaction marker (which is never delivered) reads 0 when caught up, not 1.
pub(crate) fn lag(end: i64, processed: Option<i64>, fetch: Option<&FetchPosition>) -> Option<i64> {
    if end < 0 {
        return None;
    }
    let caught_up_to = fetch.filter(|f| f.queued == 0 && f.next >= 0).map(|f| f.next);
    let position = processed.into_iter().chain(caught_up_to).max()?;
    Some((end - position).max(0))
}

impl TaskManager {
    /// Publishes every task's counts and gauges, the lag of every assigned input partition
    /// (running tasks and tasks still restoring, 0 when caught up) and the producer's
    /// failures. Run about once a second, with the consumer's latest statistics.
    pub fn publish_metrics(&mut self, fetch: &HashMap<(String, i32), FetchPosition>) {
        let topology = self.settings.factory.topology().clone();
        let read_committed = self.settings.eos;
        for task in self.tasks.values_mut() {
            self.metrics.add(&task.publish());
            let Some(sub) = topology.subtopology(task.id().subtopology) else {
                continue;
            };
            let partition = task.id().partition;
            let next = task.committable_offsets();
            for topic in &sub.source_topics {
                let Some(f) = fetch.get(&(topic.clone(), partition)) else {
                    continue;
                };
                let processed = next
                    .iter()
                    .find(|(t, p, _)| t == topic && *p == partition)
                    .map(|(_, _, o)| *o);
                if let Some(lag) = lag(f.end(read_committed), processed, Some(f)) {
                    task.observe_lag(topic, partition, lag);
                }
            }
        }
        // A restoring task's input waits (paused): everything from its first held record,
        // or from the fetch position, is lag.
        for (id, r) in &mut self.restoring {
            let Some(sub) = topology.subtopology(id.subtopology) else {
                continue;
            };
            for topic in &sub.source_topics {
                let Some(f) = fetch.get(&(topic.clone(), id.partition)) else {
                    continue;
                };
                let first_held = r
                    .held
                    .iter()
                    .find(|h| *h.topic == **topic && h.partition == id.partition)
                    .map(|h| h.offset);
                let waiting_from = first_held.or((f.next >= 0).then(|| f.next - f.queued));
                if let Some(lag) = lag(f.end(read_committed), waiting_from, None) {
                    r.metrics.set_lag(topic, id.partition, lag);
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

#[cfg(test)]
mod tests {
    use super::FetchPosition;
    use super::lag;

    fn at(next: i64, queued: i64) -> FetchPosition {
        FetchPosition {
            high: 100,
            stable: 100,
            next,
            queued,
        }
    }

    #[test]
    fn caught_up_reads_zero_even_when_the_log_ends_in_a_marker() {
        // Records 0..=98 processed; offset 99 is a commit marker the consumer skipped.
        assert_eq!(lag(100, Some(99), Some(&at(100, 0))), Some(0));
    }

    #[test]
    fn records_fetched_but_not_processed_are_lag() {
        assert_eq!(lag(100, Some(60), Some(&at(100, 40))), Some(40));
    }

    #[test]
    fn an_idle_partition_without_records_reads_zero() {
        assert_eq!(lag(0, None, Some(&at(0, 0))), Some(0));
        assert_eq!(lag(5, None, Some(&at(5, 0))), Some(0));
    }

    #[test]
    fn unknown_ends_or_positions_give_no_reading() {
        assert_eq!(lag(-1, Some(3), Some(&at(3, 0))), None);
        assert_eq!(lag(10, None, Some(&at(-1, 0))), None);
        assert_eq!(lag(10, None, None), None);
        assert_eq!(lag(10, Some(4), None), Some(6));
    }
}
