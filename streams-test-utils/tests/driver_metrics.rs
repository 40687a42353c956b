//! The driver records the runtime's metrics when asked: per task through the engine's
//! observer, per thread (one, `<application id>-driver`) from what the tasks publish.

use streams_core::serdes::StringSerde;
use streams_core::{RecordingLevel, SinkConfig, SourceConfig, Topology};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

/// The values of the series of metric `name` in Prometheus' text format.
fn values(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn pass_through() -> Topology {
    let mut b = Topology::builder();
    let words = b.source("in", SourceConfig::new(["words"], StringSerde, StringSerde));
    b.sink(
        "out",
        SinkConfig::topic("copied", StringSerde, StringSerde),
        [&words],
    );
    b.build().unwrap()
}

#[test]
fn metrics_count_per_task_and_per_thread() {
    let config = DriverConfig::default()
        .application_id("app")
        .partitions("words", 2)
        .metrics(RecordingLevel::Info);
    let driver = TopologyTestDriver::new(pass_through(), config).unwrap();
    let input = driver.input_topic("words", StringSerde, StringSerde);
    for k in ["a", "b", "c", "d", "e"] {
        input.pipe(k.into(), "x".into()).unwrap();
    }
    let text = driver.metrics().expect("asked for metrics").encode();

    let thread = values(&text, "streams_thread_process_records_total");
    assert_eq!(thread.len(), 1, "{text}");
    assert!(thread[0].0.contains(r#"thread_id="app-driver""#), "{text}");
    assert_eq!(thread[0].1, 5.0, "{text}");

    let tasks = values(&text, "streams_task_process_records_total");
    assert_eq!(tasks.len(), 2, "one series per task: {text}");
    assert_eq!(tasks.iter().map(|(_, v)| v).sum::<f64>(), 5.0, "{text}");

    // Publishing again adds nothing new.
    let again = driver.metrics().unwrap().encode();
    assert_eq!(values(&again, "streams_thread_process_records_total")[0].1, 5.0);
}

#[test]
fn no_metrics_unless_asked() {
    let driver = TopologyTestDriver::new(pass_through(), DriverConfig::default()).unwrap();
    assert!(driver.metrics().is_none());
}
