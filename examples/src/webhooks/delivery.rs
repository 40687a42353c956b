//! The HTTP delivery of a [`WebHookRequest`]: the [`Handler`] the retry ladder calls for
//! every record of the request topics.
//!
//! Invariants: the request id and hook id headers are the same on every attempt (so a
//! receiver can drop duplicates); only failures that a later attempt could fix are
//! [`HandleError::Retriable`], the others go straight to the dead-letter topic.

use std::time::Duration;

use super::records::WebHookRequest;
use crate::retry::{HandleError, Handler, RetryRecord};

/// Delivers a [`WebHookRequest`] record: POSTs its payload (JSON) to its URL with the
/// headers `x-webhook-id`, `x-webhook-request-id` and `x-webhook-attempt` (1 for the first
/// attempt). A 2xx answer is a success; another status or a connection error is
/// [`HandleError::Retriable`]; an undecodable record or a malformed URL is
/// [`HandleError::Permanent`].
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

impl Handler for HttpDelivery {
    fn handle(&self, record: &RetryRecord) -> Result<(), HandleError> {
        let value = record
            .value
            .as_deref()
            .ok_or_else(|| HandleError::Permanent("null request".into()))?;
        let request: WebHookRequest = serde_json::from_slice(value)
            .map_err(|e| HandleError::Permanent(format!("undecodable request: {e}")))?;
        let body = serde_json::to_vec(&request.payload).map_err(|e| HandleError::Permanent(e.to_string()))?;
        let sent = self
            .agent
            .post(&request.url)
            .header("content-type", "application/json")
            .header("x-webhook-id", &request.webhook_id.to_string())
            .header("x-webhook-request-id", &request.request_id)
            .header("x-webhook-attempt", &(record.attempt() + 1).to_string())
            .send(&body[..]);
        match sent {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(HandleError::Retriable(format!(
                "HTTP {}",
                response.status().as_u16()
            ))),
            Err(e @ (ureq::Error::BadUri(_) | ureq::Error::Http(_))) => {
                Err(HandleError::Permanent(format!("{}: {e}", request.url)))
            }
            Err(e) => Err(HandleError::Retriable(format!("{}: {e}", request.url))),
        }
    }
}
