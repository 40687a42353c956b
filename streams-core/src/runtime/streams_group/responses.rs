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
pub(crate) trait Response: HeaderVersion + Default {
    /// The versions decoded.
    const VERSIONS: (i16, i16);
    /// The first flexible version.
    const FLEXIBLE: i16;
    /// Reads the non-tagged fields of version `version` (checked against `VERSIONS`),
    /// flexible or not, into `self`.
    fn read(&mut self, buf: &mut &[u8], version: i16, flexible: bool) -> Result<(), DecodeError>;

    /// Decodes a body of version `version`; bytes after it are left in `buf`.
    fn decode_body(buf: &mut &[u8], version: i16) -> Result<Self, DecodeError> {
        if !(Self::VERSIONS.0..=Self::VERSIONS.1).contains(&version) {
            return Err(DecodeError::Version(version));
        }
        let flexible = version >= Self::FLEXIBLE;
        tagged(buf, flexible, |r: &mut Self, b| r.read(b, version, flexible))
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

/// A struct of the schema: its non-tagged fields, read into a default value by `fields`,
/// then (when `flexible`) its tagged section, skipped.
fn tagged<T: Default>(
    buf: &mut &[u8],
    flexible: bool,
    fields: impl FnOnce(&mut T, &mut &[u8]) -> Result<(), DecodeError>,
) -> Result<T, DecodeError> {
    let mut t = T::default();
    fields(&mut t, buf)?;
    skip_tags_if(buf, flexible)?;
    Ok(t)
}

/// A non-nullable array of [`tagged`] structs.
fn tagged_list<T: Default>(
    buf: &mut &[u8],
    flexible: bool,
    mut fields: impl FnMut(&mut T, &mut &[u8]) -> Result<(), DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    get_list(buf, flexible, |b| tagged(b, flexible, &mut fields))
}

/// The fields of a topic entry of `ListOffsets`, `OffsetFetch` and `OffsetCommit`: its name,
/// then its partitions, each read by `partition`.
fn topic<P: Default>(
    buf: &mut &[u8],
    flexible: bool,
    partition: impl FnMut(&mut P, &mut &[u8]) -> Result<(), DecodeError>,
) -> Result<(TopicName, Vec<P>), DecodeError> {
    let name = TopicName(string(buf, flexible)?);
    Ok((name, tagged_list(buf, flexible, partition)?))
}

/// A broker's address as the schemas spell it: node id, host, port.
fn node(buf: &mut &[u8], flexible: bool) -> Result<(BrokerId, StrBytes, i32), DecodeError> {
    Ok((BrokerId(get_i32(buf)?), string(buf, flexible)?, get_i32(buf)?))
}

impl Response for ApiVersionsResponse {
    const VERSIONS: (i16, i16) = (0, 4);
    const FLEXIBLE: i16 = 3;

    // Tagged: SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures, ZkMigrationReady.
    fn read(&mut self, b: &mut &[u8], version: i16, flexible: bool) -> Result<(), DecodeError> {
        self.error_code = get_i16(b)?;
        self.api_keys = tagged_list(b, flexible, |k: &mut ApiVersion, b| {
            k.api_key = get_i16(b)?;
            k.min_version = get_i16(b)?;
            k.max_version = get_i16(b)?;
            Ok(())
        })?;
        if version >= 1 {
            self.throttle_time_ms = get_i32(b)?;
        }
        Ok(())
    }
}

impl Response for DescribeClusterResponse {
    const VERSIONS: (i16, i16) = (0, 2);
    const FLEXIBLE: i16 = 0;

    fn read(&mut self, b: &mut &[u8], version: i16, flexible: bool) -> Result<(), DecodeError> {
        self.throttle_time_ms = get_i32(b)?;
        self.error_code = get_i16(b)?;
        self.error_message = nullable(b, flexible)?;
        if version >= 1 {
            self.endpoint_type = get_i8(b)?;
        }
        self.cluster_id = string(b, flexible)?;
        self.controller_id = BrokerId(get_i32(b)?);
        self.brokers = tagged_list(b, flexible, |k: &mut DescribeClusterBroker, b| {
            (k.broker_id, k.host, k.port) = node(b, flexible)?;
            k.rack = nullable(b, flexible)?;
            if version >= 2 {
                k.is_fenced = get_i8(b)? != 0;
            }
            Ok(())
        })?;
        self.cluster_authorized_operations = get_i32(b)?;
        Ok(())
    }
}

impl Response for FindCoordinatorResponse {
    const VERSIONS: (i16, i16) = (0, 6);
    const FLEXIBLE: i16 = 3;

    fn read(&mut self, b: &mut &[u8], version: i16, flexible: bool) -> Result<(), DecodeError> {
        if version >= 1 {
            self.throttle_time_ms = get_i32(b)?;
        }
        if version <= 3 {
            self.error_code = get_i16(b)?;
            if version >= 1 {
                self.error_message = nullable(b, flexible)?;
            }
            (self.node_id, self.host, self.port) = node(b, flexible)?;
        } else {
            self.coordinators = tagged_list(b, flexible, |c: &mut Coordinator, b| {
                c.key = string(b, flexible)?;
                (c.node_id, c.host, c.port) = node(b, flexible)?;
                c.error_code = get_i16(b)?;
                c.error_message = nullable(b, flexible)?;
                Ok(())
            })?;
        }
        Ok(())
    }
}

impl Response for MetadataResponse {
    // Version 9 is the first flexible one; 10 adds topic ids, unused here.
    const VERSIONS: (i16, i16) = (9, 9);
    const FLEXIBLE: i16 = 9;

    fn read(&mut self, b: &mut &[u8], _version: i16, flexible: bool) -> Result<(), DecodeError> {
        self.throttle_time_ms = get_i32(b)?;
        self.brokers = tagged_list(b, flexible, |k: &mut MetadataResponseBroker, b| {
            (k.node_id, k.host, k.port) = node(b, flexible)?;
            k.rack = nullable(b, flexible)?;
            Ok(())
        })?;
        self.cluster_id = nullable(b, flexible)?;
        self.controller_id = BrokerId(get_i32(b)?);
        self.topics = tagged_list(b, flexible, |t: &mut MetadataResponseTopic, b| {
            t.error_code = get_i16(b)?;
            t.name = Some(TopicName(string(b, flexible)?));
            t.is_internal = get_i8(b)? != 0;
            t.partitions = tagged_list(b, flexible, |p: &mut MetadataResponsePartition, b| {
                p.error_code = get_i16(b)?;
                p.partition_index = get_i32(b)?;
                p.leader_id = BrokerId(get_i32(b)?);
                p.leader_epoch = get_i32(b)?;
                let ids = |b: &mut &[u8]| get_list(b, flexible, |b| Ok(BrokerId(get_i32(b)?)));
                p.replica_nodes = ids(b)?;
                p.isr_nodes = ids(b)?;
                p.offline_replicas = ids(b)?;
                Ok(())
            })?;
            t.topic_authorized_operations = get_i32(b)?;
            Ok(())
        })?;
        self.cluster_authorized_operations = get_i32(b)?;
        Ok(())
    }
}

impl Response for ListOffsetsResponse {
    // Versions 6 to 9 share one flexible schema.
    const VERSIONS: (i16, i16) = (6, 9);
    const FLEXIBLE: i16 = 6;

    fn read(&mut self, b: &mut &[u8], _version: i16, flexible: bool) -> Result<(), DecodeError> {
        self.throttle_time_ms = get_i32(b)?;
        self.topics = tagged_list(b, flexible, |t: &mut ListOffsetsTopicResponse, b| {
            (t.name, t.partitions) = topic(b, flexible, |p: &mut ListOffsetsPartitionResponse, b| {
                p.partition_index = get_i32(b)?;
                p.error_code = get_i16(b)?;
                p.timestamp = get_i64(b)?;
                p.offset = get_i64(b)?;
                p.leader_epoch = get_i32(b)?;
                Ok(())
            })?;
            Ok(())
        })?;
        Ok(())
    }
}

impl Response for OffsetFetchResponse {
    // Versions 8 and 9 batch groups; version 10 names topics by id.
    const VERSIONS: (i16, i16) = (8, 9);
    const FLEXIBLE: i16 = 6;

    fn read(&mut self, b: &mut &[u8], _version: i16, flexible: bool) -> Result<(), DecodeError> {
        self.throttle_time_ms = get_i32(b)?;
        self.groups = tagged_list(b, flexible, |g: &mut OffsetFetchResponseGroup, b| {
            g.group_id = GroupId(string(b, flexible)?);
            g.topics = tagged_list(b, flexible, |t: &mut OffsetFetchResponseTopics, b| {
                (t.name, t.partitions) = topic(b, flexible, |p: &mut OffsetFetchResponsePartitions, b| {
                    p.partition_index = get_i32(b)?;
                    p.committed_offset = get_i64(b)?;
                    p.committed_leader_epoch = get_i32(b)?;
                    p.metadata = nullable(b, flexible)?;
                    p.error_code = get_i16(b)?;
                    Ok(())
                })?;
                Ok(())
            })?;
            g.error_code = get_i16(b)?;
            Ok(())
        })?;
        Ok(())
    }
}

impl Response for OffsetCommitResponse {
    // Version 10 names topics by id; this client commits with version 9.
    const VERSIONS: (i16, i16) = (0, 9);
    const FLEXIBLE: i16 = 8;

    fn read(&mut self, b: &mut &[u8], version: i16, flexible: bool) -> Result<(), DecodeError> {
        if version >= 3 {
            self.throttle_time_ms = get_i32(b)?;
        }
        self.topics = tagged_list(b, flexible, |t: &mut OffsetCommitResponseTopic, b| {
            (t.name, t.partitions) = topic(b, flexible, |p: &mut OffsetCommitResponsePartition, b| {
                p.partition_index = get_i32(b)?;
                p.error_code = get_i16(b)?;
                Ok(())
            })?;
            Ok(())
        })?;
        Ok(())
    }
}

impl Response for IncrementalAlterConfigsResponse {
    const VERSIONS: (i16, i16) = (0, 1);
    const FLEXIBLE: i16 = 1;

    fn read(&mut self, b: &mut &[u8], _version: i16, flexible: bool) -> Result<(), DecodeError> {
        self.throttle_time_ms = get_i32(b)?;
        self.responses = tagged_list(b, flexible, |a: &mut AlterConfigsResourceResponse, b| {
            a.error_code = get_i16(b)?;
            a.error_message = nullable(b, flexible)?;
            a.resource_type = get_i8(b)?;
            a.resource_name = string(b, flexible)?;
            Ok(())
        })?;
        Ok(())
    }
}

impl Response for SaslHandshakeResponse {
    // Never flexible: no tagged sections.
    const VERSIONS: (i16, i16) = (0, 1);
    const FLEXIBLE: i16 = i16::MAX;

    fn read(&mut self, b: &mut &[u8], _version: i16, flexible: bool) -> Result<(), DecodeError> {
        self.error_code = get_i16(b)?;
        self.mechanisms = get_list(b, flexible, |b| string(b, flexible))?;
        Ok(())
    }
}

impl Response for SaslAuthenticateResponse {
    const VERSIONS: (i16, i16) = (0, 2);
    const FLEXIBLE: i16 = 2;

    fn read(&mut self, b: &mut &[u8], version: i16, flexible: bool) -> Result<(), DecodeError> {
        self.error_code = get_i16(b)?;
        self.error_message = nullable(b, flexible)?;
        self.auth_bytes = get_bytes(b, flexible)?.into();
        if version >= 1 {
            self.session_lifetime_ms = get_i64(b)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "responses_tests.rs"]
mod tests;
