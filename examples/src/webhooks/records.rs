//! The JSON records of the web-hook application: the hooks users register, their events,
//! and the join's output, one delivery to make.
//!
//! Invariant: these are the wire formats of the three topics (serde's default JSON field
//! names); renaming a field changes what is on the topics.

use serde::{Deserialize, Serialize};

/// A web hook: call `url` when user `user_id` produces an event of type `event_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebHook {
    /// The hook's id (unique per user).
    pub webhook_id: u64,
    /// Its owner.
    pub user_id: u64,
    /// The event type it fires on.
    pub event_id: u64,
    /// Where the event's payload is POSTed.
    pub url: String,
}

/// An event of a user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventLog {
    /// The user.
    pub user_id: u64,
    /// The event type.
    pub event_id: u64,
    /// The event's data, POSTed to each matching hook.
    pub payload: serde_json::Value,
}

/// One delivery to make: an event joined with one matching hook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebHookRequest {
    /// Identifies the delivery (`<topic>/<partition>/<offset>/<webhook_id>` of the event):
    /// the same on every attempt and on a replay after a crash, so receivers can drop
    /// duplicates. Sent as the `x-webhook-request-id` header.
    pub request_id: String,
    /// The user.
    pub user_id: u64,
    /// The hook.
    pub webhook_id: u64,
    /// The event type.
    pub event_id: u64,
    /// The hook's URL.
    pub url: String,
    /// The event's payload, the request body.
    pub payload: serde_json::Value,
}
