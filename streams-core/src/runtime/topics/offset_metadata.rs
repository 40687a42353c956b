//! The metadata committed with each input offset, in Kafka Streams' format: the task's
//! stream time and its processors' metadata, so that a task starting elsewhere (a restart,
//! another instance, or a Kafka Streams application taking over) goes on from the stream
//! time its input had reached, and its emit-final aggregations from the windows they had
//! emitted.
//!
//! Kafka Streams commits each partition's metadata as base64 of a version byte and the
//! partition's time (8 bytes, big-endian); version 2 appends the processor metadata: an
//! entry count (4 bytes), then per entry the key's length (4 bytes), its UTF-8 bytes and a
//! value (8 bytes). This runtime writes version 2 with the task's stream time (the largest
//! of its partitions' times, which is what a task's stream time starts from in both
//! implementations) and reads versions 1 and 2. Anything else (no metadata, another
//! application's format) reads as unknown: the task then starts with no stream time and
//! no processor metadata.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The version written.
const VERSION: u8 = 2;

/// Kafka Streams' `RecordQueue.UNKNOWN`: the time of a partition without one yet.
const UNKNOWN: i64 = -1;

/// What one committed offset's metadata holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Committed {
    /// The stream time, if known.
    pub time: Option<i64>,
    /// The processors' metadata.
    pub processors: BTreeMap<String, i64>,
}

/// The metadata of an offset committed at stream time `stream_time` with the processor
/// metadata `processors`; `None` when there is nothing to say.
pub(crate) fn encode(stream_time: Option<i64>, processors: &BTreeMap<String, i64>) -> Option<String> {
    if stream_time.is_none() && processors.is_empty() {
        return None;
    }
    let mut bytes = Vec::with_capacity(9 + processors.len() * 20);
    bytes.push(VERSION);
    bytes.extend_from_slice(&stream_time.unwrap_or(UNKNOWN).to_be_bytes());
    if !processors.is_empty() {
        // Kafka Streams writes no entry count for empty metadata.
        bytes.extend_from_slice(&len(processors.len()).to_be_bytes());
        for (key, value) in processors {
            bytes.extend_from_slice(&len(key.len()).to_be_bytes());
            bytes.extend_from_slice(key.as_bytes());
            bytes.extend_from_slice(&value.to_be_bytes());
        }
    }
    Some(STANDARD.encode(bytes))
}

/// A length as Kafka's 4-byte int (keys and entry counts are far below `i32::MAX`).
fn len(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// What committed offset metadata holds; nothing for metadata of an unknown format.
pub(crate) fn decode(metadata: &str) -> Committed {
    decode_known(metadata).unwrap_or_default()
}

fn decode_known(metadata: &str) -> Option<Committed> {
    if metadata.is_empty() {
        return None;
    }
    let bytes = STANDARD.decode(metadata).ok()?;
    let (&version, rest) = bytes.split_first()?;
    if version != 1 && version != 2 {
        return None;
    }
    let (time, rest) = rest.split_first_chunk::<8>()?;
    let time = i64::from_be_bytes(*time);
    // Processor metadata Kafka Streams cannot read counts as none, as it does there.
    let processors = match version {
        2 => decode_processors(rest).unwrap_or_default(),
        _ => BTreeMap::new(),
    };
    Some(Committed {
        // Kafka Streams writes -1 (`RecordQueue.UNKNOWN`) for a partition without a time yet.
        time: (time >= 0).then_some(time),
        processors,
    })
}

/// Version 2's processor metadata (nothing when it is empty).
fn decode_processors(mut rest: &[u8]) -> Option<BTreeMap<String, i64>> {
    let mut processors = BTreeMap::new();
    if rest.is_empty() {
        return Some(processors);
    }
    let count = take_int(&mut rest)?;
    for _ in 0..count {
        let key_len = usize::try_from(take_int(&mut rest)?).ok()?;
        let (key, after) = rest.split_at_checked(key_len)?;
        let key = std::str::from_utf8(key).ok()?.to_owned();
        let (value, after) = after.split_first_chunk::<8>()?;
        processors.insert(key, i64::from_be_bytes(*value));
        rest = after;
    }
    Some(processors)
}

/// Takes a big-endian 4-byte int off the front of `rest`.
fn take_int(rest: &mut &[u8]) -> Option<i32> {
    let (int, after) = rest.split_first_chunk::<4>()?;
    *rest = after;
    Some(i32::from_be_bytes(*int))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(t: i64) -> Committed {
        Committed {
            time: Some(t),
            processors: BTreeMap::new(),
        }
    }

    #[test]
    fn kafka_streams_metadata_round_trips() {
        // Kafka Streams 4.x, `TopicPartitionMetadata.with(1000, empty).encode()`, and the
        // version 1 it still reads.
        assert_eq!(encode(Some(1_000), &BTreeMap::new()).unwrap(), "AgAAAAAAAAPo");
        assert_eq!(decode("AgAAAAAAAAPo"), time(1_000));
        assert_eq!(decode("AQAAAAAAAAPo"), time(1_000));
        // With the entry `ab` = 7: count 1, key length 2, `ab`, 7.
        let v2 = [
            vec![2, 0, 0, 1, 0, 0, 0, 0, 7],
            vec![0, 0, 0, 1, 0, 0, 0, 2, b'a', b'b'],
            7i64.to_be_bytes().to_vec(),
        ]
        .concat();
        let committed = Committed {
            time: Some((1 << 40) + 7),
            processors: BTreeMap::from([("ab".to_owned(), 7)]),
        };
        assert_eq!(decode(&STANDARD.encode(&v2)), committed);
        assert_eq!(
            encode(committed.time, &committed.processors),
            Some(STANDARD.encode(&v2))
        );
    }

    #[test]
    fn processor_metadata_without_a_stream_time_is_committed_with_an_unknown_one() {
        let processors = BTreeMap::from([("counts".to_owned(), 20_000), ("sums".to_owned(), -3)]);
        let encoded = encode(None, &processors).unwrap();
        let bytes = STANDARD.decode(&encoded).unwrap();
        assert_eq!(bytes[1..9], (-1i64).to_be_bytes());
        assert_eq!(
            decode(&encoded),
            Committed {
                time: None,
                processors
            }
        );
        assert_eq!(encode(None, &BTreeMap::new()), None);
    }

    #[test]
    fn anything_else_is_unknown() {
        assert_eq!(decode(""), Committed::default());
        assert_eq!(decode("not base64!"), Committed::default());
        assert_eq!(
            decode(&STANDARD.encode([3, 0, 0, 0, 0, 0, 0, 0, 1])),
            Committed::default()
        );
        assert_eq!(decode(&STANDARD.encode([1, 0, 0])), Committed::default());
        assert_eq!(
            decode(&encode(Some(-1), &BTreeMap::new()).unwrap()),
            Committed::default()
        );
        // Processor metadata cut short: none of it is trusted, the time is.
        let cut = [
            vec![2, 0, 0, 0, 0, 0, 0, 0, 5],
            vec![0, 0, 0, 1, 0, 0, 0, 9, b'a'],
        ]
        .concat();
        assert_eq!(decode(&STANDARD.encode(cut)), time(5));
    }
}
