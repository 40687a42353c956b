//! Committed offsets of a streams group, read from its coordinator over the member's own
//! connection (`OffsetFetch` v8+, `RequireStable`).
//!
//! The stream thread's consumer joins no group under the streams protocol, and librdkafka
//! sends its committed-offsets lookups to the coordinator it found last: when that broker is
//! paused, each lookup waits for librdkafka's request timeout (`socket.timeout.ms`, 60 s)
//! before it looks the coordinator up again, and the thread's new tasks wait with it. Here
//! a request that gets no answer within the connection's I/O timeout (10 s) drops the
//! connection, and the next one finds the coordinator anew, through any broker the member
//! knows.
//!
//! Invariants: an offset still in an open transaction (`UNSTABLE_OFFSET_COMMIT`) is waited
//! for, never read as "no commit"; a coordinator that moved or is loading is asked again;
//! a refused authorization fails the lookup at once.

use std::collections::BTreeMap;

use kafka_protocol::messages::TopicName;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};
use kafka_protocol::protocol::StrBytes;

use crate::model::error::StreamsError;
use crate::runtime::streams_group::commit::error_name;
use crate::runtime::streams_group::wire::{Conn, coordinator_moved, group_id, kafka};

/// A partition's committed offset and its metadata; `None` where nothing is committed.
pub(crate) type Committed = BTreeMap<(String, i32), Option<(i64, String)>>;

/// Why one lookup failed.
#[derive(Debug)]
pub(crate) enum FetchError {
    /// Ask again (after finding the coordinator anew when `reconnect`).
    Again {
        /// What the coordinator said.
        message: String,
        /// The coordinator moved, or the connection failed.
        reconnect: bool,
    },
    /// Asking again will not help.
    Failed(StreamsError),
}

/// The committed offsets of `partitions` (topic, partition) of `group`.
pub(crate) fn fetch(
    conn: &mut Conn,
    group: &str,
    partitions: &[(String, i32)],
) -> Result<Committed, FetchError> {
    let version = conn.version(9, (8, 9)).ok_or_else(|| {
        FetchError::Failed(kafka(
            format!("{} does not offer OffsetFetch v8", conn.addr()),
            false,
        ))
    })?;
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = group_id(group);
    g.topics = Some(
        by_topic
            .into_iter()
            .map(|(name, partition_indexes)| {
                let mut t = OffsetFetchRequestTopics::default();
                t.name = TopicName(StrBytes::from_string(name.to_owned()));
                t.partition_indexes = partition_indexes;
                t
            })
            .collect(),
    );
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    req.require_stable = true;
    let resp = conn.send(&req, version).map_err(|e| FetchError::Again {
        message: e.to_string(),
        reconnect: true,
    })?;
    read(group, partitions, &resp)
}

/// The offsets of `resp`, or what its error codes ask for.
fn read(
    group: &str,
    partitions: &[(String, i32)],
    resp: &OffsetFetchResponse,
) -> Result<Committed, FetchError> {
    let Some(g) = resp.groups.first() else {
        return Err(FetchError::Again {
            message: "an OffsetFetch response without the group".into(),
            reconnect: true,
        });
    };
    check(group, g.error_code, "the group")?;
    let mut out: Committed = partitions.iter().map(|p| (p.clone(), None)).collect();
    for t in &g.topics {
        for p in &t.partitions {
            let what = format!("{}-{}", t.name.0, p.partition_index);
            check(group, p.error_code, &what)?;
            let key = (t.name.0.to_string(), p.partition_index);
            if let Some(slot) = out.get_mut(&key)
                && p.committed_offset >= 0
            {
                let metadata = p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default();
                *slot = Some((p.committed_offset, metadata));
            }
        }
    }
    Ok(out)
}

/// Error `code` of the lookup of `group` (at `what`) as a [`FetchError`].
fn check(group: &str, code: i16, what: &str) -> Result<(), FetchError> {
    let message = || format!("OffsetFetch of group `{group}`: {} on {what}", error_name(code));
    match code {
        0 => Ok(()),
        c if coordinator_moved(c) => Err(FetchError::Again {
            message: message(),
            reconnect: true,
        }),
        // UNSTABLE_OFFSET_COMMIT: a transaction with offsets of the partition is still open.
        88 => Err(FetchError::Again {
            message: message(),
            reconnect: false,
        }),
        30 => Err(FetchError::Failed(StreamsError::Authorization {
            resource: format!("group `{group}`"),
            message: format!("{} (grant DESCRIBE on the group)", message()),
        })),
        29 => Err(FetchError::Failed(StreamsError::Authorization {
            resource: what.to_owned(),
            message: format!("{} (grant DESCRIBE on the topic)", message()),
        })),
        c => Err(FetchError::Failed(kafka(
            message(),
            kafka_protocol::ResponseError::try_from_code(c).is_some_and(|e| e.is_retriable()),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
    };

    use super::*;

    fn response(group_code: i16, partitions: &[(i32, i64, i16)]) -> OffsetFetchResponse {
        let mut t = OffsetFetchResponseTopics::default();
        t.name = TopicName(StrBytes::from_static_str("in"));
        t.partitions = partitions
            .iter()
            .map(|&(index, offset, code)| {
                let mut p = OffsetFetchResponsePartitions::default();
                p.partition_index = index;
                p.committed_offset = offset;
                p.metadata = Some(StrBytes::from_static_str("m"));
                p.error_code = code;
                p
            })
            .collect();
        let mut g = OffsetFetchResponseGroup::default();
        g.group_id = group_id("g");
        g.error_code = group_code;
        g.topics = vec![t];
        let mut r = OffsetFetchResponse::default();
        r.groups = vec![g];
        r
    }

    fn asked() -> Vec<(String, i32)> {
        vec![("in".into(), 0), ("in".into(), 1)]
    }

    #[test]
    fn offsets_and_their_absence_are_read() {
        let got = read("g", &asked(), &response(0, &[(0, 42, 0), (1, -1, 0)])).expect("read");
        assert_eq!(got[&("in".to_owned(), 0)], Some((42, "m".to_owned())));
        assert_eq!(got[&("in".to_owned(), 1)], None);
    }

    #[test]
    fn unstable_offsets_and_a_moved_coordinator_are_asked_again_never_read_as_missing() {
        match read("g", &asked(), &response(0, &[(0, -1, 88), (1, 5, 0)])) {
            Err(FetchError::Again { reconnect: false, .. }) => {}
            other => panic!("an unstable offset must be waited for: {other:?}"),
        }
        match read("g", &asked(), &response(16, &[])) {
            Err(FetchError::Again { reconnect: true, .. }) => {}
            other => panic!("NOT_COORDINATOR must find the coordinator again: {other:?}"),
        }
    }

    #[test]
    fn a_refused_authorization_fails_at_once() {
        match read("g", &asked(), &response(30, &[])) {
            Err(FetchError::Failed(StreamsError::Authorization { .. })) => {}
            other => panic!("{other:?}"),
        }
        match read("g", &asked(), &response(0, &[(0, -1, 29)])) {
            Err(FetchError::Failed(StreamsError::Authorization { resource, .. })) => {
                assert_eq!(resource, "in-0")
            }
            other => panic!("{other:?}"),
        }
    }
}
