//! The HTTP endpoint: `/metrics` in Prometheus' text exposition format, `/health` for
//! liveness probes (200 while the application is `Running` or `Rebalancing`, 503 otherwise).
//!
//! It runs on its own small tokio runtime thread, away from the stream threads; a scrape
//! reads the registry's atomics and takes no lock a stream thread waits on.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::Metrics;
use crate::model::State;
use crate::model::error::StreamsError;

/// Reads the application's state for `/health`.
pub(crate) type StateProbe = Arc<dyn Fn() -> State + Send + Sync>;

/// A running endpoint; dropping it stops the server.
pub(crate) struct MetricsServer {
    address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `address` (port 0 picks a free port) and serves until dropped.
    pub fn start(address: SocketAddr, metrics: Metrics, state: StateProbe) -> Result<Self, StreamsError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| metrics_error(address, e))?;
        let listener = runtime
            .block_on(TcpListener::bind(address))
            .map_err(|e| metrics_error(address, e))?;
        let bound = listener.local_addr().map_err(|e| metrics_error(address, e))?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("streams-metrics-http".into())
            .spawn(move || runtime.block_on(serve(listener, metrics, state, stopped)))
            .map_err(|e| metrics_error(address, e))?;
        tracing::info!(address = %bound, "serving metrics at /metrics and liveness at /health");
        Ok(Self {
            address: bound,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where the endpoint listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn metrics_error(address: SocketAddr, e: std::io::Error) -> StreamsError {
    StreamsError::Config {
        property: crate::config::keys::METRICS_ADDRESS.into(),
        message: format!("cannot serve metrics on {address}: {e}"),
    }
}

async fn serve(listener: TcpListener, metrics: Metrics, state: StateProbe, mut stop: oneshot::Receiver<()>) {
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "metrics endpoint: accept failed");
                continue;
            }
        };
        let (metrics, state) = (metrics.clone(), state.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let response = respond(&req, &metrics, &state);
                async move { Ok::<_, Infallible>(response) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "metrics endpoint: connection ended with an error");
            }
        });
    }
}

fn respond(req: &Request<Incoming>, metrics: &Metrics, state: &StateProbe) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.encode(),
        ),
        (&Method::GET, "/health") => {
            let s = state();
            let live = matches!(s, State::Running | State::Rebalancing);
            (
                if live {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                },
                "text/plain; charset=utf-8",
                format!("{s:?}\n"),
            )
        }
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found; try /metrics or /health\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    response
}
