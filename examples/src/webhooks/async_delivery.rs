//! Web-hook delivery through an async processor: many users' deliveries in flight at once,
//! each user's in order.
//!
//! [`async_delivery_topology`]: the request topic -> `ByUser` (re-keys each request to its
//! user, so that the async node orders by user) -> `Deliver` ([`AsyncHttpDelivery`] in an
//! [`AsyncNode`]) -> the dead-letter topic, which receives the requests whose delivery
//! failed after every retry.
//!
//! Invariants:
//! - A user's deliveries never overlap and go out in the order of the request topic's
//!   partition (the join writes a user's requests to one partition, see
//!   [`super::user_partition`]); different users' deliveries run concurrently, up to
//!   [`AsyncOptions::max_in_flight`] per task.
//! - A retry waits its delay inside the user's future: it holds back that user's later
//!   deliveries (their order is kept), never another user's.
//! - A request's offset is committed only once its delivery finished (delivered or
//!   dead-lettered), so a crash re-delivers what was in flight: at-least-once, and the
//!   `x-webhook-request-id` header lets a receiver drop the duplicates.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use streams_core::processor::{AsyncNode, AsyncOptions, AsyncProcessor};
use streams_core::serdes::{JsonSerde, StringSerde};
use streams_core::{
    ProcessResult, Processor, ProcessorContext, ProcessorError, Record, Topology, TopologyError,
};

use super::records::WebHookRequest;
use super::topics::user_key;

/// Delivers requests over HTTP/1 with hyper's pooled client (plain `http://` URLs):
/// POSTs the payload with the headers `x-webhook-id`, `x-webhook-request-id` and
/// `x-webhook-attempt`; a 2xx answer is a success, anything else is retried after each of
/// `retries` in turn, then the request is forwarded (to the dead-letter topic) with the
/// header `x-delivery-error`.
pub struct AsyncHttpDelivery {
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    retries: Vec<Duration>,
}

impl AsyncHttpDelivery {
    /// A client whose attempts each take at most `timeout`, retrying after each of
    /// `retries`.
    pub fn new(timeout: Duration, retries: &[Duration]) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Self {
            client: Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(1024)
                .build(connector),
            timeout,
            retries: retries.to_vec(),
        }
    }

    /// One attempt: `Ok` on a 2xx answer, else what went wrong.
    async fn attempt(&self, request: &WebHookRequest, body: &Bytes, number: usize) -> Result<(), String> {
        let http = hyper::Request::post(&request.url)
            .header("content-type", "application/json")
            .header("x-webhook-id", request.webhook_id.to_string())
            .header("x-webhook-request-id", &request.request_id)
            .header("x-webhook-attempt", number.to_string())
            .body(Full::new(body.clone()))
            .map_err(|e| format!("{}: {e}", request.url))?;
        let sent = tokio::time::timeout(self.timeout, async {
            let response = self.client.request(http).await.map_err(|e| e.to_string())?;
            let status = response.status();
            // Read the answer to its end, so the connection can serve the next request.
            response.into_body().collect().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(status)
        })
        .await;
        match sent {
            Ok(Ok(status)) if status.is_success() => Ok(()),
            Ok(Ok(status)) => Err(format!("HTTP {}", status.as_u16())),
            Ok(Err(e)) => Err(format!("{}: {e}", request.url)),
            Err(_) => Err(format!("{}: no answer within {:?}", request.url, self.timeout)),
        }
    }
}

#[async_trait::async_trait]
impl AsyncProcessor<String, WebHookRequest, String, WebHookRequest> for AsyncHttpDelivery {
    async fn process(
        &self,
        r: Record<String, WebHookRequest>,
    ) -> Result<Vec<Record<String, WebHookRequest>>, ProcessorError> {
        let body = Bytes::from(
            serde_json::to_vec(&r.value.payload).map_err(|e| ProcessorError::from(e.to_string()))?,
        );
        let mut error = String::new();
        for number in 1..=self.retries.len() + 1 {
            match self.attempt(&r.value, &body, number).await {
                Ok(()) => return Ok(Vec::new()),
                Err(e) => error = e,
            }
            if let Some(delay) = self.retries.get(number - 1) {
                tokio::time::sleep(*delay).await;
            }
        }
        let mut dead = r;
        dead.headers.add("x-delivery-error", error);
        Ok(vec![dead])
    }
}

/// Re-keys a request to its user (`%020d(user_id)`), the key the async node orders by.
struct ByUser;

impl Processor<String, WebHookRequest, String, WebHookRequest> for ByUser {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, WebHookRequest>,
        r: Record<String, WebHookRequest>,
    ) -> ProcessResult {
        let user = user_key(r.value.user_id);
        ctx.forward(r.with_key(user))
    }
}

/// The async delivery application's topology: `requests` -> re-key by user -> deliver
/// with `delivery`, at most `options.max_in_flight` per task -> `dead_letters`.
pub fn async_delivery_topology(
    requests: &str,
    dead_letters: &str,
    delivery: Arc<AsyncHttpDelivery>,
    options: AsyncOptions,
) -> Result<Topology, TopologyError> {
    let json = JsonSerde::<WebHookRequest>::new();
    let mut b = Topology::builder();
    b.add_source("Source-WebHookRequest", [requests], StringSerde, json.clone())
        .add_processor("ByUser", || ByUser, ["Source-WebHookRequest"])
        .add_processor("Deliver", AsyncNode::supplier(delivery, options), ["ByUser"])
        .add_sink("Sink-DeadLetters", dead_letters, StringSerde, json, ["Deliver"]);
    b.build()
}

/// Writes `per_user` requests for each of `users` users to `topic` (created with any
/// partition count), each user's to [`super::user_partition`] in sequence order, with the
/// JSON body `{"user": u, "seq": s}` and the URL `url(user)`. Returns how many it wrote.
pub fn load_requests(
    bootstrap: &str,
    topic: &str,
    users: u64,
    per_user: u64,
    url: impl Fn(u64) -> String,
) -> Result<u64, crate::ExampleError> {
    let forwarder = crate::retry::Forwarder::new(bootstrap, &[])?;
    let partitions = forwarder.partitions(topic, Duration::from_secs(30))?;
    let mut n = 0;
    for seq in 0..per_user {
        for user in 0..users {
            let request = WebHookRequest {
                request_id: format!("{user}/{seq}"),
                user_id: user,
                webhook_id: seq,
                event_id: 0,
                url: url(user),
                payload: serde_json::json!({"user": user, "seq": seq}),
            };
            forwarder.send_to(
                topic,
                Some(super::user_partition(user, partitions)),
                Some(super::hook_key(user, seq).as_bytes()),
                Some(&serde_json::to_vec(&request)?),
                rdkafka::message::OwnedHeaders::new(),
            )?;
            n += 1;
        }
    }
    forwarder.flush(Duration::from_secs(120))?;
    Ok(n)
}

/// What a receiver saw of [`load_requests`]' deliveries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Distinct requests received.
    pub distinct: usize,
    /// Requests received more than once (counted once each).
    pub duplicated: usize,
    /// Users whose requests first arrived out of sequence order.
    pub out_of_order_users: usize,
}

/// Checks the bodies of `received` (`{"user": u, "seq": s}`): per user, the first arrival
/// of each request must come in sequence order.
pub fn delivery_report(received: &[super::receiver::ReceivedRequest]) -> DeliveryReport {
    let mut seen = std::collections::HashSet::new();
    let mut last: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    let mut out_of_order = std::collections::HashSet::new();
    let mut duplicated = std::collections::HashSet::new();
    for r in received {
        let Some(body) = r.json() else { continue };
        let (Some(user), Some(seq)) = (body["user"].as_u64(), body["seq"].as_u64()) else {
            continue;
        };
        if !seen.insert((user, seq)) {
            duplicated.insert((user, seq));
            continue;
        }
        if last.get(&user).is_some_and(|l| *l > seq) {
            out_of_order.insert(user);
        }
        last.insert(user, seq);
    }
    DeliveryReport {
        distinct: seen.len(),
        duplicated: duplicated.len(),
        out_of_order_users: out_of_order.len(),
    }
}
