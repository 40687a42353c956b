//! `StreamsGroupDescribe` (API key 89, version 0): a member's current assignment as the
//! coordinator holds it, read when a heartbeat's answer may have been lost.
//!
//! Why: the coordinator sends a member its tasks only in the answer to the heartbeat that
//! changed them (or to a join); a later heartbeat is answered without tasks while they stay
//! the same. When that one answer is lost (a request timed out, the coordinator's broker
//! hung after writing the change, the coordinator moved), the member heartbeats on with
//! the tasks it had, the coordinator counts the new ones as the member's, and nobody
//! processes them: no other member is given a task the coordinator believes is owned. So
//! after a failed heartbeat the member asks for its assignment once (see
//! [`Heartbeat`](super::heartbeat::Heartbeat)), and takes it when it differs.
//!
//! Invariants: the response is untrusted input, decoded with [`decode`](super::decode)'s
//! bounds-checked readers; every non-tagged field of version 0 is read, in the schema's order.

use bytes::BufMut;

use crate::runtime::streams_group::codec::{self, TaskIds};
use crate::runtime::streams_group::decode::{
    DecodeError, get_array, get_i8, get_i16, get_i32, get_i64, get_nullable_array, get_nullable_str, get_str,
    get_u16, skip_tags,
};

/// The API key of `StreamsGroupDescribe`.
pub(crate) const API_KEY: i16 = 89;

/// One member of a described group, as far as this client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DescribedMember {
    pub member_id: String,
    pub member_epoch: i32,
    /// The member's current assignment: active, standby, warm-up.
    pub assignment: [Vec<TaskIds>; 3],
    /// The `TaskOffsets` and `TaskEndOffsets` the member last reported, as
    /// (subtopology, partition, offset).
    pub task_offsets: [Vec<(String, i32, i64)>; 2],
}

/// One described group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DescribedGroup {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub group_id: String,
    pub members: Vec<DescribedMember>,
}

/// The request body (after the request header, version 2) describing `group`.
pub(crate) fn encode_request(group: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(group.len() + 8);
    codec::put_array(&mut b, Some(&[group]), |b, g| codec::put_str(b, g));
    b.put_u8(0); // IncludeAuthorizedOperations
    codec::put_no_tags(&mut b);
    b
}

/// Skips a `[]KeyValue`.
fn skip_key_values(b: &mut &[u8]) -> Result<(), DecodeError> {
    get_array(b, |b| {
        get_str(b)?;
        get_str(b)?;
        skip_tags(b)
    })?;
    Ok(())
}

/// Skips a `[]TopicInfo`.
fn skip_topic_infos(b: &mut &[u8]) -> Result<(), DecodeError> {
    get_array(b, |b| {
        get_str(b)?;
        get_i32(b)?;
        get_i16(b)?;
        skip_key_values(b)?;
        skip_tags(b)
    })?;
    Ok(())
}

/// Reads a `[]TaskOffset` as (subtopology, partition, offset).
fn get_task_offsets(b: &mut &[u8]) -> Result<Vec<(String, i32, i64)>, DecodeError> {
    get_array(b, |b| {
        let offset = (get_str(b)?, get_i32(b)?, get_i64(b)?);
        skip_tags(b)?;
        Ok(offset)
    })
}

/// Whether a nullable struct follows: its marker, -1 for null and 1 for present.
fn present(b: &mut &[u8]) -> Result<bool, DecodeError> {
    Ok(get_i8(b)? >= 0)
}

/// Skips a nullable `Topology`: its epoch and sub-topologies.
fn skip_topology(b: &mut &[u8]) -> Result<(), DecodeError> {
    if !present(b)? {
        return Ok(());
    }
    get_i32(b)?; // Epoch
    get_nullable_array(b, |b| {
        get_str(b)?; // SubtopologyId
        get_array(b, get_str)?; // SourceTopics
        get_array(b, get_str)?; // RepartitionSinkTopics
        skip_topic_infos(b)?; // StateChangelogTopics
        skip_topic_infos(b)?; // RepartitionSourceTopics
        skip_tags(b)
    })?;
    skip_tags(b)
}

/// An `Assignment` struct: active, standby and warm-up tasks.
fn get_assignment(b: &mut &[u8]) -> Result<[Vec<TaskIds>; 3], DecodeError> {
    let out = [
        get_array(b, codec::get_task_ids)?,
        get_array(b, codec::get_task_ids)?,
        get_array(b, codec::get_task_ids)?,
    ];
    skip_tags(b)?;
    Ok(out)
}

fn get_member(b: &mut &[u8]) -> Result<DescribedMember, DecodeError> {
    let member_id = get_str(b)?;
    let member_epoch = get_i32(b)?;
    get_nullable_str(b)?; // InstanceId
    get_nullable_str(b)?; // RackId
    get_str(b)?; // ClientId
    get_str(b)?; // ClientHost
    get_i32(b)?; // TopologyEpoch
    get_str(b)?; // ProcessId
    if present(b)? {
        // UserEndpoint
        get_str(b)?;
        get_u16(b)?;
        skip_tags(b)?;
    }
    skip_key_values(b)?; // ClientTags
    let task_offsets = [get_task_offsets(b)?, get_task_offsets(b)?];
    let assignment = get_assignment(b)?;
    get_assignment(b)?; // TargetAssignment
    get_i8(b)?; // IsClassic
    skip_tags(b)?;
    Ok(DescribedMember {
        member_id,
        member_epoch,
        assignment,
        task_offsets,
    })
}

fn get_group(b: &mut &[u8]) -> Result<DescribedGroup, DecodeError> {
    let error_code = get_i16(b)?;
    let error_message = get_nullable_str(b)?;
    let group_id = get_str(b)?;
    get_str(b)?; // GroupState
    get_i32(b)?; // GroupEpoch
    get_i32(b)?; // AssignmentEpoch
    skip_topology(b)?;
    let members = get_array(b, get_member)?;
    get_i32(b)?; // AuthorizedOperations
    skip_tags(b)?;
    Ok(DescribedGroup {
        error_code,
        error_message,
        group_id,
        members,
    })
}

/// Decodes a response body (after the response header, version 1), version 0.
pub(crate) fn decode_response(mut buf: &[u8]) -> Result<Vec<DescribedGroup>, DecodeError> {
    let b = &mut buf;
    get_i32(b)?; // ThrottleTimeMs
    let groups = get_array(b, get_group)?;
    skip_tags(b)?;
    crate::runtime::streams_group::decode::end(b)?;
    Ok(groups)
}

/// A version 0 response as Apache Kafka 4.4's own serializer writes it
/// (`StreamsGroupDescribeResponseData`): group `g` (stable, a topology of one sub-topology)
/// with member `member` (epoch 1, an endpoint, a client tag, a task offset; owning active
/// tasks 0_0, 0_2 and 1_1 and standby 0_1, with target 0_0) and member `m2` (epoch 4, no
/// endpoint, nothing assigned); then group `other`, GROUP_ID_NOT_FOUND, with no topology.
#[cfg(test)]
#[rustfmt::skip]
pub(crate) const KAFKA_RESPONSE: &[u8] = &[
    0, 0, 0, 0, 3, 0, 0, 0, 2, 103, 7, 83, 116, 97, 98, 108, 101, 0, 0, 0,
    3, 0, 0, 0, 3, 1, 0, 0, 0, 0, 2, 2, 48, 2, 3, 105, 110, 2, 2, 114,
    2, 3, 99, 108, 0, 0, 0, 0, 0, 0, 2, 15, 99, 108, 101, 97, 110, 117, 112, 46,
    112, 111, 108, 105, 99, 121, 8, 99, 111, 109, 112, 97, 99, 116, 0, 0, 1, 0, 0, 3,
    7, 109, 101, 109, 98, 101, 114, 0, 0, 0, 1, 0, 2, 114, 2, 99, 3, 47, 104, 0,
    0, 0, 0, 2, 112, 1, 10, 108, 111, 99, 97, 108, 104, 111, 115, 116, 27, 88, 0, 2,
    2, 107, 2, 118, 0, 2, 2, 48, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7,
    0, 1, 3, 2, 48, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2, 49, 2, 0, 0,
    0, 1, 0, 2, 2, 48, 2, 0, 0, 0, 1, 0, 1, 0, 2, 2, 48, 2, 0, 0,
    0, 0, 0, 1, 1, 0, 0, 0, 3, 109, 50, 0, 0, 0, 4, 0, 0, 2, 99, 3,
    47, 104, 0, 0, 0, 0, 2, 113, 255, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0,
    0, 0, 128, 0, 0, 0, 0, 0, 69, 3, 110, 111, 6, 111, 116, 104, 101, 114, 1, 0,
    0, 0, 0, 0, 0, 0, 0, 255, 1, 128, 0, 0, 0, 0, 0,
];

/// The assignment of `member_id` in the group `group` as its coordinator (reached by
/// `conn`) holds it: `Ok(None)` when the group has no such member.
pub(crate) fn member_assignment(
    conn: &mut crate::runtime::streams_group::wire::Conn,
    group: &str,
    member_id: &str,
) -> Result<Option<DescribedMember>, crate::model::error::StreamsError> {
    use crate::runtime::streams_group::wire;
    let body = conn.round_trip(API_KEY, 0, 2, 1, &encode_request(group))?;
    // An answer that does not decode will not decode when asked again: not retriable.
    let groups = decode_response(&body).map_err(|e| {
        wire::kafka(
            format!("StreamsGroupDescribe v0 from {}: {e}", conn.addr()),
            false,
        )
    })?;
    let Some(g) = groups.into_iter().find(|g| g.group_id == group) else {
        return Err(wire::kafka(
            format!(
                "StreamsGroupDescribe from {}: group {group} not in the answer",
                conn.addr()
            ),
            true,
        ));
    };
    if g.error_code != 0 {
        let retriable = wire::coordinator_moved(g.error_code);
        return Err(wire::kafka(
            format!(
                "StreamsGroupDescribe of {group}: {} {}",
                crate::runtime::streams_group::commit::error_name(g.error_code),
                g.error_message.unwrap_or_default()
            ),
            retriable,
        ));
    }
    Ok(g.members.into_iter().find(|m| m.member_id == member_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(subtopology: &str, partitions: &[i32]) -> TaskIds {
        TaskIds {
            subtopology: subtopology.into(),
            partitions: partitions.to_vec(),
        }
    }

    #[test]
    fn kafkas_own_response_decodes() {
        let groups = decode_response(KAFKA_RESPONSE).expect("decodes");
        assert_eq!(
            groups,
            vec![
                DescribedGroup {
                    error_code: 0,
                    error_message: None,
                    group_id: "g".into(),
                    members: vec![
                        DescribedMember {
                            member_id: "member".into(),
                            member_epoch: 1,
                            assignment: [
                                vec![ids("0", &[0, 2]), ids("1", &[1])],
                                vec![ids("0", &[1])],
                                vec![]
                            ],
                            task_offsets: [vec![("0".into(), 1, 7)], vec![]],
                        },
                        DescribedMember {
                            member_id: "m2".into(),
                            member_epoch: 4,
                            assignment: [vec![], vec![], vec![]],
                            task_offsets: [vec![], vec![]],
                        },
                    ],
                },
                DescribedGroup {
                    error_code: 69,
                    error_message: Some("no".into()),
                    group_id: "other".into(),
                    members: vec![],
                },
            ]
        );
    }

    #[test]
    fn a_truncated_or_padded_response_is_an_error_not_a_panic() {
        for cut in 0..KAFKA_RESPONSE.len() {
            assert!(decode_response(&KAFKA_RESPONSE[..cut]).is_err(), "cut at {cut}");
        }
        let mut padded = KAFKA_RESPONSE.to_vec();
        padded.push(0);
        assert_eq!(decode_response(&padded), Err(DecodeError::Trailing(1)));
        // A member count far beyond the bytes left is refused before anything is sized by it.
        let mut hostile = KAFKA_RESPONSE[..4].to_vec();
        hostile.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
        assert!(matches!(
            decode_response(&hostile),
            Err(DecodeError::Oversized { .. })
        ));
    }

    #[test]
    fn the_request_names_the_group_and_asks_for_no_authorized_operations() {
        // [1 group] "app" (len+1 = 4) IncludeAuthorizedOperations=false, no tags.
        assert_eq!(encode_request("app"), vec![2, 4, b'a', b'p', b'p', 0, 0]);
    }
}
