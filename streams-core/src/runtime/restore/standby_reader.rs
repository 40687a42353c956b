//! The consumer standby tasks read their changelogs with (`tailing.rs`), made the first time
//! a standby steps: an instance without standbys has none.
//!
//! It is not the restore consumer. A restoration reads up to an end it knows and stops, so
//! the restore consumer asks the broker to hold a fetch only briefly (see
//! `client/defaults.rs`); a standby waits at its changelogs' ends nearly all the time and,
//! with that short wait, would fetch twenty times a second from every broker. Its own
//! consumer also keeps the standbys' partitions assigned while tasks restore.

use rdkafka::ClientConfig;

use crate::config::OAuthBearerTokenProvider;
use crate::model::error::StreamsError;
use crate::runtime::topics::resets::{AssignedConsumer, assigned_consumer};

/// The standbys' consumer: its settings until first used, then the client.
pub(crate) struct StandbyReader {
    config: ClientConfig,
    name: String,
    application_id: String,
    /// The application's OAUTHBEARER token provider, if any.
    tokens: Option<OAuthBearerTokenProvider>,
    consumer: Option<AssignedConsumer>,
}

impl StandbyReader {
    /// A consumer to be made with `config` as client `name` of application `application_id`,
    /// given its OAUTHBEARER tokens by `tokens` (when the application has a provider).
    pub fn new(
        config: ClientConfig,
        name: String,
        application_id: String,
        tokens: Option<OAuthBearerTokenProvider>,
    ) -> Self {
        Self {
            config,
            name,
            application_id,
            tokens,
            consumer: None,
        }
    }

    /// The consumer, made now if it was not yet.
    pub fn get(&mut self) -> Result<&AssignedConsumer, StreamsError> {
        let consumer = match self.consumer.take() {
            Some(c) => c,
            None => {
                let c = assigned_consumer(
                    &self.config,
                    &self.name,
                    &self.application_id,
                    self.tokens.as_ref(),
                )?;
                tracing::debug!(client = %self.name, "standby consumer created");
                c
            }
        };
        Ok(self.consumer.insert(consumer))
    }

    /// A reader of tests that restore only: never made.
    #[cfg(test)]
    pub fn unused() -> Self {
        Self::new(ClientConfig::new(), "standby".into(), String::new(), None)
    }

    /// The consumer, if it was made.
    pub fn made(&self) -> Option<&AssignedConsumer> {
        self.consumer.as_ref()
    }
}
