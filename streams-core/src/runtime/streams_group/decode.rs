//! Bounds-checked readers of the Kafka wire primitives, for every response this client
//! decodes: the `StreamsGroupHeartbeat` codec and the responses [`wire`](super::wire)
//! reads (see [`responses`](super::responses)).
//!
//! Invariants (the input is untrusted: a corrupt or hostile broker):
//! - no reader panics: every read checks the bytes left and returns [`DecodeError`];
//! - no length or count read off the wire sizes an allocation or an index before it is
//!   checked against the bytes left: a string's length must fit in them, and an array's
//!   element count may not exceed them (every element takes at least one byte), so memory
//!   grows only with input actually received;
//! - lengths the schemas call negative (compact varints above `i32::MAX`, classic lengths
//!   below -1, or -1 where the field is not nullable) are errors.

use bytes::Buf;

/// A response that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    /// The input ends inside a field.
    #[error("malformed response: truncated ({needed} bytes needed, {left} left)")]
    Truncated { needed: usize, left: usize },
    /// An unsigned varint of more than 5 bytes or above `u32::MAX`.
    #[error("malformed response: invalid unsigned varint")]
    Varint,
    /// A length below -1 (or, compact, a varint that is negative as a Java `int`).
    #[error("malformed response: negative length {0}")]
    NegativeLength(i64),
    /// A length or element count larger than the bytes left.
    #[error("malformed response: length {len} with only {left} bytes left")]
    Oversized { len: usize, left: usize },
    /// Null where the schema does not allow it.
    #[error("malformed response: null {0}")]
    Null(&'static str),
    /// A string that is not UTF-8.
    #[error("malformed response: a string is not UTF-8")]
    Utf8,
    /// Bytes after the end of the message: the schema does not match.
    #[error("malformed response: {0} bytes after the end of the message")]
    Trailing(usize),
    /// A version this client does not decode.
    #[error("cannot decode version {0} of this response")]
    Version(i16),
}

/// Fails unless `n` bytes are left.
pub(crate) fn need(buf: &[u8], n: usize) -> Result<(), DecodeError> {
    if buf.len() < n {
        return Err(DecodeError::Truncated {
            needed: n,
            left: buf.len(),
        });
    }
    Ok(())
}

/// Fails unless `len` (of a string, or the element count of an array) fits in the bytes left.
fn fits(buf: &[u8], len: usize) -> Result<usize, DecodeError> {
    if len > buf.len() {
        return Err(DecodeError::Oversized { len, left: buf.len() });
    }
    Ok(len)
}

pub(crate) fn get_i8(buf: &mut &[u8]) -> Result<i8, DecodeError> {
    need(buf, 1)?;
    Ok(buf.get_i8())
}

pub(crate) fn get_i16(buf: &mut &[u8]) -> Result<i16, DecodeError> {
    need(buf, 2)?;
    Ok(buf.get_i16())
}

pub(crate) fn get_u16(buf: &mut &[u8]) -> Result<u16, DecodeError> {
    need(buf, 2)?;
    Ok(buf.get_u16())
}

pub(crate) fn get_i32(buf: &mut &[u8]) -> Result<i32, DecodeError> {
    need(buf, 4)?;
    Ok(buf.get_i32())
}

pub(crate) fn get_i64(buf: &mut &[u8]) -> Result<i64, DecodeError> {
    need(buf, 8)?;
    Ok(buf.get_i64())
}

/// Non-nullable bytes (a compact length when `flexible`, else an `i32` length).
pub(crate) fn get_bytes(buf: &mut &[u8], flexible: bool) -> Result<Vec<u8>, DecodeError> {
    let len = if flexible {
        get_len(buf)?
    } else {
        classic_len(get_i32(buf)?)?
    };
    let n = fits(buf, len.ok_or(DecodeError::Null("in non-nullable bytes"))?)?;
    let out = buf[..n].to_vec();
    buf.advance(n);
    Ok(out)
}

/// An unsigned varint of at most 5 bytes and 32 bits.
pub(crate) fn get_uvarint(buf: &mut &[u8]) -> Result<u32, DecodeError> {
    let mut v: u32 = 0;
    for i in 0..5 {
        need(buf, 1)?;
        let b = buf.get_u8();
        if i == 4 && b > 0x0f {
            return Err(DecodeError::Varint); // a continuation bit or bits above 32
        }
        v |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(DecodeError::Varint)
}

/// A compact length (length + 1 as an unsigned varint): `None` for null.
pub(crate) fn get_len(buf: &mut &[u8]) -> Result<Option<usize>, DecodeError> {
    match get_uvarint(buf)? {
        0 => Ok(None),
        n if n > i32::MAX as u32 => Err(DecodeError::NegativeLength(i64::from(n as i32) - 1)),
        n => Ok(Some(n as usize - 1)),
    }
}

/// A classic length (`i16` for strings, `i32` for arrays): `None` for -1.
fn classic_len(n: i32) -> Result<Option<usize>, DecodeError> {
    match n {
        -1 => Ok(None),
        n if n < 0 => Err(DecodeError::NegativeLength(n.into())),
        n => Ok(Some(n as usize)),
    }
}

/// A nullable string, compact when `flexible`.
pub(crate) fn get_nullable_string(buf: &mut &[u8], flexible: bool) -> Result<Option<String>, DecodeError> {
    let len = if flexible {
        get_len(buf)?
    } else {
        classic_len(get_i16(buf)?.into())?
    };
    let Some(n) = len else { return Ok(None) };
    fits(buf, n)?;
    let s = std::str::from_utf8(&buf[..n])
        .map_err(|_| DecodeError::Utf8)?
        .to_owned();
    buf.advance(n);
    Ok(Some(s))
}

/// A non-nullable string, compact when `flexible`.
pub(crate) fn get_string(buf: &mut &[u8], flexible: bool) -> Result<String, DecodeError> {
    get_nullable_string(buf, flexible)?.ok_or(DecodeError::Null("in a non-nullable string"))
}

/// A nullable array, compact when `flexible`, of elements read by `each`.
pub(crate) fn get_nullable_list<T>(
    buf: &mut &[u8],
    flexible: bool,
    mut each: impl FnMut(&mut &[u8]) -> Result<T, DecodeError>,
) -> Result<Option<Vec<T>>, DecodeError> {
    let len = if flexible {
        get_len(buf)?
    } else {
        classic_len(get_i32(buf)?)?
    };
    let Some(n) = len else { return Ok(None) };
    // Every element takes at least one byte: a count beyond the bytes left is corrupt, and
    // the capacity never exceeds the input (nor a small bound; more grows as elements decode).
    let mut out = Vec::with_capacity(fits(buf, n)?.min(1024));
    for _ in 0..n {
        out.push(each(buf)?);
    }
    Ok(Some(out))
}

/// A non-nullable array, compact when `flexible`.
pub(crate) fn get_list<T>(
    buf: &mut &[u8],
    flexible: bool,
    each: impl FnMut(&mut &[u8]) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    get_nullable_list(buf, flexible, each)?.ok_or(DecodeError::Null("in a non-nullable array"))
}

/// Skips a tagged-field section (fields this client does not read).
pub(crate) fn skip_tags(buf: &mut &[u8]) -> Result<(), DecodeError> {
    let count = get_uvarint(buf)? as usize;
    // Every field takes at least two bytes (its tag and its size).
    fits(buf, count)?;
    for _ in 0..count {
        get_uvarint(buf)?; // the tag
        let size = get_uvarint(buf)? as usize;
        let size = fits(buf, size)?;
        buf.advance(size);
    }
    Ok(())
}

/// [`skip_tags`] in a flexible version; nothing otherwise.
pub(crate) fn skip_tags_if(buf: &mut &[u8], flexible: bool) -> Result<(), DecodeError> {
    if flexible { skip_tags(buf) } else { Ok(()) }
}

/// Fails when bytes are left after a whole message.
pub(crate) fn end(buf: &[u8]) -> Result<(), DecodeError> {
    match buf.len() {
        0 => Ok(()),
        n => Err(DecodeError::Trailing(n)),
    }
}

// Compact (flexible-version) shorthands, as the StreamsGroupHeartbeat codec reads them.

pub(crate) fn get_nullable_str(buf: &mut &[u8]) -> Result<Option<String>, DecodeError> {
    get_nullable_string(buf, true)
}

pub(crate) fn get_str(buf: &mut &[u8]) -> Result<String, DecodeError> {
    get_string(buf, true)
}

pub(crate) fn get_nullable_array<T>(
    buf: &mut &[u8],
    each: impl FnMut(&mut &[u8]) -> Result<T, DecodeError>,
) -> Result<Option<Vec<T>>, DecodeError> {
    get_nullable_list(buf, true, each)
}

pub(crate) fn get_array<T>(
    buf: &mut &[u8],
    each: impl FnMut(&mut &[u8]) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    get_list(buf, true, each)
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
