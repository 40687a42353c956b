//! One round's batch of records for the stream thread's loop.
//!
//! Records come from the thread's fetch queue (`client/fetch_queue.rs`: every assigned
//! partition's records, routed there by the rebalance callback before the partition is
//! assigned, taken a batch per call). The consumer's own queue carries the rebalances and
//! errors: each round drains it first, with the task manager lent to the rebalance
//! callbacks it may run, then takes from the fetch queue. A record the consumer's queue
//! still hands out (none is expected) joins the batch.
//!
//! An idle thread waits on the fetch queue in slices of [`QUERY_SLICE`] and stops waiting
//! when a query arrives, async work completed (the tasks' processors wake the thread
//! through the waker its task factory gives them) or a rebalance ran: a rebalance waits at
//! most one slice for its callback.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use super::{LoopMetrics, LoopSettings};
use crate::model::error::StreamsError;
use crate::model::record::RawRecord;
use crate::runtime::client::consumed::{TopicNames, to_raw};
use crate::runtime::client::errors::kafka_err;
use crate::runtime::client::fetch_queue::FetchQueue;
use crate::runtime::group::lend::lend;
use crate::runtime::group::rebalance::{ThreadContext, drop_revoked};
use crate::runtime::query::Inbox;
use crate::runtime::tasks::TaskManager;

/// How long an idle thread waits for records before it looks at its query inbox.
const QUERY_SLICE: Duration = Duration::from_millis(5);

/// The thread's two sources of records (see the module doc).
pub(super) struct Poller<'c> {
    consumer: &'c BaseConsumer<ThreadContext>,
    fetch: FetchQueue<'c, ThreadContext>,
    topics: TopicNames,
}

impl<'c> Poller<'c> {
    pub fn new(
        consumer: &'c BaseConsumer<ThreadContext>,
        max_poll_records: usize,
    ) -> Result<Self, StreamsError> {
        let fetch = FetchQueue::new(consumer, &consumer.context().fetch_route, max_poll_records).ok_or_else(
            || {
                kafka_err(
                    "creating the stream thread's fetch queue",
                    KafkaError::ClientCreation("librdkafka returned no queue".into()),
                )
            },
        )?;
        Ok(Self {
            consumer,
            fetch,
            topics: TopicNames::default(),
        })
    }

    /// Up to `max_poll_records` records, waiting up to the loop's poll time for the first
    /// (see the module doc); a fetch error ends the batch (counted, and logged), an
    /// authorization error fails the thread.
    pub fn poll(
        &mut self,
        tm: &mut TaskManager,
        settings: &LoopSettings,
        inbox: &Inbox,
        m: &LoopMetrics,
    ) -> Result<Vec<RawRecord>, StreamsError> {
        let consumer = self.consumer;
        let generation = || consumer.context().generation.load(Ordering::Relaxed);
        let max = settings.max_poll_records;
        let deadline = Instant::now() + settings.poll;
        let started = generation();
        let mut batch = Vec::new();
        loop {
            let mut drained = false;
            while batch.len() < max {
                let before = generation();
                let polled = lend(tm, || consumer.poll(Duration::ZERO));
                if generation() != before {
                    drop_revoked(consumer, &mut batch);
                }
                match polled {
                    Some(Ok(message)) => batch.push(to_raw(&message, &mut self.topics)),
                    Some(Err(e)) => return self.failed(settings, m, e, batch),
                    None => {
                        drained = true;
                        break;
                    }
                }
            }
            if !drained {
                return Ok(batch);
            }
            let wait = if batch.is_empty() {
                deadline
                    .saturating_duration_since(Instant::now())
                    .min(QUERY_SLICE)
            } else {
                Duration::ZERO
            };
            let (_, errors) = self
                .fetch
                .take(wait, max - batch.len(), &mut self.topics, &mut batch);
            if let Some(e) = errors.into_iter().next() {
                return self.failed(settings, m, e, batch);
            }
            if !batch.is_empty()
                || wait < QUERY_SLICE
                || inbox.has_pending()
                || tm.settings.factory.waker().take()
                || generation() != started
            {
                return Ok(batch);
            }
        }
    }

    /// A fetch error met while gathering `batch`: an authorization error fails the
    /// thread (not transient: librdkafka would retry for ever); any other is counted and
    /// logged, and the batch so far goes on.
    fn failed(
        &self,
        settings: &LoopSettings,
        m: &LoopMetrics,
        e: KafkaError,
        batch: Vec<RawRecord>,
    ) -> Result<Vec<RawRecord>, StreamsError> {
        if let Some(denied) = poll_denied(self.consumer, settings, &e) {
            return Err(denied);
        }
        tracing::warn!(thread = %self.consumer.context().name, error = %e, "poll error");
        m.consumer_errors.inc();
        Ok(batch)
    }
}

/// The authorization error a poll of the main consumer reported, naming the group or the
/// source topics.
fn poll_denied(
    consumer: &BaseConsumer<ThreadContext>,
    settings: &LoopSettings,
    e: &KafkaError,
) -> Option<StreamsError> {
    let code = e
        .rdkafka_error_code()
        .filter(|c| crate::runtime::client::connect::is_authorization(*c))?;
    let app = &settings.application_id;
    if code == RDKafkaErrorCode::GroupAuthorizationFailed {
        return Some(crate::runtime::client::connect::denied(
            format!("group `{app}`"),
            "joining the consumer group or reading its offsets",
            code,
            &format!("READ and DESCRIBE on groups prefixed `{app}`"),
        ));
    }
    let topics = consumer
        .subscription()
        .map(|s| {
            s.elements()
                .iter()
                .map(|e| format!("`{}`", e.topic()))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    Some(crate::runtime::client::connect::denied(
        format!("source topics {topics}"),
        "reading them",
        code,
        &format!("READ on each source topic (READ on topics prefixed `{app}` for repartition topics)"),
    ))
}
