//! The application's lifecycle states and the metrics recording level.

/// The state of a [`KafkaStreams`](crate::KafkaStreams) application, as in Kafka Streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Built, not started.
    Created,
    /// Started; some thread is in a rebalance or restoring its tasks.
    Rebalancing,
    /// Every thread is processing.
    Running,
    /// `close` was called; threads are finishing.
    PendingShutdown,
    /// Closed.
    NotRunning,
    /// A thread failed and the application stopped.
    Error,
}

/// Which metrics are recorded (`metrics.recording.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecordingLevel {
    /// Counters and gauges of every level, latency histograms of threads. The default.
    #[default]
    Info,
    /// Also latency histograms per processor node and per store operation.
    Debug,
}
