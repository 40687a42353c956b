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
//!
//! A lookup the runtime cannot go on without ([`fetch_retrying`]: where a changelog
//! restores to, where a partition without a committed offset starts) retries for as long
//! as a broker may take to come back, as Kafka Streams' `task.timeout.ms` does: one failure
//! right after a broker moved its leaderships is not a reason to stop a stream thread.

use std::ffi::CString;
use std::time::{Duration, Instant};

use rdkafka::bindings as rdsys;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, KafkaResult};

use crate::engine::Fetched;
use crate::model::error::StreamsError;
use crate::runtime::client::connect::is_authorization;
use crate::runtime::client::errors::kafka_err;

/// How long one try of [`fetch_retrying`] may wait for the broker.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The pause between two tries of [`fetch_retrying`].
const RETRY_PAUSE: Duration = Duration::from_millis(200);

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

/// The watermarks of `topic`-`partition` as `consumer`'s last fetch response for it carried
/// (librdkafka's cache: no request): the high watermark, and the log start offset when
/// librdkafka knows it. `None` before the partition was fetched.
///
/// rust-rdkafka has no binding for this call (`rd_kafka_get_watermark_offsets`): one of the
/// workspace's few `unsafe` blocks (the root `Cargo.toml` lists them).
#[allow(unsafe_code)]
pub(crate) fn cached<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Option<(Option<i64>, i64)> {
    let topic = CString::new(topic).ok()?;
    let (mut low, mut high) = (-1_i64, -1_i64);
    // SAFETY: the client handle stays valid while `consumer` is borrowed; `topic` is a
    // NUL-terminated string alive across the call; librdkafka writes the two offsets
    // through pointers to live locals and keeps none of the pointers.
    let error = unsafe {
        rdsys::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            partition,
            &mut low,
            &mut high,
        )
    };
    let found = error == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0;
    found.then_some(((low >= 0).then_some(low), high))
}

/// [`fetch`], tried again every 200 ms for up to `limit` while the lookup fails (a leader
/// moving, a broker restarting or paused, a partition just created and not yet led):
/// `stop(error)` ends the tries early with its own error (refused authorization, or a
/// failure no wait can mend). After `limit` the last error, as `watermarks of
/// <topic>-<partition>`.
pub(crate) fn fetch_retrying<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
    limit: Duration,
    mut stop: impl FnMut(&KafkaError) -> Option<StreamsError>,
) -> Result<(i64, i64), StreamsError> {
    let deadline = Instant::now() + limit;
    loop {
        let attempt = deadline
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_millis(100), ATTEMPT_TIMEOUT);
        let e = match fetch(consumer, topic, partition, attempt) {
            Ok(w) => return Ok(w),
            Err(e) => e,
        };
        if let Some(stopped) = stop(&e) {
            return Err(stopped);
        }
        if Instant::now() >= deadline {
            return Err(kafka_err(&format!("watermarks of {topic}-{partition}"), e));
        }
        tracing::debug!(topic, partition, error = %e, "watermarks; retrying");
        std::thread::sleep(RETRY_PAUSE);
    }
}

/// For [`fetch_retrying`]'s `stop`: an authorization error ends the tries with its
/// [`StreamsError::Authorization`], naming `topic`.
pub(crate) fn stop_if_denied(topic: &str) -> impl FnMut(&KafkaError) -> Option<StreamsError> + '_ {
    move |e| {
        let code = e.rdkafka_error_code().filter(|c| is_authorization(*c))?;
        Some(crate::runtime::client::connect::denied(
            format!("topic `{topic}`"),
            "looking up its offsets",
            code,
            "DESCRIBE on it",
        ))
    }
}

/// What `consumer` knows of `topic`-`partition` without asking a broker: the high watermark
/// of its last fetch response against its position (past the records it handed over and
/// past transaction markers), or `next` (where the caller's records of it end) when that
/// is further.
///
/// librdkafka keeps both per partition but rust-rdkafka exposes neither without a broker
/// round trip, hence its C API here: the one other place of the workspace with `unsafe`
/// (see `txn_offsets.rs`). Under `read_committed` the high watermark may lie past an open
/// transaction the consumer cannot read yet: the partition then looks behind, and the
/// task's wait for it is bounded (see `engine/queue.rs`).
#[allow(unsafe_code)]
pub(crate) fn fetched<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
    next: Option<i64>,
) -> Fetched {
    let Ok(name) = std::ffi::CString::new(topic) else {
        return Fetched::Unknown;
    };
    let mut positions = rdkafka::TopicPartitionList::with_capacity(1);
    positions.add_partition(topic, partition);
    let (mut low, mut high) = (-1i64, -1i64);
    // SAFETY: the handle is valid while `consumer` is borrowed; librdkafka copies nothing
    // from the topic name past the call, writes only the two integers given, and fills the
    // one-element list it is given (owned here, freed once by its drop).
    let (found, _) = unsafe {
        let native = consumer.client().native_ptr();
        (
            rdkafka::bindings::rd_kafka_get_watermark_offsets(
                native,
                name.as_ptr(),
                partition,
                &mut low,
                &mut high,
            ),
            rdkafka::bindings::rd_kafka_position(native, positions.ptr()),
        )
    };
    if found != rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || high < 0 {
        return Fetched::Unknown;
    }
    let position = positions
        .find_partition(topic, partition)
        .and_then(|e| match e.offset() {
            rdkafka::Offset::Offset(o) => Some(o),
            _ => None,
        });
    match position.max(next) {
        None => Fetched::Unknown,
        Some(p) if p >= high => Fetched::CaughtUp,
        Some(_) => Fetched::Behind,
    }
}
