//! The settings of the test clients: the basics they share, and the producer's and the
//! consumer's.

use rdkafka::ClientConfig;

use super::blocking::DEFAULT_TIMEOUT;

/// Client settings shared by the test clients: quick reconnects, bounded socket waits.
pub(super) fn base_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("socket.timeout.ms", "10000")
        .set("reconnect.backoff.ms", "50")
        .set("reconnect.backoff.max.ms", "1000")
        .set("retry.backoff.ms", "50");
    config
}

/// Producer settings for tests: idempotent (so `acks=all`), no batching delay, keys placed
/// by murmur2 (as Java producers and the runtime place them), and a
/// delivery timeout of [`DEFAULT_TIMEOUT`]. Add `transactional.id` for a transactional producer.
pub fn producer_config(bootstrap: &str) -> ClientConfig {
    let mut config = base_config(bootstrap);
    config
        .set("enable.idempotence", "true")
        .set("linger.ms", "0")
        // Keys placed as Java producers and the runtime's sinks place them, so topics
        // written by tests are co-partitioned with the application's own topics.
        .set("partitioner", "murmur2_random")
        .set("message.timeout.ms", DEFAULT_TIMEOUT.as_millis().to_string());
    config
}

/// Consumer settings for tests: the given group, no auto commit, reading from the earliest
/// offset, and the classic group protocol with a 6 s session timeout and 500 ms heartbeats,
/// so groups form and notice a dead member quickly. Fetches return after at most 100 ms.
pub fn consumer_config(bootstrap: &str, group_id: &str) -> ClientConfig {
    let mut config = base_config(bootstrap);
    config
        .set("group.id", group_id)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("fetch.wait.max.ms", "100")
        .set("topic.metadata.refresh.interval.ms", "2000");
    config
}
