//! A partition's watermarks (log start and end offsets), with the metadata refreshed when
//! the lookup fails.
//!
//! librdkafka answers a watermark lookup from its metadata cache: where the cached leader
//! is gone (a broker killed or paused, so left out of the cluster's metadata) it fails at
//! once with "Unknown partition" and asks for no new metadata; a client that neither
//! fetches nor produces the topic (a restore consumer between restorations) then refreshes
//! it only every `topic.metadata.refresh.interval.ms` (5 minutes), and every retry in
//! between fails the same way. A failed lookup here asks for the topic's metadata before
//! it returns, so the next try sees the new leader.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaResult;

/// How long the refresh after a failed lookup may take.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(5);

/// The low and high watermarks of `topic`-`partition`, waiting up to `timeout`; after a
/// failure the topic's metadata is refreshed (its own failure is only logged) and the
/// lookup's error returned.
pub(crate) fn fetch<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
    timeout: Duration,
) -> KafkaResult<(i64, i64)> {
    consumer.fetch_watermarks(topic, partition, timeout).inspect_err(|e| {
        if let Err(refresh) = consumer.fetch_metadata(Some(topic), REFRESH_TIMEOUT) {
            tracing::debug!(topic, partition, error = %e, refresh = %refresh, "watermarks failed, and so did refreshing the topic's metadata");
        }
    })
}
