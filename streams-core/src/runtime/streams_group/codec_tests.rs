//! The codec: a hand-checked request, and round trips through a test-side decoder of
//! requests and encoder of responses written from the schemas.

use bytes::BufMut;
use proptest::prelude::*;

use super::*;
use crate::runtime::streams_group::topology::{CopartitionGroup, GroupSubtopology};

/// A leave heartbeat, byte by byte from the schema.
#[test]
fn a_leave_request_encodes_as_the_schema_says() {
    let req = HeartbeatRequest {
        group_id: "g".into(),
        member_id: "m".into(),
        member_epoch: -1,
        rebalance_timeout_ms: -1,
        ..Default::default()
    };
    #[rustfmt::skip]
    let expected: Vec<u8> = vec![
        0x02, b'g',             // GroupId: compact string, length + 1
        0x02, b'm',             // MemberId
        0xff, 0xff, 0xff, 0xff, // MemberEpoch -1
        0, 0, 0, 0,             // EndpointInformationEpoch 0
        0x00,                   // InstanceId null
        0x00,                   // RackId null
        0xff, 0xff, 0xff, 0xff, // RebalanceTimeoutMs -1
        0xff,                   // Topology: null struct
        0x00, 0x00, 0x00,       // Active, Standby, Warmup tasks: null arrays
        0x00,                   // ProcessId null
        0xff,                   // UserEndpoint: null struct
        0x00,                   // ClientTags null
        0x00, 0x00,             // TaskOffsets, TaskEndOffsets null
        0x00,                   // ShutdownApplication false
        0x00,                   // no tagged fields
    ];
    assert_eq!(req.encode(), expected);
}

/// Task offsets, byte by byte from the schema (`TaskOffset`: subtopology, partition, offset).
#[test]
fn task_offsets_encode_as_the_schema_says() {
    let req = HeartbeatRequest {
        task_offsets: Some(vec![TaskOffset {
            subtopology: "0".into(),
            partition: 3,
            offset: 258,
        }]),
        ..Default::default()
    };
    let encoded = req.encode();
    #[rustfmt::skip]
    let tail: Vec<u8> = vec![
        0x00,                   // ClientTags null
        0x02,                   // TaskOffsets: one element
        0x02, b'0',             //   SubtopologyId "0"
        0, 0, 0, 3,             //   Partition 3
        0, 0, 0, 0, 0, 0, 1, 2, //   Offset 258
        0x00,                   //   no tagged fields
        0x00,                   // TaskEndOffsets null
        0x00,                   // ShutdownApplication false
        0x00,                   // no tagged fields
    ];
    assert!(encoded.ends_with(&tail), "{encoded:x?}");
}

#[test]
fn varints_take_seven_bits_a_byte() {
    let mut b = Vec::new();
    put_uvarint(&mut b, 300);
    assert_eq!(b, [0xac, 0x02]);
    assert_eq!(get_uvarint(&mut &b[..]), Ok(300));
    assert!(get_uvarint(&mut &[0x80u8][..]).is_err());
}

#[test]
fn unknown_tagged_fields_are_skipped() {
    let mut body = encode_response(&HeartbeatResponse {
        member_id: "m".into(),
        ..Default::default()
    });
    body.pop(); // the empty top-level tag section
    body.extend_from_slice(&[1, 7, 2, 0xaa, 0xbb]); // one field, tag 7, two bytes
    let r = HeartbeatResponse::decode(&body).expect("decodes");
    assert_eq!(r.member_id, "m");
}

// ---- the other halves, from the schemas ----------------------------------------------------

fn get_task_lists(b: &mut &[u8]) -> Result<Option<Vec<TaskIds>>, DecodeError> {
    get_nullable_array(b, get_task_ids)
}

fn get_kv(b: &mut &[u8]) -> Result<(String, String), DecodeError> {
    let kv = (get_str(b)?, get_str(b)?);
    skip_tags(b)?;
    Ok(kv)
}

fn get_topic_info(b: &mut &[u8]) -> Result<TopicInfo, DecodeError> {
    let name = get_str(b)?;
    let partitions = get_i32(b)?;
    let replication_factor = get_i16(b)?;
    let configs = get_array(b, get_kv)?;
    skip_tags(b)?;
    Ok(TopicInfo {
        name,
        partitions,
        replication_factor,
        configs,
    })
}

fn get_struct_marker(b: &mut &[u8]) -> Result<bool, DecodeError> {
    Ok(get_i8(b)? >= 0)
}

fn decode_request(mut buf: &[u8]) -> Result<HeartbeatRequest, DecodeError> {
    let b = &mut buf;
    let mut r = HeartbeatRequest {
        group_id: get_str(b)?,
        member_id: get_str(b)?,
        member_epoch: get_i32(b)?,
        endpoint_information_epoch: get_i32(b)?,
        instance_id: get_nullable_str(b)?,
        rack_id: get_nullable_str(b)?,
        rebalance_timeout_ms: get_i32(b)?,
        ..Default::default()
    };
    if get_struct_marker(b)? {
        let epoch = get_i32(b)?;
        let subtopologies = get_array(b, |b| {
            let s = GroupSubtopology {
                id: get_str(b)?,
                source_topics: get_array(b, get_str)?,
                source_topic_regex: get_array(b, get_str)?,
                state_changelog_topics: get_array(b, get_topic_info)?,
                repartition_sink_topics: get_array(b, get_str)?,
                repartition_source_topics: get_array(b, get_topic_info)?,
                copartition_groups: get_array(b, |b| {
                    let g = CopartitionGroup {
                        source_topics: get_array(b, get_i16)?,
                        source_topic_regex: get_array(b, get_i16)?,
                        repartition_source_topics: get_array(b, get_i16)?,
                    };
                    skip_tags(b)?;
                    Ok(g)
                })?,
            };
            skip_tags(b)?;
            Ok(s)
        })?;
        skip_tags(b)?;
        r.topology = Some(GroupTopology { epoch, subtopologies });
    }
    r.active_tasks = get_task_lists(b)?;
    r.standby_tasks = get_task_lists(b)?;
    r.warmup_tasks = get_task_lists(b)?;
    r.process_id = get_nullable_str(b)?;
    if get_struct_marker(b)? {
        r.user_endpoint = Some(get_endpoint(b)?);
    }
    r.client_tags = get_nullable_array(b, get_kv)?;
    r.task_offsets = get_nullable_array(b, get_task_offset)?;
    r.task_end_offsets = get_nullable_array(b, get_task_offset)?;
    r.shutdown_application = get_i8(b)? != 0;
    skip_tags(b)?;
    assert!(b.is_empty(), "{} bytes left", b.len());
    Ok(r)
}

fn get_task_offset(b: &mut &[u8]) -> Result<TaskOffset, DecodeError> {
    let subtopology = get_str(b)?;
    let partition = get_i32(b)?;
    let offset = crate::runtime::streams_group::decode::get_i64(b)?;
    skip_tags(b)?;
    Ok(TaskOffset {
        subtopology,
        partition,
        offset,
    })
}

fn put_tp(b: &mut Vec<u8>, (t, ps): &(String, Vec<i32>)) {
    put_str(b, t);
    put_array(b, Some(ps), |b, p| b.put_i32(*p));
    put_no_tags(b);
}

fn put_endpoint(b: &mut Vec<u8>, (host, port): &(String, u16)) {
    put_str(b, host);
    b.put_u16(*port);
    put_no_tags(b);
}

/// A response body, field by field as `StreamsGroupHeartbeatResponse.json` (v0) orders them.
pub(super) fn encode_response(r: &HeartbeatResponse) -> Vec<u8> {
    let mut b = Vec::new();
    b.put_i32(r.throttle_time_ms);
    b.put_i16(r.error_code);
    put_nullable_str(&mut b, r.error_message.as_deref());
    put_str(&mut b, &r.member_id);
    b.put_i32(r.member_epoch);
    b.put_i32(r.heartbeat_interval_ms);
    b.put_i32(r.acceptable_recovery_lag);
    b.put_i32(r.task_offset_interval_ms);
    put_array(&mut b, r.status.as_deref(), |b, s| {
        b.put_i8(s.code);
        put_str(b, &s.detail);
        put_no_tags(b);
    });
    for tasks in [&r.active_tasks, &r.standby_tasks, &r.warmup_tasks] {
        put_array(&mut b, tasks.as_deref(), put_task_ids);
    }
    b.put_i32(r.endpoint_information_epoch);
    put_array(&mut b, r.partitions_by_endpoint.as_deref(), |b, e| {
        put_endpoint(b, &e.endpoint);
        put_array(b, Some(&e.active), put_tp);
        put_array(b, Some(&e.standby), put_tp);
        put_no_tags(b);
    });
    put_no_tags(&mut b);
    b
}

// ---- round trips ----------------------------------------------------------------------------

fn name() -> impl Strategy<Value = String> {
    "[a-z0-9._-]{0,12}"
}

fn task_ids() -> impl Strategy<Value = Vec<TaskIds>> {
    prop::collection::vec(
        (name(), prop::collection::vec(any::<i32>(), 0..4)).prop_map(|(subtopology, partitions)| TaskIds {
            subtopology,
            partitions,
        }),
        0..3,
    )
}

fn topic_info() -> impl Strategy<Value = TopicInfo> {
    (
        name(),
        any::<i32>(),
        any::<i16>(),
        prop::collection::vec((name(), name()), 0..2),
    )
        .prop_map(|(name, partitions, replication_factor, configs)| TopicInfo {
            name,
            partitions,
            replication_factor,
            configs,
        })
}

fn subtopology() -> impl Strategy<Value = GroupSubtopology> {
    let names = || prop::collection::vec(name(), 0..3);
    let infos = || prop::collection::vec(topic_info(), 0..2);
    let idx = || prop::collection::vec(any::<i16>(), 0..3);
    (
        name(),
        names(),
        names(),
        infos(),
        names(),
        infos(),
        prop::collection::vec((idx(), idx(), idx()), 0..2),
    )
        .prop_map(
            |(id, src, regex, changelogs, sinks, repart, groups)| GroupSubtopology {
                id,
                source_topics: src,
                source_topic_regex: regex,
                state_changelog_topics: changelogs,
                repartition_sink_topics: sinks,
                repartition_source_topics: repart,
                copartition_groups: groups
                    .into_iter()
                    .map(|(a, b, c)| CopartitionGroup {
                        source_topics: a,
                        source_topic_regex: b,
                        repartition_source_topics: c,
                    })
                    .collect(),
            },
        )
}

fn request() -> impl Strategy<Value = HeartbeatRequest> {
    let topology = prop::option::of(
        (any::<i32>(), prop::collection::vec(subtopology(), 0..3))
            .prop_map(|(epoch, subtopologies)| GroupTopology { epoch, subtopologies }),
    );
    (
        (
            name(),
            name(),
            any::<i32>(),
            any::<i32>(),
            prop::option::of(name()),
            prop::option::of(name()),
        ),
        (any::<i32>(), topology),
        (
            prop::option::of(task_ids()),
            prop::option::of(task_ids()),
            prop::option::of(task_ids()),
        ),
        (
            prop::option::of(name()),
            prop::option::of((name(), any::<u16>())),
            prop::option::of(prop::collection::vec((name(), name()), 0..2)),
            any::<bool>(),
        ),
        (task_offsets(), task_offsets()),
    )
        .prop_map(
            |(
                (group_id, member_id, member_epoch, endpoint_information_epoch, instance_id, rack_id),
                (rebalance_timeout_ms, topology),
                (active_tasks, standby_tasks, warmup_tasks),
                (process_id, user_endpoint, client_tags, shutdown_application),
                (task_offsets, task_end_offsets),
            )| HeartbeatRequest {
                group_id,
                member_id,
                member_epoch,
                endpoint_information_epoch,
                instance_id,
                rack_id,
                rebalance_timeout_ms,
                topology,
                active_tasks,
                standby_tasks,
                warmup_tasks,
                process_id,
                user_endpoint,
                client_tags,
                task_offsets,
                task_end_offsets,
                shutdown_application,
            },
        )
}

fn task_offsets() -> impl Strategy<Value = Option<Vec<TaskOffset>>> {
    prop::option::of(prop::collection::vec(
        (name(), any::<i32>(), any::<i64>()).prop_map(|(subtopology, partition, offset)| TaskOffset {
            subtopology,
            partition,
            offset,
        }),
        0..3,
    ))
}

pub(super) fn response() -> impl Strategy<Value = HeartbeatResponse> {
    let tps = || prop::collection::vec((name(), prop::collection::vec(any::<i32>(), 0..3)), 0..2);
    let endpoints = prop::option::of(prop::collection::vec(
        ((name(), any::<u16>()), tps(), tps()).prop_map(|(endpoint, active, standby)| EndpointPartitions {
            endpoint,
            active,
            standby,
        }),
        0..2,
    ));
    let status = prop::option::of(prop::collection::vec(
        (any::<i8>(), name()).prop_map(|(code, detail)| GroupStatus { code, detail }),
        0..2,
    ));
    (
        (any::<i32>(), any::<i16>(), prop::option::of(name()), name()),
        (
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
        ),
        status,
        (
            prop::option::of(task_ids()),
            prop::option::of(task_ids()),
            prop::option::of(task_ids()),
        ),
        endpoints,
    )
        .prop_map(
            |(
                (throttle, code, message, member_id),
                (epoch, interval, lag, offsets, endpoint_epoch),
                status,
                tasks,
                endpoints,
            )| {
                HeartbeatResponse {
                    throttle_time_ms: throttle,
                    error_code: code,
                    error_message: message,
                    member_id,
                    member_epoch: epoch,
                    heartbeat_interval_ms: interval,
                    acceptable_recovery_lag: lag,
                    task_offset_interval_ms: offsets,
                    status,
                    active_tasks: tasks.0,
                    standby_tasks: tasks.1,
                    warmup_tasks: tasks.2,
                    endpoint_information_epoch: endpoint_epoch,
                    partitions_by_endpoint: endpoints,
                }
            },
        )
}

proptest! {
    #[test]
    fn requests_round_trip(req in request()) {
        prop_assert_eq!(decode_request(&req.encode()), Ok(req));
    }

    #[test]
    fn responses_round_trip(resp in response()) {
        prop_assert_eq!(HeartbeatResponse::decode(&encode_response(&resp)), Ok(resp));
    }
}

/// The response `a_v0_response_decodes_as_the_schema_says` pins byte by byte.
pub(super) fn v0_response() -> HeartbeatResponse {
    HeartbeatResponse {
        throttle_time_ms: 5,
        error_code: 0,
        error_message: None,
        member_id: "m".into(),
        member_epoch: 7,
        heartbeat_interval_ms: 1000,
        acceptable_recovery_lag: 10,
        task_offset_interval_ms: 5000,
        status: Some(vec![GroupStatus {
            code: 1,
            detail: "x".into(),
        }]),
        active_tasks: Some(vec![TaskIds {
            subtopology: "0".into(),
            partitions: vec![1, 2],
        }]),
        standby_tasks: Some(vec![]),
        warmup_tasks: None,
        endpoint_information_epoch: 42,
        partitions_by_endpoint: Some(vec![EndpointPartitions {
            endpoint: ("h".into(), 8080),
            active: vec![("t".into(), vec![3])],
            standby: vec![],
        }]),
    }
}

/// A v0 response with an `EndpointInformationEpoch` and an endpoint map after it, byte by
/// byte from `StreamsGroupHeartbeatResponse.json` (independent of the test encoder).
#[test]
fn a_v0_response_decodes_as_the_schema_says() {
    #[rustfmt::skip]
    let body: Vec<u8> = vec![
        0, 0, 0, 5,                 // ThrottleTimeMs 5
        0, 0,                       // ErrorCode 0
        0x00,                       // ErrorMessage: null
        0x02, b'm',                 // MemberId "m"
        0, 0, 0, 7,                 // MemberEpoch 7
        0, 0, 0x03, 0xe8,           // HeartbeatIntervalMs 1000
        0, 0, 0, 10,                // AcceptableRecoveryLag 10
        0, 0, 0x13, 0x88,           // TaskOffsetIntervalMs 5000
        0x02,                       // Status: one
        0x01, 0x02, b'x', 0x00,     //   StatusCode 1, StatusDetail "x", no tags
        0x02,                       // ActiveTasks: one
        0x02, b'0',                 //   SubtopologyId "0"
        0x03, 0, 0, 0, 1, 0, 0, 0, 2, //   Partitions [1, 2]
        0x00,                       //   no tags
        0x01,                       // StandbyTasks: empty
        0x00,                       // WarmupTasks: null
        0, 0, 0, 42,                // EndpointInformationEpoch 42
        0x02,                       // PartitionsByUserEndpoint: one
        0x02, b'h', 0x1f, 0x90, 0x00, //   UserEndpoint "h":8080, no tags
        0x02,                       //   ActivePartitions: one
        0x02, b't', 0x02, 0, 0, 0, 3, 0x00, // Topic "t", Partitions [3], no tags
        0x01,                       //   StandbyPartitions: empty
        0x00,                       //   no tags
        0x00,                       // no tagged fields
    ];
    let expected = v0_response();
    assert_eq!(HeartbeatResponse::decode(&body), Ok(expected.clone()));
    // The test encoder writes the same bytes.
    assert_eq!(encode_response(&expected), body);
    // A body without the epoch (the old, wrong layout) no longer decodes silently.
    let mut short = body.clone();
    short.drain(45..49);
    assert_eq!(&body[45..49], &[0, 0, 0, 42]);
    assert!(HeartbeatResponse::decode(&short).is_err());
}
