//! The web-hook store served over HTTP from any instance of the join:
//! `GET /users/{id}/hooks[?after=<key>&limit=<n>]` answers a user's hooks, read from the
//! instance that hosts the user's partition.
//!
//! The server is hyper's HTTP/1 server on a current-thread tokio runtime of its own thread
//! (one task per connection, `Connection: close`), as in [`super::receiver`]. It is bound
//! first ([`QueryListener::bind`]), so that the join's `application.server` can name the
//! bound address before the join is built, and serves once it is given the join's
//! [`Queries`] ([`QueryListener::serve`]); until then connections wait in the listen queue.
//!
//! - **Routing.** [`Queries::query_metadata_for_key`] over the user's key
//!   ([`user_key`], the key the hooks are partitioned by) names the user's partition and
//!   the instance hosting it. Here: the page is read from that partition's task only
//!   ([`ReadOnlyKeyValueStore::for_partition`]), a prefix scan over `%020d(user_id):`.
//!   Elsewhere: the request is forwarded once to `http://<endpoint>` with the header
//!   [`FORWARDED`], and the owner's answer is relayed as it is.
//! - **Paging.** At most `limit` hooks (default [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`])
//!   in key order; `next` is the key of the last hook returned while the range may hold
//!   more (else `null`), and `after=<next>` continues after it
//!   ([`KeyValueCursor::resume_after`](streams_core::KeyValueCursor::resume_after)).
//!
//! Invariants:
//! - An answer is the owner's whole page or `503 Service Unavailable` (`Retry-After: 1`,
//!   "not available here now, retry"), never a partial or a wrong one: a user's hooks are
//!   read only from the task of the user's partition, which fails (`NotHosted`,
//!   `Rebalancing`) rather than answering "no hooks" when it is not hosted here, or moving.
//!   A retriable [`QueryError`], a stopped application, no known owner, an owner without
//!   an endpoint, and an owner that cannot be reached all answer 503.
//! - A forwarded request (one carrying [`FORWARDED`]) is never forwarded again: an instance
//!   that does not host the user either answers 503, so stale metadata cannot make two
//!   instances bounce a request.
//! - Bad input answers 400 (a non-numeric id, a limit outside `1..=1000`, an `after` that is
//!   not a key of that user), an unknown path 404, another method than GET 405; the input
//!   is checked before any query or forwarding.
//! - The server uses the application only through the join's [`Queries`] and a store
//!   handle made from it (both `Send + Sync`, shared by every connection's task), never
//!   through the [`KafkaStreams`](streams_core::KafkaStreams), which is neither `Send` nor
//!   `Sync` and stays with its owner (e.g. the binary's main thread), which starts and
//!   closes it. The server may serve before `start` and outlive `close`, and keeps nothing
//!   running: the store is not read then (a request to be answered here gets 503,
//!   `NotRunning`). The lookups, the stream threads' answers and the owner's are awaited on
//!   tokio's blocking threads (a page at most [`QUERY_TIMEOUT`], a forwarded request at
//!   most [`FORWARD_TIMEOUT`]), never on the runtime's own thread.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CONNECTION, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use hyper::{Request, Response, StatusCode};
use serde::Serialize;
use streams_core::Queries;
use streams_core::serdes::{JsonSerde, StringSerde};
use streams_core::{QueryError, ReadOnlyKeyValueStore};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

use super::http::{ServerThread, serve_connections};
use super::join::STORE;
use super::query_request::{HooksQuery, Rejection, parse};
use super::records::WebHook;
use super::topics::user_key;
use crate::ExampleError;

/// The header that marks a forwarded request (its value: the forwarding instance's
/// endpoint). An instance never forwards a request that carries it.
pub const FORWARDED: &str = "x-webhooks-forwarded";
/// The header naming the endpoint of the instance that answered (relayed with a forwarded
/// answer).
pub const SERVED_BY: &str = "x-webhooks-served-by";
/// Hooks per page without `limit`.
pub const DEFAULT_LIMIT: usize = 100;
/// The largest `limit`.
pub const MAX_LIMIT: usize = 1000;
/// How long a page may wait for the stream threads.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a forwarded request may take (the owner's [`QUERY_TIMEOUT`] and then some).
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a client may take to send a request's head.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The body of every 503.
const UNAVAILABLE: &str = "not available here now, retry";

type Hooks = ReadOnlyKeyValueStore<StringSerde, JsonSerde<WebHook>>;

/// One page of a user's hooks, the JSON of a 200 answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct HooksPage {
    /// The user.
    pub user_id: u64,
    /// At most `limit` hooks, in key order (`%020d(user_id):webhook_id` as text).
    pub hooks: Vec<WebHook>,
    /// The key of the last hook returned while the user may have more (pass it back as
    /// `after`), else `None` (`null`).
    pub next: Option<String>,
}

/// Where a user's page was found.
enum Found {
    /// Read here.
    Here(HooksPage),
    /// Hosted by the instance with this endpoint (`None`: it announced none).
    There(Option<String>),
    /// Hosted nowhere now.
    Nowhere,
}

/// The query server, bound but not serving yet: connections wait in the listen queue until
/// [`serve`](Self::serve).
pub struct QueryListener {
    runtime: Runtime,
    listener: TcpListener,
    addr: SocketAddr,
    endpoint: String,
}

impl QueryListener {
    /// Binds `address` (`host:port`; port 0 for any free port). The endpoint announced as
    /// `application.server` is that host with the bound port, so the host must be one the
    /// other instances can reach (not `0.0.0.0`).
    pub fn bind(address: &str) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let listener = runtime.block_on(TcpListener::bind(address))?;
        let addr = listener.local_addr()?;
        let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
        Ok(Self {
            runtime,
            listener,
            addr,
            endpoint: format!("{host}:{}", addr.port()),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `host:port`, the value of the join's `application.server`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Serves the store [`STORE`] of the join whose [`Queries`] these are (a
    /// [`super::topology`] built with `application.server` set to
    /// [`endpoint`](Self::endpoint), for forwarding to work; started or not yet) until the
    /// returned server is dropped.
    pub fn serve(self, queries: Queries) -> Result<QueryServer, ExampleError> {
        let hooks = queries
            .store_named(STORE, StringSerde, JsonSerde::<WebHook>::new())
            .map_err(|e| ExampleError::Other(format!("the query server needs the join's store: {e}")))?
            .with_timeout(QUERY_TIMEOUT);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(FORWARD_TIMEOUT))
            .build()
            .into();
        let shared = Arc::new(Shared {
            queries,
            hooks,
            agent,
            endpoint: self.endpoint.clone(),
        });
        let Self {
            runtime,
            listener,
            addr,
            endpoint,
        } = self;
        let _thread = ServerThread::spawn("webhook-queries", move |stopped| {
            runtime.block_on(serve(listener, shared, stopped));
            // Drops every connection's task (and with them their handles on the
            // application); a blocking call still under way finishes on its own.
            runtime.shutdown_timeout(Duration::from_secs(1));
        })?;
        Ok(QueryServer {
            addr,
            endpoint,
            _thread,
        })
    }
}

impl std::fmt::Debug for QueryListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryListener")
            .field("addr", &self.addr)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// The running query server; stops when dropped.
pub struct QueryServer {
    addr: SocketAddr,
    endpoint: String,
    _thread: ServerThread,
}

impl QueryServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `host:port`, as announced in `application.server`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The URL of `path` on this server (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.endpoint)
    }
}

impl std::fmt::Debug for QueryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryServer")
            .field("addr", &self.addr)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// What every connection's task shares.
struct Shared {
    /// The join's queries: where a user's hooks are.
    queries: Queries,
    /// The join's store [`STORE`], read from the stream threads.
    hooks: Hooks,
    agent: ureq::Agent,
    endpoint: String,
}

/// Serves until `stop` fires (or its sender is dropped).
async fn serve(listener: TcpListener, shared: Arc<Shared>, stop: oneshot::Receiver<()>) {
    let answer = move |req| answer(req, shared.clone());
    serve_connections(listener, stop, "query server", READ_TIMEOUT, answer).await;
}

/// Answers one request: checks it, then reads the page here or forwards it to the owner.
async fn answer(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut response = route(&req, &shared).await;
    let headers = response.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    if !headers.contains_key(SERVED_BY)
        && let Ok(v) = HeaderValue::from_str(&shared.endpoint)
    {
        headers.insert(HeaderName::from_static(SERVED_BY), v);
    }
    Ok(response)
}

async fn route(req: &Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let query = match parse(req.method(), req.uri().path(), req.uri().query()) {
        Ok(q) => q,
        Err(rejection) => return rejection.response(),
    };
    let forwarded = req.headers().contains_key(FORWARDED);
    // Where the user's hooks are; and the page, read from the stream threads, when they are
    // here, which waits: so on a blocking thread.
    let queries = shared.queries.clone();
    let hooks = shared.hooks.clone();
    let found = tokio::task::spawn_blocking(move || -> Result<Found, QueryError> {
        let metadata = queries.query_metadata_for_key(STORE, &user_key(query.user_id), &StringSerde)?;
        Ok(match metadata.active {
            None => Found::Nowhere,
            Some(owner) if owner.local => Found::Here(read_page(&hooks, &query, metadata.partition)?),
            Some(owner) => Found::There(owner.endpoint),
        })
    })
    .await;
    let owner = match found {
        Ok(Ok(Found::Here(page))) => return json(&page),
        Ok(Ok(Found::There(owner))) => owner,
        Ok(Ok(Found::Nowhere)) => return unavailable("no instance hosts the user's partition now"),
        Ok(Err(e)) => return query_failed(&e),
        Err(e) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the query failed: {e}"),
            );
        }
    };
    if forwarded {
        return unavailable("forwarded here, but another instance hosts the user");
    }
    let Some(endpoint) = owner else {
        return unavailable("the user's instance announced no endpoint");
    };
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned());
    let url = format!("http://{endpoint}{path}");
    let agent = shared.agent.clone();
    let from = shared.endpoint.clone();
    match tokio::task::spawn_blocking(move || forward(&agent, &url, &from)).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => {
            tracing::debug!(%endpoint, error = %e, "forwarding failed");
            unavailable("the user's instance did not answer")
        }
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("forwarding failed: {e}"),
        ),
    }
}

impl Rejection {
    fn response(self) -> Response<Full<Bytes>> {
        let mut r = text(self.0, self.1);
        if self.0 == StatusCode::METHOD_NOT_ALLOWED {
            r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET"));
        }
        r
    }
}

/// One page of `query`'s user from the task of `partition`, which must be hosted here.
fn read_page(hooks: &Hooks, query: &HooksQuery, partition: i32) -> Result<HooksPage, QueryError> {
    let prefix = format!("{}:", user_key(query.user_id));
    let mut cursor = hooks
        .clone()
        .for_partition(partition)
        .prefix_scan(&prefix, &StringSerde)?
        .chunk_size(query.limit);
    if let Some(after) = &query.after {
        cursor = cursor.resume_after(after.clone().into_bytes());
    }
    let page: Vec<WebHook> = cursor
        .next_chunk()?
        .unwrap_or_default()
        .into_iter()
        .map(|(_, hook)| hook)
        .collect();
    let next = if page.is_empty() || cursor.is_exhausted() {
        None
    } else {
        cursor.last_key().map(|k| String::from_utf8_lossy(k).into_owned())
    };
    Ok(HooksPage {
        user_id: query.user_id,
        hooks: page,
        next,
    })
}

/// GETs `url` as a forwarded request; the owner's answer (status, body, and the headers
/// that matter) to relay.
fn forward(agent: &ureq::Agent, url: &str, from: &str) -> Result<Response<Full<Bytes>>, ureq::Error> {
    let mut answer = agent.get(url).header(FORWARDED, from).call()?;
    let body = answer.body_mut().read_to_vec()?;
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = answer.status();
    for name in [CONTENT_TYPE, RETRY_AFTER, HeaderName::from_static(SERVED_BY)] {
        if let Some(v) = answer.headers().get(&name) {
            response.headers_mut().insert(name, v.clone());
        }
    }
    Ok(response)
}

/// The answer to a failed query: 503 when asking again (here or elsewhere) may succeed,
/// 500 otherwise.
fn query_failed(e: &QueryError) -> Response<Full<Bytes>> {
    match e {
        QueryError::Rebalancing => unavailable("a rebalance or restoration is under way"),
        QueryError::NotHosted { .. } => unavailable("the user's partition has moved"),
        QueryError::Timeout(_) => unavailable("the stream threads did not answer in time"),
        QueryError::NotRunning { state } => unavailable(&format!("the application is {state:?}")),
        e if e.is_retriable() => unavailable(&e.to_string()),
        e => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// 503 with `Retry-After: 1`.
fn unavailable(reason: &str) -> Response<Full<Bytes>> {
    let mut r = text(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("{UNAVAILABLE} ({reason})"),
    );
    r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

fn text(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{message}\n"))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn json(page: &HooksPage) -> Response<Full<Bytes>> {
    match serde_json::to_vec(page) {
        Ok(body) => {
            let mut r = Response::new(Full::new(Bytes::from(body)));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::Method;

    use crate::webhooks::query_request::percent_decode;

    fn status(r: Result<HooksQuery, Rejection>) -> u16 {
        r.map_or_else(|r| r.0.as_u16(), |_| 200)
    }

    #[test]
    fn requests_are_checked_before_anything_is_asked() {
        let get = |path: &str, query: Option<&str>| parse(&Method::GET, path, query);
        assert_eq!(
            get("/users/7/hooks", None).unwrap(),
            HooksQuery {
                user_id: 7,
                after: None,
                limit: DEFAULT_LIMIT
            }
        );
        let q = get(
            "/users/7/hooks",
            Some("limit=2&after=00000000000000000007%3A12&x=1"),
        )
        .unwrap();
        assert_eq!(
            (q.limit, q.after.as_deref()),
            (2, Some("00000000000000000007:12"))
        );
        assert_eq!(
            get("/users/7/hooks", Some("after=00000000000000000007:1"))
                .unwrap()
                .after
                .as_deref(),
            Some("00000000000000000007:1")
        );
        for bad in [
            "/users/abc/hooks",
            "/users/-1/hooks",
            "/users/+1/hooks",
            "/users//hooks",
        ] {
            assert_eq!(status(get(bad, None)), 400, "{bad}");
        }
        assert_eq!(status(get("/users/99999999999999999999999/hooks", None)), 400);
        for query in [
            "limit=0",
            "limit=1001",
            "limit=x",
            "limit=",
            "after=00000000000000000008:1",
            "after=0000000000000000000",
            "after=%zz",
        ] {
            assert_eq!(status(get("/users/7/hooks", Some(query))), 400, "{query}");
        }
        assert_eq!(get("/users/7/hooks", Some("limit=1000")).unwrap().limit, 1000);
        for unknown in [
            "/",
            "/users/7",
            "/users/7/hooks/",
            "/users/7/x/hooks",
            "/users/7/hookz",
        ] {
            assert_eq!(status(get(unknown, None)), 404, "{unknown}");
        }
        let post = parse(&Method::POST, "/users/7/hooks", None)
            .unwrap_err()
            .response();
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(post.headers()[ALLOW], "GET");
    }

    #[test]
    fn percent_escapes_decode() {
        assert_eq!(percent_decode("a%3Ab%20c").as_deref(), Some("a:b c"));
        assert_eq!(percent_decode("plain:1").as_deref(), Some("plain:1"));
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%ff"), None);
    }

    /// The HTTP surface without a broker: a join that was never started answers 400 and
    /// 404 as usual, and 503 (retry) for a valid request, since nothing is hosted yet.
    #[test]
    fn a_join_that_is_not_running_answers_503_with_retry_after() {
        let state = tempfile::tempdir().unwrap();
        let state_dir = state.path().display().to_string();
        let listener = QueryListener::bind("127.0.0.1:0").unwrap();
        let endpoint = listener.endpoint().to_owned();
        assert_eq!(endpoint, format!("127.0.0.1:{}", listener.addr().port()));
        let config = streams_core::StreamsConfig::from_properties([
            ("application.id", "webhook-queries-unit"),
            ("bootstrap.servers", "127.0.0.1:1"),
            ("state.dir", &state_dir),
            ("application.server", &endpoint),
        ])
        .unwrap();
        let topology = super::super::topology(&super::super::WebHookTopics::default()).unwrap();
        let app = streams_core::KafkaStreams::new(topology, config).unwrap();
        let server = listener.serve(app.queries()).unwrap();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        let get = |path: &str| {
            let mut r = agent.get(&server.url(path)).call().unwrap();
            let retry_after = r
                .headers()
                .get(RETRY_AFTER)
                .map(|v| v.to_str().unwrap().to_owned());
            let served_by = r.headers().get(SERVED_BY).map(|v| v.to_str().unwrap().to_owned());
            let body = r.body_mut().read_to_string().unwrap();
            (r.status().as_u16(), retry_after, served_by, body)
        };
        let (status, retry_after, served_by, body) = get("/users/1/hooks");
        assert_eq!((status, retry_after.as_deref()), (503, Some("1")), "{body}");
        assert!(body.starts_with(UNAVAILABLE), "{body}");
        assert_eq!(served_by.as_deref(), Some(endpoint.as_str()));
        assert_eq!(get("/users/x/hooks").0, 400);
        assert_eq!(get("/users/1/hooks?limit=5000").0, 400);
        assert_eq!(get("/metrics").0, 404);
        drop(server);
        assert_eq!(app.state(), streams_core::State::Created);
    }
}
