//! The HTTP delivery of a [`WebHookRequest`]: the [`RetryHandler`] of the delivery
//! application's retry ladder, and that application's topology ([`delivery_topology`]).
//!
//! Invariants: the request id and hook id headers are the same on every attempt (so a
//! receiver can drop duplicates); only failures that a later attempt could fix are
//! [`RetryError::Retriable`], the others go straight to the dead-letter topic; a request
//! record that does not decode (a null or malformed value) never reaches the handler: the
//! ladder dead-letters it as fatal.

use std::time::Duration;

use streams_core::serdes::{JsonSerde, StringSerde};
use streams_core::{Topology, TopologyError};
use streams_dsl::retry::{Attempt, RetryError, RetryHandler, RetryLadder, RetryOptions, retry_topology};

use super::records::WebHookRequest;

/// Delivers a [`WebHookRequest`]: POSTs its payload (JSON) to its URL with the headers
/// `x-webhook-id`, `x-webhook-request-id` and `x-webhook-attempt` (1 for the first
/// attempt, and for the first after a replay). A 2xx answer is a success; another status
/// or a connection error is [`RetryError::Retriable`]; a malformed URL is
/// [`RetryError::Fatal`].
#[derive(Debug, Clone)]
pub struct HttpDelivery {
    agent: ureq::Agent,
}

impl HttpDelivery {
    /// A client whose requests each take at most `timeout`.
    pub fn new(timeout: Duration) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build();
        Self {
            agent: ureq::Agent::new_with_config(config),
        }
    }
}

impl RetryHandler<String, WebHookRequest> for HttpDelivery {
    fn handle(&self, attempt: &Attempt<'_, String, WebHookRequest>) -> Result<(), RetryError> {
        let request = attempt.value();
        let body = serde_json::to_vec(&request.payload).map_err(RetryError::fatal)?;
        let sent = self
            .agent
            .post(&request.url)
            .header("content-type", "application/json")
            .header("x-webhook-id", &request.webhook_id.to_string())
            .header("x-webhook-request-id", &request.request_id)
            .header("x-webhook-attempt", &attempt.number().to_string())
            .send(&body[..]);
        match sent {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(RetryError::Retriable(format!(
                "HTTP {}",
                response.status().as_u16()
            ))),
            Err(e @ (ureq::Error::BadUri(_) | ureq::Error::Http(_))) => {
                Err(RetryError::Fatal(format!("{}: {e}", request.url)))
            }
            Err(e) => Err(RetryError::Retriable(format!("{}: {e}", request.url))),
        }
    }
}

/// The delivery application's topology: `ladder` (whose main topic is the join's request
/// topic) delivering with [`HttpDelivery`] (requests time out after `http_timeout`).
pub fn delivery_topology(
    ladder: &RetryLadder,
    http_timeout: Duration,
    options: &RetryOptions,
) -> Result<Topology, TopologyError> {
    retry_topology(
        ladder,
        StringSerde,
        JsonSerde::<WebHookRequest>::new(),
        HttpDelivery::new(http_timeout),
        options,
    )
}
