//! The accept loop the example's HTTP servers share (the receiver and the query server):
//! hyper's HTTP/1 server, one task per connection, no keep-alive; and [`ServerThread`],
//! the thread each of them serves on.
//!
//! Invariants: it returns once `stop` fires or its sender is dropped; an accept error is
//! logged and retried after 20 ms; a client gets `read_timeout` to send a request's head.

use std::future::Future;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// Accepts connections on `listener` until `stop`, answering each request with `answer`;
/// `what` names the server in its log lines.
pub(super) async fn serve_connections<F, Fut, B, E>(
    listener: TcpListener,
    mut stop: oneshot::Receiver<()>,
    what: &'static str,
    read_timeout: Duration,
    answer: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<Response<B>, E>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "{what} accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let answer = answer.clone();
        tokio::spawn(async move {
            if let Err(e) = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(read_timeout)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service_fn(answer))
                .await
            {
                tracing::debug!(error = %e, "{what} connection failed");
            }
        });
    }
}

/// The thread a server runs on, told to stop and joined when dropped.
pub(super) struct ServerThread {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ServerThread {
    /// Spawns the thread `name` running `run`, whose receiver fires when this is dropped.
    pub(super) fn spawn(
        name: &str,
        run: impl FnOnce(oneshot::Receiver<()>) + Send + 'static,
    ) -> std::io::Result<Self> {
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(stopped))?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
