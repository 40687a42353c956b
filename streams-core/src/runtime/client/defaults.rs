//! Client settings the runtime chooses where the configuration is silent (any of them can
//! be overridden with the client prefixes of `docs/configuration.md`).

use rdkafka::ClientConfig;

/// How many records librdkafka prefetches per partition before it stops fetching it.
const QUEUED_MIN_MESSAGES: &str = "20000";
/// How long librdkafka waits before it fetches a partition again whose prefetch queue was
/// full.
const FETCH_QUEUE_BACKOFF_MS: &str = "10";

/// Prefetching of every consumer of the runtime (main, restore, global).
///
/// librdkafka stops fetching a partition once 100,000 records of it are queued and then
/// waits `fetch.queue.backoff.ms`, 1,000 ms by default, before it looks again. A thread that
/// consumes slower than the broker delivers (every stream thread: it processes and
/// produces) drains the queue long before that second ends and then starves: a
/// consume-and-produce loop on a local broker moved 170,000 records/s with the defaults and
/// 1,100,000 with 20,000 records and 10 ms, using less memory (64 MiB resident instead of
/// 100). See docs/benchmarks.md.
pub(crate) fn consumer(c: &mut ClientConfig) {
    for (key, value) in [
        ("queued.min.messages", QUEUED_MIN_MESSAGES),
        ("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS),
    ] {
        if c.get(key).is_none() {
            c.set(key, value);
        }
    }
}

/// How long a consumer of a stream thread waits for a broker's answer before it gives up on
/// the connection and looks the partition's leader up again.
const SOCKET_TIMEOUT_MS: &str = "10000";

/// The request timeout (`socket.timeout.ms`) of the stream threads' main and restore
/// consumers.
///
/// librdkafka waits 60 s by default for a request in flight (Kafka Streams' Java consumer
/// 30 s). When a partition's leader is paused, a consumer learns of the new leader only once
/// its request times out: restorations and the fetching of the partitions that broker led
/// stood still for the whole minute, seen on a three-broker cluster with its only bootstrap
/// broker paused. The consumers' requests are short (fetches wait at most
/// `fetch.wait.max.ms`, 500 ms; a group join has a timeout of its own), so 10 s is ample.
pub(crate) fn request_timeout(c: &mut ClientConfig) {
    if c.get("socket.timeout.ms").is_none() {
        c.set("socket.timeout.ms", SOCKET_TIMEOUT_MS);
    }
}

/// How long the broker may hold a restore consumer's fetch when no record lies beyond it.
const RESTORE_FETCH_WAIT_MS: &str = "50";

/// The fetch wait (`fetch.wait.max.ms`) of the restore consumer, which reads changelogs up
/// to an end it knows and then stops.
///
/// Each store's restoration ends with a fetch at its changelog's end offset, which the
/// broker holds for the whole wait (500 ms by default) because nothing lies beyond it; and
/// librdkafka sends one fetch per broker connection at a time, so the next store's
/// partition waits for it. A 2.95-million-record restore of four stores spent 1.5 s of 6.7 s
/// so; with 50 ms it took 22% less time at the same CPU (docs/benchmarks.md). Standby
/// tasks, which wait at their changelogs' ends all the time, read with a consumer of their
/// own that keeps the default, so that an idle standby does not fetch twenty times a second.
pub(crate) fn restore_fetch_wait(c: &mut ClientConfig) {
    if c.get("fetch.wait.max.ms").is_none() {
        c.set("fetch.wait.max.ms", RESTORE_FETCH_WAIT_MS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_in_only_what_is_not_configured() {
        let mut c = ClientConfig::new();
        c.set("queued.min.messages", "5");
        consumer(&mut c);
        assert_eq!(c.get("queued.min.messages"), Some("5"));
        assert_eq!(c.get("fetch.queue.backoff.ms"), Some(FETCH_QUEUE_BACKOFF_MS));
        request_timeout(&mut c);
        assert_eq!(c.get("socket.timeout.ms"), Some(SOCKET_TIMEOUT_MS));
        let mut set = ClientConfig::new();
        set.set("socket.timeout.ms", "30000");
        request_timeout(&mut set);
        assert_eq!(set.get("socket.timeout.ms"), Some("30000"));
        restore_fetch_wait(&mut c);
        assert_eq!(c.get("fetch.wait.max.ms"), Some(RESTORE_FETCH_WAIT_MS));
        set.set("fetch.wait.max.ms", "200");
        restore_fetch_wait(&mut set);
        assert_eq!(set.get("fetch.wait.max.ms"), Some("200"));
    }
}
