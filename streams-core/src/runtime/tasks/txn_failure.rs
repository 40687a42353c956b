//! Exactly-once: what a failed transaction's records ask for once it is aborted.
//!
//! A transaction fails when one of its records fails (the delivery report says why) or
//! when it cannot reach its coordinator. Either way the thread aborts it and processes the
//! input again from the last commit (`recover.rs`). Before that, the records that failed
//! are read here, after every delivery report of the aborted transaction has arrived:
//! - a record refused for good (too large for its topic, a deleted topic) goes to the
//!   production handler: `log_and_fail` fails the thread with an error naming the topic
//!   and the broker's reason; `log_and_continue` and `dead_letter_queue` have it dropped
//!   or dead-lettered when it is sent again, in the next transaction (`skips.rs`);
//! - a changelog write refused for good fails the thread (the store cannot be kept in
//!   step with its changelog), naming the changelog and the reason;
//! - a write the cluster did not authorize fails the thread, naming the ACL;
//! - anything else (a timeout, a broker down) only aborts: nothing is skipped for it.
//!
//! A deleted output topic can fail the transaction before any of its records fails: the
//! coordinator refuses to add the topic's partition to the transaction, and the abort
//! purges the records, which then report nothing. So when no record failed (not even for a
//! passing reason), the topics of the purged output records are looked up: the records of
//! a topic the cluster no longer has go to the production handler as refused ones. Without
//! that, the thread would abort and process the same input again until librdkafka itself
//! gave up on the topic (dozens of transactions in half a minute).

use std::sync::atomic::Ordering;

use rdkafka::producer::Producer;

use crate::model::error::StreamsError;
use crate::model::handlers::{ErrorHandling, dead_letter};
use crate::runtime::client::errors::kafka_err;
use crate::runtime::produce::skips::Instead;
use crate::runtime::tasks::TaskManager;

impl TaskManager {
    /// Whether the producer reported that the open transaction can no longer commit
    /// (exactly-once), or that it can no longer send at all (a fatal error, either
    /// guarantee).
    pub(in crate::runtime) fn transaction_failed(&self) -> bool {
        self.tracker.txn_failed.load(Ordering::Acquire)
    }

    /// Reads (and clears) what the aborted transaction's delivery reports said, and acts
    /// on it as the module doc says. Called once the transaction is aborted and its
    /// reports have arrived.
    pub(in crate::runtime) fn settle_failed_records(&mut self) -> Result<(), StreamsError> {
        let crate::runtime::produce::producer::Failures {
            changelog_error,
            failed_records: mut failed,
            denied,
            transient,
            purged,
            ..
        } = self.take_aborted()?;
        self.fatal_write_failure(denied, changelog_error)?;
        if let Some(e) = &transient {
            tracing::info!(error = %e, "a record of the aborted transaction failed for a passing reason; its input is processed again");
        } else if failed.is_empty() && !purged.is_empty() {
            // Nothing explains the abort: a topic may be gone (see the module docs). A
            // broker outage, which aborts with records timed out, asks nothing.
            failed = self.of_missing_topics(purged);
        }
        let policy = self.settings.factory.policy();
        for (raw, error) in failed {
            let instead = match policy.production {
                ErrorHandling::LogAndFail => {
                    return Err(StreamsError::Kafka {
                        message: format!(
                            "cannot produce to `{}` (partition {}): {error} (production.exception.handler \
                             is log_and_fail; log_and_continue skips such a record, dead_letter_queue \
                             writes it to the dead-letter topic)",
                            raw.topic, raw.partition
                        ),
                        retriable: false,
                    });
                }
                ErrorHandling::LogAndContinue => Instead::Drop,
                ErrorHandling::DeadLetterQueue => {
                    let Some(dlq) = policy.dead_letter_topic.as_deref() else {
                        return Err(kafka_err("dead letter", "no dead-letter topic"));
                    };
                    self.metrics.dead_letters[2].inc();
                    Instead::DeadLetter(dead_letter(dlq, &raw, "production", &raw.topic, &error))
                }
            };
            tracing::warn!(topic = %raw.topic, partition = raw.partition, error = %error,
                "a record cannot be produced; its transaction is aborted and the record {} when its input is processed again",
                if instead == Instead::Drop { "skipped" } else { "dead-lettered" });
            self.tracker
                .skips
                .add(&raw.topic, raw.key.clone(), raw.value.clone(), error, instead);
        }
        Ok(())
    }

    /// The records of `purged` whose topic the cluster no longer has, each with that error.
    fn of_missing_topics(
        &self,
        purged: Vec<crate::model::record::RawRecord>,
    ) -> Vec<(crate::model::record::RawRecord, String)> {
        let mut missing = std::collections::HashMap::new();
        let mut out = Vec::new();
        for raw in purged {
            let gone = *missing
                .entry(raw.topic.clone())
                .or_insert_with(|| topic_missing(self.producer.client(), &raw.topic));
            if gone {
                out.push((
                    raw,
                    "Broker: Unknown topic or partition (the topic no longer exists: its partition \
                     could not be added to the transaction)"
                        .to_owned(),
                ));
            }
        }
        out
    }

    /// Forgets what the delivery reports of a transaction said (its tasks were lost: their
    /// next owner processes the input and meets any failure itself).
    pub(in crate::runtime) fn forget_failed_records(&mut self) {
        if let Err(e) = self.take_aborted() {
            tracing::warn!(error = %e, "forgetting the lost transaction's delivery reports");
        }
    }

    /// Takes what the aborted transaction's delivery reports said and starts the next
    /// transaction afresh: not failed, and every remembered record to be skipped again.
    fn take_aborted(&mut self) -> Result<crate::runtime::produce::producer::Failures, StreamsError> {
        let failures = self.take_failures(true);
        self.tracker.txn_failed.store(false, Ordering::Release);
        self.tracker.skips.aborted();
        failures
    }
}

/// Whether the cluster says `topic` does not exist. A lookup that fails says nothing: the
/// topic is then taken to exist (the transaction is only processed again).
fn topic_missing<C: rdkafka::ClientContext>(client: &rdkafka::client::Client<C>, topic: &str) -> bool {
    match client.fetch_metadata(Some(topic), std::time::Duration::from_secs(2)) {
        Ok(md) => md.topics().iter().any(|t| {
            t.name() == topic
                && t.error() == Some(rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
        }),
        Err(e) => {
            tracing::debug!(topic, error = %e, "looking up a purged record's topic");
            false
        }
    }
}
