//! Serializers and deserializers ("serdes") between typed keys/values and bytes.
//!
//! A [`Serde`] turns one Rust type into bytes and back. Errors are values
//! ([`SerdeError`]), never panics, so an undeserializable record can be routed to an error
//! handler with its original bytes.
//!
//! # Ordered serdes
//!
//! Stores compare keys as bytes. A serde whose byte order equals the logical order of its
//! type implements the marker trait [`OrderedSerde`]; the typed store offers `range`,
//! `reverse_range` and `prefix_scan` only for such key serdes, so a range over an encoding
//! whose byte order is not its logical order does not compile.
//!
//! | serde | encoding | ordered |
//! |---|---|---|
//! | [`StringSerde`] | UTF-8 | yes (code-point order) |
//! | [`BytesSerde`] | as is | yes |
//! | [`U32Serde`], [`U64Serde`] | big-endian | yes |
//! | [`OrderedI32Serde`], [`OrderedI64Serde`] | big-endian, sign bit flipped | yes |
//! | [`I32Serde`], [`I64Serde`] | big-endian two's complement (Kafka's `IntegerSerde`/`LongSerde`) | no: negatives sort after positives |
//! | [`PairSerde`] | first part length-free when fixed-width, see its docs | when both parts are |

use crate::error::SerdeError;

/// Converts values of one type to bytes and back.
pub trait Serde: Send + Sync + 'static {
    /// The type this serde converts.
    type Target;

    /// Appends the bytes of `value` to `out`.
    fn serialize_into(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<(), SerdeError>;

    /// Reads a value from `bytes`.
    fn deserialize(&self, bytes: &[u8]) -> Result<Self::Target, SerdeError>;

    /// The bytes of `value` in a new buffer.
    fn serialize(&self, value: &Self::Target) -> Result<Vec<u8>, SerdeError> {
        let mut out = Vec::new();
        self.serialize_into(value, &mut out)?;
        Ok(out)
    }

    /// Serializes `value` for a Kafka record, where a key or value may be null: appends the
    /// bytes and returns `true`, or returns `false` for null. Only [`NullableSerde`] writes
    /// nulls; every other serde always writes bytes.
    fn serialize_nullable(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<bool, SerdeError> {
        self.serialize_into(value, out).map(|()| true)
    }

    /// Reads a value from a Kafka record's key or value, which may be null. By default a
    /// null reads as empty bytes (so a null value is `""` for strings and an error for JSON);
    /// [`NullableSerde`] reads it as `None`.
    fn deserialize_nullable(&self, bytes: Option<&[u8]>) -> Result<Self::Target, SerdeError> {
        self.deserialize(bytes.unwrap_or_default())
    }

    /// Whether the bytes this serde reads and writes are laid out as
    /// [`ValueAndTimestamp`](crate::ValueAndTimestamp)s: an 8-byte timestamp, then the
    /// value (`true` for [`ValueAndTimestampSerde`](crate::ValueAndTimestampSerde), and for
    /// any serde reading such bytes, even into the plain value). Lets a store's readers tell
    /// timestamped stores from plain ones, and whether a serde expects the timestamp.
    fn is_value_and_timestamp(&self) -> bool {
        false
    }

    /// The part of a serialized key that chooses its partition when a sink has no
    /// partitioner: all of it by default. A windowed key serde returns its base key's
    /// bytes, so that every window of a key goes to the key's partition (Kafka Streams'
    /// `WindowedStreamPartitioner`).
    fn partition_bytes<'a>(&self, serialized: &'a [u8]) -> &'a [u8] {
        serialized
    }
}

/// `Option<T>` over another serde, with `None` as Kafka's null (a tombstone value or a
/// record without a key). Inside a store, where null does not exist, `None` is empty bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct NullableSerde<S>(pub S);

impl<S: Serde> Serde for NullableSerde<S> {
    type Target = Option<S::Target>;
    fn serialize_into(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        match value {
            Some(v) => self.0.serialize_into(v, out),
            None => Ok(()),
        }
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<Self::Target, SerdeError> {
        self.0.deserialize(bytes).map(Some)
    }
    fn serialize_nullable(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<bool, SerdeError> {
        match value {
            Some(v) => self.0.serialize_into(v, out).map(|()| true),
            None => Ok(false),
        }
    }
    fn deserialize_nullable(&self, bytes: Option<&[u8]>) -> Result<Self::Target, SerdeError> {
        bytes.map(|b| self.0.deserialize(b)).transpose()
    }
    fn partition_bytes<'a>(&self, serialized: &'a [u8]) -> &'a [u8] {
        self.0.partition_bytes(serialized)
    }
}

/// Marker: the byte order of this serde's output is the logical order of its type, and a
/// serialized prefix of a value is a byte prefix of the serialized value where that makes
/// sense (strings, byte strings). Only key serdes with this marker get range queries.
pub trait OrderedSerde: Serde {}

impl<S: Serde + ?Sized> Serde for std::sync::Arc<S> {
    type Target = S::Target;
    fn serialize_into(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        (**self).serialize_into(value, out)
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<Self::Target, SerdeError> {
        (**self).deserialize(bytes)
    }
    fn serialize_nullable(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<bool, SerdeError> {
        (**self).serialize_nullable(value, out)
    }
    fn deserialize_nullable(&self, bytes: Option<&[u8]>) -> Result<Self::Target, SerdeError> {
        (**self).deserialize_nullable(bytes)
    }
    fn is_value_and_timestamp(&self) -> bool {
        (**self).is_value_and_timestamp()
    }
    fn partition_bytes<'a>(&self, serialized: &'a [u8]) -> &'a [u8] {
        (**self).partition_bytes(serialized)
    }
}

/// UTF-8 strings. Ordered: UTF-8 byte order is code-point order.
#[derive(Debug, Clone, Copy, Default)]
pub struct StringSerde;

impl Serde for StringSerde {
    type Target = String;
    fn serialize_into(&self, value: &String, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(value.as_bytes());
        Ok(())
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<String, SerdeError> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| SerdeError::new("StringSerde", format!("invalid UTF-8: {e}")))
    }
}
impl OrderedSerde for StringSerde {}

/// Raw bytes, unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesSerde;

impl Serde for BytesSerde {
    type Target = Vec<u8>;
    fn serialize_into(&self, value: &Vec<u8>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(value);
        Ok(())
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<Vec<u8>, SerdeError> {
        Ok(bytes.to_vec())
    }
}
impl OrderedSerde for BytesSerde {}

/// The unit value, as zero bytes; for records without a key or value.
#[derive(Debug, Clone, Copy, Default)]
pub struct UnitSerde;

impl Serde for UnitSerde {
    type Target = ();
    fn serialize_into(&self, _: &(), _: &mut Vec<u8>) -> Result<(), SerdeError> {
        Ok(())
    }
    fn deserialize(&self, _: &[u8]) -> Result<(), SerdeError> {
        Ok(())
    }
}

fn fixed<const N: usize>(serde: &'static str, bytes: &[u8]) -> Result<[u8; N], SerdeError> {
    bytes
        .try_into()
        .map_err(|_| SerdeError::new(serde, format!("expected {N} bytes, got {}", bytes.len())))
}

macro_rules! int_serde {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $n:literal, ordered: $ordered:tt, flip: $flip:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl Serde for $name {
            type Target = $ty;
            fn serialize_into(&self, value: &$ty, out: &mut Vec<u8>) -> Result<(), SerdeError> {
                out.extend_from_slice(&(*value ^ $flip).to_be_bytes());
                Ok(())
            }
            fn deserialize(&self, bytes: &[u8]) -> Result<$ty, SerdeError> {
                Ok(<$ty>::from_be_bytes(fixed::<$n>(stringify!($name), bytes)?) ^ $flip)
            }
        }
        int_serde!(@ordered $ordered $name);
    };
    (@ordered true $name:ident) => { impl OrderedSerde for $name {} };
    (@ordered false $name:ident) => {};
}

int_serde!(
    /// `u32` as 4 big-endian bytes. Ordered.
    U32Serde, u32, 4, ordered: true, flip: 0
);
int_serde!(
    /// `u64` as 8 big-endian bytes. Ordered; the same bytes as Kafka's `LongSerde` for
    /// non-negative values.
    U64Serde, u64, 8, ordered: true, flip: 0
);
int_serde!(
    /// `i32` as Kafka's `IntegerSerde` writes it (big-endian two's complement). Not ordered:
    /// negative values sort after positive ones. Use [`OrderedI32Serde`] for range keys.
    I32Serde, i32, 4, ordered: false, flip: 0
);
int_serde!(
    /// `i64` as Kafka's `LongSerde` writes it (big-endian two's complement). Not ordered:
    /// negative values sort after positive ones. Use [`OrderedI64Serde`] for range keys.
    I64Serde, i64, 8, ordered: false, flip: 0
);
int_serde!(
    /// `i32` big-endian with the sign bit flipped, so byte order is numeric order. Ordered.
    OrderedI32Serde, i32, 4, ordered: true, flip: i32::MIN
);
int_serde!(
    /// `i64` big-endian with the sign bit flipped, so byte order is numeric order. Ordered.
    OrderedI64Serde, i64, 8, ordered: true, flip: i64::MIN
);

/// `f64` as Kafka's `DoubleSerde` writes it (IEEE 754 big-endian). Not ordered.
#[derive(Debug, Clone, Copy, Default)]
pub struct F64Serde;

impl Serde for F64Serde {
    type Target = f64;
    fn serialize_into(&self, value: &f64, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(&value.to_be_bytes());
        Ok(())
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<f64, SerdeError> {
        Ok(f64::from_be_bytes(fixed::<8>("F64Serde", bytes)?))
    }
}

/// Encodings with a known fixed width, so they can lead a composite key without a length.
pub trait FixedWidth: Serde {
    /// The number of bytes every value takes.
    const WIDTH: usize;
}
impl FixedWidth for U32Serde {
    const WIDTH: usize = 4;
}
impl FixedWidth for U64Serde {
    const WIDTH: usize = 8;
}
impl FixedWidth for OrderedI32Serde {
    const WIDTH: usize = 4;
}
impl FixedWidth for OrderedI64Serde {
    const WIDTH: usize = 8;
}

/// A pair `(A, B)` as the bytes of `A` (fixed width) followed by the bytes of `B`.
///
/// Ordered when both parts are: pairs sort by `A`, then by `B`. Because `A` has a fixed
/// width, every pair with the same first part shares the first part's bytes as a prefix, so
/// `prefix_scan(&a, &first_serde)` finds all pairs starting with `a` (KIP-614's pattern).
#[derive(Debug, Clone, Copy, Default)]
pub struct PairSerde<A, B>(pub A, pub B);

impl<A: FixedWidth, B: Serde> Serde for PairSerde<A, B> {
    type Target = (A::Target, B::Target);
    fn serialize_into(&self, value: &Self::Target, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        self.0.serialize_into(&value.0, out)?;
        self.1.serialize_into(&value.1, out)
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<Self::Target, SerdeError> {
        if bytes.len() < A::WIDTH {
            return Err(SerdeError::new(
                "PairSerde",
                format!("expected at least {} bytes", A::WIDTH),
            ));
        }
        let (a, b) = bytes.split_at(A::WIDTH);
        Ok((self.0.deserialize(a)?, self.1.deserialize(b)?))
    }
}
impl<A: FixedWidth + OrderedSerde, B: OrderedSerde> OrderedSerde for PairSerde<A, B> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip<S: Serde>(s: &S, v: S::Target) -> S::Target {
        s.deserialize(&s.serialize(&v).unwrap()).unwrap()
    }

    #[test]
    fn ordered_signed_integers_sort_numerically() {
        let vals = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        let enc: Vec<_> = vals
            .iter()
            .map(|v| OrderedI64Serde.serialize(v).unwrap())
            .collect();
        assert!(enc.windows(2).all(|w| w[0] < w[1]));
        for v in vals {
            assert_eq!(roundtrip(&OrderedI64Serde, v), v);
        }
        assert_eq!(roundtrip(&OrderedI32Serde, -3), -3);
    }

    #[test]
    fn kafka_compatible_integers() {
        assert_eq!(I32Serde.serialize(&-1).unwrap(), vec![0xFF; 4]);
        assert_eq!(I64Serde.serialize(&1).unwrap(), vec![0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(U64Serde.serialize(&258).unwrap(), vec![0, 0, 0, 0, 0, 0, 1, 2]);
    }

    #[test]
    fn errors_are_values() {
        let e = U64Serde.deserialize(b"abc").unwrap_err();
        assert!(e.to_string().contains("expected 8 bytes"), "{e}");
        assert!(StringSerde.deserialize(&[0xC3, 0x28]).is_err());
        assert!(PairSerde(U64Serde, StringSerde).deserialize(b"1").is_err());
    }

    #[test]
    fn pairs_sort_by_first_then_second() {
        let s = PairSerde(U64Serde, StringSerde);
        let a = s.serialize(&(1, "z".into())).unwrap();
        let b = s.serialize(&(2, "a".into())).unwrap();
        assert!(a < b);
        assert!(a.starts_with(&U64Serde.serialize(&1).unwrap()));
        assert_eq!(roundtrip(&s, (9, "x".into())), (9, "x".to_string()));
    }
}
