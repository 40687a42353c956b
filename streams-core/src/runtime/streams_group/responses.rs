//! The responses [`Conn::send`](super::wire::Conn::send) reads, decoded with the
//! bounds-checked readers of [`decode`](super::decode) into `kafka_protocol`'s message types.
//!
//! `kafka_protocol`'s own decoders size a `Vec` from an array count read off the wire
//! before reading any element (`Vec::with_capacity(count)`), so a 7-byte `ApiVersions`
//! response claiming 2^31 keys asks for 64 GiB and aborts the process. These decoders check
//! every count against the bytes left first.
//!
//! Invariants: each decoder follows Apache Kafka's schema (`<Name>Response.json`) for the
//! versions this client negotiates, reads every non-tagged field, skips tagged sections
//! (their known fields are unused here), and refuses other versions.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    ApiVersionsResponse, BrokerId, DescribeClusterResponse, FindCoordinatorResponse, GroupId,
    IncrementalAlterConfigsResponse, ListOffsetsResponse, MetadataResponse, OffsetCommitResponse,
    OffsetFetchResponse, SaslAuthenticateResponse, SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::{HeaderVersion, StrBytes};

use crate::runtime::streams_group::decode::{
    DecodeError, get_bytes, get_i8, get_i16, get_i32, get_i64, get_list, get_nullable_string, get_string,
    skip_tags_if,
};

/// A response body this client decodes itself.
pub(crate) trait Response: HeaderVersion + Sized {
    /// The versions decoded.
    const VERSIONS: (i16, i16);
    /// The first flexible version.
    const FLEXIBLE: i16;
    /// Reads the body of version `version` (checked against `VERSIONS`), flexible or not.
    fn read(buf: &mut &[u8], version: i16, flexible: bool) -> Result<Self, DecodeError>;

    /// Decodes a body of version `version`; bytes after it are left in `buf`.
    fn decode_body(buf: &mut &[u8], version: i16) -> Result<Self, DecodeError> {
        if !(Self::VERSIONS.0..=Self::VERSIONS.1).contains(&version) {
            return Err(DecodeError::Version(version));
        }
        Self::read(buf, version, version >= Self::FLEXIBLE)
    }
}

fn str_bytes(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

fn nullable(buf: &mut &[u8], flexible: bool) -> Result<Option<StrBytes>, DecodeError> {
    Ok(get_nullable_string(buf, flexible)?.map(str_bytes))
}

fn string(buf: &mut &[u8], flexible: bool) -> Result<StrBytes, DecodeError> {
    get_string(buf, flexible).map(str_bytes)
}

impl Response for ApiVersionsResponse {
    const VERSIONS: (i16, i16) = (0, 4);
    const FLEXIBLE: i16 = 3;

    fn read(b: &mut &[u8], version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let mut r = ApiVersionsResponse::default();
        r.error_code = get_i16(b)?;
        r.api_keys = get_list(b, flexible, |b| {
            let mut k = ApiVersion::default();
            k.api_key = get_i16(b)?;
            k.min_version = get_i16(b)?;
            k.max_version = get_i16(b)?;
            skip_tags_if(b, flexible)?;
            Ok(k)
        })?;
        if version >= 1 {
            r.throttle_time_ms = get_i32(b)?;
        }
        // SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures, ZkMigrationReady.
        skip_tags_if(b, flexible)?;
        Ok(r)
    }
}

impl Response for DescribeClusterResponse {
    const VERSIONS: (i16, i16) = (0, 2);
    const FLEXIBLE: i16 = 0;

    fn read(b: &mut &[u8], version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let mut r = DescribeClusterResponse::default();
        r.throttle_time_ms = get_i32(b)?;
        r.error_code = get_i16(b)?;
        r.error_message = nullable(b, flexible)?;
        if version >= 1 {
            r.endpoint_type = get_i8(b)?;
        }
        r.cluster_id = string(b, flexible)?;
        r.controller_id = BrokerId(get_i32(b)?);
        r.brokers = get_list(b, flexible, |b| {
            let mut broker = DescribeClusterBroker::default();
            broker.broker_id = BrokerId(get_i32(b)?);
            broker.host = string(b, flexible)?;
            broker.port = get_i32(b)?;
            broker.rack = nullable(b, flexible)?;
            if version >= 2 {
                broker.is_fenced = get_i8(b)? != 0;
            }
            skip_tags_if(b, flexible)?;
            Ok(broker)
        })?;
        r.cluster_authorized_operations = get_i32(b)?;
        skip_tags_if(b, flexible)?;
        Ok(r)
    }
}

impl Response for FindCoordinatorResponse {
    const VERSIONS: (i16, i16) = (0, 6);
    const FLEXIBLE: i16 = 3;

    fn read(b: &mut &[u8], version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let mut r = FindCoordinatorResponse::default();
        if version >= 1 {
            r.throttle_time_ms = get_i32(b)?;
        }
        if version <= 3 {
            r.error_code = get_i16(b)?;
            if version >= 1 {
                r.error_message = nullable(b, flexible)?;
            }
            r.node_id = BrokerId(get_i32(b)?);
            r.host = string(b, flexible)?;
            r.port = get_i32(b)?;
        } else {
            r.coordinators = get_list(b, flexible, |b| {
                let mut c = Coordinator::default();
                c.key = string(b, flexible)?;
                c.node_id = BrokerId(get_i32(b)?);
                c.host = string(b, flexible)?;
                c.port = get_i32(b)?;
                c.error_code = get_i16(b)?;
                c.error_message = nullable(b, flexible)?;
                skip_tags_if(b, flexible)?;
                Ok(c)
            })?;
        }
        skip_tags_if(b, flexible)?;
        Ok(r)
    }
}

impl Response for MetadataResponse {
    // Version 9 is the first flexible one; 10 adds topic ids, unused here.
    const VERSIONS: (i16, i16) = (9, 9);
    const FLEXIBLE: i16 = 9;

    fn read(b: &mut &[u8], _version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let mut r = MetadataResponse::default();
        r.throttle_time_ms = get_i32(b)?;
        r.brokers = get_list(b, flexible, |b| {
            let mut k = MetadataResponseBroker::default();
            k.node_id = BrokerId(get_i32(b)?);
            k.host = string(b, flexible)?;
            k.port = get_i32(b)?;
            k.rack = nullable(b, flexible)?;
            skip_tags_if(b, flexible)?;
            Ok(k)
        })?;
        r.cluster_id = nullable(b, flexible)?;
        r.controller_id = BrokerId(get_i32(b)?);
        r.topics = get_list(b, flexible, |b| {
            let mut t = MetadataResponseTopic::default();
            t.error_code = get_i16(b)?;
            t.name = Some(TopicName(string(b, flexible)?));
            t.is_internal = get_i8(b)? != 0;
            t.partitions = get_list(b, flexible, |b| {
                let mut p = MetadataResponsePartition::default();
                p.error_code = get_i16(b)?;
                p.partition_index = get_i32(b)?;
                p.leader_id = BrokerId(get_i32(b)?);
                p.leader_epoch = get_i32(b)?;
                let ids = |b: &mut &[u8]| get_list(b, flexible, |b| Ok(BrokerId(get_i32(b)?)));
                p.replica_nodes = ids(b)?;
                p.isr_nodes = ids(b)?;
                p.offline_replicas = ids(b)?;
                skip_tags_if(b, flexible)?;
                Ok(p)
            })?;
            t.topic_authorized_operations = get_i32(b)?;
            skip_tags_if(b, flexible)?;
            Ok(t)
        })?;
        r.cluster_authorized_operations = get_i32(b)?;
        skip_tags_if(b, flexible)?;
        Ok(r)
    }
}

impl Response for ListOffsetsResponse {
    // Versions 6 to 9 share one flexible schema.
    const VERSIONS: (i16, i16) = (6, 9);
    const FLEXIBLE: i16 = 6;

    fn read(b: &mut &[u8], _version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let mut r = ListOffsetsResponse::default();
        r.throttle_time_ms = get_i32(b)?;
        r.topics = get_list(b, flexible, |b| {
            let mut t = ListOffsetsTopicResponse::default();
            t.name = TopicName(string(b, flexible)?);
            t.partitions = get_list(b, flexible, |b| {
                let mut p = ListOffsetsPartitionResponse::default();
                p.partition_index = get_i32(b)?;
                p.error_code = get_i16(b)?;
                p.timestamp = get_i64(b)?;
                p.offset = get_i64(b)?;
                p.leader_epoch = get_i32(b)?;
                skip_tags_if(b, flexible)?;
                Ok(p)
            })?;
            skip_tags_if(b, flexible)?;
            Ok(t)
        })?;
        skip_tags_if(b, flexible)?;
        Ok(r)
    }
}

impl Response for OffsetFetchResponse {
    // Versions 8 and 9 batch groups; version 10 names topics by id.
    const VERSIONS: (i16, i16) = (8, 9);
    const FLEXIBLE: i16 = 6;

    fn read(b: &mut &[u8], _version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let mut r = OffsetFetchResponse::default();
        r.throttle_time_ms = get_i32(b)?;
        r.groups = get_list(b, flexible, |b| {
            let mut g = OffsetFetchResponseGroup::default();
            g.group_id = GroupId(string(b, flexible)?);
            g.topics = get_list(b, flexible, |b| {
                let mut t = OffsetFetchResponseTopics::default();
                t.name = TopicName(string(b, flexible)?);
                t.partitions = get_list(b, flexible, |b| {
                    let mut p = OffsetFetchResponsePartitions::default();
                    p.partition_index = get_i32(b)?;
                    p.committed_offset = get_i64(b)?;
                    p.committed_leader_epoch = get_i32(b)?;
                    p.metadata = nullable(b, flexible)?;
                    p.error_code = get_i16(b)?;
                    skip_tags_if(b, flexible)?;
                    Ok(p)
                })?;
                skip_tags_if(b, flexible)?;
                Ok(t)
            })?;
            g.error_code = get_i16(b)?;
            skip_tags_if(b, flexible)?;
            Ok(g)
        })?;
        skip_tags_if(b, flexible)?;
        Ok(r)
    }
}

impl Response for OffsetCommitResponse {
    // Version 10 names topics by id; this client commits with version 9.
    const VERSIONS: (i16, i16) = (0, 9);
    const FLEXIBLE: i16 = 8;

    fn read(b: &mut &[u8], version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let mut r = OffsetCommitResponse::default();
        if version >= 3 {
            r.throttle_time_ms = get_i32(b)?;
        }
        r.topics = get_list(b, flexible, |b| {
            let mut t = OffsetCommitResponseTopic::default();
            t.name = TopicName(string(b, flexible)?);
            t.partitions = get_list(b, flexible, |b| {
                let mut p = OffsetCommitResponsePartition::default();
                p.partition_index = get_i32(b)?;
                p.error_code = get_i16(b)?;
                skip_tags_if(b, flexible)?;
                Ok(p)
            })?;
            skip_tags_if(b, flexible)?;
            Ok(t)
        })?;
        skip_tags_if(b, flexible)?;
        Ok(r)
    }
}

impl Response for IncrementalAlterConfigsResponse {
    const VERSIONS: (i16, i16) = (0, 1);
    const FLEXIBLE: i16 = 1;

    fn read(b: &mut &[u8], _version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let mut r = IncrementalAlterConfigsResponse::default();
        r.throttle_time_ms = get_i32(b)?;
        r.responses = get_list(b, flexible, |b| {
            let mut a = AlterConfigsResourceResponse::default();
            a.error_code = get_i16(b)?;
            a.error_message = nullable(b, flexible)?;
            a.resource_type = get_i8(b)?;
            a.resource_name = string(b, flexible)?;
            skip_tags_if(b, flexible)?;
            Ok(a)
        })?;
        skip_tags_if(b, flexible)?;
        Ok(r)
    }
}

impl Response for SaslHandshakeResponse {
    const VERSIONS: (i16, i16) = (0, 1);
    const FLEXIBLE: i16 = i16::MAX;

    fn read(b: &mut &[u8], _version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let mut r = SaslHandshakeResponse::default();
        r.error_code = get_i16(b)?;
        r.mechanisms = get_list(b, flexible, |b| string(b, flexible))?;
        Ok(r)
    }
}

impl Response for SaslAuthenticateResponse {
    const VERSIONS: (i16, i16) = (0, 2);
    const FLEXIBLE: i16 = 2;

    fn read(b: &mut &[u8], version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let mut r = SaslAuthenticateResponse::default();
        r.error_code = get_i16(b)?;
        r.error_message = nullable(b, flexible)?;
        r.auth_bytes = get_bytes(b, flexible)?.into();
        if version >= 1 {
            r.session_lifetime_ms = get_i64(b)?;
        }
        skip_tags_if(b, flexible)?;
        Ok(r)
    }
}

#[cfg(test)]
#[path = "responses_tests.rs"]
mod tests;
