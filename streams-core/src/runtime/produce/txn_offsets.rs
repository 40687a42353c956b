//! Input offsets added to an exactly-once transaction on behalf of a streams-group member.
//!
//! Under `group.protocol=streams` (KIP-1071) the thread's consumer joins no group, so its
//! own group metadata carries no member: the broker would refuse the transactional offset
//! commit of a group with members. The offsets are therefore sent with group metadata that
//! names the thread's member of the streams group and its current member epoch, which the
//! group coordinator checks as it checks a consumer group member's generation. rust-rdkafka
//! builds such metadata only from a subscribed consumer, so this goes through librdkafka's
//! C API (`rd_kafka_consumer_group_metadata_new_with_genid`).

use std::ffi::{CStr, CString};
use std::time::Duration;

use rdkafka::TopicPartitionList;
use rdkafka::bindings as rdsys;
use rdkafka::producer::Producer;

use crate::runtime::produce::producer::StreamProducer;

/// Why a call on the open transaction failed (adding the offsets, committing it).
#[derive(Debug)]
pub(crate) struct TxnOffsetsError {
    pub message: String,
    /// The producer can no longer be used (fenced, or its commit did not end).
    pub fatal: bool,
}

impl std::fmt::Display for TxnOffsetsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Adds `offsets` to `producer`'s open transaction as the offsets of member `member_id`
/// at `epoch` of group `group`.
///
/// One of the two places of the workspace with `unsafe` (the other reads cached
/// watermarks, `client/watermarks.rs`): without the member and its epoch the
/// broker accepts the offsets unchecked (a transactional commit may omit them), so a
/// thread that lost its tasks without knowing it could still commit them. With them, the
/// group coordinator refuses such a commit, as it fences a stale consumer group member.
#[allow(unsafe_code)]
pub(crate) fn send_offsets_as_member(
    producer: &StreamProducer,
    offsets: &TopicPartitionList,
    group: &str,
    member_id: &str,
    epoch: i32,
    timeout: Duration,
) -> Result<(), TxnOffsetsError> {
    let text = |what: &str| TxnOffsetsError {
        message: format!("{what} contains a NUL byte"),
        fatal: true,
    };
    let group = CString::new(group).map_err(|_| text("the group id"))?;
    let member = CString::new(member_id).map_err(|_| text("the member id"))?;
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: the strings outlive the call that copies them into the metadata; the
    // metadata is destroyed once, after the call that reads it; `offsets` and the
    // producer's handle are valid for the duration of the call (borrowed); the error
    // object, when returned, is read and destroyed once.
    unsafe {
        let metadata = rdsys::rd_kafka_consumer_group_metadata_new_with_genid(
            group.as_ptr(),
            epoch,
            member.as_ptr(),
            std::ptr::null(),
        );
        if metadata.is_null() {
            return Err(TxnOffsetsError {
                message: "librdkafka could not build the group metadata".into(),
                fatal: false,
            });
        }
        let error = rdsys::rd_kafka_send_offsets_to_transaction(
            producer.client().native_ptr(),
            offsets.ptr(),
            metadata,
            timeout_ms,
        );
        rdsys::rd_kafka_consumer_group_metadata_destroy(metadata);
        if error.is_null() {
            return Ok(());
        }
        let message = CStr::from_ptr(rdsys::rd_kafka_error_string(error))
            .to_string_lossy()
            .into_owned();
        let fatal = rdsys::rd_kafka_error_is_fatal(error) != 0;
        rdsys::rd_kafka_error_destroy(error);
        Err(TxnOffsetsError { message, fatal })
    }
}
