//! Offset resets: nothing is skipped silently.
//!
//! When a source partition's position is no longer in the log (retention or
//! `DeleteRecords` removed it while the application was behind or stopped), the fetch fails
//! with `OFFSET_OUT_OF_RANGE` and librdkafka moves the position as `auto.offset.reset`
//! says, as Kafka Streams does. librdkafka reports such a reset only as a log line
//! (facility `OFFSET`, level warning); the stream thread's client context recognises that
//! line ([`parse`]), and the loop then measures what was skipped ([`SourceResets::handle`]):
//! a WARN naming the partition and the number of offsets skipped, and two counters
//! (`streams_thread_offset_resets_total`, `streams_thread_skipped_offsets_total`).
//!
//! A reset on librdkafka's in-process mock cluster means its retention (5 MiB or 100,000
//! message sets per partition) deleted records the application had not read: that is never
//! what a user wants, so there the thread fails with [`mock_retention_error`].
//!
//! Changelogs are a different matter (see `restore/mod.rs`): a gap there is corrupted state,
//! and the store is wiped and restored from the earliest offset.
//!
//! Every other librdkafka log line is passed on to `tracing` with its level mapped (see
//! `client_log.rs`); client-level errors, which librdkafka retries itself, are warnings
//! ([`QuietContext`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rdkafka::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use rdkafka::error::KafkaError;

use crate::config::OAuthBearerTokenProvider;
use crate::model::error::StreamsError;
use crate::runtime::client::client_log::forward_log;
use crate::runtime::client::oauth::Authenticated;

/// One reset librdkafka reported: the partition and the offset it could not fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OffsetReset {
    pub topic: String,
    pub partition: i32,
    /// The offset that was out of range, when the log line names one.
    pub at: Option<i64>,
    /// Where librdkafka moved the position (`BEGINNING`, `END`, or an offset), as logged.
    pub to: String,
}

/// Recognises librdkafka's reset line, e.g.
/// `orders [3]: offset reset (at offset 15001 (leader epoch 0), broker 1) to offset BEGINNING: fetch failed due to requested offset not available on the broker: Broker: Offset out of range`.
pub(crate) fn parse(fac: &str, message: &str) -> Option<OffsetReset> {
    if fac != "OFFSET" {
        return None;
    }
    let (head, rest) = message.split_once("]: offset reset (at ")?;
    // librdkafka may put the thread first: `[thrd:main]: topic [3]: offset reset ...`.
    let head = match head.strip_prefix("[thrd:") {
        Some(h) => h.split_once("]: ")?.1,
        None => head,
    };
    let (topic, partition) = head.rsplit_once(" [")?;
    let partition = partition.parse().ok()?;
    let at = rest
        .strip_prefix("offset ")
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit() && c != '-').next())
        .and_then(|n| n.parse().ok());
    let to = rest
        .split_once(") to ")
        .map(|(_, t)| t.split(':').next().unwrap_or_default().trim().to_owned())
        .unwrap_or_default();
    Some(OffsetReset {
        topic: topic.to_owned(),
        partition,
        at,
        to,
    })
}

/// Resets seen by a client's log callback (on librdkafka's threads), taken by the loop.
#[derive(Debug, Default)]
pub(crate) struct ResetWatch {
    seen: AtomicBool,
    resets: Mutex<Vec<OffsetReset>>,
}

impl ResetWatch {
    /// Notes `message` when it reports a reset; returns whether it did.
    pub fn observe(&self, fac: &str, message: &str) -> bool {
        let Some(reset) = parse(fac, message) else {
            return false;
        };
        if let Ok(mut r) = self.resets.lock() {
            r.push(reset);
            self.seen.store(true, Ordering::Release);
        }
        true
    }

    /// The resets seen since the last call (one atomic load when there are none).
    pub fn take(&self) -> Vec<OffsetReset> {
        if !self.seen.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        self.resets
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }
}

/// The error a reset on the embedded mock cluster ends the application with.
pub(crate) fn mock_retention_error(what: &str, topic: &str, partition: i32, detail: &str) -> StreamsError {
    StreamsError::Kafka {
        message: format!(
            "{what} {topic}-{partition}: {detail}. The embedded mock cluster's retention was exceeded: \
             librdkafka's mock keeps at most 5 MiB or 100,000 message sets per partition and deletes older \
             records without notice; run on a real broker (set bootstrap.servers)"
        ),
        retriable: false,
    }
}

/// What the stream thread does with the resets of its source partitions.
pub(crate) struct SourceResets {
    /// The application runs on the embedded mock cluster.
    pub on_mock: bool,
    pub resets: prometheus::IntCounter,
    pub skipped: prometheus::IntCounter,
}

impl SourceResets {
    /// Logs and counts each reset, measuring the offsets skipped from the partition's
    /// current log start and end; fails on the mock cluster.
    pub fn handle<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        resets: Vec<OffsetReset>,
    ) -> Result<(), StreamsError> {
        for r in resets {
            let marks = crate::runtime::client::watermarks::fetch(
                consumer,
                &r.topic,
                r.partition,
                Duration::from_secs(10),
            );
            let skipped = match (&marks, r.at) {
                (Ok((_, high)), Some(at)) if r.to.contains("END") => (high - at).max(0),
                (Ok((low, _)), Some(at)) => (low - at).max(0),
                _ => 0,
            };
            let marks = marks.map_or_else(
                |e| format!("watermarks unknown: {e}"),
                |(l, h)| format!("log {l}..{h}"),
            );
            let at = r.at.map_or_else(|| "unknown".to_owned(), |a| a.to_string());
            if self.on_mock {
                return Err(mock_retention_error(
                    "source partition",
                    &r.topic,
                    r.partition,
                    &format!(
                        "offset {at} is no longer in the log ({marks}); {skipped} records were deleted unread"
                    ),
                ));
            }
            self.resets.inc();
            self.skipped.inc_by(u64::try_from(skipped).unwrap_or(0));
            tracing::warn!(
                topic = %r.topic,
                partition = r.partition,
                skipped,
                "source partition {}-{}: offset {at} is out of range ({marks}); auto.offset.reset moved it to {}: {skipped} offsets skipped",
                r.topic,
                r.partition,
                r.to
            );
        }
        Ok(())
    }
}

/// The context of the clients a thread assigns partitions to itself (restore and global
/// consumers): librdkafka's client-level errors are transient (it retries them), so they
/// are warnings, and its log lines go to `tracing`.
pub(crate) struct QuietContext {
    pub name: String,
    /// The consumer's `group.id`.
    pub group: String,
    /// The application's id (the prefix of its groups and internal topics).
    pub application_id: String,
}

impl QuietContext {
    /// The authorization error `e` reports, if it is one: the group, or `topics` (which the
    /// consumer reads; `grant` says what lets it).
    pub fn denied(&self, e: &KafkaError, topics: &str, grant: &str) -> Option<StreamsError> {
        let code = e
            .rdkafka_error_code()
            .filter(|c| crate::runtime::client::connect::is_authorization(*c))?;
        Some(
            if code == rdkafka::types::RDKafkaErrorCode::GroupAuthorizationFailed {
                crate::runtime::client::connect::denied(
                    format!("group `{}`", self.group),
                    "using the consumer group",
                    code,
                    &format!("READ and DESCRIBE on groups prefixed `{}`", self.application_id),
                )
            } else {
                crate::runtime::client::connect::denied(format!("topic {topics}"), "reading", code, grant)
            },
        )
    }
}

impl ClientContext for QuietContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        forward_log(&self.name, level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let reason = crate::runtime::client::redact::redact(reason);
        tracing::warn!(client = %self.name, error = %error, "kafka client: {reason}");
    }
}

impl ConsumerContext for QuietContext {}

/// A consumer with [`QuietContext`].
pub(crate) type AssignedConsumer = Authenticated<BaseConsumer<QuietContext>>;

/// An [`AssignedConsumer`] with `config`, named `name`, of application `application_id`,
/// given its OAUTHBEARER tokens by `tokens` (when the application has a provider).
pub(crate) fn assigned_consumer(
    config: &rdkafka::ClientConfig,
    name: &str,
    application_id: &str,
    tokens: Option<&OAuthBearerTokenProvider>,
) -> Result<AssignedConsumer, StreamsError> {
    let group = config.get("group.id").unwrap_or_default().to_owned();
    let consumer = config
        .create_with_context(QuietContext {
            name: name.to_owned(),
            group,
            application_id: application_id.to_owned(),
        })
        .map_err(|e| crate::runtime::client::errors::kafka_err(name, e))?;
    Authenticated::new(consumer, tokens, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_librdkafkas_reset_line() {
        let line = "aggregator-input [3]: offset reset (at offset 15001 (leader epoch 0), broker 1) to cached BEGINNING offset 43650: fetch failed due to requested offset not available on the broker: Broker: Offset out of range";
        let r = parse("OFFSET", line).unwrap();
        assert_eq!(r.topic, "aggregator-input");
        assert_eq!(r.partition, 3);
        assert_eq!(r.at, Some(15001));
        assert_eq!(r.to, "cached BEGINNING offset 43650");

        let line = "t.v1 [0]: offset reset (at offset 7, broker 1) to offset BEGINNING: fetch failed: Broker: Offset out of range";
        let r = parse("OFFSET", line).unwrap();
        assert_eq!((r.topic.as_str(), r.partition, r.at), ("t.v1", 0, Some(7)));
        assert_eq!(r.to, "offset BEGINNING");

        // As librdkafka 2.12 logs it, thread first.
        let line = "[thrd:main]: reset-in-1 [0]: offset reset (at offset 2 (leader epoch -1), broker 1) to offset BEGINNING (leader epoch -1): fetch failed due to requested offset not available on the broker: Broker: Offset out of range";
        let r = parse("OFFSET", line).unwrap();
        assert_eq!((r.topic.as_str(), r.partition, r.at), ("reset-in-1", 0, Some(2)));
        assert_eq!(r.to, "offset BEGINNING (leader epoch -1)");
    }

    #[test]
    fn ignores_other_lines() {
        assert_eq!(
            parse("FETCH", "t [0]: offset reset (at offset 1, broker 1) to END: x"),
            None
        );
        assert_eq!(parse("OFFSET", "t [0]: stored offset 5"), None);
        assert_eq!(parse("OFFSET", "no partition: offset reset (at offset 1"), None);
    }

    #[test]
    fn watch_hands_out_each_reset_once() {
        let w = ResetWatch::default();
        assert!(w.take().is_empty());
        assert!(w.observe(
            "OFFSET",
            "a [1]: offset reset (at offset 2, broker 1) to offset END: x"
        ));
        assert!(!w.observe("OFFSET", "unrelated"));
        let taken = w.take();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].to, "offset END");
        assert!(w.take().is_empty());
    }
}
