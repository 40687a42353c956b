//! The wire responses: hand-built bytes per schema, decoded alike by `kafka_protocol`'s
//! decoders (fine on benign input), and hostile input (the 7-byte `ApiVersions` response
//! that made `kafka_protocol`'s decoder ask for 64 GiB and abort).

use kafka_protocol::protocol::Decodable;
use proptest::prelude::*;

use super::*;

fn decode<R: Response>(bytes: &[u8], version: i16) -> Result<R, DecodeError> {
    let mut buf = bytes;
    let r = R::decode_body(&mut buf, version)?;
    assert!(buf.is_empty(), "{} bytes left", buf.len());
    Ok(r)
}

/// `bytes` decode at `version`, to what `kafka_protocol` decodes them to.
fn agrees<R>(bytes: &[u8], version: i16) -> R
where
    R: Response + Decodable + PartialEq + std::fmt::Debug,
{
    let ours = decode::<R>(bytes, version).expect("decodes");
    let mut b = bytes::Bytes::copy_from_slice(bytes);
    let theirs = <R as Decodable>::decode(&mut b, version).expect("kafka_protocol decodes");
    assert_eq!(ours, theirs, "v{version}");
    ours
}

const NO_TAGS: u8 = 0;

#[test]
fn api_versions_decode_as_the_schema_says() {
    #[rustfmt::skip]
    let v3 = [
        0, 0,                     // ErrorCode
        0x03,                     // ApiKeys: two
        0, 18, 0, 0, 0, 4, NO_TAGS, // ApiVersions 0-4
        0, 88, 0, 0, 0, 0, NO_TAGS, // StreamsGroupHeartbeat 0-0
        0, 0, 0, 9,               // ThrottleTimeMs 9
        NO_TAGS,
    ];
    let r: ApiVersionsResponse = agrees(&v3, 3);
    let keys: Vec<_> = r
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    assert_eq!(keys, [(18, 0, 4), (88, 0, 0)]);
    assert_eq!(r.throttle_time_ms, 9);
    // A tagged field we skip (ZkMigrationReady, tag 3, = true).
    let mut tagged = v3.to_vec();
    tagged.pop();
    tagged.extend_from_slice(&[0x01, 0x03, 0x01, 0x01]);
    assert_eq!(
        decode::<ApiVersionsResponse>(&tagged, 3)
            .expect("decodes")
            .api_keys,
        r.api_keys
    );
    #[rustfmt::skip]
    let v0 = [
        0, 35,                    // ErrorCode UNSUPPORTED_VERSION
        0, 0, 0, 1,               // ApiKeys: one (classic count)
        0, 18, 0, 0, 0, 3,
    ];
    let r: ApiVersionsResponse = agrees(&v0, 0);
    assert_eq!((r.error_code, r.api_keys.len()), (35, 1));
}

#[test]
fn find_coordinator_decodes_as_the_schema_says() {
    // v0: ErrorCode, NodeId, Host (classic), Port.
    let r: FindCoordinatorResponse = agrees(&[0, 0, 0, 0, 0, 2, 0, 1, b'h', 0, 0, 0x23, 0x84], 0);
    assert_eq!((r.node_id.0, r.host.to_string(), r.port), (2, "h".into(), 9092));
    // v1: ThrottleTimeMs, ErrorCode, ErrorMessage (nullable), NodeId, Host, Port.
    #[rustfmt::skip]
    let v1 = [0, 0, 0, 5, 0, 15, 0, 1, b'e', 0, 0, 0, 2, 0, 1, b'h', 0, 0, 0x23, 0x84];
    let r: FindCoordinatorResponse = agrees(&v1, 1);
    assert_eq!(
        (r.error_code, r.error_message.map(|m| m.to_string())),
        (15, Some("e".into()))
    );
    // v3: the same, flexible.
    #[rustfmt::skip]
    let v3 = [0, 0, 0, 5, 0, 0, 0x00, 0, 0, 0, 2, 0x02, b'h', 0, 0, 0x23, 0x84, NO_TAGS];
    let r: FindCoordinatorResponse = agrees(&v3, 3);
    assert_eq!((r.error_message, r.host.to_string()), (None, "h".into()));
    // v6: ThrottleTimeMs, Coordinators [Key, NodeId, Host, Port, ErrorCode, ErrorMessage].
    #[rustfmt::skip]
    let v6 = [
        0, 0, 0, 0,
        0x02,                                         // one coordinator
        0x02, b'g', 0, 0, 0, 2, 0x02, b'h', 0, 0, 0x23, 0x84, 0, 0, 0x00, NO_TAGS,
        NO_TAGS,
    ];
    let r: FindCoordinatorResponse = agrees(&v6, 6);
    let c = &r.coordinators[0];
    assert_eq!((c.key.to_string(), c.node_id.0, c.port), ("g".into(), 2, 9092));
}

#[test]
fn describe_cluster_decodes_as_the_schema_says() {
    // v2 (flexible from v0): ThrottleTimeMs, ErrorCode, ErrorMessage, EndpointType (v1+),
    // ClusterId, ControllerId, Brokers [BrokerId, Host, Port, Rack, IsFenced (v2)],
    // ClusterAuthorizedOperations.
    #[rustfmt::skip]
    let v2 = [
        0, 0, 0, 0,                 // ThrottleTimeMs
        0, 0,                       // ErrorCode
        0x00,                       // ErrorMessage: null
        1,                          // EndpointType: brokers
        0x02, b'c',                 // ClusterId
        0, 0, 0, 1,                 // ControllerId
        0x03,                       // Brokers: two
        0, 0, 0, 1, 0x02, b'a', 0, 0, 0x23, 0x84, 0x00, 0, NO_TAGS,
        0, 0, 0, 2, 0x02, b'b', 0, 0, 0x23, 0x85, 0x02, b'r', 1, NO_TAGS,
        0x80, 0, 0, 0,              // ClusterAuthorizedOperations: none asked
        NO_TAGS,
    ];
    let r: DescribeClusterResponse = agrees(&v2, 2);
    let brokers: Vec<_> = r
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.host.to_string(), b.port, b.is_fenced))
        .collect();
    assert_eq!(
        brokers,
        [(1, "a".into(), 9092, false), (2, "b".into(), 9093, true)]
    );
    assert_eq!(
        r.brokers[1].rack.as_ref().map(|r| r.to_string()),
        Some("r".into())
    );
    // v0: no EndpointType, no IsFenced.
    #[rustfmt::skip]
    let v0 = [
        0, 0, 0, 0, 0, 0, 0x00, 0x02, b'c', 0, 0, 0, 1,
        0x02, 0, 0, 0, 1, 0x02, b'a', 0, 0, 0x23, 0x84, 0x00, NO_TAGS,
        0x80, 0, 0, 0, NO_TAGS,
    ];
    let r: DescribeClusterResponse = agrees(&v0, 0);
    assert_eq!((r.brokers.len(), r.brokers[0].port), (1, 9092));
}

#[test]
fn offset_commit_decodes_as_the_schema_says() {
    // v2: Topics [Name, Partitions [PartitionIndex, ErrorCode]] (classic, no throttle).
    #[rustfmt::skip]
    let v2 = [0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 4, 0, 110];
    let r: OffsetCommitResponse = agrees(&v2, 2);
    assert_eq!(
        (
            r.topics[0].partitions[0].partition_index,
            r.topics[0].partitions[0].error_code
        ),
        (4, 110)
    );
    // v7: ThrottleTimeMs first.
    let v7 = [&[0, 0, 0, 6][..], &v2].concat();
    let r: OffsetCommitResponse = agrees(&v7, 7);
    assert_eq!(r.throttle_time_ms, 6);
    // v9: flexible.
    #[rustfmt::skip]
    let v9 = [0, 0, 0, 6, 0x02, 0x02, b't', 0x02, 0, 0, 0, 4, 0, 110, NO_TAGS, NO_TAGS, NO_TAGS];
    let r: OffsetCommitResponse = agrees(&v9, 9);
    assert_eq!(r.topics[0].name.0.to_string(), "t");
}

#[test]
fn offset_fetch_decodes_as_the_schema_says() {
    // v8 (flexible): ThrottleTimeMs, Groups [GroupId, Topics [Name, Partitions [PartitionIndex,
    // CommittedOffset, CommittedLeaderEpoch, Metadata, ErrorCode]], ErrorCode].
    #[rustfmt::skip]
    let v8 = [
        0, 0, 0, 3, 0x02, 0x02, b'g', 0x02, 0x02, b't', 0x03,
        0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 42, 0xff, 0xff, 0xff, 0xff, 0x02, b'm', 0, 0, NO_TAGS,
        0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x00, 0, 88, NO_TAGS,
        NO_TAGS, 0, 0, NO_TAGS, NO_TAGS,
    ];
    let r: OffsetFetchResponse = agrees(&v8, 8);
    let p = &r.groups[0].topics[0].partitions;
    assert_eq!((p[0].committed_offset, p[0].metadata.as_deref()), (42, Some("m")));
    assert_eq!(
        (p[1].committed_offset, p[1].metadata.as_deref(), p[1].error_code),
        (-1, None, 88)
    );
    let r: OffsetFetchResponse = agrees(&v8, 9);
    assert_eq!(r.throttle_time_ms, 3);
}

#[test]
fn metadata_and_list_offsets_decode_as_the_schemas_say() {
    // Metadata v9: ThrottleTimeMs, Brokers [NodeId, Host, Port, Rack], ClusterId, ControllerId,
    // Topics [ErrorCode, Name, IsInternal, Partitions [ErrorCode, PartitionIndex, LeaderId,
    // LeaderEpoch, ReplicaNodes, IsrNodes, OfflineReplicas], TopicAuthorizedOperations],
    // ClusterAuthorizedOperations.
    #[rustfmt::skip]
    let metadata = [
        0, 0, 0, 0, 0x02, 0, 0, 0, 2, 0x02, b'h', 0, 0, 0x23, 0x84, 0x00, NO_TAGS,
        0x02, b'c', 0, 0, 0, 2,
        0x02, 0, 0, 0x02, b't', 0, 0x02,
        0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 9, 0x02, 0, 0, 0, 2, 0x02, 0, 0, 0, 2, 0x01, NO_TAGS,
        0x80, 0, 0, 0, NO_TAGS,
        0x80, 0, 0, 0, NO_TAGS,
    ];
    let r: MetadataResponse = agrees(&metadata, 9);
    let p = &r.topics[0].partitions[0];
    assert_eq!((p.partition_index, p.leader_id.0, p.leader_epoch), (1, 2, 9));
    assert_eq!((r.brokers[0].host.as_str(), r.brokers[0].port), ("h", 9092));
    // ListOffsets v6: ThrottleTimeMs, Topics [Name, Partitions [PartitionIndex, ErrorCode,
    // Timestamp, Offset, LeaderEpoch]].
    #[rustfmt::skip]
    let list = [
        0, 0, 0, 0, 0x02, 0x02, b't', 0x02,
        0, 0, 0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 151, 0, 0, 0, 9, NO_TAGS,
        NO_TAGS, NO_TAGS,
    ];
    for version in 6..=9 {
        let r: ListOffsetsResponse = agrees(&list, version);
        assert_eq!(r.topics[0].partitions[0].offset, 151);
    }
}

#[test]
fn incremental_alter_configs_decodes_as_the_schema_says() {
    // v0: ThrottleTimeMs, Responses [ErrorCode, ErrorMessage, ResourceType, ResourceName].
    #[rustfmt::skip]
    let v0 = [0, 0, 0, 1, 0, 0, 0, 1, 0, 40, 0, 2, b'n', b'o', 32, 0, 1, b'g'];
    let r: IncrementalAlterConfigsResponse = agrees(&v0, 0);
    let a = &r.responses[0];
    assert_eq!(
        (a.error_code, a.resource_type, a.resource_name.to_string()),
        (40, 32, "g".into())
    );
    #[rustfmt::skip]
    let v1 = [0, 0, 0, 1, 0x02, 0, 40, 0x00, 32, 0x02, b'g', NO_TAGS, NO_TAGS];
    let r: IncrementalAlterConfigsResponse = agrees(&v1, 1);
    assert_eq!(r.responses[0].error_message, None);
}

#[test]
fn the_seven_byte_api_versions_response_is_an_error() {
    // ErrorCode 0, ApiKeys: compact count 0x7ffffffe, and nothing more.
    let r = decode::<ApiVersionsResponse>(&[0, 0, 0xff, 0xff, 0xff, 0xff, 0x07], 3);
    assert_eq!(
        r,
        Err(DecodeError::Oversized {
            len: 0x7fff_fffe,
            left: 0
        })
    );
    // The classic (v0) count 0x7fffffff, and -2.
    let r = decode::<ApiVersionsResponse>(&[0, 0, 0x7f, 0xff, 0xff, 0xff], 0);
    assert_eq!(
        r,
        Err(DecodeError::Oversized {
            len: 0x7fff_ffff,
            left: 0
        })
    );
    let r = decode::<ApiVersionsResponse>(&[0, 0, 0xff, 0xff, 0xff, 0xfe], 0);
    assert_eq!(r, Err(DecodeError::NegativeLength(-2)));
}

#[test]
fn huge_and_negative_counts_are_errors_in_every_response() {
    let huge = [0xff, 0xff, 0xff, 0xff, 0x07];
    let pad = [0u8; 16];
    // FindCoordinator v6: ThrottleTimeMs, then Coordinators.
    let r = decode::<FindCoordinatorResponse>(&[&[0, 0, 0, 0][..], &huge, &pad].concat(), 6);
    assert!(matches!(r, Err(DecodeError::Oversized { .. })), "{r:?}");
    // FindCoordinator v1: ThrottleTimeMs, ErrorCode, ErrorMessage of length 0x7fff.
    let r = decode::<FindCoordinatorResponse>(&[0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0, 0], 1);
    assert!(matches!(r, Err(DecodeError::Oversized { .. })), "{r:?}");
    // ... and of length -2.
    let r = decode::<FindCoordinatorResponse>(&[0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0], 1);
    assert_eq!(r, Err(DecodeError::NegativeLength(-2)));
    // OffsetCommit v9: Topics, then a topic's Partitions.
    let r = decode::<OffsetCommitResponse>(&[&[0, 0, 0, 0][..], &huge, &pad].concat(), 9);
    assert!(matches!(r, Err(DecodeError::Oversized { .. })), "{r:?}");
    let r = decode::<OffsetCommitResponse>(&[&[0, 0, 0, 0, 0x02, 0x02, b't'][..], &huge, &pad].concat(), 9);
    assert!(matches!(r, Err(DecodeError::Oversized { .. })), "{r:?}");
    // IncrementalAlterConfigs v0 (classic): Responses of 0x7fffffff and of -2.
    let r = decode::<IncrementalAlterConfigsResponse>(&[0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0], 0);
    assert!(matches!(r, Err(DecodeError::Oversized { .. })), "{r:?}");
    let r = decode::<IncrementalAlterConfigsResponse>(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe], 0);
    assert_eq!(r, Err(DecodeError::NegativeLength(-2)));
    // DescribeCluster v2: ThrottleTimeMs, ErrorCode, ErrorMessage (null), EndpointType,
    // ClusterId "c", ControllerId, then Brokers.
    let head = [0, 0, 0, 0, 0, 0, 0x00, 1, 0x02, b'c', 0, 0, 0, 1];
    let r = decode::<DescribeClusterResponse>(&[&head[..], &huge, &pad].concat(), 2);
    assert!(matches!(r, Err(DecodeError::Oversized { .. })), "{r:?}");
    // A top-level tagged section claiming 0x7fffffff fields.
    let r = decode::<IncrementalAlterConfigsResponse>(&[&[0, 0, 0, 0, 0x01][..], &huge, &pad].concat(), 1);
    assert!(matches!(r, Err(DecodeError::Oversized { .. })), "{r:?}");
}

#[test]
fn versions_beyond_the_schemas_known_here_are_refused() {
    assert_eq!(
        decode::<OffsetCommitResponse>(&[], 10),
        Err(DecodeError::Version(10))
    );
    assert_eq!(
        decode::<FindCoordinatorResponse>(&[], -1),
        Err(DecodeError::Version(-1))
    );
    assert_eq!(
        decode::<IncrementalAlterConfigsResponse>(&[], 2),
        Err(DecodeError::Version(2))
    );
    assert_eq!(
        decode::<OffsetFetchResponse>(&[], 10),
        Err(DecodeError::Version(10))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Random bytes, any response, any version: errors or values, never a panic.
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256), version in 0i16..10) {
        let mut b = &bytes[..];
        let _ = ApiVersionsResponse::decode_body(&mut b, version);
        let mut b = &bytes[..];
        let _ = FindCoordinatorResponse::decode_body(&mut b, version);
        let mut b = &bytes[..];
        let _ = OffsetCommitResponse::decode_body(&mut b, version);
        let mut b = &bytes[..];
        let _ = IncrementalAlterConfigsResponse::decode_body(&mut b, version);
        let mut b = &bytes[..];
        let _ = OffsetFetchResponse::decode_body(&mut b, version);
        let mut b = &bytes[..];
        let _ = MetadataResponse::decode_body(&mut b, version);
        let mut b = &bytes[..];
        let _ = ListOffsetsResponse::decode_body(&mut b, version);
    }
}
