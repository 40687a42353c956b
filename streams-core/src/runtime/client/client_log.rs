//! librdkafka's log lines, passed on to `tracing` (target `librdkafka`) with their levels
//! mapped and the configuration's secrets masked. A leaf of the runtime: every client
//! context logs through it.

use rdkafka::config::RDKafkaLogLevel;

/// Passes a librdkafka log line on to `tracing` (target `librdkafka`) at the matching level,
/// the configuration's secret values masked (see `redact.rs`).
pub(crate) fn forward_log(client: &str, level: RDKafkaLogLevel, fac: &str, message: &str) {
    let message = crate::runtime::client::redact::redact(message);
    let message = message.as_ref();
    let level = if is_transient_retry(level, message) {
        RDKafkaLogLevel::Info
    } else {
        level
    };
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => {
            tracing::error!(target: "librdkafka", client, "{fac} {message}")
        }
        RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", client, "{fac} {message}"),
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
            tracing::info!(target: "librdkafka", client, "{fac} {message}")
        }
        RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", client, "{fac} {message}"),
    }
}

/// Whether `message` is a warning librdkafka logs while it waits out a coordinator that is
/// still loading its state (a broker just started): it retries by itself and the operation
/// goes through, so it is news, not a warning.
fn is_transient_retry(level: RDKafkaLogLevel, message: &str) -> bool {
    matches!(level, RDKafkaLogLevel::Warning)
        && message.contains("Coordinator load in progress")
        && message.ends_with("retrying")
}

/// The librdkafka log level for the runtime's clients: what `tracing` would show of target
/// `librdkafka`, but never below warnings, which carry the offset resets this module must
/// see whatever the application's log filter. (rdkafka derives the level from the `log`
/// crate's filter, which is `Error` when no logger is installed.)
pub(crate) fn client_log_level() -> RDKafkaLogLevel {
    if tracing::enabled!(target: "librdkafka", tracing::Level::DEBUG) {
        RDKafkaLogLevel::Debug
    } else if tracing::enabled!(target: "librdkafka", tracing::Level::INFO) {
        RDKafkaLogLevel::Info
    } else {
        RDKafkaLogLevel::Warning
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coordinator_still_loading_is_not_a_warning() {
        let loading = "Failed to acquire transactional PID from broker TxnCoordinator/1: \
                       Broker: Coordinator load in progress: retrying";
        assert!(is_transient_retry(RDKafkaLogLevel::Warning, loading));
        assert!(!is_transient_retry(RDKafkaLogLevel::Error, loading));
        assert!(!is_transient_retry(
            RDKafkaLogLevel::Warning,
            "Failed to acquire transactional PID from broker TxnCoordinator/1: \
             Broker: Coordinator load in progress"
        ));
        assert!(!is_transient_retry(
            RDKafkaLogLevel::Warning,
            "Fetch position offset 5 is out of range for partition [0], resetting offset"
        ));
    }
}
