//! The whole web-hook application in one process: the join (a [`KafkaStreams`]) writing
//! the request topic, and the delivery consumers reading it under the retry ladder.
//!
//! Invariants: the ladder's main topic is the join's output topic (checked at start);
//! closing stops the delivery before the join.

use std::path::PathBuf;
use std::time::Duration;

use streams_core::{KafkaStreams, StreamsConfig};

use super::delivery::HttpDelivery;
use super::join::topology;
use super::topics::WebHookTopics;
use crate::ExampleError;
use crate::retry::{DeliveryStats, RetryConsumers, RetryLadder, RetryOptions};

/// How [`WebHookPipeline`] runs.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// The join's `application.id`.
    pub application_id: String,
    /// The join's `state.dir` (its RocksDB store lives there).
    pub state_dir: PathBuf,
    /// The join's topics.
    pub topics: WebHookTopics,
    /// The delivery's retry ladder (its main topic must be `topics.requests`).
    pub ladder: RetryLadder,
    /// The delivery consumers' settings.
    pub delivery: RetryOptions,
    /// The longest one HTTP request may take.
    pub http_timeout: Duration,
    /// Extra properties of the join's [`StreamsConfig`].
    pub streams_properties: Vec<(String, String)>,
}

impl PipelineConfig {
    /// The defaults for `application_id`: the standard topic names, the production ladder
    /// (5m, 30m, 1h), delivery groups `<application_id>-delivery.<topic>`, 10 s HTTP timeout.
    pub fn new(application_id: impl Into<String>, state_dir: impl Into<PathBuf>) -> Self {
        let application_id = application_id.into();
        let topics = WebHookTopics::default();
        Self {
            ladder: RetryLadder::production(topics.requests.clone()),
            delivery: RetryOptions::new(format!("{application_id}-delivery")),
            application_id,
            state_dir: state_dir.into(),
            topics,
            http_timeout: Duration::from_secs(10),
            streams_properties: Vec::new(),
        }
    }

    /// Uses `topics`, with a ladder of the same delays renamed after `topics.requests`.
    pub fn with_topics(mut self, topics: WebHookTopics) -> Self {
        let delays: Vec<Duration> = self.ladder.steps().iter().map(|s| s.delay).collect();
        self.ladder = RetryLadder::new(topics.requests.clone(), &delays);
        self.topics = topics;
        self
    }

    /// Uses a ladder with these delays.
    pub fn with_delays(mut self, delays: &[Duration]) -> Self {
        self.ladder = RetryLadder::new(self.topics.requests.clone(), delays);
        self
    }

    /// Every topic the pipeline reads or writes.
    pub fn all_topics(&self) -> Vec<String> {
        let t = &self.topics;
        [t.web_hooks.clone(), t.event_logs.clone(), t.requests.clone()]
            .into_iter()
            .chain(self.ladder.topics())
            .collect()
    }
}

/// The whole web-hook application: the join (a [`KafkaStreams`]) and the delivery
/// consumers ([`RetryConsumers`] with [`HttpDelivery`]).
pub struct WebHookPipeline {
    streams: KafkaStreams,
    delivery: RetryConsumers,
}

impl WebHookPipeline {
    /// Starts the join and the delivery on `bootstrap`. The topics must exist
    /// ([`crate::admin::create_topics`] with [`PipelineConfig::all_topics`]).
    pub fn start(bootstrap: &str, config: PipelineConfig) -> Result<Self, ExampleError> {
        if config.ladder.source() != config.topics.requests {
            return Err(ExampleError::Other(format!(
                "the ladder reads {} but the join writes {}",
                config.ladder.source(),
                config.topics.requests
            )));
        }
        let mut properties = vec![
            ("application.id".to_owned(), config.application_id.clone()),
            ("bootstrap.servers".to_owned(), bootstrap.to_owned()),
            ("state.dir".to_owned(), config.state_dir.display().to_string()),
            ("commit.interval.ms".to_owned(), "1000".to_owned()),
        ];
        properties.extend(config.streams_properties.iter().cloned());
        let streams_config = StreamsConfig::from_properties(properties)?;
        let mut streams = KafkaStreams::new(topology(&config.topics)?, streams_config)?;
        streams.start()?;
        let delivery = match RetryConsumers::start(
            bootstrap,
            config.ladder.clone(),
            HttpDelivery::new(config.http_timeout),
            config.delivery.clone(),
        ) {
            Ok(d) => d,
            Err(e) => {
                streams.close(Duration::from_secs(30));
                return Err(e);
            }
        };
        Ok(Self { streams, delivery })
    }

    /// The join.
    pub fn streams(&self) -> &KafkaStreams {
        &self.streams
    }

    /// The delivery consumers.
    pub fn delivery(&self) -> &RetryConsumers {
        &self.delivery
    }

    /// What the delivery did so far.
    pub fn stats(&self) -> DeliveryStats {
        self.delivery.stats()
    }

    /// Stops the delivery, then the join; the first error of a delivery consumer, if any.
    pub fn close(mut self, timeout: Duration) -> Result<(), ExampleError> {
        let delivered = self.delivery.close(timeout);
        if !self.streams.close(timeout) {
            tracing::warn!("the join did not stop within {timeout:?}");
        }
        delivered
    }
}

impl std::fmt::Debug for WebHookPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebHookPipeline")
            .field("state", &self.streams.state())
            .field("delivery", &self.delivery)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_topics_rename_the_ladder() {
        let c = PipelineConfig::new("app", "/tmp/x")
            .with_topics(WebHookTopics::with_suffix("-t"))
            .with_delays(&[Duration::from_millis(5)]);
        assert_eq!(c.ladder.source(), "web_hook_requests-t");
        assert_eq!(
            c.all_topics(),
            vec![
                "web_hooks-t",
                "event_logs-t",
                "web_hook_requests-t",
                "web_hook_requests-t-retry-1",
                "web_hook_requests-t-dlq",
            ]
        );
        let production = PipelineConfig::new("app", "/tmp/x").with_topics(WebHookTopics::with_suffix("-u"));
        assert_eq!(production.ladder.steps().len(), 3);
        assert_eq!(production.ladder.steps()[0].topic, "web_hook_requests-u-retry-1");
    }
}
