//! The time bounds of the helpers, and [`block_on_timeout`], which waits for rdkafka's
//! futures on the calling thread.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// A generous default bound for one helper call against a healthy local broker.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Extra time given to a future whose client-side request timeout is already set, before
/// [`block_on_timeout`] gives up on it.
pub(super) const GRACE: Duration = Duration::from_secs(5);

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` on the current thread until it completes or `timeout` passes (`None`).
///
/// A minimal executor for futures that other threads complete, such as rdkafka's admin
/// and `FutureProducer` futures. It does not drive tokio resources (timers, sockets), and
/// it works inside or outside a tokio runtime alike (it only blocks the calling thread).
pub fn block_on_timeout<F: Future>(future: F, timeout: Duration) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let deadline = Instant::now() + timeout;
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return Some(output);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout(deadline - now);
    }
}
