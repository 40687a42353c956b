//! Prometheus metrics of an application: client, stream threads, tasks, processor nodes and
//! state stores, in Kafka Streams' hierarchy (see `docs/metrics.md` for every metric).
//!
//! One [`Metrics`] per application owns a [`prometheus::Registry`] with every family
//! registered once. Threads, tasks, nodes and stores take pre-resolved handles, with their
//! label values bound when they are created, so recording on the per-record path is at most
//! a relaxed atomic add: no lock, no map lookup, no formatting. Processor-node counts are
//! plain adds on task-local counters, published to the registry about once a second.
//! Latency histograms per processor node and per store operation cost two clock reads
//! each, so they are recorded only at `metrics.recording.level=DEBUG`, as in Kafka Streams.
//!
//! When a task closes (or moves to another thread or instance), its series are removed.
//! Rates are not separate series: Kafka Streams' `process-rate` is
//! `rate(streams_task_process_records_total[1m])` here.

mod families;
pub(crate) mod handles;
mod server;
mod store;

use std::sync::Arc;

use prometheus::{Encoder, Registry, TextEncoder};

pub(crate) use handles::TaskMetrics;
pub use handles::ThreadMetrics;
pub(crate) use server::MetricsServer;

use self::families::Families;
pub use crate::model::RecordingLevel;
use crate::model::State;
use crate::model::error::StreamsError;

struct Inner {
    registry: Registry,
    families: Families,
    application_id: String,
    level: RecordingLevel,
}

/// The metrics of one application. Cheap to clone (shared).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("application_id", &self.inner.application_id)
            .field("level", &self.inner.level)
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// The metrics of application `application_id`, in a registry of their own.
    pub fn new(application_id: &str, level: RecordingLevel) -> Result<Self, StreamsError> {
        let registry = Registry::new();
        let families = Families::register(&registry)
            .map_err(|e| StreamsError::Usage(format!("registering metrics: {e}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                registry,
                families,
                application_id: application_id.to_owned(),
                level,
            }),
        })
    }

    /// The registry; register your own collectors here to serve them on the same endpoint.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// The recording level.
    pub fn recording_level(&self) -> RecordingLevel {
        self.inner.level
    }

    /// Every metric in Prometheus' text exposition format.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.inner.registry.gather(), &mut buf) {
            tracing::warn!(error = %e, "encoding metrics");
        }
        String::from_utf8(buf).unwrap_or_default()
    }

    pub(crate) fn application_id(&self) -> &str {
        &self.inner.application_id
    }

    pub(crate) fn families(&self) -> &Families {
        &self.inner.families
    }

    /// The metrics of stream thread `thread`; its series go when the handles are dropped.
    pub fn thread(&self, thread: &str) -> ThreadMetrics {
        ThreadMetrics::new(self, thread)
    }

    /// Sets the client state gauge.
    pub(crate) fn set_state(&self, state: State) {
        for s in [
            State::Created,
            State::Rebalancing,
            State::Running,
            State::PendingShutdown,
            State::NotRunning,
            State::Error,
        ] {
            let name = state_name(s);
            self.inner
                .families
                .client_state
                .with_label_values(&[self.application_id(), name])
                .set(i64::from(s == state));
        }
    }

    /// Sets the alive-threads gauge.
    pub(crate) fn set_alive_threads(&self, n: usize) {
        self.inner
            .families
            .alive_threads
            .with_label_values(&[self.application_id()])
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Publishes the topology description as an info metric.
    pub(crate) fn set_topology(&self, description: &str) {
        self.inner
            .families
            .topology_info
            .with_label_values(&[self.application_id(), description])
            .set(1);
    }
}

/// Kafka Streams' spelling of a state.
fn state_name(s: State) -> &'static str {
    match s {
        State::Created => "CREATED",
        State::Rebalancing => "REBALANCING",
        State::Running => "RUNNING",
        State::PendingShutdown => "PENDING_SHUTDOWN",
        State::NotRunning => "NOT_RUNNING",
        State::Error => "ERROR",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::TaskObserver;
    use crate::model::TaskId;

    fn series(m: &Metrics, name: &str) -> usize {
        m.registry()
            .gather()
            .iter()
            .filter(|f| f.name() == name)
            .map(|f| f.get_metric().len())
            .sum()
    }

    #[test]
    fn closed_task_leaves_no_series() {
        let m = Metrics::new("app", RecordingLevel::Debug).unwrap();
        let thread = m.thread("app-StreamThread-1");
        let mut task = thread.task(TaskId {
            subtopology: 0,
            partition: 3,
        });
        let _timer = task.watch_node("count");
        task.process_records.inc_by(5);
        task.set_lag("words", 3, 42);
        let _store = task.store("counts");
        let text = m.encode();
        assert!(text.contains(
            r#"streams_processor_node_records_in_total{application_id="app",processor_node_id="count",task_id="0_3",thread_id="app-StreamThread-1"} 0"#
        ), "{text}");
        assert!(text.contains(r#"partition="3""#), "{text}");
        assert_eq!(series(&m, "streams_store_operations_total"), 14);
        drop(task);
        for name in [
            "streams_task_process_records_total",
            "streams_task_records_lag",
            "streams_processor_node_records_in_total",
            "streams_processor_node_process_latency_seconds",
            "streams_store_operations_total",
            "streams_store_operation_latency_seconds",
            "streams_store_open_iterators",
        ] {
            assert_eq!(series(&m, name), 0, "{name} left after the task closed");
        }
        assert_eq!(series(&m, "streams_thread_process_records_total"), 1);
        drop(thread);
        assert_eq!(series(&m, "streams_thread_process_records_total"), 0);
    }

    #[test]
    fn client_state_is_one_hot() {
        let m = Metrics::new("app", RecordingLevel::Info).unwrap();
        m.set_state(State::Running);
        m.set_state(State::Rebalancing);
        let text = m.encode();
        assert!(text.contains(r#"streams_client_state{application_id="app",state="REBALANCING"} 1"#));
        assert!(text.contains(r#"streams_client_state{application_id="app",state="RUNNING"} 0"#));
    }

    /// Every metric name in `text` (`streams_...`), histogram suffixes stripped.
    fn names_in(text: &str) -> std::collections::BTreeSet<String> {
        let mut names = std::collections::BTreeSet::new();
        let mut rest = text;
        while let Some(i) = rest.find("streams_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(tail.len());
            let mut name = &tail[..end];
            for suffix in ["_bucket", "_sum", "_count"] {
                name = name.strip_suffix(suffix).unwrap_or(name);
            }
            // `streams_` inside a longer word (a crate name) is not a metric.
            if i == 0 || !rest[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '-') {
                names.insert(name.to_owned());
            }
            rest = &tail[end..];
        }
        names
    }

    #[test]
    fn docs_and_dashboard_name_exactly_the_registered_metrics() {
        let m = Metrics::new("app", RecordingLevel::Debug).unwrap();
        m.set_state(State::Running);
        m.set_alive_threads(1);
        m.set_topology("t");
        let thread = m.thread("t1");
        let mut task = thread.task(TaskId {
            subtopology: 0,
            partition: 0,
        });
        let _node = task.watch_node("n");
        let _store = task.store("s");
        task.set_lag("in", 0, 0);
        let _standby = thread.standby(TaskId {
            subtopology: 0,
            partition: 1,
        });
        let registered: std::collections::BTreeSet<String> = m
            .registry()
            .gather()
            .iter()
            .map(|f| f.name().to_owned())
            .collect();
        let docs = names_in(include_str!("../../../docs/metrics.md"));
        assert_eq!(docs, registered, "docs/metrics.md vs the registry");
        let dashboard = names_in(include_str!("../../../docs/grafana-dashboard.json"));
        let unknown: Vec<_> = dashboard.difference(&registered).collect();
        assert!(
            unknown.is_empty(),
            "the dashboard queries unknown metrics: {unknown:?}"
        );
    }
}
