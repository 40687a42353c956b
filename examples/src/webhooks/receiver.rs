//! A tiny local HTTP server that receives web-hook deliveries, for the demo and the tests:
//! std `TcpListener` on `127.0.0.1:0`, one thread per connection, HTTP/1.1 with
//! `Content-Length` bodies, `Connection: close`. It records every request and answers
//! with the status a [`Policy`] chooses, so some URLs can fail on purpose.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    /// The path, e.g. `/hooks/crm`.
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
    stop: AtomicBool,
}

/// The running receiver; stops when dropped.
pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Starts on `127.0.0.1` on a free port, answering as `policy` says.
    pub fn start(policy: Policy) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            log: Mutex::new(Log::default()),
            policy: Mutex::new(policy),
            stop: AtomicBool::new(false),
        });
        let accept_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("webhook-receiver".into())
            .spawn(move || {
                while !accept_shared.stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let shared = accept_shared.clone();
                            let _ = std::thread::Builder::new()
                                .name("webhook-receiver-conn".into())
                                .spawn(move || serve(stream, &shared));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "receiver accept failed");
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
            })?;
        Ok(Self {
            addr,
            shared,
            thread: Some(thread),
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

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
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

/// Reads one request, records it and answers it.
fn serve(stream: TcpStream, shared: &Shared) {
    if let Err(e) = serve_inner(stream, shared) {
        tracing::debug!(error = %e, "receiver connection failed");
    }
}

fn serve_inner(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(());
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or("/").to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let status = {
        let mut log = shared.log.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = log.requests.len() as u64;
        let counter = log.per_path.entry(path.clone()).or_insert(0);
        let path_seq = *counter;
        *counter += 1;
        let policy = shared
            .policy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
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
    };
    let reason = if (200..300).contains(&status) {
        "OK"
    } else {
        "Error"
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    stream.flush()
}
