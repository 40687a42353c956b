//! The RocksDB options setter (`StreamsConfigBuilder::rocksdb_config_setter`, Kafka Streams'
//! `rocksdb.config.setter`) reaches the stores the runtime opens: a keyed count on the real
//! broker, whose setter switches its stores to universal compaction without compression,
//! counts right, the setter is called for the store of every task, and RocksDB's own
//! options file in each store's directory records the setter's choices.
//!
//! Fresh application id and topics. Without a broker (`STREAMS_TEST_BOOTSTRAP`) the test
//! says it was skipped; `scripts/test.sh` always provides one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use streams_core::state::librocksdb::{DBCompactionStyle, DBCompressionType, Options};
use streams_core::{KafkaStreams, StreamsConfig};
use streams_test_utils::kafka;

mod common;

use common::{count_topology, produce_words, wait_for_counts};

/// RocksDB's `OPTIONS-*` files under `dir`, at any depth.
fn options_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("OPTIONS-"))
            {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn the_options_setter_shapes_every_store_the_runtime_opens() {
    let Some(bootstrap) = kafka::require_kafka("the_options_setter_shapes_every_store_the_runtime_opens")
    else {
        return;
    };
    let app_id = kafka::unique_name("setter-app");
    let input = kafka::unique_name("words");
    let output = kafka::unique_name("counts");
    kafka::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    let state = tempfile::tempdir().unwrap();
    const KEYS: usize = 200;
    produce_words(&bootstrap, &input, KEYS, 5, "a");

    let seen = Arc::new(Mutex::new(Vec::new()));
    let config = StreamsConfig::builder()
        .application_id(app_id.as_str())
        .bootstrap_servers(bootstrap.as_str())
        .state_dir(state.path())
        .set("commit.interval.ms", "200")
        .rocksdb_config_setter({
            let seen = seen.clone();
            move |store: &str, options: &mut Options| {
                options.set_compaction_style(DBCompactionStyle::Universal);
                options.set_compression_type(DBCompressionType::None);
                seen.lock().unwrap().push(store.to_owned());
            }
        })
        .build()
        .unwrap();
    let mut app = KafkaStreams::new(count_topology(&input, &output), config).unwrap();
    kafka::start_running(&mut app, Duration::from_secs(60));
    wait_for_counts(&bootstrap, &output, KEYS, 5, Duration::from_secs(120));
    assert!(app.close(Duration::from_secs(60)));

    // A call for each task's store (4 partitions, one store each; a task created again
    // after a rebalance calls it again), by the store's name.
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 4, "setter calls: {seen:?}");
    assert_eq!(
        seen.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        BTreeSet::from(["counts"])
    );
    // RocksDB wrote the options it opened each store with: the setter's, over the defaults.
    let files = options_files(state.path());
    assert!(files.len() >= 4, "options files: {files:?}");
    let mut data_families = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for section in text.split("[CFOptions \"").skip(1) {
            if section.starts_with("default\"") {
                data_families += 1;
                assert!(
                    section.contains("compaction_style=kCompactionStyleUniversal"),
                    "{}: the data column family is not universal",
                    file.display()
                );
                assert!(
                    section.contains("compression=kNoCompression"),
                    "{}: the data column family is compressed",
                    file.display()
                );
            }
        }
    }
    assert!(data_families >= 4, "data column families seen: {data_families}");
}
