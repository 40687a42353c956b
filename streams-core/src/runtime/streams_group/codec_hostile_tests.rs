//! The heartbeat response decoder on corrupt and hostile input: errors, never a panic,
//! never an allocation sized by a count the input cannot hold.

use proptest::prelude::*;

use super::tests::{encode_response, response, v0_response};
use super::*;

/// The compact varint 0x7fffffff: a length or count of 0x7ffffffe.
const HUGE: [u8; 5] = [0xff, 0xff, 0xff, 0xff, 0x07];
/// The varint 0xffffffff: length -2 as a Java int.
const NEGATIVE: [u8; 5] = [0xff, 0xff, 0xff, 0xff, 0x0f];

/// ThrottleTimeMs, ErrorCode, ErrorMessage null, MemberId "m", MemberEpoch,
/// HeartbeatIntervalMs, AcceptableRecoveryLag, TaskOffsetIntervalMs.
fn fixed_fields() -> Vec<u8> {
    let mut b = vec![0, 0, 0, 0, 0, 0, 0x00, 0x02, b'm'];
    b.extend_from_slice(&[0; 16]);
    b
}

fn with(prefix: &[u8], bad: &[u8]) -> Vec<u8> {
    let mut b = prefix.to_vec();
    b.extend_from_slice(bad);
    b.extend_from_slice(&[0; 32]); // enough for any element, not for 2^31 of them
    b
}

#[test]
fn huge_counts_in_every_position_are_errors() {
    let fixed = fixed_fields();
    let at = |prefix: &[u8]| with(prefix, &HUGE);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("ErrorMessage", at(&[0, 0, 0, 0, 0, 0])),
        ("MemberId", at(&[0, 0, 0, 0, 0, 0, 0x00])),
        ("Status", at(&fixed)),
        ("ActiveTasks", at(&[&fixed[..], &[0x00]].concat())),
        ("StandbyTasks", at(&[&fixed[..], &[0x00, 0x00]].concat())),
        ("WarmupTasks", at(&[&fixed[..], &[0x00, 0x00, 0x00]].concat())),
        (
            "ActiveTasks[0].SubtopologyId",
            at(&[&fixed[..], &[0x00, 0x02]].concat()),
        ),
        (
            "ActiveTasks[0].Partitions",
            at(&[&fixed[..], &[0x00, 0x02, 0x02, b'0']].concat()),
        ),
        (
            "PartitionsByUserEndpoint",
            at(&[&fixed[..], &[0x00, 0x00, 0x00, 0x00, 0, 0, 0, 1]].concat()),
        ),
        (
            "PartitionsByUserEndpoint[0].ActivePartitions",
            at(&[
                &fixed[..],
                &[0x00, 0x00, 0x00, 0x00, 0, 0, 0, 1, 0x02, 0x02, b'h', 0, 80, 0x00],
            ]
            .concat()),
        ),
        (
            "tagged fields",
            at(&[&fixed[..], &[0x00, 0x00, 0x00, 0x00, 0, 0, 0, 1, 0x00]].concat()),
        ),
    ];
    for (field, body) in cases {
        let r = HeartbeatResponse::decode(&body);
        assert!(matches!(r, Err(DecodeError::Oversized { .. })), "{field}: {r:?}");
    }
}

#[test]
fn negative_compact_lengths_are_errors() {
    let fixed = fixed_fields();
    for (field, prefix) in [
        ("ErrorMessage", vec![0, 0, 0, 0, 0, 0]),
        ("Status", fixed.clone()),
        (
            "PartitionsByUserEndpoint",
            [&fixed[..], &[0, 0, 0, 0, 0, 0, 0, 1]].concat(),
        ),
    ] {
        let r = HeartbeatResponse::decode(&with(&prefix, &NEGATIVE));
        assert_eq!(r, Err(DecodeError::NegativeLength(-2)), "{field}");
    }
    // Null where the schema forbids it: MemberId, a task's partitions.
    let r = HeartbeatResponse::decode(&with(&[0, 0, 0, 0, 0, 0, 0x00], &[0x00]));
    assert!(matches!(r, Err(DecodeError::Null(_))), "{r:?}");
}

#[test]
fn every_truncation_of_a_full_response_is_an_error() {
    // Every field present: the pinned v0 response with its null and empty parts filled.
    let full = encode_response(&HeartbeatResponse {
        error_message: Some("e".into()),
        warmup_tasks: Some(vec![]),
        partitions_by_endpoint: Some(vec![EndpointPartitions {
            endpoint: ("h".into(), 1),
            active: vec![("t".into(), vec![0])],
            standby: vec![("t".into(), vec![1])],
        }]),
        ..v0_response()
    });
    for n in 0..full.len() {
        assert!(
            HeartbeatResponse::decode(&full[..n]).is_err(),
            "{n} bytes decoded"
        );
    }
    assert!(HeartbeatResponse::decode(&full).is_ok());
    let mut long = full.clone();
    long.push(0);
    assert_eq!(HeartbeatResponse::decode(&long), Err(DecodeError::Trailing(1)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Random bytes never panic.
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = HeartbeatResponse::decode(&bytes);
    }

    /// A valid response with bytes overwritten, or cut, never panics.
    #[test]
    fn corrupted_responses_never_panic(
        resp in response(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut body = encode_response(&resp);
        for (at, byte) in edits {
            let i = at.index(body.len());
            body[i] = byte;
        }
        let _ = HeartbeatResponse::decode(&body);
        let _ = HeartbeatResponse::decode(&body[..cut.index(body.len() + 1)]);
    }
}
