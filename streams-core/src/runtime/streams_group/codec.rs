//! The `StreamsGroupHeartbeat` request and response (API key 88, KIP-1071), version 0.
//!
//! Every version of the API is *flexible*: strings and arrays are compact (length + 1 as an
//! unsigned varint, 0 for null), and every struct, nested or top-level, ends with a tagged
//! field section. We write an empty tagged section everywhere and skip the tagged fields a
//! newer broker adds when decoding, so a response carrying unknown tags still decodes.
//! The encoder writes the fields in schema order; a `None` is written as null, which the
//! coordinator reads as "unchanged since the last heartbeat".
//!
//! The decoder never panics on a short or corrupt buffer, nor allocates for a length or a
//! count the buffer cannot hold (see [`decode`](super::decode)): it returns [`DecodeError`].
//! It reads every field of the schema, and a response with bytes left after its last field
//! (a schema mismatch) is an error rather than silently misread.
//!
//! The schemas are Apache Kafka's `StreamsGroupHeartbeatRequest.json` and
//! `StreamsGroupHeartbeatResponse.json` (version 0, flexible).

use bytes::BufMut;

pub(crate) use crate::runtime::streams_group::decode::DecodeError;
#[cfg(test)]
use crate::runtime::streams_group::decode::get_uvarint;
use crate::runtime::streams_group::decode::{
    end, get_array, get_i8, get_i16, get_i32, get_nullable_array, get_nullable_str, get_str, get_u16,
    skip_tags,
};
use crate::runtime::streams_group::topology::{GroupTopology, TopicInfo};

/// The API key of `StreamsGroupHeartbeat`.
pub(crate) const API_KEY: i16 = 88;
/// The highest version this codec speaks (request v1 only announces response v1's new
/// field, which we do not read).
pub(crate) const MAX_VERSION: i16 = 0;

/// The tasks of one sub-topology, by partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskIds {
    /// The sub-topology's id (our `u32` id in decimal).
    pub subtopology: String,
    /// Its partitions.
    pub partitions: Vec<i32>,
}

/// A task's changelog offset sum (`TaskOffsets` / `TaskEndOffsets` of the request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskOffset {
    pub subtopology: String,
    pub partition: i32,
    pub offset: i64,
}

/// A `StreamsGroupHeartbeat` request. `None` fields are sent as null ("unchanged").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HeartbeatRequest {
    pub group_id: String,
    pub member_id: String,
    /// 0 to join, -1 to leave, the current epoch otherwise.
    pub member_epoch: i32,
    pub endpoint_information_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    /// Only on join (epoch 0).
    pub topology: Option<GroupTopology>,
    pub active_tasks: Option<Vec<TaskIds>>,
    pub standby_tasks: Option<Vec<TaskIds>>,
    pub warmup_tasks: Option<Vec<TaskIds>>,
    pub process_id: Option<String>,
    pub user_endpoint: Option<(String, u16)>,
    pub client_tags: Option<Vec<(String, String)>>,
    /// The sums of the changelog offsets of the tasks whose state this member's process
    /// holds (active, standby, or only on disk).
    pub task_offsets: Option<Vec<TaskOffset>>,
    pub task_end_offsets: Option<Vec<TaskOffset>>,
    pub shutdown_application: bool,
}

/// One status the coordinator reports for the group (missing source topics, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupStatus {
    /// 0 stale topology, 1 missing source topics, 2 incorrectly partitioned topics,
    /// 3 missing internal topics, 4 shutdown requested.
    pub code: i8,
    pub detail: String,
}

/// A `StreamsGroupHeartbeat` response. `None` task lists mean "unchanged".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HeartbeatResponse {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub acceptable_recovery_lag: i32,
    pub task_offset_interval_ms: i32,
    pub status: Option<Vec<GroupStatus>>,
    pub active_tasks: Option<Vec<TaskIds>>,
    pub standby_tasks: Option<Vec<TaskIds>>,
    pub warmup_tasks: Option<Vec<TaskIds>>,
    /// The epoch of the endpoint map the coordinator holds (sent back in the next request,
    /// so the map comes again only when it changed).
    pub endpoint_information_epoch: i32,
    /// Per user endpoint: its active and standby partitions (topic, partitions); null when
    /// the request's `EndpointInformationEpoch` is current.
    pub partitions_by_endpoint: Option<Vec<EndpointPartitions>>,
}

/// The partitions a user endpoint serves (for interactive queries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EndpointPartitions {
    pub endpoint: (String, u16),
    pub active: Vec<(String, Vec<i32>)>,
    pub standby: Vec<(String, Vec<i32>)>,
}

// ---- primitives -------------------------------------------------------------------------

fn put_uvarint(buf: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn put_len(buf: &mut Vec<u8>, len: Option<usize>) {
    put_uvarint(buf, len.map_or(0, |n| n as u32 + 1));
}

pub(crate) fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_len(buf, Some(s.len()));
    buf.put_slice(s.as_bytes());
}

pub(crate) fn put_nullable_str(buf: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(buf, s),
        None => put_len(buf, None),
    }
}

pub(crate) fn put_array<T>(buf: &mut Vec<u8>, items: Option<&[T]>, mut each: impl FnMut(&mut Vec<u8>, &T)) {
    put_len(buf, items.map(<[T]>::len));
    for item in items.unwrap_or_default() {
        each(buf, item);
    }
}

/// An empty tagged-field section.
pub(crate) fn put_no_tags(buf: &mut Vec<u8>) {
    put_uvarint(buf, 0);
}

// ---- the request --------------------------------------------------------------------------

pub(crate) fn put_task_ids(buf: &mut Vec<u8>, t: &TaskIds) {
    put_str(buf, &t.subtopology);
    put_array(buf, Some(&t.partitions), |b, p| b.put_i32(*p));
    put_no_tags(buf);
}

pub(crate) fn put_task_offset(buf: &mut Vec<u8>, t: &TaskOffset) {
    put_str(buf, &t.subtopology);
    buf.put_i32(t.partition);
    buf.put_i64(t.offset);
    put_no_tags(buf);
}

pub(crate) fn put_key_value(buf: &mut Vec<u8>, (k, v): &(String, String)) {
    put_str(buf, k);
    put_str(buf, v);
    put_no_tags(buf);
}

fn put_topic_info(buf: &mut Vec<u8>, t: &TopicInfo) {
    put_str(buf, &t.name);
    buf.put_i32(t.partitions);
    buf.put_i16(t.replication_factor);
    put_array(buf, Some(&t.configs), put_key_value);
    put_no_tags(buf);
}

fn put_topology(buf: &mut Vec<u8>, t: &GroupTopology) {
    buf.put_i32(t.epoch);
    put_array(buf, Some(&t.subtopologies), |b, s| {
        put_str(b, &s.id);
        put_array(b, Some(&s.source_topics), |b, t| put_str(b, t));
        put_array(b, Some(&s.source_topic_regex), |b, t| put_str(b, t));
        put_array(b, Some(&s.state_changelog_topics), put_topic_info);
        put_array(b, Some(&s.repartition_sink_topics), |b, t| put_str(b, t));
        put_array(b, Some(&s.repartition_source_topics), put_topic_info);
        put_array(b, Some(&s.copartition_groups), |b, g| {
            put_array(b, Some(&g.source_topics), |b, i| b.put_i16(*i));
            put_array(b, Some(&g.source_topic_regex), |b, i| b.put_i16(*i));
            put_array(b, Some(&g.repartition_source_topics), |b, i| b.put_i16(*i));
            put_no_tags(b);
        });
        put_no_tags(b);
    });
    put_no_tags(buf);
}

impl HeartbeatRequest {
    /// The request body (without the request header), version 0.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(256);
        put_str(&mut b, &self.group_id);
        put_str(&mut b, &self.member_id);
        b.put_i32(self.member_epoch);
        b.put_i32(self.endpoint_information_epoch);
        put_nullable_str(&mut b, self.instance_id.as_deref());
        put_nullable_str(&mut b, self.rack_id.as_deref());
        b.put_i32(self.rebalance_timeout_ms);
        match &self.topology {
            // A nullable struct: -1 (i8) for null, 1 then the struct otherwise.
            Some(t) => {
                b.put_i8(1);
                put_topology(&mut b, t);
            }
            None => b.put_i8(-1),
        }
        for tasks in [&self.active_tasks, &self.standby_tasks, &self.warmup_tasks] {
            put_array(&mut b, tasks.as_deref(), put_task_ids);
        }
        put_nullable_str(&mut b, self.process_id.as_deref());
        match &self.user_endpoint {
            Some((host, port)) => {
                b.put_i8(1);
                put_str(&mut b, host);
                b.put_u16(*port);
                put_no_tags(&mut b);
            }
            None => b.put_i8(-1),
        }
        put_array(&mut b, self.client_tags.as_deref(), put_key_value);
        put_array(&mut b, self.task_offsets.as_deref(), put_task_offset);
        put_array(&mut b, self.task_end_offsets.as_deref(), put_task_offset);
        b.put_u8(u8::from(self.shutdown_application));
        put_no_tags(&mut b);
        b
    }
}

// ---- the response -------------------------------------------------------------------------

pub(crate) fn get_task_ids(buf: &mut &[u8]) -> Result<TaskIds, DecodeError> {
    let subtopology = get_str(buf)?;
    let partitions = get_array(buf, get_i32)?;
    skip_tags(buf)?;
    Ok(TaskIds {
        subtopology,
        partitions,
    })
}

fn get_endpoint(buf: &mut &[u8]) -> Result<(String, u16), DecodeError> {
    let host = get_str(buf)?;
    let port = get_u16(buf)?;
    skip_tags(buf)?;
    Ok((host, port))
}

fn get_topic_partitions(buf: &mut &[u8]) -> Result<(String, Vec<i32>), DecodeError> {
    let topic = get_str(buf)?;
    let partitions = get_array(buf, get_i32)?;
    skip_tags(buf)?;
    Ok((topic, partitions))
}

impl HeartbeatResponse {
    /// Decodes a response body (after the response header), version 0.
    pub(crate) fn decode(mut buf: &[u8]) -> Result<Self, DecodeError> {
        let b = &mut buf;
        let mut r = HeartbeatResponse {
            throttle_time_ms: get_i32(b)?,
            error_code: get_i16(b)?,
            error_message: get_nullable_str(b)?,
            member_id: get_str(b)?,
            member_epoch: get_i32(b)?,
            heartbeat_interval_ms: get_i32(b)?,
            acceptable_recovery_lag: get_i32(b)?,
            task_offset_interval_ms: get_i32(b)?,
            ..Default::default()
        };
        r.status = get_nullable_array(b, |b| {
            let code = get_i8(b)?;
            let detail = get_str(b)?;
            skip_tags(b)?;
            Ok(GroupStatus { code, detail })
        })?;
        r.active_tasks = get_nullable_array(b, get_task_ids)?;
        r.standby_tasks = get_nullable_array(b, get_task_ids)?;
        r.warmup_tasks = get_nullable_array(b, get_task_ids)?;
        r.endpoint_information_epoch = get_i32(b)?;
        r.partitions_by_endpoint = get_nullable_array(b, |b| {
            let endpoint = get_endpoint(b)?;
            let active = get_array(b, get_topic_partitions)?;
            let standby = get_array(b, get_topic_partitions)?;
            skip_tags(b)?;
            Ok(EndpointPartitions {
                endpoint,
                active,
                standby,
            })
        })?;
        skip_tags(b)?;
        end(b)?;
        Ok(r)
    }
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "codec_hostile_tests.rs"]
mod hostile_tests;
