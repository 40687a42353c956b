//! Metrics of a running application against the real broker, scraped over HTTP: thread,
//! task, processor and store series with their labels, counters that match the records
//! sent, `/health`, and the series of tasks that moved to another instance removed.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use streams_core::{KafkaStreams, State, StreamsConfig, Topology};
use streams_test_utils::kafka;

mod common;

use common::count_topology as topology;
use common::{http_get as get, metric_sum as sum, samples};

fn config(bootstrap: &str, app: &str, dir: &Path) -> StreamsConfig {
    config_with(bootstrap, app, dir, &[])
}

fn config_with(bootstrap: &str, app: &str, dir: &Path, extra: &[(&str, &str)]) -> StreamsConfig {
    let dir = dir.display().to_string();
    let base = [
        ("application.id", app),
        ("bootstrap.servers", bootstrap),
        ("state.dir", dir.as_str()),
        ("commit.interval.ms", "200"),
        ("metrics.address", "127.0.0.1:0"),
        ("metrics.recording.level", "DEBUG"),
        ("consumer.session.timeout.ms", "6000"),
        ("consumer.heartbeat.interval.ms", "500"),
    ];
    StreamsConfig::from_properties(base.iter().chain(extra).copied()).unwrap()
}

fn task_ids(text: &str) -> BTreeSet<String> {
    samples(text, "streams_task_process_records_total", &[])
        .iter()
        .filter_map(|(labels, _)| {
            let start = labels.find("task_id=\"")? + 9;
            let end = labels[start..].find('"')? + start;
            Some(labels[start..end].to_owned())
        })
        .collect()
}

/// Scrapes until `done(text)` or fails after `timeout`, showing the last scrape.
fn scrape_until(address: SocketAddr, timeout: Duration, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let (status, text) = get(address, "/metrics");
        assert_eq!(status, 200);
        if done(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not reached; last scrape:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn start(topology: Topology, config: StreamsConfig) -> (KafkaStreams, SocketAddr) {
    let mut app = KafkaStreams::new(topology, config).unwrap();
    app.start().unwrap();
    assert!(app.wait_for_state(State::Running, Duration::from_secs(60)));
    let address = app.metrics_address().expect("metrics endpoint");
    (app, address)
}

#[test]
fn metrics_are_scraped_while_running_and_follow_the_tasks() {
    let Some(bootstrap) = kafka::require_kafka("metrics_are_scraped_while_running_and_follow_the_tasks")
    else {
        return;
    };
    let app_id = kafka::unique_name("metrics-app");
    let input = kafka::unique_name("words");
    let output = kafka::unique_name("counts");
    kafka::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());

    let (mut a, address) = start(topology(&input, &output), config(&bootstrap, &app_id, d1.path()));
    for probe in ["/health", "/health/live", "/health/ready"] {
        let (status, body) = get(address, probe);
        assert_eq!((status, body.trim()), (200, "Running"), "{probe}");
    }

    const N: usize = 2_000;
    common::produce_words(&bootstrap, &input, 100, N / 100, "v");

    let app = format!("application_id=\"{app_id}\"");
    let n = N as f64;
    let lag_of_input = format!("topic=\"{input}\"");
    // Lag comes from the consumer's statistics, emitted once a second.
    let text = scrape_until(address, Duration::from_secs(60), "all records processed", |t| {
        sum(t, "streams_thread_process_records_total", &[&app]) == n
            && sum(
                t,
                "streams_processor_node_records_in_total",
                &["processor_node_id=\"count\""],
            ) == n
            && samples(t, "streams_task_records_lag", &[&lag_of_input]).len() == 4
            && sum(t, "streams_task_records_lag", &[&lag_of_input]) == 0.0
    });

    // Thread level.
    let thread = format!("thread_id=\"{app_id}-StreamThread-1\"");
    assert!(
        sum(
            &text,
            "streams_thread_poll_latency_seconds_count",
            &[&app, &thread]
        ) > 0.0
    );
    assert!(sum(&text, "streams_thread_commit_total", &[&thread]) > 0.0);
    // Commit phases: at-least-once flushes stores and the producer and commits offsets;
    // no transaction phase runs.
    let phase = |p: &str| {
        sum(
            &text,
            "streams_thread_commit_phase_seconds_total",
            &[&thread, &format!("phase=\"{p}\"")],
        )
    };
    for p in ["flush_stores", "flush_producer", "commit_offsets"] {
        assert!(phase(p) > 0.0, "phase {p}");
    }
    for p in ["send_offsets", "commit_transaction", "begin_transaction"] {
        assert_eq!(phase(p), 0.0, "phase {p}");
    }
    assert_eq!(
        samples(
            &text,
            "streams_thread_produce_queue_full_seconds_total",
            &[&thread]
        )
        .len(),
        1
    );
    assert_eq!(sum(&text, "streams_thread_task_created_total", &[&thread]), 4.0);
    assert_eq!(sum(&text, "streams_client_alive_stream_threads", &[&app]), 1.0);
    assert_eq!(
        sum(&text, "streams_client_state", &[&app, "state=\"RUNNING\""]),
        1.0
    );
    assert_eq!(
        samples(&text, "streams_client_topology_info", &[&app]).len(),
        1,
        "topology info"
    );
    // Task level: four tasks whose counts add up, lag caught up.
    assert_eq!(
        task_ids(&text),
        ["0_0", "0_1", "0_2", "0_3"].map(String::from).into()
    );
    assert_eq!(sum(&text, "streams_task_process_records_total", &[&thread]), n);
    // Processor nodes: the source forwards every record to `count`, which forwards each.
    assert_eq!(
        sum(
            &text,
            "streams_processor_node_records_forwarded_total",
            &["processor_node_id=\"src\""]
        ),
        n
    );
    assert_eq!(
        sum(
            &text,
            "streams_processor_node_records_forwarded_total",
            &["processor_node_id=\"count\""]
        ),
        n
    );
    assert!(
        sum(
            &text,
            "streams_processor_node_process_latency_seconds_count",
            &["processor_node_id=\"count\""]
        ) == n,
        "DEBUG level times every record"
    );
    // Store level: one get and one put per record, RocksDB gauges present.
    let store = "store=\"counts\"";
    assert_eq!(
        sum(
            &text,
            "streams_store_operations_total",
            &[store, "operation=\"get\""]
        ),
        n
    );
    assert_eq!(
        sum(
            &text,
            "streams_store_operations_total",
            &[store, "operation=\"put\""]
        ),
        n
    );
    assert!(
        sum(
            &text,
            "streams_store_operation_latency_seconds_count",
            &[store, "operation=\"put\""]
        ) == n
    );
    assert_eq!(samples(&text, "streams_store_estimated_keys", &[store]).len(), 4);
    assert_eq!(sum(&text, "streams_store_open_iterators", &[store]), 0.0);

    // A second instance joins: the first keeps two tasks, and the series of the two it gave
    // away are gone.
    let (mut b, address_b) = start(topology(&input, &output), config(&bootstrap, &app_id, d2.path()));
    let text = scrape_until(address, Duration::from_secs(60), "tasks handed over", |t| {
        task_ids(t).len() == 2
    });
    let kept = task_ids(&text);
    let text_b = scrape_until(address_b, Duration::from_secs(60), "tasks taken over", |t| {
        task_ids(t).len() == 2
    });
    assert!(
        kept.is_disjoint(&task_ids(&text_b)),
        "{kept:?} vs {:?}",
        task_ids(&text_b)
    );
    for id in ["0_0", "0_1", "0_2", "0_3"] {
        let label = format!("task_id=\"{id}\"");
        let series = samples(&text, "streams_store_operations_total", &[&label]).len();
        assert_eq!(series > 0, kept.contains(id), "store series of task {id}");
    }

    assert!(b.close(Duration::from_secs(60)));
    assert!(a.close(Duration::from_secs(60)));
    for probe in ["/health", "/health/live", "/health/ready"] {
        let (status, body) = get(address, probe);
        assert_eq!((status, body.trim()), (503, "NotRunning"), "{probe}");
    }
}

/// Lag is reported for every assigned input partition, also those that never had a record,
/// and reads 0 once caught up, also where the input was written in transactions (the log
/// then ends in a commit marker, which the consumer never delivers).
#[test]
fn lag_covers_every_partition_and_reads_zero_when_caught_up() {
    use rdkafka::producer::{BaseRecord, Producer};

    let Some(bootstrap) = kafka::require_kafka("lag_covers_every_partition_and_reads_zero_when_caught_up")
    else {
        return;
    };
    let app_id = kafka::unique_name("lag-app");
    let input = kafka::unique_name("lag-words");
    let output = kafka::unique_name("lag-counts");
    kafka::create_topic(&bootstrap, &input, 4, &[]).unwrap();
    kafka::create_topic(&bootstrap, &output, 4, &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config_with(
        &bootstrap,
        &app_id,
        dir.path(),
        &[("processing.guarantee", "exactly_once_v2")],
    );
    let (mut app, address) = start(topology(&input, &output), config);

    // Two of the four partitions get records, in two transactions.
    let producer = kafka::transactional_producer(&bootstrap, "lag-feeder", &[]).unwrap();
    for round in 0..2 {
        producer.begin_transaction().unwrap();
        for i in 0..25 {
            for partition in [0, 1] {
                let value = format!("w{round}-{i}");
                producer
                    .send(
                        BaseRecord::to(&input)
                            .key("w")
                            .payload(&value)
                            .partition(partition),
                    )
                    .unwrap();
            }
        }
        producer.commit_transaction(Duration::from_secs(30)).unwrap();
    }

    let app_label = format!("application_id=\"{app_id}\"");
    let lag_of_input = format!("topic=\"{input}\"");
    let text = scrape_until(
        address,
        Duration::from_secs(60),
        "every partition caught up",
        |t| {
            sum(t, "streams_thread_process_records_total", &[&app_label]) == 100.0
                && samples(t, "streams_task_records_lag", &[&lag_of_input]).len() == 4
                && sum(t, "streams_task_records_lag", &[&lag_of_input]) == 0.0
        },
    );
    let partitions: BTreeSet<&str> = samples(&text, "streams_task_records_lag", &[&lag_of_input])
        .iter()
        .filter_map(|(labels, _)| {
            let start = labels.find("partition=\"")? + 11;
            let end = labels[start..].find('"')? + start;
            Some(&labels[start..end])
        })
        .collect();
    assert_eq!(partitions, BTreeSet::from(["0", "1", "2", "3"]));
    assert!(app.close(Duration::from_secs(30)), "closed in time");
}
