//! Which consumer group protocol the stream threads join with.
//!
//! The consumer protocol of KIP-848 (`group.protocol=consumer`) is the default where the
//! broker offers it (Apache Kafka 4.0 and later list `consumer` in
//! `group.coordinator.rebalance.protocols`): rebalances are incremental, so tasks whose
//! partitions stay assigned keep processing through them, and the broker assigns with
//! `range`, which keeps co-partitioned topics on one task. The classic protocol (eager
//! `range` on the client) is used when:
//! - `group.protocol=classic` is configured;
//! - a setting only the classic protocol takes is configured for the main consumer
//!   (`session.timeout.ms`, `heartbeat.interval.ms`, `partition.assignment.strategy`: with
//!   the consumer protocol the broker owns them);
//! - the broker does not offer the consumer protocol, the application runs on the embedded
//!   mock cluster, or the broker's configuration cannot be read (a principal without
//!   DESCRIBE_CONFIGS on the cluster: the broker then returns no configuration at all):
//!   logged, with the reason.
//!
//! The streams protocol of KIP-1071 (`group.protocol=streams`, chosen too when
//! `num.standby.replicas` is above 0 and no protocol is set) makes each stream thread a
//! member of a *streams group*: the broker assigns tasks (active and standby) rather than
//! partitions, and the runtime assigns its consumers' partitions itself (see
//! `streams_group/`). It needs Apache Kafka 4.2 or later; it is never chosen by itself.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};

use crate::config::OAuthBearerTokenProvider;

/// The consumer group protocol of an application's stream threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupProtocol {
    /// The classic protocol: eager rebalances, `range` assigned on the client.
    Classic,
    /// The consumer protocol of KIP-848: incremental rebalances, `range` assigned by the
    /// broker.
    Consumer,
    /// The streams protocol of KIP-1071: the broker assigns active and standby tasks to the
    /// stream threads; the consumers are assigned their partitions by the runtime.
    Streams,
}

impl GroupProtocol {
    /// The value of librdkafka's `group.protocol`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Classic => "classic",
            Self::Consumer => "consumer",
            Self::Streams => "streams",
        }
    }
}

/// Settings that only the classic protocol takes from the client.
const CLASSIC_ONLY: [&str; 3] = [
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
];

/// The protocol the main consumer's properties, `group.protocol=streams` (`streams`, taken
/// out of the client properties) and `num.standby.replicas` (`standbys`) decide by
/// themselves, with the reason; `None` when the broker decides.
fn configured(
    main: &BTreeMap<String, String>,
    streams: bool,
    standbys: usize,
) -> Option<(GroupProtocol, String)> {
    if streams {
        return Some((
            GroupProtocol::Streams,
            "group.protocol=streams is configured".into(),
        ));
    }
    if let Some(p) = main.get("group.protocol") {
        let protocol = match p.trim().to_ascii_lowercase().as_str() {
            "consumer" => GroupProtocol::Consumer,
            "streams" => GroupProtocol::Streams,
            _ => GroupProtocol::Classic,
        };
        return Some((protocol, format!("group.protocol={p} is configured")));
    }
    if standbys > 0 {
        return Some((
            GroupProtocol::Streams,
            format!(
                "num.standby.replicas={standbys} is configured, and the broker places standbys only in streams groups"
            ),
        ));
    }
    CLASSIC_ONLY.iter().find(|k| main.contains_key(**k)).map(|k| {
        (
            GroupProtocol::Classic,
            format!("{k} is configured, which only the classic protocol takes"),
        )
    })
}

/// Chooses the protocol for the main consumer's properties `main`; `md` and `admin` reach
/// the cluster.
pub(crate) fn choose<C: ConsumerContext>(
    main: &BTreeMap<String, String>,
    streams: bool,
    standbys: usize,
    md: &BaseConsumer<C>,
    admin: &ClientConfig,
    tokens: Option<&OAuthBearerTokenProvider>,
    on_mock: bool,
) -> GroupProtocol {
    let (protocol, reason) = configured(main, streams, standbys).unwrap_or_else(|| {
        if on_mock {
            return (GroupProtocol::Classic, "the embedded mock cluster runs the classic protocol".into());
        }
        match broker_protocols(md, admin, tokens) {
            Ok(list) if list.split(',').any(|p| p.trim() == "consumer") => (
                GroupProtocol::Consumer,
                format!("the broker offers it (group.coordinator.rebalance.protocols={list})"),
            ),
            Ok(list) => (
                GroupProtocol::Classic,
                format!("the broker does not offer the consumer protocol (group.coordinator.rebalance.protocols={list})"),
            ),
            Err(e) => (
                GroupProtocol::Classic,
                format!("the broker's group protocols could not be read ({e})"),
            ),
        }
    });
    tracing::info!(
        protocol = protocol.name(),
        "consumer group protocol: {}: {reason}",
        protocol.name()
    );
    protocol
}

/// The broker's `group.coordinator.rebalance.protocols` (absent before Apache Kafka 3.7:
/// classic only).
fn broker_protocols<C: ConsumerContext>(
    md: &BaseConsumer<C>,
    admin: &ClientConfig,
    tokens: Option<&OAuthBearerTokenProvider>,
) -> Result<String, String> {
    let timeout = Duration::from_secs(30);
    let metadata = md.fetch_metadata(None, timeout).map_err(|e| e.to_string())?;
    let broker = metadata
        .brokers()
        .first()
        .ok_or("no broker in the metadata")?
        .id();
    let admin: AdminClient<crate::runtime::client::connect::ConnectContext> = admin
        .create_with_context(crate::runtime::client::connect::ConnectContext::default())
        .map_err(|e| e.to_string())?;
    let admin = crate::runtime::client::oauth::Authenticated::new(admin, tokens, "admin client")
        .map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let opts = AdminOptions::new().request_timeout(Some(timeout));
    let described = rt
        .block_on(async {
            tokio::time::timeout(
                timeout + Duration::from_secs(5),
                admin.describe_configs(&[ResourceSpecifier::Broker(broker)], &opts),
            )
            .await
        })
        .map_err(|_| "describing the broker's configuration timed out".to_owned())?
        .map_err(|e| e.to_string())?;
    let resource = described
        .into_iter()
        .next()
        .ok_or("no configuration returned")?
        .map_err(|code| code.to_string())?;
    if resource.entries.is_empty() {
        // A broker always has configuration; none at all is the answer to a principal
        // without DESCRIBE_CONFIGS on the cluster (rust-rdkafka drops the error code).
        return Err(
            "the broker returned no configuration: the principal may lack DESCRIBE_CONFIGS on the cluster"
                .into(),
        );
    }
    Ok(resource
        .get("group.coordinator.rebalance.protocols")
        .and_then(|e| e.value.clone())
        .unwrap_or_else(|| "classic".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::map as props;

    #[test]
    fn configured_protocol_and_classic_only_settings_decide_before_the_broker() {
        assert_eq!(configured(&props(&[]), false, 0), None);
        assert_eq!(
            configured(&props(&[("group.protocol", "consumer")]), false, 0).map(|c| c.0),
            Some(GroupProtocol::Consumer)
        );
        assert_eq!(
            configured(&props(&[]), true, 0).map(|c| c.0),
            Some(GroupProtocol::Streams)
        );
        assert_eq!(
            configured(&props(&[]), false, 1).map(|c| c.0),
            Some(GroupProtocol::Streams)
        );
        assert_eq!(
            configured(
                &props(&[("group.protocol", "classic"), ("session.timeout.ms", "6000")]),
                false,
                0
            )
            .map(|c| c.0),
            Some(GroupProtocol::Classic)
        );
        for k in CLASSIC_ONLY {
            let (p, reason) = configured(&props(&[(k, "x")]), false, 0).unwrap();
            assert_eq!(p, GroupProtocol::Classic);
            assert!(reason.contains(k), "{reason}");
        }
        assert_eq!(configured(&props(&[("fetch.min.bytes", "1")]), false, 0), None);
    }
}
