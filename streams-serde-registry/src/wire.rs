//! The Confluent wire format: a magic byte `0`, the schema id as a 4-byte big-endian
//! integer, then the payload in the schema's format.
//!
//! ```text
//! +------+----------------+--------------------------+
//! | 0x00 | schema id (BE) | payload (Avro binary, .. |
//! +------+----------------+--------------------------+
//!   1 B       4 B              rest
//! ```

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

#[cfg(test)]
mod tests {
    use super::*;

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
