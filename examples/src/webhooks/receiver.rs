//! A tiny local HTTP server that receives web-hook deliveries, for the demo and the tests:
//! hyper's HTTP/1 server on `127.0.0.1:0`, on a current-thread tokio runtime of its own
//! thread (one task per connection), answering every request with an empty body and
//! `Connection: close`. It records every request and answers with the status a [`Policy`]
//! chooses, so some URLs can fail on purpose.
//!
//! Invariants: a request is recorded (with the status it gets) before its answer is sent,
//! so a client that saw the answer finds the request in [`Receiver::requests`]; sequence
//! numbers are given under one lock, in arrival order; dropping the [`Receiver`] stops the
//! runtime and closes every connection. [`Receiver::set_delay`] makes it a slow endpoint:
//! each answer then waits, concurrently with the others.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::http::{ServerThread, serve_connections};

/// How long a client may take to send a request's head, and then its body.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Chooses the status of a request from its path and its sequence number among the
/// requests to that path (0 for the first).
pub type Policy = Arc<dyn Fn(&str, u64) -> u16 + Send + Sync>;

/// A policy that answers 200 to everything.
pub fn always_ok() -> Policy {
    Arc::new(|_, _| 200)
}

/// A request the receiver got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedRequest {
    /// Its sequence number among all requests (from 0).
    pub seq: u64,
    /// Its sequence number among the requests to its path (from 0).
    pub path_seq: u64,
    /// The method, e.g. `POST`.
    pub method: String,
    /// The path (with the query, if any), e.g. `/hooks/crm`.
    pub path: String,
    /// The headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// The status answered.
    pub status: u16,
}

impl ReceivedRequest {
    /// The first header named `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the answer was a success (2xx).
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

#[derive(Default)]
struct Log {
    requests: Vec<ReceivedRequest>,
    per_path: HashMap<String, u64>,
}

struct Shared {
    log: Mutex<Log>,
    policy: Mutex<Policy>,
    /// How long each answer waits after the request was recorded (a slow endpoint).
    delay: Mutex<Duration>,
}

impl Shared {
    /// Numbers the request, asks the policy for its status and records it.
    fn record(&self, method: String, path: String, headers: Vec<(String, String)>, body: Vec<u8>) -> u16 {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = log.requests.len() as u64;
        let counter = log.per_path.entry(path.clone()).or_insert(0);
        let path_seq = *counter;
        *counter += 1;
        let policy = self.policy.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let status = policy(&path, path_seq);
        log.requests.push(ReceivedRequest {
            seq,
            path_seq,
            method,
            path,
            headers,
            body,
            status,
        });
        status
    }
}

/// The running receiver; stops when dropped.
pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    _thread: ServerThread,
}

impl Receiver {
    /// Starts on `127.0.0.1` on a free port, answering as `policy` says.
    pub fn start(policy: Policy) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            log: Mutex::new(Log::default()),
            policy: Mutex::new(policy),
            delay: Mutex::new(Duration::ZERO),
        });
        let serve_shared = shared.clone();
        let _thread = ServerThread::spawn("webhook-receiver", move |stopped| {
            runtime.block_on(serve(listener, serve_shared, stopped))
        })?;
        Ok(Self {
            addr,
            shared,
            _thread,
        })
    }

    /// The URL of `path` on this receiver (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers from now on as `policy` says (e.g. to "recover" a failing endpoint).
    pub fn set_policy(&self, policy: Policy) {
        *self.shared.policy.lock().unwrap_or_else(PoisonError::into_inner) = policy;
    }

    /// Answers every request from now on `delay` after receiving it (a slow endpoint;
    /// requests are still recorded on arrival).
    pub fn set_delay(&self, delay: Duration) {
        *self.shared.delay.lock().unwrap_or_else(PoisonError::into_inner) = delay;
    }

    /// How many requests were received so far.
    pub fn count(&self) -> usize {
        self.shared
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .requests
            .len()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .requests
            .clone()
    }

    /// Waits until `done(requests)` holds or `timeout` passes; returns whether it held.
    pub fn wait_for(&self, timeout: Duration, done: impl Fn(&[ReceivedRequest]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(
                &self
                    .shared
                    .log
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .requests,
            ) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Serves until `stop` fires (or its sender is dropped).
async fn serve(listener: TcpListener, shared: Arc<Shared>, stop: oneshot::Receiver<()>) {
    let answer = move |req| answer(req, shared.clone());
    serve_connections(listener, stop, "receiver", READ_TIMEOUT, answer).await;
}

/// Reads one request's body, records the request and answers with the policy's status.
async fn answer(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Empty<Bytes>>, ReadError> {
    let (head, body) = req.into_parts();
    let body = match tokio::time::timeout(READ_TIMEOUT, body.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes().to_vec(),
        Ok(Err(e)) => return Err(ReadError::Body(e)),
        Err(_) => return Err(ReadError::Timeout),
    };
    let path = head
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    let headers = head
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).trim().to_owned(),
            )
        })
        .collect();
    let status = shared.record(head.method.as_str().to_owned(), path, headers, body);
    let delay = *shared.delay.lock().unwrap_or_else(PoisonError::into_inner);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut response = Response::new(Empty::new());
    // A status the policy made up that HTTP cannot carry is answered as 500 (and recorded
    // as the policy chose it).
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    Ok(response)
}

/// Why a request could not be read; the connection is closed without an answer.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error("reading the body failed: {0}")]
    Body(hyper::Error),
    #[error("the body took longer than {READ_TIMEOUT:?}")]
    Timeout,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_requests_and_answers_as_the_policy_says() {
        let receiver = Receiver::start(Arc::new(
            |path: &str, n| {
                if path == "/fail" && n == 0 { 503 } else { 200 }
            },
        ))
        .unwrap();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        let post = |path: &str, body: &str| {
            agent
                .post(&receiver.url(path))
                .header("x-webhook-id", "7")
                .header("content-type", "application/json")
                .send(body)
                .unwrap()
                .status()
                .as_u16()
        };
        assert_eq!(post("/fail", r#"{"a":1}"#), 503);
        assert_eq!(post("/fail", r#"{"a":2}"#), 200);
        assert_eq!(post("/ok?x=1", "[]"), 200);
        let got = receiver.requests();
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].seq, got[0].path_seq, got[0].status), (0, 0, 503));
        assert!(!got[0].succeeded());
        assert_eq!((got[1].seq, got[1].path_seq), (1, 1));
        assert!(got[1].succeeded());
        assert_eq!(got[1].method, "POST");
        assert_eq!(got[1].header("x-webhook-id"), Some("7"));
        assert_eq!(got[1].json(), Some(serde_json::json!({"a": 2})));
        assert_eq!(got[2].path, "/ok?x=1");
        receiver.set_policy(Arc::new(|_, _| 500));
        assert_eq!(post("/fail", "{}"), 500);
        assert!(receiver.wait_for(Duration::from_secs(1), |r| r.len() == 4));
        let addr = receiver.addr();
        drop(receiver);
        assert!(std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
    }
}
