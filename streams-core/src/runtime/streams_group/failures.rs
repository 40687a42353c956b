//! What the coordinator's answers to a streams group member mean when they are not
//! success: the error codes and group statuses that fail the member (with the
//! [`StreamsError`] it reports), as against those it retries or waits out.

use crate::model::error::{StreamsError, StreamsGroupFailure};
use crate::runtime::streams_group::codec::GroupStatus;
use crate::runtime::streams_group::commit::error_name;
use crate::runtime::streams_group::wire;

/// A fatal error for heartbeat error `code`, or `None` when the member retries.
pub(crate) fn fatal(group: &str, code: i16, message: Option<&str>) -> Option<StreamsError> {
    let static_refused = code == 42 && message.is_some_and(|m| m.contains("Static member"));
    let mut message = format!("{}: {}", error_name(code), message.unwrap_or(""));
    if static_refused {
        message.push_str(
            " (static membership, group.instance.id, needs Apache Kafka 4.4 or later under \
             group.protocol=streams)",
        );
    }
    let kind = match code {
        // INVALID_REQUEST from a broker before 4.4 to a member with `group.instance.id`.
        42 if static_refused => StreamsGroupFailure::Unsupported,
        // GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED
        29..=31 => {
            return Some(StreamsError::Authorization {
                resource: format!("group `{group}`"),
                message: format!(
                    "{message} (grant READ on the group, DESCRIBE on the source topics, and \
                     CREATE on the internal topics)"
                ),
            });
        }
        130 => StreamsGroupFailure::InvalidTopology,
        131 | 132 => StreamsGroupFailure::TopologyEpoch,
        // INCONSISTENT_GROUP_PROTOCOL, GROUP_ID_NOT_FOUND (a group of another type)
        23 | 69 => StreamsGroupFailure::OtherGroupType,
        81 => StreamsGroupFailure::GroupFull,
        // FENCED_INSTANCE_ID: another member joined with this member's `group.instance.id`.
        82 => StreamsGroupFailure::InstanceIdInUse,
        35 => StreamsGroupFailure::Unsupported,
        // INVALID_REQUEST, UNRELEASED_INSTANCE_ID and anything unexpected
        _ if wire::coordinator_moved(code) => return None,
        _ => StreamsGroupFailure::Protocol,
    };
    let message = if kind == StreamsGroupFailure::OtherGroupType {
        format!(
            "{message}: the group exists as a consumer group, or as a classic group that still \
             has members (an earlier run with another group.protocol, or another application \
             with this id). Kafka turns an empty classic group into a streams group and keeps \
             its committed offsets, but not a consumer group: stop every instance (one that did \
             not leave counts until its session times out), and coming \
             from group.protocol=consumer start the application once with \
             group.protocol=classic and close it; then start it with group.protocol=streams. \
             Or keep the earlier group.protocol, or use a new application.id"
        )
    } else {
        message
    };
    Some(StreamsError::StreamsGroup {
        group: group.to_owned(),
        kind,
        message,
    })
}

/// The fatal condition a group status reports, as Kafka Streams treats them: missing
/// source topics and incorrectly partitioned topics fail the thread (nothing of the
/// topology can be assigned until someone fixes the topics), and so does a shutdown
/// another instance requested. Stale topology, missing internal topics and a delayed
/// assignment only wait.
pub(crate) fn status_failure<'a>(
    group: &str,
    status: impl IntoIterator<Item = &'a GroupStatus>,
) -> Option<StreamsError> {
    status.into_iter().find_map(|s| {
        let kind = match s.code {
            1 => StreamsGroupFailure::MissingSourceTopics,
            2 => StreamsGroupFailure::IncorrectlyPartitioned,
            4 => StreamsGroupFailure::ShutdownRequested,
            _ => return None,
        };
        Some(StreamsError::StreamsGroup {
            group: group.to_owned(),
            kind,
            message: s.detail.clone(),
        })
    })
}
