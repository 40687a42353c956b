//! The HTTP endpoint: `/metrics` in Prometheus' text exposition format, and the health
//! probes (see [`Probe`]): `/health/live` (200 unless the application has failed or was
//! closed), `/health/ready` (200 only while every thread is processing) and `/health` (200
//! while `Running` or `Rebalancing`).
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

/// A health probe of the endpoint; each answers 200 or 503 with the state as its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// `/health/live`: the instance is alive, so restarting it would not help: 200 while
    /// `Created`, `Rebalancing`, `Running` or `PendingShutdown`; 503 once a thread failed
    /// (`Error`) or the application was closed (`NotRunning`).
    Live,
    /// `/health/ready`: the instance is processing: 200 only while `Running`, that is every
    /// thread has its tasks assigned, restored and running; 503 while it starts, rebalances,
    /// restores its stores, shuts down or has failed.
    Ready,
    /// `/health`: 200 while `Running` or `Rebalancing` (the probe before the two above).
    Any,
}

impl Probe {
    fn of(path: &str) -> Option<Self> {
        match path {
            "/health/live" => Some(Self::Live),
            "/health/ready" => Some(Self::Ready),
            "/health" => Some(Self::Any),
            _ => None,
        }
    }

    fn passes(self, state: State) -> bool {
        match self {
            Self::Live => !matches!(state, State::Error | State::NotRunning),
            Self::Ready => state == State::Running,
            Self::Any => matches!(state, State::Running | State::Rebalancing),
        }
    }
}

/// Reads the application's state for the health probes.
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
        tracing::info!(address = %bound, "serving metrics at /metrics and health at /health/live and /health/ready");
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
        (&Method::GET, path) if Probe::of(path).is_some() => {
            let s = state();
            let up = Probe::of(path).is_some_and(|p| p.passes(s));
            (
                if up {
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
            "not found; try /metrics, /health/live, /health/ready or /health\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_answer_by_state() {
        use State::*;
        let states = [Created, Rebalancing, Running, PendingShutdown, NotRunning, Error];
        let passing = |p: Probe| -> Vec<State> { states.into_iter().filter(|&s| p.passes(s)).collect() };
        assert_eq!(
            passing(Probe::Live),
            [Created, Rebalancing, Running, PendingShutdown]
        );
        assert_eq!(passing(Probe::Ready), [Running]);
        assert_eq!(passing(Probe::Any), [Rebalancing, Running]);
        assert_eq!(Probe::of("/health/live"), Some(Probe::Live));
        assert_eq!(Probe::of("/health/ready"), Some(Probe::Ready));
        assert_eq!(Probe::of("/health"), Some(Probe::Any));
        assert_eq!(Probe::of("/health/other"), None);
    }
}
