//! What the producer reported since the last commit, acted on at commit: failed changelog
//! writes (fatal), failed output records (dead-lettered, skipped or fatal, per the
//! production handler), and the changelog offsets that at-least-once checkpoints record.

use std::time::Duration;

use crate::engine::{Task, TaskId};
use crate::model::error::StreamsError;
use crate::model::record::RawRecord;
use crate::runtime::client::errors::kafka_err;
use crate::runtime::tasks::TaskManager;
use crate::topology::changelog_topic;

impl TaskManager {
    /// Acts on failed deliveries since the last commit: a failed changelog write is fatal;
    /// failed output records go to the dead-letter topic (production handler
    /// `dead_letter_queue`, then the producer is flushed again), are skipped
    /// (`log_and_continue`), or fail the thread (`log_and_fail`).
    pub(in crate::runtime) fn check_deliveries(&mut self) -> Result<(), StreamsError> {
        let crate::runtime::produce::producer::Failures {
            error,
            changelog_error,
            failed_records: failed,
            denied,
            ..
        } = self.take_failures(false)?;
        self.fatal_write_failure(denied, changelog_error)?;
        if !failed.is_empty() {
            self.dead_letter_failed(failed)?;
        }
        match error {
            Some(e)
                if self.settings.factory.policy().production
                    != crate::model::handlers::ErrorHandling::LogAndContinue =>
            {
                Err(StreamsError::Kafka {
                    message: format!("delivery failed: {e}"),
                    retriable: false,
                })
            }
            Some(e) => {
                tracing::warn!(error = %e, "delivery failed; continuing (production handler)");
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Takes what the delivery reports said since the last take; with `aborted` (the
    /// transaction they belonged to was aborted) also forgets the changelog offsets they
    /// reached, since the restored stores start from the committed changelog again.
    pub(in crate::runtime) fn take_failures(
        &self,
        aborted: bool,
    ) -> Result<crate::runtime::produce::producer::Failures, StreamsError> {
        let mut d = self
            .tracker
            .state
            .lock()
            .map_err(|_| kafka_err("deliveries", "lock poisoned"))?;
        if aborted {
            d.changelog_offsets.clear();
        }
        Ok(d.take_failures())
    }

    /// The failures no handler may skip: a write the broker denied (`denied`: the topic
    /// and the error code) and a failed changelog write, in that order.
    pub(in crate::runtime) fn fatal_write_failure(
        &self,
        denied: Option<(String, rdkafka::types::RDKafkaErrorCode)>,
        changelog_error: Option<String>,
    ) -> Result<(), StreamsError> {
        if let Some((topic, code)) = denied {
            return Err(self.write_denied(&topic, code));
        }
        if let Some(e) = changelog_error {
            return Err(StreamsError::Kafka {
                message: format!("changelog write failed: {e}"),
                retriable: false,
            });
        }
        Ok(())
    }

    /// The error of a write to `topic` the cluster refused with `code`, naming the ACL.
    pub(in crate::runtime) fn write_denied(
        &self,
        topic: &str,
        code: rdkafka::types::RDKafkaErrorCode,
    ) -> StreamsError {
        let app = self.settings.factory.app_id();
        let grant = if topic.starts_with(app.as_ref()) {
            format!("WRITE on topics prefixed `{app}` (the application's internal topics)")
        } else {
            "WRITE on it".to_owned()
        };
        crate::runtime::client::connect::denied(format!("topic `{topic}`"), "writing to it", code, &grant)
    }

    /// Writes output records the producer failed to deliver to the dead-letter topic, with
    /// their bytes, headers and the error, and waits until they are written.
    fn dead_letter_failed(&mut self, failed: Vec<(RawRecord, String)>) -> Result<(), StreamsError> {
        let Some(topic) = self.settings.factory.policy().dead_letter_topic.clone() else {
            return Err(kafka_err("dead letter", "no dead-letter topic"));
        };
        let n = failed.len();
        for (raw, error) in failed {
            tracing::warn!(topic = %raw.topic, partition = raw.partition, error = %error, dlq = %topic, "dead-lettering a record that could not be produced");
            let r = crate::model::handlers::dead_letter(&topic, &raw, "production", &raw.topic, &error);
            crate::runtime::produce::topic_handle::send_to(
                &self.producer,
                crate::runtime::produce::producer::Written::Output,
                &r.topic,
                crate::runtime::produce::topic_handle::Outgoing {
                    partition: None,
                    key: r.key.as_deref(),
                    value: r.value.as_deref(),
                    timestamp: r.timestamp,
                    headers: crate::runtime::produce::topic_handle::RecordHeaders::Model(&r.headers),
                },
            )
            .map_err(|e| kafka_err("dead-letter topic", e))?;
        }
        crate::runtime::produce::producer::flush(&self.producer, Duration::from_secs(60))
            .map_err(|e| kafka_err("flush dead-letter records", e))?;
        self.metrics.dead_letters[2].inc_by(n as u64);
        // A dead-letter record that itself failed is an error, not another dead letter.
        let mut d = self
            .tracker
            .state
            .lock()
            .map_err(|_| kafka_err("deliveries", "lock poisoned"))?;
        if let Some((raw, e)) = d.failed_records.drain(..).next() {
            return Err(StreamsError::Kafka {
                message: format!("dead-letter write to `{}` failed: {e}", raw.topic),
                retriable: false,
            });
        }
        Ok(())
    }

    /// Writes every task's checkpoints: the changelog offset each store's local data
    /// reaches (restored, or delivered since).
    /// Writes every task's checkpoints; returns the tasks whose store was found corrupt
    /// doing so, for the caller to rebuild once their offsets are committed.
    pub(in crate::runtime) fn write_checkpoints(&self) -> Result<Vec<(TaskId, String)>, StreamsError> {
        let mut corrupt = Vec::new();
        for (id, task) in &self.tasks {
            if let Err(e) = self.write_checkpoint(task) {
                let what = crate::runtime::tasks::corrupted::corruption(&e).ok_or(e)?;
                corrupt.push((*id, what));
            }
        }
        Ok(corrupt)
    }

    /// Writes the checkpoints of `task`'s stores.
    pub(in crate::runtime) fn write_checkpoint(&self, task: &Task) -> Result<(), StreamsError> {
        let on_disk = self.each_store_checkpoint(task, |store, offset| match offset {
            Some(o) => store.write_checkpoint(Some(o)),
            None => Ok(()),
        })?;
        self.record_offset_sum(task.id(), on_disk, false);
        Ok(())
    }

    /// After a committed transaction: every task's stores apply the writes they held
    /// (exactly-once stores hold them until now) together with their checkpoints.
    pub(in crate::runtime) fn commit_writes(&self) -> Result<(), StreamsError> {
        for task in self.tasks.values() {
            let on_disk = self.each_store_checkpoint(task, |store, offset| store.commit_writes(offset))?;
            self.record_offset_sum(task.id(), on_disk, false);
        }
        Ok(())
    }

    /// Records the offset sum of a task whose persistent stores' checkpoints are
    /// `on_disk` (a task without any holds nothing across a restart and is not recorded).
    fn record_offset_sum(&self, id: TaskId, on_disk: Vec<Option<i64>>, closing: bool) {
        if !on_disk.is_empty() {
            let sum = crate::runtime::restore::offset_sums::sum_of(on_disk);
            self.settings.offset_sums.record(id, sum, closing);
        }
    }

    /// Before `task` closes cleanly: its offset sum goes to disk now.
    pub(in crate::runtime) fn record_closing_offset_sum(&self, task: &Task) {
        if let Ok(on_disk) = self.each_store_checkpoint(task, |_, _| Ok(())) {
            self.record_offset_sum(task.id(), on_disk, true);
        }
    }

    /// Calls `f` with each store of `task` and the changelog offset its local data reaches
    /// (delivered since, or restored), if known. A store restored from a source topic
    /// reaches the task's committed position in that topic. Returns those offsets of the
    /// persistent stores (what the task holds across a restart).
    fn each_store_checkpoint(
        &self,
        task: &Task,
        mut f: impl FnMut(&mut dyn streams_state::KeyValueStore, Option<i64>) -> streams_state::Result<()>,
    ) -> Result<Vec<Option<i64>>, StreamsError> {
        let mut on_disk = Vec::new();
        let delivered = self
            .tracker
            .state
            .lock()
            .map_err(|_| kafka_err("deliveries", "lock poisoned"))?;
        let topology = self.settings.factory.topology();
        let mut consumed = None;
        for slot in task.stores() {
            let partition = task.id().partition;
            let offset = if let Some(topic) = topology.source_changelog(&slot.name) {
                let consumed = consumed.get_or_insert_with(|| task.committable_offsets());
                consumed
                    .iter()
                    .find(|(t, p, _)| t == topic && *p == partition)
                    .map(|(_, _, next)| next - 1)
                    .or_else(|| self.restored_to.get(&(topic.to_owned(), partition)).copied())
            } else {
                let key = (
                    changelog_topic(self.settings.factory.app_id(), &slot.name),
                    partition,
                );
                delivered
                    .changelog_offsets
                    .get(&key)
                    .or_else(|| self.restored_to.get(&key))
                    .copied()
            };
            let mut store = slot.store.borrow_mut();
            if store.persistent() {
                on_disk.push(offset);
            }
            f(&mut **store, offset)?;
        }
        Ok(on_disk)
    }
}
