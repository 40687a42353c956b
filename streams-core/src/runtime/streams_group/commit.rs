//! Offset commits of a streams group member: `OffsetCommit` v9+ carrying the member id and
//! its current member epoch, so the coordinator accepts them only from a live member of
//! the current epoch.
//!
//! Invariants: a commit goes to the group coordinator over a connection of its own (the
//! heartbeat thread's connection stays free); an error is either retriable (a stale epoch,
//! the coordinator moved or is loading, a rebalance) — the caller may commit again,
//! typically after the next heartbeat — or it means the tasks are lost (the member was
//! fenced or is unknown): the caller drops its tasks without committing.

use std::collections::BTreeMap;

use kafka_protocol::messages::OffsetCommitRequest;
use kafka_protocol::messages::TopicName;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::protocol::StrBytes;

use crate::model::error::StreamsError;
use crate::runtime::streams_group::wire::{Conn, coordinator_moved, group_id};

/// Why a commit failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CommitError {
    /// Try again (after the next heartbeat for a stale epoch).
    #[error("offset commit of group `{group}` failed, retriable: {message}")]
    Retriable {
        /// The group.
        group: String,
        /// The error code's name and context.
        message: String,
    },
    /// The member was fenced or is unknown to the coordinator: its tasks are lost.
    #[error("offset commit of group `{group}` refused, the member's tasks are lost: {message}")]
    Lost {
        /// The group.
        group: String,
        /// The error code's name and context.
        message: String,
    },
    /// Any other failure (authorization, an unexpected error code).
    #[error(transparent)]
    Failed(#[from] StreamsError),
}

impl CommitError {
    /// Whether committing again may succeed.
    pub(crate) fn is_retriable(&self) -> bool {
        match self {
            Self::Retriable { .. } => true,
            Self::Lost { .. } => false,
            Self::Failed(e) => e.is_retriable(),
        }
    }
}

/// The name of error `code`.
pub(crate) fn error_name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        Some(e) => format!("{e:?} ({code})"),
        None => "NONE".into(),
    }
}

/// Commits `offsets` (topic, partition, next offset, metadata) for `member_id` at `epoch`.
pub(crate) fn commit(
    conn: &mut Conn,
    group: &str,
    member_id: &str,
    epoch: i32,
    offsets: &[(String, i32, i64, String)],
) -> Result<(), CommitError> {
    let version = conn.version(8, (9, 9)).ok_or_else(|| {
        CommitError::Failed(StreamsError::Kafka {
            message: format!("{} does not offer OffsetCommit v9", conn.addr()),
            retriable: false,
        })
    })?;
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (topic, partition, offset, metadata) in offsets {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = *partition;
        p.committed_offset = *offset;
        p.committed_leader_epoch = -1;
        p.committed_metadata = Some(StrBytes::from_string(metadata.clone()));
        by_topic.entry(topic).or_default().push(p);
    }
    let mut req = OffsetCommitRequest::default();
    req.group_id = group_id(group);
    req.generation_id_or_member_epoch = epoch;
    req.member_id = StrBytes::from_string(member_id.to_owned());
    req.topics = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            let mut t = OffsetCommitRequestTopic::default();
            t.name = TopicName(StrBytes::from_string(name.to_owned()));
            t.partitions = partitions;
            t
        })
        .collect();
    let resp = conn.send(&req, version)?;
    let failed = resp
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
        .find(|(_, p)| p.error_code != 0);
    let Some((topic, p)) = failed else { return Ok(()) };
    let code = p.error_code;
    let message = format!(
        "{} on {}-{} (member epoch {epoch})",
        error_name(code),
        topic.name.0,
        p.partition_index
    );
    let group = group.to_owned();
    Err(match code {
        // STALE_MEMBER_EPOCH, REBALANCE_IN_PROGRESS, or the coordinator moved/loads.
        113 | 27 => CommitError::Retriable { group, message },
        c if coordinator_moved(c) => CommitError::Retriable { group, message },
        // FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION
        110 | 25 | 22 => CommitError::Lost { group, message },
        30 | 29 => CommitError::Failed(StreamsError::Authorization {
            resource: format!("group `{group}`"),
            message: format!("committing offsets: {message} (grant READ on the group and the topics)"),
        }),
        _ => CommitError::Failed(StreamsError::Kafka {
            message: format!("offset commit of group `{group}`: {message}"),
            retriable: kafka_protocol::ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable()),
        }),
    })
}
