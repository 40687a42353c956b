//! Interactive queries in tests: asking again while the answer is a retriable "not now",
//! and whether the instances agree on who hosts what.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use streams_core::{KafkaStreams, QueryError};

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

/// `app`'s view of the application: each instance's endpoint (empty when it has none) ->
/// the partitions it hosts.
pub fn view(app: &KafkaStreams) -> BTreeMap<String, BTreeSet<i32>> {
    app.all_metadata()
        .into_iter()
        .map(|m| (m.host.endpoint.clone().unwrap_or_default(), m.partitions()))
        .collect()
}

/// Whether the instances' views of the application (each endpoint -> the partitions it
/// hosts) are all the same, name exactly `endpoints`, and split `partitions` partitions
/// among them: each endpoint hosting some, disjoint and covering all.
pub fn views_agree(
    views: &[BTreeMap<String, BTreeSet<i32>>],
    endpoints: &BTreeSet<&str>,
    partitions: usize,
) -> bool {
    views.iter().all(|v| {
        let named: BTreeSet<&str> = v.keys().map(String::as_str).collect();
        let total: usize = v.values().map(BTreeSet::len).sum();
        let union: BTreeSet<i32> = v.values().flatten().copied().collect();
        named == *endpoints
            && total == partitions
            && union.len() == partitions
            && v.values().all(|p| !p.is_empty())
    }) && views.windows(2).all(|w| w[0] == w[1])
}
