//! The metadata committed with each input offset: the task's stream time, in Kafka Streams'
//! format, so that a task starting elsewhere (a restart, another instance, or a Kafka
//! Streams application taking over) goes on from the stream time its input had reached.
//!
//! Kafka Streams commits each partition's time as base64 of a version byte and the time
//! (8 bytes, big-endian); version 2 appends processor metadata, which is not read here. This
//! runtime writes version 1 with the task's stream time (the largest of its partitions'
//! times, which is what a task's stream time starts from in both implementations), and reads
//! versions 1 and 2. Anything else (no metadata, another application's format) reads as
//! unknown: the task then starts with no stream time, as before.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The version written.
const VERSION: u8 = 1;

/// The metadata of an offset committed at stream time `stream_time`.
pub(crate) fn encode(stream_time: i64) -> String {
    let mut bytes = [0u8; 9];
    bytes[0] = VERSION;
    bytes[1..].copy_from_slice(&stream_time.to_be_bytes());
    STANDARD.encode(bytes)
}

/// The stream time in committed offset metadata, if it holds a known one.
pub(crate) fn decode(metadata: &str) -> Option<i64> {
    if metadata.is_empty() {
        return None;
    }
    let bytes = STANDARD.decode(metadata).ok()?;
    let (&version, rest) = bytes.split_first()?;
    if version != 1 && version != 2 {
        return None;
    }
    let time = i64::from_be_bytes(*rest.first_chunk::<8>()?);
    // Kafka Streams writes -1 (`RecordQueue.UNKNOWN`) for a partition without a time yet.
    (time >= 0).then_some(time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_streams_metadata_round_trips() {
        // Kafka Streams 4.x, `TopicPartitionMetadata.with(1000, empty).encode()` without
        // processor entries, and its version 1.
        assert_eq!(encode(1_000), "AQAAAAAAAAPo");
        assert_eq!(decode("AQAAAAAAAAPo"), Some(1_000));
        let v2 = STANDARD.encode([2, 0, 0, 1, 0, 0, 0, 0, 7, 0, 0, 0, 0]);
        assert_eq!(decode(&v2), Some((1 << 40) + 7));
    }

    #[test]
    fn anything_else_is_unknown() {
        assert_eq!(decode(""), None);
        assert_eq!(decode("not base64!"), None);
        assert_eq!(decode(&STANDARD.encode([3, 0, 0, 0, 0, 0, 0, 0, 1])), None);
        assert_eq!(decode(&STANDARD.encode([1, 0, 0])), None);
        assert_eq!(decode(&encode(-1)), None);
    }
}
