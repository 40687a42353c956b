//! The readers on hostile input: every length and count is checked before it sizes
//! anything, and negative lengths are errors.

use proptest::prelude::*;

use super::*;

fn read<T>(bytes: &[u8], f: impl FnOnce(&mut &[u8]) -> Result<T, DecodeError>) -> Result<T, DecodeError> {
    let mut buf = bytes;
    f(&mut buf)
}

fn int16(buf: &mut &[u8]) -> Result<i16, DecodeError> {
    get_i16(buf)
}

#[test]
fn varints_are_at_most_five_bytes_and_32_bits() {
    assert_eq!(read(&[0xac, 0x02], get_uvarint), Ok(300));
    assert_eq!(read(&[0xff, 0xff, 0xff, 0xff, 0x0f], get_uvarint), Ok(u32::MAX));
    assert_eq!(
        read(&[0xff, 0xff, 0xff, 0xff, 0x1f], get_uvarint),
        Err(DecodeError::Varint)
    );
    assert_eq!(
        read(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], get_uvarint),
        Err(DecodeError::Varint)
    );
    assert!(matches!(
        read(&[0x80], get_uvarint),
        Err(DecodeError::Truncated { .. })
    ));
    assert!(matches!(
        read(&[], get_uvarint),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn compact_lengths_above_i32_max_are_negative() {
    assert_eq!(read(&[0x00], get_len), Ok(None));
    assert_eq!(read(&[0x01], get_len), Ok(Some(0)));
    // 0x7fffffff: length 0x7ffffffe, allowed here (the caller checks it against the input).
    assert_eq!(
        read(&[0xff, 0xff, 0xff, 0xff, 0x07], get_len),
        Ok(Some(0x7fff_fffe))
    );
    // 0x80000000 and 0xffffffff are negative as a Java int.
    assert_eq!(
        read(&[0x80, 0x80, 0x80, 0x80, 0x08], get_len),
        Err(DecodeError::NegativeLength(i64::from(i32::MIN) - 1))
    );
    assert_eq!(
        read(&[0xff, 0xff, 0xff, 0xff, 0x0f], get_len),
        Err(DecodeError::NegativeLength(-2))
    );
}

#[test]
fn huge_array_counts_fail_before_allocating() {
    let huge_compact = [0xff, 0xff, 0xff, 0xff, 0x07, 0, 0];
    assert_eq!(
        read(&huge_compact, |b| get_list(b, true, int16)),
        Err(DecodeError::Oversized {
            len: 0x7fff_fffe,
            left: 2
        })
    );
    let huge_classic = [0x7f, 0xff, 0xff, 0xff, 0, 0];
    assert_eq!(
        read(&huge_classic, |b| get_list(b, false, int16)),
        Err(DecodeError::Oversized {
            len: 0x7fff_ffff,
            left: 2
        })
    );
    // A count that fits the bytes but whose elements do not.
    assert!(matches!(
        read(&[0x04, 0, 1, 0], |b| get_list(b, true, int16)),
        Err(DecodeError::Truncated { .. })
    ));
    assert_eq!(
        read(&[0x03, 0, 1, 0, 2], |b| get_list(b, true, int16)),
        Ok(vec![1, 2])
    );
}

#[test]
fn classic_lengths_below_minus_one_are_errors() {
    assert_eq!(
        read(&[0xff, 0xff, 0xff, 0xff], |b| get_nullable_list(b, false, int16)),
        Ok(None)
    );
    assert_eq!(
        read(&[0xff, 0xff, 0xff, 0xfe], |b| get_nullable_list(b, false, int16)),
        Err(DecodeError::NegativeLength(-2))
    );
    assert_eq!(
        read(&[0x80, 0, 0, 0], |b| get_nullable_list(b, false, int16)),
        Err(DecodeError::NegativeLength(i32::MIN.into()))
    );
    assert_eq!(read(&[0xff, 0xff], |b| get_nullable_string(b, false)), Ok(None));
    assert_eq!(
        read(&[0xff, 0xfe], |b| get_nullable_string(b, false)),
        Err(DecodeError::NegativeLength(-2))
    );
    assert_eq!(
        read(&[0x80, 0x00], |b| get_nullable_string(b, false)),
        Err(DecodeError::NegativeLength(i16::MIN.into()))
    );
    assert_eq!(
        read(&[0x7f, 0xff, b'a'], |b| get_nullable_string(b, false)),
        Err(DecodeError::Oversized { len: 0x7fff, left: 1 })
    );
    assert_eq!(
        read(&[0x00, 0x01, b'a'], |b| get_string(b, false)),
        Ok("a".into())
    );
}

#[test]
fn null_where_the_schema_forbids_it_is_an_error() {
    assert!(matches!(read(&[0x00], get_str), Err(DecodeError::Null(_))));
    assert!(matches!(
        read(&[0x00], |b| get_array(b, int16)),
        Err(DecodeError::Null(_))
    ));
    assert!(matches!(
        read(&[0xff, 0xff], |b| get_string(b, false)),
        Err(DecodeError::Null(_))
    ));
    assert!(matches!(
        read(&[0xff, 0xff, 0xff, 0xff], |b| get_list(b, false, int16)),
        Err(DecodeError::Null(_))
    ));
}

#[test]
fn strings_must_fit_and_be_utf8() {
    assert_eq!(
        read(&[0xff, 0xff, 0xff, 0xff, 0x07, b'a'], get_str),
        Err(DecodeError::Oversized {
            len: 0x7fff_fffe,
            left: 1
        })
    );
    assert_eq!(read(&[0x02, 0xff], get_str), Err(DecodeError::Utf8));
    assert_eq!(read(&[0x03, b'o', b'k'], get_str), Ok("ok".into()));
}

#[test]
fn tagged_sections_are_bounded_by_the_input() {
    assert_eq!(read(&[0x00], skip_tags), Ok(()));
    assert_eq!(read(&[0x01, 0x07, 0x02, 0xaa, 0xbb], skip_tags), Ok(()));
    assert_eq!(
        read(&[0xff, 0xff, 0xff, 0xff, 0x07, 0x00], skip_tags),
        Err(DecodeError::Oversized {
            len: 0x7fff_ffff,
            left: 1
        })
    );
    assert_eq!(
        read(&[0x01, 0x07, 0xff, 0xff, 0xff, 0xff, 0x0f, 0xaa], skip_tags),
        Err(DecodeError::Oversized {
            len: u32::MAX as usize,
            left: 1
        })
    );
    assert_eq!(read(&[0x00], |b| skip_tags_if(b, false)), Ok(()));
    assert_eq!(end(&[]), Ok(()));
    assert_eq!(end(&[0, 0]), Err(DecodeError::Trailing(2)));
}

proptest! {
    /// Any bytes: every reader returns, none panics.
    #[test]
    fn readers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64), flexible in any::<bool>()) {
        let _ = read(&bytes, get_uvarint);
        let _ = read(&bytes, |b| get_nullable_string(b, flexible));
        let _ = read(&bytes, |b| get_nullable_list(b, flexible, |b| get_nullable_string(b, flexible)));
        let _ = read(&bytes, |b| get_list(b, flexible, |b| get_list(b, flexible, get_i32)));
        let _ = read(&bytes, skip_tags);
    }
}
