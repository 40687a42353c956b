//! The whole web-hook application in one process, as two streams applications: the join
//! writing the request topic, and the delivery reading it under the retry ladder
//! ([`delivery_topology`]).
//!
//! Why two applications and not one topology: the ladder's handler (an HTTP call of up to
//! `http_timeout`) runs on its stream thread, and would hold up every task on that thread —
//! the join's too, had they shared the application. As its own application (id
//! `<application_id>-delivery`, its own consumer group, threads and changelogs) the
//! delivery cannot slow the join, takes its own thread count (`num.stream.threads` in
//! [`PipelineConfig::delivery_properties`]) and its own metrics; the two meet only through
//! the request topic, as separate services would.
//!
//! Invariants: the ladder's main topic is the join's output topic (checked at start);
//! both applications share `state.dir` (each keeps its state under its own id); closing
//! stops the delivery before the join.

use std::path::PathBuf;
use std::time::Duration;

use streams_core::{KafkaStreams, State, StreamsConfig};
use streams_dsl::retry::{OutcomeEvent, RetryLadder, RetryListener, RetryOptions};

use super::delivery::delivery_topology;
use super::join::topology;
use super::topics::WebHookTopics;
use crate::ExampleError;
use crate::retry::{DeliveryCounters, DeliveryStats, production_ladder};

/// The delivery's `max.poll.records`: a stream thread polls again only after handling
/// its whole batch, so a batch whose endpoints all time out holds it for
/// `max.poll.records × http_timeout` (plus a punctuation); with 20 × 10 s that stays well
/// under `max.poll.interval.ms` (5 minutes), after which the group would evict the thread.
pub const DELIVERY_MAX_POLL_RECORDS: usize = 20;

/// How [`WebHookPipeline`] runs.
#[derive(Clone)]
pub struct PipelineConfig {
    /// The join's `application.id`; the delivery's is `<application_id>-delivery`.
    pub application_id: String,
    /// The `state.dir` of both applications (the join's RocksDB store, the ladder's
    /// stores of waiting requests).
    pub state_dir: PathBuf,
    /// The join's topics.
    pub topics: WebHookTopics,
    /// The delivery's retry ladder (its main topic must be `topics.requests`).
    pub ladder: RetryLadder,
    /// The ladder's settings (punctuation interval and bounds); the pipeline adds its own
    /// listener, which counts outcomes ([`WebHookPipeline::stats`]) and then calls
    /// [`listener`](Self::listener).
    pub retry: RetryOptions,
    /// Called after every step of the ladder (e.g. to print it).
    pub listener: Option<RetryListener>,
    /// The longest one HTTP request may take.
    pub http_timeout: Duration,
    /// Extra properties of both applications' [`StreamsConfig`].
    pub streams_properties: Vec<(String, String)>,
    /// Extra properties of the join only (after `streams_properties`).
    pub join_properties: Vec<(String, String)>,
    /// Extra properties of the delivery only (after `streams_properties`).
    pub delivery_properties: Vec<(String, String)>,
}

impl PipelineConfig {
    /// The defaults for `application_id`: the standard topic names, the production ladder
    /// (5m, 30m, 1h) punctuating every second, 10 s HTTP timeout, and for the delivery
    /// [`DELIVERY_MAX_POLL_RECORDS`] records per poll.
    pub fn new(application_id: impl Into<String>, state_dir: impl Into<PathBuf>) -> Self {
        let topics = WebHookTopics::default();
        Self {
            ladder: production_ladder(topics.requests.clone()),
            retry: RetryOptions::new(),
            listener: None,
            application_id: application_id.into(),
            state_dir: state_dir.into(),
            topics,
            http_timeout: Duration::from_secs(10),
            streams_properties: Vec::new(),
            join_properties: Vec::new(),
            delivery_properties: vec![(
                "max.poll.records".to_owned(),
                DELIVERY_MAX_POLL_RECORDS.to_string(),
            )],
        }
    }

    /// Uses `topics`, with a ladder of the same delays renamed after `topics.requests`.
    pub fn with_topics(mut self, topics: WebHookTopics) -> Self {
        self.ladder = RetryLadder::new(topics.requests.clone(), &self.ladder.delays());
        self.topics = topics;
        self
    }

    /// Uses a ladder with these delays.
    pub fn with_delays(mut self, delays: &[Duration]) -> Self {
        self.ladder = RetryLadder::new(self.topics.requests.clone(), delays);
        self
    }

    /// Calls `listener` after every step of the ladder.
    pub fn with_listener(mut self, listener: impl Fn(&OutcomeEvent<'_>) + Send + Sync + 'static) -> Self {
        self.listener = Some(std::sync::Arc::new(listener));
        self
    }

    /// The delivery application's id.
    pub fn delivery_application_id(&self) -> String {
        format!("{}-delivery", self.application_id)
    }

    /// Every topic the pipeline reads or writes (the applications create their changelogs
    /// themselves).
    pub fn all_topics(&self) -> Vec<String> {
        let t = &self.topics;
        [t.web_hooks.clone(), t.event_logs.clone(), t.requests.clone()]
            .into_iter()
            .chain(self.ladder.topics())
            .collect()
    }

    fn streams_config(
        &self,
        bootstrap: &str,
        application_id: &str,
        extra: &[(String, String)],
    ) -> Result<StreamsConfig, ExampleError> {
        let mut properties = vec![
            ("application.id".to_owned(), application_id.to_owned()),
            ("bootstrap.servers".to_owned(), bootstrap.to_owned()),
            ("state.dir".to_owned(), self.state_dir.display().to_string()),
            ("commit.interval.ms".to_owned(), "1000".to_owned()),
        ];
        properties.extend(self.streams_properties.iter().cloned());
        properties.extend(extra.iter().cloned());
        Ok(StreamsConfig::from_properties(properties)?)
    }
}

impl std::fmt::Debug for PipelineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineConfig")
            .field("application_id", &self.application_id)
            .field("state_dir", &self.state_dir)
            .field("topics", &self.topics)
            .field("ladder", &self.ladder)
            .field("retry", &self.retry)
            .field("listener", &self.listener.is_some())
            .field("http_timeout", &self.http_timeout)
            .field("streams_properties", &self.streams_properties)
            .field("join_properties", &self.join_properties)
            .field("delivery_properties", &self.delivery_properties)
            .finish()
    }
}

/// The whole web-hook application: the join and the delivery, two [`KafkaStreams`].
pub struct WebHookPipeline {
    join: KafkaStreams,
    delivery: KafkaStreams,
    counters: DeliveryCounters,
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
        let counters = DeliveryCounters::new(&config.ladder);
        let options = {
            let counters = counters.clone();
            let listener = config.listener.clone();
            config.retry.clone().listener(move |e| {
                counters.record(e);
                if let Some(l) = &listener {
                    l(e);
                }
            })
        };
        let join_config =
            config.streams_config(bootstrap, &config.application_id, &config.join_properties)?;
        let delivery_config = config.streams_config(
            bootstrap,
            &config.delivery_application_id(),
            &config.delivery_properties,
        )?;
        let mut join = KafkaStreams::new(topology(&config.topics)?, join_config)?;
        let mut delivery = KafkaStreams::new(
            delivery_topology(&config.ladder, config.http_timeout, &options)?,
            delivery_config,
        )?;
        join.start()?;
        if let Err(e) = delivery.start() {
            join.close(Duration::from_secs(30));
            return Err(e.into());
        }
        Ok(Self {
            join,
            delivery,
            counters,
        })
    }

    /// The join.
    pub fn streams(&self) -> &KafkaStreams {
        &self.join
    }

    /// The delivery.
    pub fn delivery(&self) -> &KafkaStreams {
        &self.delivery
    }

    /// Whether both applications are running (or rebalancing).
    pub fn is_running(&self) -> bool {
        [&self.join, &self.delivery]
            .iter()
            .all(|s| matches!(s.state(), State::Running | State::Rebalancing | State::Created))
    }

    /// What the delivery did so far (each step counted as often as the runtime ran it).
    pub fn stats(&self) -> DeliveryStats {
        self.counters.stats()
    }

    /// Waits until `done(stats)` holds or `timeout` passes; returns the last stats and
    /// whether it held. Stops early (false) when an application stopped.
    pub fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&DeliveryStats) -> bool,
    ) -> (DeliveryStats, bool) {
        self.counters.wait_for(timeout, || self.is_running(), done)
    }

    /// Stops the delivery, then the join, each within `timeout`; an error when one of them
    /// had failed or did not stop in time.
    pub fn close(mut self, timeout: Duration) -> Result<(), ExampleError> {
        let mut problems = Vec::new();
        for (name, app) in [("delivery", &mut self.delivery), ("join", &mut self.join)] {
            if app.state() == State::Error {
                problems.push(format!("the {name} failed"));
            }
            if !app.close(timeout) {
                problems.push(format!("the {name} did not stop within {timeout:?}"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ExampleError::Other(problems.join("; ")))
        }
    }
}

impl std::fmt::Debug for WebHookPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebHookPipeline")
            .field("join", &self.join.state())
            .field("delivery", &self.delivery.state())
            .field("stats", &self.stats())
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
        assert_eq!(c.delivery_application_id(), "app-delivery");
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
