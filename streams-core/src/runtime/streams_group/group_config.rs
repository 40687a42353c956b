//! The application's group settings, applied to its streams group before a member joins:
//! `IncrementalAlterConfigs` (SET) on the GROUP config resource (type 32) named after the
//! group.
//!
//! Invariants: only settings the application configured are sent, so a group keeps the
//! broker's defaults (`group.streams.*`) for the rest; a setting the broker refuses (out of
//! the broker's `group.streams.min/max.*` bounds) fails the join with a config error, and a
//! principal without ALTER_CONFIGS on the group gets an authorization error naming it.

use std::collections::BTreeMap;

use kafka_protocol::messages::IncrementalAlterConfigsRequest;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::protocol::StrBytes;

use crate::model::error::StreamsError;
use crate::runtime::streams_group::wire::{Conn, kafka};

/// The config resource type of a group.
const GROUP_RESOURCE: i8 = 32;

/// The group settings an application asks for: `streams.num.standby.replicas` from
/// `num.standby.replicas` when above 0, `streams.session.timeout.ms` and
/// `streams.heartbeat.interval.ms` from the main consumer's `session.timeout.ms` and
/// `heartbeat.interval.ms` (`main`) when configured.
pub(crate) fn group_configs(
    num_standby_replicas: usize,
    main: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if num_standby_replicas > 0 {
        out.push((
            "streams.num.standby.replicas".to_owned(),
            num_standby_replicas.to_string(),
        ));
    }
    for (ours, theirs) in [
        ("session.timeout.ms", "streams.session.timeout.ms"),
        ("heartbeat.interval.ms", "streams.heartbeat.interval.ms"),
    ] {
        if let Some(v) = main.get(ours) {
            out.push((theirs.to_owned(), v.clone()));
        }
    }
    out
}

/// [`group_configs`] of `config`.
pub(crate) fn group_configs_of(config: &crate::config::StreamsConfig) -> Vec<(String, String)> {
    group_configs(config.num_standby_replicas(), &config.main_consumer_properties())
}

/// Sets `configs` on group `group` through `conn` (any broker).
pub(crate) fn apply(conn: &mut Conn, group: &str, configs: &[(String, String)]) -> Result<(), StreamsError> {
    if configs.is_empty() {
        return Ok(());
    }
    let version = conn.version(44, (0, 1)).ok_or_else(|| {
        kafka(
            format!("{} offers no IncrementalAlterConfigs", conn.addr()),
            false,
        )
    })?;
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = GROUP_RESOURCE;
    resource.resource_name = StrBytes::from_string(group.to_owned());
    resource.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut c = AlterableConfig::default();
            c.name = StrBytes::from_string(k.clone());
            c.config_operation = 0; // SET
            c.value = Some(StrBytes::from_string(v.clone()));
            c
        })
        .collect();
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![resource];
    let resp = conn.send(&req, version)?;
    for r in &resp.responses {
        let why = r
            .error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default();
        match r.error_code {
            0 => {}
            // CLUSTER_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED
            30 | 31 => {
                return Err(StreamsError::Authorization {
                    resource: format!("group `{group}`"),
                    message: format!(
                        "setting its group configs {configs:?}: {why} (grant ALTER_CONFIGS on the group)"
                    ),
                });
            }
            // INVALID_CONFIG, INVALID_REQUEST
            40 | 42 => {
                return Err(StreamsError::Config {
                    property: configs
                        .iter()
                        .map(|(k, _)| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    message: format!("the broker refused group `{group}`'s settings {configs:?}: {why}"),
                });
            }
            code => {
                return Err(kafka(
                    format!("IncrementalAlterConfigs on group `{group}`: error {code} {why}"),
                    false,
                ));
            }
        }
    }
    tracing::info!(group, ?configs, "applied the streams group's configs");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_configured_settings_are_sent() {
        assert!(group_configs(0, &BTreeMap::new()).is_empty());
        let main = BTreeMap::from([
            ("session.timeout.ms".to_owned(), "12000".to_owned()),
            ("fetch.min.bytes".to_owned(), "1".to_owned()),
        ]);
        assert_eq!(
            group_configs(1, &main),
            vec![
                ("streams.num.standby.replicas".to_owned(), "1".to_owned()),
                ("streams.session.timeout.ms".to_owned(), "12000".to_owned()),
            ]
        );
    }
}
