//! Interactive queries in tests: asking again while the answer is a retriable "not now".

use std::time::{Duration, Instant};

use streams_core::QueryError;

/// How long [`retry`] asks again.
pub const RETRY_FOR: Duration = Duration::from_secs(30);

/// `query`, asked again every 50 ms while it fails with a retriable error (a rebalance of
/// the group, a partition moving), for at most [`RETRY_FOR`].
///
/// # Panics
///
/// On an error that is not retriable, or a retriable one after [`RETRY_FOR`]; the message
/// starts with `what`.
pub fn retry<T>(what: &str, mut query: impl FnMut() -> Result<T, QueryError>) -> T {
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        match query() {
            Ok(t) => return t,
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}
