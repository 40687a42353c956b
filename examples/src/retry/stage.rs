//! The loop of one consumer of the ladder: attempt each record, forward a failure to the
//! next rung (or the dead-letter topic), and wait for records that are not due yet
//! without blocking anything else.
//!
//! Invariants: the main stage never waits (its records carry no due time); a record that
//! is not due pauses only its own partition, and the consumer keeps polling so it stays in
//! its group; at most one record per partition is held back, and the records fetched
//! after it are dropped and read again from its next offset once it was attempted;
//! commits go through [`StageContext::commit`], after the forwards.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::commit::StageContext;
use super::forwarder::Forwarder;
use super::handler::{HandleError, Handler, Outcome, OutcomeEvent};
use super::ladder::RetryLadder;
use super::options::RetryOptions;
use super::record::{HEADER_ATTEMPT, HEADER_LAST_ERROR, HEADER_NEXT_AT, RetryRecord, now_ms};
use super::stats::Counters;
use crate::ExampleError;

/// One consumer of the ladder.
pub(super) struct Stage {
    /// Its place in the ladder: 0 for the main topic, `i` for retry topic `i`.
    pub(super) index: usize,
    /// The topic it reads.
    pub(super) topic: String,
    ladder: Arc<RetryLadder>,
    handler: Arc<dyn Handler>,
    consumer: BaseConsumer<StageContext>,
    options: RetryOptions,
    /// What it did so far.
    pub(super) counters: Arc<Counters>,
    shutdown: Arc<AtomicBool>,
    /// A record that is not due yet, per paused partition.
    waiting: HashMap<i32, RetryRecord>,
}

impl Stage {
    /// The consumer of stage `index` of `ladder` on `bootstrap` (its own group and its own
    /// producer), handing records to `handler` until `shutdown` is set.
    pub(super) fn new(
        bootstrap: &str,
        index: usize,
        ladder: Arc<RetryLadder>,
        handler: Arc<dyn Handler>,
        options: &RetryOptions,
        shutdown: Arc<AtomicBool>,
    ) -> Result<Self, ExampleError> {
        let topic = ladder.stage_topic(index).to_owned();
        let forwarder = Arc::new(Forwarder::new(bootstrap, &options.producer_properties)?);
        let context = StageContext::new(topic.clone(), forwarder, options.produce_timeout);
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("group.id", format!("{}.{topic}", options.group_id))
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "100")
            .set("session.timeout.ms", "10000")
            .set("heartbeat.interval.ms", "1000");
        for (k, v) in &options.consumer_properties {
            config.set(k, v);
        }
        let consumer: BaseConsumer<StageContext> = config.create_with_context(context)?;
        Ok(Self {
            index,
            topic,
            ladder,
            handler,
            consumer,
            options: options.clone(),
            counters: Arc::new(Counters::default()),
            shutdown,
            waiting: HashMap::new(),
        })
    }

    fn forwarder(&self) -> &Forwarder {
        &self.consumer.context().forwarder
    }

    /// Attempts `record` and forwards it down the ladder when it fails.
    fn attempt(&self, record: &RetryRecord) -> Result<(), ExampleError> {
        let result = self.handler.handle(record);
        let outcome = match &result {
            Ok(()) => {
                self.counters.delivered.fetch_add(1, Ordering::Relaxed);
                Outcome::Delivered
            }
            Err(error) => {
                let attempt = record.attempt() + 1;
                let message = error.to_string();
                let next = match error {
                    HandleError::Retriable(_) => self.ladder.next_after(self.index),
                    HandleError::Permanent(_) => None,
                };
                match next {
                    Some(step) => {
                        let due = now_ms() + step.delay.as_millis() as i64;
                        let headers = record.moved_headers(&[
                            (HEADER_ATTEMPT, attempt.to_string()),
                            (HEADER_NEXT_AT, due.to_string()),
                            (HEADER_LAST_ERROR, message),
                        ]);
                        self.forwarder().send(
                            &step.topic,
                            record.key.as_deref(),
                            record.value.as_deref(),
                            headers,
                        )?;
                        self.counters.retried.fetch_add(1, Ordering::Relaxed);
                        Outcome::Retrying {
                            topic: step.topic.clone(),
                            attempt,
                            due_at_ms: due,
                        }
                    }
                    None => {
                        let headers = record.moved_headers(&[
                            (HEADER_ATTEMPT, attempt.to_string()),
                            (HEADER_LAST_ERROR, message),
                        ]);
                        let dlq = self.ladder.dead_letter();
                        self.forwarder().send(
                            dlq,
                            record.key.as_deref(),
                            record.value.as_deref(),
                            headers,
                        )?;
                        self.counters.dead_lettered.fetch_add(1, Ordering::Relaxed);
                        Outcome::DeadLettered {
                            attempt,
                            permanent: matches!(error, HandleError::Permanent(_)),
                        }
                    }
                }
            }
        };
        if let Some(listener) = &self.options.listener {
            listener(&OutcomeEvent {
                topic: &self.topic,
                record,
                outcome,
                error: result.as_ref().err(),
            });
        }
        self.consumer.context().handled(record.partition, record.offset);
        Ok(())
    }

    fn partition_list(&self, partition: i32) -> Result<TopicPartitionList, ExampleError> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, partition, Offset::Invalid)?;
        Ok(tpl)
    }

    /// Attempts the waiting records that are due; returns when the next one is due.
    fn attempt_due(&mut self) -> Result<Option<i64>, ExampleError> {
        let now = now_ms();
        let due: Vec<i32> = self
            .waiting
            .iter()
            .filter(|(_, r)| r.due_at_ms().unwrap_or(0) <= now)
            .map(|(&p, _)| p)
            .collect();
        for p in due {
            let Some(record) = self.waiting.remove(&p) else {
                continue;
            };
            self.attempt(&record)?;
            self.consumer.context().commit(&self.consumer)?;
            // Records after it that were fetched while waiting were dropped: read on from
            // the next offset.
            self.consumer.seek(
                &self.topic,
                p,
                Offset::Offset(record.offset + 1),
                Duration::from_secs(10),
            )?;
            self.consumer.resume(&self.partition_list(p)?)?;
        }
        Ok(self.waiting.values().filter_map(RetryRecord::due_at_ms).min())
    }

    /// Consumes until shutdown (or a failure), then commits what it handled and leaves
    /// its group.
    pub(super) fn run(mut self) -> Result<(), ExampleError> {
        self.consumer.subscribe(&[self.topic.as_str()])?;
        let mut in_batch = 0usize;
        while !self.shutdown.load(Ordering::Relaxed) {
            if self.consumer.context().rebalanced.swap(false, Ordering::Relaxed) {
                // Waiting records were not committed: whoever owns their partitions now
                // reads them again. Partitions we keep are resumed.
                self.waiting.clear();
                let assignment = self.consumer.assignment()?;
                if assignment.count() > 0 {
                    self.consumer.resume(&assignment)?;
                }
            }
            let next_due = self.attempt_due()?;
            let mut wait = if in_batch > 0 {
                Duration::ZERO
            } else {
                self.options.poll_interval
            };
            if let Some(due) = next_due {
                wait = wait.min(Duration::from_millis((due - now_ms()).max(0) as u64));
            }
            let message = match self.consumer.poll(wait) {
                None => None,
                Some(Ok(m)) => Some(RetryRecord::from_message(&m)),
                Some(Err(e)) => {
                    tracing::warn!(topic = %self.topic, error = %e, "consumer error");
                    None
                }
            };
            let Some(record) = message else {
                // Idle: commit the batch.
                in_batch = 0;
                self.consumer.context().commit(&self.consumer)?;
                continue;
            };
            if self.waiting.contains_key(&record.partition) {
                // Fetched before the partition was paused; read again after the wait.
                continue;
            }
            if record.due_at_ms().is_some_and(|due| due > now_ms()) {
                // Not due: commit what came before it, pause its partition and keep polling
                // (the other partitions keep flowing, the group keeps us).
                self.consumer.context().commit(&self.consumer)?;
                self.consumer.pause(&self.partition_list(record.partition)?)?;
                self.counters.waits.fetch_add(1, Ordering::Relaxed);
                self.waiting.insert(record.partition, record);
                continue;
            }
            self.attempt(&record)?;
            in_batch += 1;
            if in_batch >= self.options.max_batch {
                in_batch = 0;
                self.consumer.context().commit(&self.consumer)?;
            }
        }
        let committed = self.consumer.context().commit(&self.consumer);
        self.consumer.unsubscribe();
        committed
    }
}
