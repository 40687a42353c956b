//! Which instance hosts a key, across instances on the real broker.
//!
//! Three instances of one application (each with its own `application.server` and state
//! directory) count 600 keys over 6 partitions. Every instance must come to the same view:
//! three instances whose tasks are disjoint and cover every partition; for every key,
//! `query_metadata_for_key` names the instance whose store, read for that key's partition
//! only, holds the key's count; the union of the three instances' stores holds every key
//! exactly once. An instance asked for a partition it does not host answers `NotHosted`.
//! Then one instance leaves: the two others' views converge on the two of them, covering
//! every partition again, and every key is found where they say.
//!
//! The scenario runs twice: under the default group protocol the instances learn of each
//! other from the `<application.id>-instances` topic; under `group.protocol=streams` from
//! the group coordinator's endpoint map, and that topic must not exist.
//!
//! Fresh topics and application id; without a broker the test says it was skipped
//! (`scripts/test.sh` always provides one).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{KafkaStreams, QueryError, ReadOnlyKeyValueStore, State, StreamsConfig};
use streams_test_utils::{kafka, queries};

mod common;

const PARTITIONS: i32 = 6;
const KEYS: usize = 600;

struct Instance {
    app: KafkaStreams,
    endpoint: String,
    _state: tempfile::TempDir,
}

impl Instance {
    fn start(bootstrap: &str, app_id: &str, topics: &Topics, port: u16, protocol: Option<&str>) -> Self {
        let state = tempfile::tempdir().unwrap();
        let endpoint = format!("127.0.0.1:{port}");
        let mut props = vec![
            ("application.id", app_id.to_owned()),
            ("bootstrap.servers", bootstrap.to_owned()),
            ("state.dir", state.path().display().to_string()),
            ("application.server", endpoint.clone()),
            ("commit.interval.ms", "100".into()),
        ];
        if let Some(p) = protocol {
            props.push(("group.protocol", p.to_owned()));
        }
        let config = StreamsConfig::from_properties(props).unwrap();
        let (input, output) = (&topics.input, &topics.output);
        let mut app = KafkaStreams::new(common::count_topology(input, output), config).unwrap();
        app.start().unwrap();
        Self {
            app,
            endpoint,
            _state: state,
        }
    }

    fn counts(&self) -> ReadOnlyKeyValueStore<StringSerde, U64Serde> {
        self.app.store_named("counts", StringSerde, U64Serde).unwrap()
    }
}

/// Retries `f` on retriable query errors until it succeeds or `deadline` passes.
fn retry<T>(what: &str, deadline: Instant, mut f: impl FnMut() -> Result<T, QueryError>) -> T {
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// Each instance's view, as (endpoint -> partitions), once every instance in `live` sees
/// exactly `live`, each hosting some of the tasks, disjoint and covering every partition.
fn converged(live: &[&Instance], deadline: Instant) -> BTreeMap<String, BTreeSet<i32>> {
    loop {
        let views: Vec<_> = live.iter().map(|i| queries::view(&i.app)).collect();
        let expected: BTreeSet<&str> = live.iter().map(|i| i.endpoint.as_str()).collect();
        let good = queries::views_agree(&views, &expected, PARTITIONS as usize);
        if good {
            return views.into_iter().next().unwrap();
        }
        assert!(Instant::now() < deadline, "views did not converge: {views:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every key is found, with count 1, on the instance its metadata names (asked of every
/// live instance), reading only the key's partition there.
fn every_key_where_metadata_says(live: &[&Instance], deadline: Instant) {
    let stores: BTreeMap<&str, ReadOnlyKeyValueStore<StringSerde, U64Serde>> =
        live.iter().map(|i| (i.endpoint.as_str(), i.counts())).collect();
    for asker in live {
        for k in 0..KEYS {
            let key = format!("key-{k}");
            let value = retry(&key, deadline, || {
                let md = asker.app.query_metadata_for_key("counts", &key, &StringSerde)?;
                let Some(active) = md.active else {
                    return Err(QueryError::Rebalancing);
                };
                let endpoint = active.endpoint.expect("endpoint");
                assert_eq!(active.local, endpoint == asker.endpoint);
                stores[endpoint.as_str()]
                    .clone()
                    .for_partition(md.partition)
                    .get(&key)
            });
            assert_eq!(value, Some(1), "{key} asked of {}", asker.endpoint);
        }
    }
}

struct Topics {
    input: String,
    output: String,
}

#[test]
fn every_instance_knows_which_instance_hosts_each_key_also_after_one_leaves() {
    hosts_are_found_and_follow_a_leave(None, 18_001);
}

#[test]
fn under_the_streams_protocol_the_group_coordinator_tells_who_hosts_each_key() {
    hosts_are_found_and_follow_a_leave(Some("streams"), 18_011);
}

/// The scenario of this file under `protocol` (the default when `None`), the instances
/// listening on ports `port..port + 3`.
fn hosts_are_found_and_follow_a_leave(protocol: Option<&str>, port: u16) {
    let Some(bootstrap) = kafka::require_kafka("query_metadata_kafka") else {
        return;
    };
    common::init_tracing();
    let app_id = kafka::unique_name("iq-md");
    let topics = Topics {
        input: kafka::unique_name("iq-md-in"),
        output: kafka::unique_name("iq-md-out"),
    };
    kafka::create_topic(&bootstrap, &topics.input, PARTITIONS, &[]).unwrap();
    kafka::create_topic(&bootstrap, &topics.output, PARTITIONS, &[]).unwrap();
    common::produce_words(&bootstrap, &topics.input, KEYS, 1, "v");

    let a = Instance::start(&bootstrap, &app_id, &topics, port, protocol);
    let b = Instance::start(&bootstrap, &app_id, &topics, port + 1, protocol);
    let mut c = Instance::start(&bootstrap, &app_id, &topics, port + 2, protocol);
    let deadline = Instant::now() + Duration::from_secs(120);
    let view = converged(&[&a, &b, &c], deadline);
    println!("three instances: {view:?}");
    for i in [&a, &b, &c] {
        assert!(i.app.wait_for_state(State::Running, Duration::from_secs(60)));
    }
    let instances_topic = format!("{app_id}-instances");
    let listed = kafka::topics_with_prefix(&bootstrap, &app_id).unwrap();
    assert_eq!(
        listed.contains(&instances_topic),
        protocol != Some("streams"),
        "{instances_topic} among {listed:?}"
    );

    // The union of the stores holds every key exactly once.
    let mut seen = BTreeMap::new();
    for i in [&a, &b, &c] {
        let entries = retry("all", deadline, || {
            i.counts().all().collect::<Result<Vec<_>, _>>()
        });
        for (k, n) in entries {
            assert_eq!(n, 1, "{k}");
            *seen.entry(k).or_insert(0) += 1;
        }
    }
    assert_eq!(seen.len(), KEYS, "every key, once processed, is in some store");
    assert!(seen.values().all(|n| *n == 1), "a key held by two instances");
    every_key_where_metadata_says(&[&a, &b, &c], deadline);

    // A partition hosted elsewhere is refused, not answered as empty.
    let (elsewhere, _) = view
        .iter()
        .find(|(e, _)| **e != a.endpoint)
        .map(|(e, p)| (e.clone(), *p.first().unwrap()))
        .unwrap();
    let partition = view[&elsewhere].first().copied().unwrap();
    match a.counts().for_partition(partition).get(&"key-0".to_owned()) {
        Err(QueryError::NotHosted { partition: p, .. }) => assert_eq!(p, partition),
        other => panic!(
            "partition {partition} of {elsewhere} asked of {}: {other:?}",
            a.endpoint
        ),
    }

    // One instance leaves cleanly: the others take its partitions and say so.
    assert!(c.app.close(Duration::from_secs(60)));
    let deadline = Instant::now() + Duration::from_secs(120);
    let view = converged(&[&a, &b], deadline);
    println!("after one left: {view:?}");
    every_key_where_metadata_says(&[&a, &b], deadline);
    c.endpoint.clear();
    for mut i in [a, b] {
        assert!(i.app.close(Duration::from_secs(60)));
    }
}
