//! Reaching a secured cluster, and saying clearly when it refuses.
//!
//! - Every client property is checked by librdkafka itself when the application is
//!   constructed ([`validate_clients`]): an unknown name or a bad value fails
//!   `KafkaStreams::new` naming the property, never quoting a secret value.
//! - `start` first waits for the cluster to answer ([`connect`]). A failed TLS handshake
//!   (the broker's certificate not signed by a trusted CA, ...) or refused SASL credentials
//!   end the wait at once with [`StreamsError::Tls`] or [`StreamsError::Authentication`]
//!   instead of librdkafka's endless reconnecting; a cluster that does not answer at all ends
//!   it after [`CONNECT_TIMEOUT`], with the last error librdkafka reported.
//! - An operation the principal may not do is a [`StreamsError::Authorization`] naming the
//!   resource and the ACL that grants it ([`denied`]); the runtime never retries it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::config::{MASK, StreamsConfig, is_secret};
use crate::model::error::StreamsError;
use crate::runtime::client::client_log::forward_log;
use crate::runtime::client::redact::redact;

/// How long `start` waits for the cluster to answer at all.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Checks the client properties of every scope with librdkafka (each scope's own, so an
/// error names the property as it was set, with its prefix).
pub(crate) fn validate_clients(config: &StreamsConfig) -> Result<(), StreamsError> {
    for (prefix, props) in config.client_scopes() {
        let mut c = ClientConfig::new();
        for (k, v) in props {
            c.set(k, v);
        }
        if let Err(KafkaError::ClientConfig(_, description, key, value)) = c.create_native_config() {
            let description = if is_secret(&key) && !value.is_empty() {
                description.replace(&value, MASK)
            } else {
                description
            };
            return Err(StreamsError::Config {
                property: format!("{prefix}{key}"),
                message: format!("refused by librdkafka: {}", redact(&description)),
            });
        }
    }
    Ok(())
}

/// Whether `code` says the principal is not authorized.
pub(crate) fn is_authorization(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::GroupAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::TransactionalIdAuthorizationFailed
    )
}

/// The error of an operation on `resource` the principal may not do: `what` was refused
/// (`code`), and `grant` is the ACL that allows it.
pub(crate) fn denied(
    resource: String,
    what: &str,
    code: impl std::fmt::Display,
    grant: &str,
) -> StreamsError {
    StreamsError::Authorization {
        resource,
        message: redact(&format!(
            "{what} was refused ({code}); grant the application's principal {grant}"
        ))
        .into_owned(),
    }
}

/// What a [`ConnectContext`] saw.
#[derive(Debug, Clone, Default)]
struct Seen {
    /// The first TLS or SASL failure.
    failure: Option<(RDKafkaErrorCode, String)>,
    /// The last error of any kind.
    last: Option<String>,
}

/// The context of the client `start` reaches the cluster with: forwards librdkafka's log
/// lines and keeps the first TLS or authentication failure it reports.
#[derive(Default)]
pub(crate) struct ConnectContext {
    seen: Mutex<Seen>,
}

impl ClientContext for ConnectContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        forward_log("startup", level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let reason = redact(reason).into_owned();
        tracing::warn!(client = "startup", error = %error, "kafka client: {reason}");
        if let Ok(mut seen) = self.seen.lock() {
            if let Some(code @ (RDKafkaErrorCode::SSL | RDKafkaErrorCode::Authentication)) =
                error.rdkafka_error_code()
            {
                seen.failure.get_or_insert((code, reason.clone()));
            }
            seen.last = Some(reason);
        }
    }
}

impl ConsumerContext for ConnectContext {}

/// The client `start` uses for metadata and the checks before the threads start.
pub(crate) type StartupConsumer = BaseConsumer<ConnectContext>;

/// `bootstrap` followed by the other brokers the cluster lists (their `host:port` on the
/// listener `client` reached), for every client of the stream threads.
///
/// librdkafka learns a cluster's brokers only from a metadata answer, and a client that has
/// not asked anything yet knows only its bootstrap list. With one bootstrap broker paused
/// (or gone), a client first used after that (a restore consumer, a new thread's consumer)
/// could reach no broker at all until it came back, while the rest of the cluster served.
/// The list is read once, at start, with a metadata request for `topic`; a failure to read
/// it leaves `bootstrap` as it is.
pub(crate) fn with_cluster_brokers(bootstrap: &str, client: &StartupConsumer, topic: Option<&str>) -> String {
    let listed = listed_brokers(client.client(), topic, Duration::from_secs(10));
    with_brokers(Some(bootstrap), &listed).unwrap_or_else(|| bootstrap.to_owned())
}

/// The brokers the cluster lists, as `host:port`, from a metadata request of `client` for
/// `topic` (every topic when `None`; the broker list comes with either), waiting up to
/// `timeout`; none when it fails.
pub(crate) fn listed_brokers<C: ClientContext>(
    client: &rdkafka::client::Client<C>,
    topic: Option<&str>,
    timeout: Duration,
) -> Vec<String> {
    match client.fetch_metadata(topic, timeout) {
        Ok(md) => md
            .brokers()
            .iter()
            .map(|b| format!("{}:{}", b.host(), b.port()))
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "listing the cluster's brokers failed");
            Vec::new()
        }
    }
}

/// `configured` (a `bootstrap.servers` list) with each of `brokers` it does not name yet
/// appended; `None` where nothing is added.
pub(crate) fn with_brokers(configured: Option<&str>, brokers: &[String]) -> Option<String> {
    let mut list: Vec<&str> = configured
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .collect();
    let before = list.len();
    for b in brokers {
        if !list.contains(&b.as_str()) {
            list.push(b);
        }
    }
    (list.len() > before).then(|| list.join(","))
}

/// Waits until the cluster of `bootstrap` answers; fails at once on a TLS or SASL failure,
/// and after `limit` when nothing answers. `props` are the client's properties (the SASL
/// mechanism and user name are named in an authentication error).
pub(crate) fn connect(
    client: &StartupConsumer,
    bootstrap: &str,
    props: &std::collections::BTreeMap<String, String>,
    limit: Duration,
) -> Result<(), StreamsError> {
    let deadline = Instant::now() + limit;
    loop {
        // Polling serves the client's events: its log lines and errors reach the context.
        if let Some(Err(e)) = client.poll(Duration::from_millis(100)) {
            tracing::debug!(client = "startup", error = %e, "while connecting");
        }
        if client
            .client()
            .fetch_cluster_id(Duration::from_millis(150))
            .is_some()
        {
            return Ok(());
        }
        let Seen { failure, last } = client
            .context()
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        match failure {
            Some((RDKafkaErrorCode::SSL, reason)) => {
                return Err(StreamsError::Tls {
                    message: format!("{bootstrap}: {reason}"),
                });
            }
            Some((_, reason)) => {
                let mechanism = props.get("sasl.mechanism").map_or("GSSAPI", String::as_str);
                let user = props
                    .get("sasl.username")
                    .map(|u| format!(" as user `{u}`"))
                    .unwrap_or_default();
                return Err(StreamsError::Authentication {
                    message: format!("{bootstrap} with sasl.mechanism={mechanism}{user}: {reason}"),
                });
            }
            None => {}
        }
        if Instant::now() >= deadline {
            return Err(StreamsError::Kafka {
                message: format!(
                    "no answer from the brokers at {bootstrap} within {limit:?}{}",
                    last.map(|l| format!(" (last error: {l})")).unwrap_or_default()
                ),
                retriable: true,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_producer_also_bootstraps_from_the_listed_brokers() {
        let listed = ["b:9092".to_owned(), "c:9092".to_owned(), "a:9092".to_owned()];
        assert_eq!(
            with_brokers(Some("a:9092, b:9092"), &listed).as_deref(),
            Some("a:9092,b:9092,c:9092")
        );
        assert_eq!(with_brokers(Some("a:9092,b:9092,c:9092"), &listed), None);
        assert_eq!(with_brokers(Some("a:9092"), &[]), None);
        assert_eq!(with_brokers(None, &listed[..1]).as_deref(), Some("b:9092"));
    }

    #[test]
    fn librdkafka_refusals_name_the_property_and_mask_secrets() {
        let config = StreamsConfig::from_properties([
            ("application.id", "app"),
            ("producer.sasl.passwrd", "connect-test-pw-9d1"),
        ])
        .unwrap();
        let e = validate_clients(&config).unwrap_err().to_string();
        assert!(e.contains("producer.sasl.passwrd"), "{e}");
        assert!(!e.contains("connect-test-pw-9d1"), "{e}");

        let config = StreamsConfig::from_properties([
            ("application.id", "app"),
            ("security.protocol", "SASL_TLS"),
            ("sasl.password", "connect-test-pw-9d1"),
        ])
        .unwrap();
        let e = validate_clients(&config).unwrap_err().to_string();
        assert!(e.contains("`security.protocol`") && e.contains("SASL_TLS"), "{e}");

        let config = StreamsConfig::from_properties([
            ("application.id", "app"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.password", "connect-test-pw-9d1"),
            ("ssl.key.password", "connect-test-pw-9d2"),
        ])
        .unwrap();
        validate_clients(&config).unwrap();
    }
}
