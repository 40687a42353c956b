//! How a stream thread's producer is made, kept so it can be made again.
//!
//! Under exactly-once a producer can become unusable while the thread is fine: the broker
//! aborted its transaction after `transaction.timeout.ms` (a broker paused, a network
//! partition) and bumped its epoch, so it is fenced; or an abort cannot reach the
//! transaction coordinator for longer than the thread waits. The thread then closes its
//! tasks dirty, drops the producer and makes a new one with the same `transactional.id`:
//! its `init_transactions` fences the old epoch and completes or aborts whatever the old
//! one left open, and the tasks restart from the last commit (as Kafka Streams does when
//! a producer is fenced: the tasks are "migrated" and the producer is reset).
//!
//! A new client knows the cluster only through its bootstrap list, and a producer is reset
//! exactly when brokers misbehave: where the configured brokers are the ones down (a
//! single bootstrap broker paused), the new producer could reach none of them and the
//! thread would stall until they came back. So a reset producer's bootstrap list also
//! names the brokers the cluster lists at that moment, as the old producer's metadata
//! shows them ([`connect::listed_brokers`]).

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use rdkafka::types::RDKafkaErrorCode;

use crate::config::OAuthBearerTokenProvider;
use crate::model::error::StreamsError;
use crate::runtime::client::connect;
use crate::runtime::client::errors;
use crate::runtime::client::oauth::Authenticated;
use crate::runtime::produce::producer::{DeliveryTracker, StreamProducer};

/// How long one `init_transactions` may take before it is tried again.
const INIT_ATTEMPT: Duration = Duration::from_secs(30);

/// Everything a thread's producer is made from.
pub(crate) struct ProducerRecipe {
    /// The producer's client properties (with `transactional.id` under exactly-once).
    pub config: ClientConfig,
    /// The delivery tracker every producer of the thread shares.
    pub tracker: DeliveryTracker,
    /// The application's id, for the ACLs an authorization error names.
    pub application_id: String,
    /// The application's OAUTHBEARER token provider, if any.
    pub tokens: Option<OAuthBearerTokenProvider>,
}

impl ProducerRecipe {
    /// The transactional id, under exactly-once.
    fn transactional_id(&self) -> Option<&str> {
        self.config.get("transactional.id")
    }

    /// The producer's `transaction.timeout.ms` (Kafka's default, 60 s, where unset; the
    /// runtime sets 10 s under exactly-once unless configured).
    pub fn transaction_timeout(&self) -> Duration {
        self.config
            .get("transaction.timeout.ms")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(Duration::from_secs(60), Duration::from_millis)
    }

    /// A new producer (not yet initialized for transactions).
    pub fn create(&self) -> Result<StreamProducer, StreamsError> {
        self.create_knowing(&[])
    }

    /// A new producer as [`create`](Self::create) makes it, whose bootstrap list also names
    /// `brokers` (`host:port`).
    fn create_knowing(&self, brokers: &[String]) -> Result<StreamProducer, StreamsError> {
        let mut config = self.config.clone();
        if let Some(list) = connect::with_brokers(self.config.get("bootstrap.servers"), brokers) {
            config.set("bootstrap.servers", list);
        }
        let producer = config
            .create_with_context(self.tracker.clone())
            .map_err(|e| errors::kafka_err("producer", e))?;
        Authenticated::new(producer, self.tokens.as_ref(), "producer")
    }

    /// Initializes `producer` for transactions (exactly-once), waiting at most `timeout`.
    pub fn init(&self, producer: &StreamProducer, timeout: Duration) -> Result<(), StreamsError> {
        if self.transactional_id().is_none() {
            return Ok(());
        }
        producer
            .init_transactions(timeout)
            .map_err(|e| self.init_error(e))
    }

    /// A new producer, initialized, trying again for up to `limit` while the cluster does
    /// not answer (a broker down, the coordinator moving). Authorization errors and fatal
    /// errors are returned at once. Its bootstrap list also names `brokers`.
    pub fn create_retrying(
        &self,
        limit: Duration,
        brokers: &[String],
    ) -> Result<StreamProducer, StreamsError> {
        let started = Instant::now();
        let producer = self.create_knowing(brokers)?;
        loop {
            match self.init(&producer, INIT_ATTEMPT.min(limit)) {
                Ok(()) => return Ok(producer),
                Err(e) if !e.is_retriable() || started.elapsed() >= limit => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, waited_s = started.elapsed().as_secs(), "initializing a new transactional producer failed; retrying");
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        }
    }

    fn init_error(&self, e: KafkaError) -> StreamsError {
        let app_id = &self.application_id;
        match e.rdkafka_error_code() {
            Some(code @ RDKafkaErrorCode::TransactionalIdAuthorizationFailed) => connect::denied(
                format!(
                    "transactional id `{}`",
                    self.transactional_id().unwrap_or_default()
                ),
                "initializing the transactional producer",
                code,
                &format!("WRITE and DESCRIBE on transactional ids prefixed `{app_id}`"),
            ),
            Some(code @ RDKafkaErrorCode::ClusterAuthorizationFailed) => connect::denied(
                "the cluster".into(),
                "initializing the transactional producer",
                code,
                "IDEMPOTENT_WRITE on the cluster (brokers before Apache Kafka 2.8 ask for it)",
            ),
            _ => {
                let fatal = crate::runtime::client::errors::is_fatal(&e);
                StreamsError::Kafka {
                    message: crate::runtime::client::redact::redact(&format!("init transactions: {e}"))
                        .into_owned(),
                    retriable: !fatal,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe(timeout: Option<&str>) -> ProducerRecipe {
        let mut config = ClientConfig::new();
        if let Some(t) = timeout {
            config.set("transaction.timeout.ms", t);
        }
        ProducerRecipe {
            config,
            tracker: DeliveryTracker::default(),
            application_id: "app".into(),
            tokens: None,
        }
    }

    #[test]
    fn a_commit_waits_no_longer_than_the_transaction_may_stay_open() {
        assert_eq!(
            recipe(Some("10000")).transaction_timeout(),
            Duration::from_secs(10)
        );
        assert_eq!(
            recipe(Some(" 2500 ")).transaction_timeout(),
            Duration::from_millis(2500)
        );
        assert_eq!(recipe(None).transaction_timeout(), Duration::from_secs(60));
    }
}
