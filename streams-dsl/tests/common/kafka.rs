//! Setup shared by the tests that run DSL topologies on the real broker. A test binary
//! includes it with `#[path = "common/kafka.rs"] mod broker;`; each item here is used by
//! every such binary but [`config_unpurged`], for the few that read a repartition topic.
//!
//! Applications commit every 200 ms and leave a consumer group within 6 s, so that tests
//! see output and rebalances quickly; reads take a topic's whole content at the moment.

use std::path::Path;
use std::time::Duration;

use streams_core::{KafkaStreams, StreamsConfig, Topology};
use streams_test_utils::kafka::{self, ConsumedRecord};

/// The configuration of application `app_id` on `bootstrap` with its state in `state_dir`.
pub fn config(bootstrap: &str, app_id: &str, state_dir: &Path) -> StreamsConfig {
    let dir = state_dir.display().to_string();
    StreamsConfig::from_properties([
        ("application.id", app_id),
        ("bootstrap.servers", bootstrap),
        ("state.dir", dir.as_str()),
        ("commit.interval.ms", "200"),
        ("consumer.session.timeout.ms", "6000"),
        ("consumer.heartbeat.interval.ms", "500"),
    ])
    .unwrap()
}

/// Starts `topology` with `config`; fails unless the application runs within a minute.
/// [`config`], with repartition topics never purged while the test runs: for tests that
/// read a repartition topic from its start.
#[allow(dead_code)]
pub fn config_unpurged(bootstrap: &str, app_id: &str, state_dir: &Path) -> StreamsConfig {
    config(bootstrap, app_id, state_dir)
        .to_builder()
        .repartition_purge_interval(Duration::from_secs(3600))
        .build()
        .unwrap()
}

pub fn start(topology: Topology, config: StreamsConfig) -> KafkaStreams {
    let mut app = KafkaStreams::new(topology, config).unwrap();
    kafka::start_running(&mut app, Duration::from_secs(60));
    app
}

/// Every record of `topic` so far.
pub fn read_all(bootstrap: &str, topic: &str) -> Vec<ConsumedRecord> {
    kafka::read_to_end(bootstrap, topic, Duration::from_secs(60), false).unwrap()
}
