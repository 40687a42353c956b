//! The Confluent wire format: a magic byte `0`, the schema id as a 4-byte big-endian
//! integer, then the payload in the schema's format.
//!
//! ```text
//! +------+----------------+--------------------------+
//! | 0x00 | schema id (BE) | payload (Avro binary, .. |
//! +------+----------------+--------------------------+
//!   1 B       4 B              rest
//! ```
//!
//! A Protobuf payload starts with the *message indexes*: the path from the schema file to
//! the record's message type (`[1]` is the file's second top-level message, `[1, 0]` the
//! first message nested in it). They are written as zigzag varints, first their count, then
//! each index; the common path `[0]` is written as the single byte `0`.

use crate::error::WireError;

/// The first byte of every framed record.
pub const MAGIC_BYTE: u8 = 0;

/// The length of the frame header: magic byte and schema id.
pub const HEADER_LEN: usize = 5;

/// Appends the frame header for `schema_id` to `out`; the payload is appended after it.
pub fn write_header(schema_id: u32, out: &mut Vec<u8>) {
    out.push(MAGIC_BYTE);
    out.extend_from_slice(&schema_id.to_be_bytes());
}

/// A framed record: the header followed by `payload`.
pub fn frame(schema_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    write_header(schema_id, &mut out);
    out.extend_from_slice(payload);
    out
}

/// Splits a framed record into its schema id and payload.
///
/// Fails with [`WireError::TooShort`] when `bytes` is shorter than the header and with
/// [`WireError::UnknownMagicByte`] when it does not start with [`MAGIC_BYTE`].
pub fn split(bytes: &[u8]) -> Result<(u32, &[u8]), WireError> {
    let Some((&magic, rest)) = bytes.split_first() else {
        return Err(WireError::TooShort { len: 0 });
    };
    if magic != MAGIC_BYTE {
        return Err(WireError::UnknownMagicByte { byte: magic });
    }
    match rest.split_first_chunk::<4>() {
        Some((id, payload)) => Ok((u32::from_be_bytes(*id), payload)),
        None => Err(WireError::TooShort { len: bytes.len() }),
    }
}

/// Appends the Protobuf message indexes `indexes` (see the module doc) to `out`.
pub fn write_message_indexes(indexes: &[i32], out: &mut Vec<u8>) {
    if indexes == [0] {
        out.push(0);
        return;
    }
    write_zigzag(i32::try_from(indexes.len()).unwrap_or(i32::MAX), out);
    for &index in indexes {
        write_zigzag(index, out);
    }
}

/// Splits a Protobuf payload into its message indexes and the message's bytes.
///
/// Fails with [`WireError::MessageIndexes`] when the varints are truncated, too long,
/// negative, or more than the payload could hold.
pub fn read_message_indexes(payload: &[u8]) -> Result<(Vec<i32>, &[u8]), WireError> {
    let (count, mut rest) = read_zigzag(payload)?;
    if count == 0 {
        return Ok((vec![0], rest));
    }
    let count = usize::try_from(count)
        .ok()
        .filter(|&n| n <= rest.len())
        .ok_or_else(|| WireError::MessageIndexes {
            reason: format!("count {count} does not fit a payload of {} bytes", payload.len()),
        })?;
    let mut indexes = Vec::with_capacity(count);
    for _ in 0..count {
        let (index, tail) = read_zigzag(rest)?;
        if index < 0 {
            return Err(WireError::MessageIndexes {
                reason: format!("negative index {index}"),
            });
        }
        indexes.push(index);
        rest = tail;
    }
    Ok((indexes, rest))
}

fn write_zigzag(n: i32, out: &mut Vec<u8>) {
    let mut v = ((n << 1) ^ (n >> 31)) as u32;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_zigzag(bytes: &[u8]) -> Result<(i32, &[u8]), WireError> {
    let mut v: u32 = 0;
    for (i, &b) in bytes.iter().enumerate().take(5) {
        v |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let n = ((v >> 1) as i32) ^ -((v & 1) as i32);
            return Ok((n, &bytes[i + 1..]));
        }
    }
    Err(WireError::MessageIndexes {
        reason: if bytes.len() < 5 {
            "truncated varint".to_owned()
        } else {
            "varint longer than 5 bytes".to_owned()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indexes(i: &[i32]) -> Vec<u8> {
        let mut out = Vec::new();
        write_message_indexes(i, &mut out);
        out
    }

    #[test]
    fn message_indexes_as_confluent_writes_them() {
        // Bytes as Confluent's serializers write them (zigzag varints, `[0]` as one byte).
        assert_eq!(indexes(&[0]), [0]);
        assert_eq!(indexes(&[1]), [2, 2]);
        assert_eq!(indexes(&[1, 0]), [4, 2, 0]);
        assert_eq!(indexes(&[64]), [2, 0x80, 0x01]);
        for case in [vec![0], vec![1], vec![3, 1, 4], vec![0, 0], vec![1000, 70_000]] {
            let mut framed = indexes(&case);
            framed.extend_from_slice(b"msg");
            assert_eq!(read_message_indexes(&framed), Ok((case, &b"msg"[..])));
        }
    }

    #[test]
    fn bad_message_indexes_are_errors() {
        for bad in [
            &[][..],
            &[0x80][..],
            &[2][..],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01][..],
            &[2, 1][..],
        ] {
            assert!(
                matches!(read_message_indexes(bad), Err(WireError::MessageIndexes { .. })),
                "{bad:?}"
            );
        }
        // A count larger than the payload could hold is refused before any allocation.
        assert!(read_message_indexes(&[0xfe, 0xff, 0xff, 0xff, 0x07]).is_err());
    }

    #[test]
    fn frames_and_splits() {
        let framed = frame(0x0102_0304, b"payload");
        assert_eq!(&framed[..5], &[0, 1, 2, 3, 4]);
        assert_eq!(split(&framed), Ok((0x0102_0304, &b"payload"[..])));
    }

    #[test]
    fn empty_payload_is_allowed() {
        assert_eq!(split(&frame(7, b"")), Ok((7, &b""[..])));
    }

    #[test]
    fn largest_id_round_trips() {
        assert_eq!(split(&frame(u32::MAX, b"x")), Ok((u32::MAX, &b"x"[..])));
    }

    #[test]
    fn too_short() {
        assert_eq!(split(b""), Err(WireError::TooShort { len: 0 }));
        assert_eq!(split(&[0, 0, 0, 1]), Err(WireError::TooShort { len: 4 }));
    }

    #[test]
    fn wrong_magic_byte() {
        assert_eq!(
            split(&[1, 0, 0, 0, 1, 2]),
            Err(WireError::UnknownMagicByte { byte: 1 })
        );
        // A plain JSON or string value, as written by a serde without the registry.
        assert_eq!(
            split(b"{\"a\":1}"),
            Err(WireError::UnknownMagicByte { byte: b'{' })
        );
    }
}
