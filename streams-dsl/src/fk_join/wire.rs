//! What a foreign-key join sends between its two sides, and how it is written: the
//! subscription a left row sends to its foreign key ([`Subscription`]), the response the
//! right side sends back ([`Response`]), the subscription store's `[fk][pk]` keys, and the
//! 128-bit hash of a left value that lets the left side drop stale responses.
//!
//! Invariants:
//! - a subscription key is the foreign key's length (4 bytes, big-endian), its bytes, then
//!   the primary key's bytes, so every subscriber of one foreign key shares the prefix
//!   [`subscription_prefix`] and one prefix scan finds them all, whatever the key serdes;
//! - the hash is MurmurHash3 x64 128 of the left value's serialized bytes with Kafka
//!   Streams' seed (104729), the function Kafka Streams uses: equal bytes, equal hash, on
//!   every instance, version and implementation;
//! - subscriptions and responses are Kafka Streams' bytes (`SubscriptionWrapperSerde` v1,
//!   `SubscriptionResponseWrapperSerde` v0), so either implementation reads the other's
//!   topics and subscription store; an unknown version is a serde error, never a misread.

use streams_state::{Serde, SerdeError};

use crate::dyn_serde::DynSerde;

/// The 128-bit hash of a left value, as two 64-bit halves.
pub(crate) type ValueHash = [u64; 2];

/// What the right side does with a subscription (Kafka Streams' instructions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Instruction {
    /// Remove the subscription; answer nothing (the left row moved to another foreign key,
    /// whose own subscription answers).
    DeleteNoPropagate,
    /// Remove the subscription; answer with no right value (the left row was deleted).
    DeleteAndPropagate,
    /// Keep the subscription; answer with the right value, or with none when absent.
    PropagateNullIfAbsent,
    /// Keep the subscription; answer only when the right value is present.
    PropagateOnlyIfPresent,
}

impl Instruction {
    fn byte(self) -> u8 {
        match self {
            Self::DeleteNoPropagate => 0,
            Self::DeleteAndPropagate => 1,
            Self::PropagateNullIfAbsent => 2,
            Self::PropagateOnlyIfPresent => 3,
        }
    }

    fn from_byte(b: u8) -> Result<Self, SerdeError> {
        Ok(match b {
            0 => Self::DeleteNoPropagate,
            1 => Self::DeleteAndPropagate,
            2 => Self::PropagateNullIfAbsent,
            3 => Self::PropagateOnlyIfPresent,
            _ => return Err(SerdeError::new(SUB, format!("unknown instruction {b}"))),
        })
    }

    /// Whether the subscription is removed from the store.
    pub fn deletes(self) -> bool {
        matches!(self, Self::DeleteNoPropagate | Self::DeleteAndPropagate)
    }
}

/// A left row's subscription to a foreign key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subscription<K> {
    pub instruction: Instruction,
    /// The hash of the left row's new value; `None` for a deleted row.
    pub hash: Option<ValueHash>,
    /// The left row's partition, where the response goes back to.
    pub partition: i32,
    /// The left row's key.
    pub pk: K,
}

/// The right side's answer to a subscriber: its current right value, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response<VO> {
    /// The hash the subscription carried.
    pub hash: Option<ValueHash>,
    /// The right value; `None` when absent.
    pub value: Option<VO>,
    /// The subscriber's partition.
    pub partition: i32,
}

const SUB: &str = "SubscriptionSerde";
const RESP: &str = "ResponseSerde";
/// The version a subscription is written with (Kafka Streams' `SubscriptionWrapper` v1: with
/// the partition); version 0, without it, is read too.
const SUB_VERSION: u8 = 1;
/// The only version of a response (Kafka Streams' `SubscriptionResponseWrapper` v0).
const RESP_VERSION: u8 = 0;
/// The bit of the first byte that says the hash is absent.
const NO_HASH: u8 = 0x80;

/// Writes the first byte (`version`, with [`NO_HASH`] when `hash` is absent); the hash
/// follows the instruction in a subscription, the first byte in a response.
fn version_byte(version: u8, hash: &Option<ValueHash>) -> u8 {
    if hash.is_some() {
        version
    } else {
        version | NO_HASH
    }
}

fn put_hash(hash: &Option<ValueHash>, out: &mut Vec<u8>) {
    if let Some([a, b]) = hash {
        out.extend_from_slice(&a.to_be_bytes());
        out.extend_from_slice(&b.to_be_bytes());
    }
}

/// Reads `n` bytes from the front of `bytes`.
fn take<'a>(bytes: &mut &'a [u8], n: usize, serde: &'static str) -> Result<&'a [u8], SerdeError> {
    if bytes.len() < n {
        return Err(SerdeError::new(serde, "truncated"));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

fn u64_of(b: &[u8]) -> u64 {
    b.iter().fold(0, |n, &x| (n << 8) | u64::from(x))
}

/// Reads the first byte: the version and whether a hash follows.
fn get_version(bytes: &mut &[u8], serde: &'static str) -> Result<(u8, bool), SerdeError> {
    let first = take(bytes, 1, serde)?[0];
    Ok((first & !NO_HASH, first & NO_HASH == 0))
}

fn get_hash(bytes: &mut &[u8], present: bool, serde: &'static str) -> Result<Option<ValueHash>, SerdeError> {
    if !present {
        return Ok(None);
    }
    let h = take(bytes, 16, serde)?;
    Ok(Some([u64_of(&h[..8]), u64_of(&h[8..])]))
}

/// A [`Subscription`], on the subscription topic and in the subscription store, as Kafka
/// Streams' `SubscriptionWrapperSerde` writes it (version 1): the version byte (its top
/// bit set when the hash is absent), the instruction, the hash (16 bytes, when present),
/// the primary key, then the partition (4 bytes). Version 0 (no partition) is read as
/// partition `-1`.
pub(crate) struct SubscriptionSerde<K>(pub DynSerde<K>);

impl<K> Clone for SubscriptionSerde<K> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<K: 'static> Serde for SubscriptionSerde<K> {
    type Target = Subscription<K>;

    fn serialize_into(&self, s: &Subscription<K>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.push(version_byte(SUB_VERSION, &s.hash));
        out.push(s.instruction.byte());
        put_hash(&s.hash, out);
        self.0.serialize_into(&s.pk, out)?;
        out.extend_from_slice(&s.partition.to_be_bytes());
        Ok(())
    }

    fn deserialize(&self, mut bytes: &[u8]) -> Result<Subscription<K>, SerdeError> {
        let b = &mut bytes;
        let (version, has_hash) = get_version(b, SUB)?;
        let instruction = Instruction::from_byte(take(b, 1, SUB)?[0])?;
        let hash = get_hash(b, has_hash, SUB)?;
        let (pk, partition) = match version {
            0 => (*b, -1),
            1 => {
                let split = b
                    .len()
                    .checked_sub(4)
                    .ok_or_else(|| SerdeError::new(SUB, "truncated"))?;
                let (pk, partition) = b.split_at(split);
                (pk, u64_of(partition) as u32 as i32)
            }
            v => return Err(SerdeError::new(SUB, format!("unsupported version {v}"))),
        };
        Ok(Subscription {
            instruction,
            hash,
            partition,
            pk: self.0.deserialize(pk)?,
        })
    }
}

/// A [`Response`], as Kafka Streams' `SubscriptionResponseWrapperSerde` writes it: the
/// version byte (0, its top bit set when the hash is absent), the hash (16 bytes, when
/// present), then the right value's bytes. No bytes after the hash is no right value (so a
/// right value that serializes to nothing, such as `""`, arrives as none, as in Kafka
/// Streams). The partition is not written (the sink's partitioner reads it before); it
/// reads as `-1`.
pub(crate) struct ResponseSerde<VO>(pub DynSerde<VO>);

impl<VO> Clone for ResponseSerde<VO> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<VO: 'static> Serde for ResponseSerde<VO> {
    type Target = Response<VO>;

    fn serialize_into(&self, r: &Response<VO>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.push(version_byte(RESP_VERSION, &r.hash));
        put_hash(&r.hash, out);
        match &r.value {
            Some(v) => self.0.serialize_into(v, out),
            None => Ok(()),
        }
    }

    fn deserialize(&self, mut bytes: &[u8]) -> Result<Response<VO>, SerdeError> {
        let b = &mut bytes;
        let (version, has_hash) = get_version(b, RESP)?;
        if version != RESP_VERSION {
            return Err(SerdeError::new(RESP, format!("unsupported version {version}")));
        }
        let hash = get_hash(b, has_hash, RESP)?;
        let value = if b.is_empty() {
            None
        } else {
            Some(self.0.deserialize(b)?)
        };
        Ok(Response {
            hash,
            value,
            partition: -1,
        })
    }
}

/// The prefix every subscription key of foreign key bytes `fk` starts with.
pub(crate) fn subscription_prefix(fk: &[u8]) -> Result<Vec<u8>, SerdeError> {
    let len = u32::try_from(fk.len()).map_err(|_| SerdeError::new(SUB, "foreign key longer than 4 GiB"))?;
    let mut out = Vec::with_capacity(4 + fk.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(fk);
    Ok(out)
}

/// The subscription store key of primary key bytes `pk` under foreign key bytes `fk`.
pub(crate) fn subscription_key(fk: &[u8], pk: &[u8]) -> Result<Vec<u8>, SerdeError> {
    let mut out = subscription_prefix(fk)?;
    out.extend_from_slice(pk);
    Ok(out)
}

/// The seed of Kafka Streams' `Murmur3.hash128` (Hive's default).
const KAFKA_STREAMS_SEED: u64 = 104_729;

/// The hash of a left value: MurmurHash3 x64 128 with Kafka Streams' seed, so that both
/// implementations hash a value alike (a response carries the hash the other side made).
pub(crate) fn hash128(data: &[u8]) -> ValueHash {
    murmur3_128(data, KAFKA_STREAMS_SEED)
}

/// MurmurHash3 x64 128 of `data` with `seed`.
fn murmur3_128(data: &[u8], seed: u64) -> ValueHash {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let fmix = |mut k: u64| {
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    };
    let le = |b: &[u8]| b.iter().rev().fold(0u64, |n, &x| (n << 8) | u64::from(x));
    let mix1 = |k: u64| k.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    let mix2 = |k: u64| k.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
    let (mut h1, mut h2) = (seed, seed);
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        h1 ^= mix1(le(&block[..8]));
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= mix2(le(&block[8..]));
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    if tail.len() > 8 {
        h2 ^= mix2(le(&tail[8..]));
    }
    if !tail.is_empty() {
        h1 ^= mix1(le(&tail[..tail.len().min(8)]));
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    [h1, h2]
}

#[cfg(test)]
mod tests {
    use streams_state::serde::StringSerde;

    use super::*;
    use crate::dyn_serde::dyn_serde;

    #[test]
    fn murmur3_matches_the_reference_vectors() {
        assert_eq!(murmur3_128(b"", 0), [0, 0]);
        assert_eq!(
            murmur3_128(b"hello", 0),
            [0xcbd8_a7b3_41bd_9b02, 0x5b1e_906a_48ae_1d19]
        );
        let long = b"The quick brown fox jumps over the lazy dog";
        assert_eq!(
            murmur3_128(long, 0),
            [0xe34b_bc7b_bc07_1b6c, 0x7a43_3ca9_c49a_9347]
        );
    }

    /// Kafka Streams 4.4.0's `Murmur3.hash128` of each string's UTF-8 bytes (every tail
    /// length class, bytes above 0x7f).
    #[test]
    fn the_hash_is_kafka_streams_hash() {
        for (text, hash) in [
            ("", [0x9d27_64a0_18e3_2942, 0x8c3c_f3b0_3593_8518]),
            ("a", [0x3361_634e_7e0f_5188, 0xe9c7_dda2_4eae_326b]),
            ("hello", [0x30bf_b4f3_9919_e764, 0x566a_ea85_7401_d1c6]),
            ("héllo wörld ÿÿ", [0xf945_3f0a_a3bf_bb0b, 0x0b7f_b62e_1833_a0fb]),
            ("0123456789abcdef", [0x1a6e_941e_c6a7_6967, 0xd7d8_2808_f505_d6b1]),
            (
                "0123456789abcdefé",
                [0x262c_6545_87c6_efdc, 0x5a84_a702_3c9d_b42c],
            ),
            (
                "The quick brown fox jumps over the lazy dog",
                [0xe74c_5921_af0f_99c8, 0xb7f8_5ec8_1df0_6726],
            ),
        ] {
            assert_eq!(hash128(text.as_bytes()), hash, "{text:?}");
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The bytes Kafka Streams 4.4.0's serdes write for the same wrappers.
    #[test]
    fn subscriptions_and_responses_are_kafka_streams_bytes() {
        let s = SubscriptionSerde(dyn_serde(StringSerde));
        let hash = Some(hash128(b"hello"));
        let sub = Subscription {
            instruction: Instruction::PropagateNullIfAbsent,
            hash,
            partition: 7,
            pk: "order-1".to_owned(),
        };
        let bytes = s.serialize(&sub).unwrap();
        assert_eq!(
            hex(&bytes),
            "010230bfb4f39919e764566aea857401d1c66f726465722d3100000007"
        );
        assert_eq!(s.deserialize(&bytes).unwrap(), sub);
        let unhashed = Subscription {
            instruction: Instruction::DeleteAndPropagate,
            hash: None,
            partition: 2,
            pk: "o".to_owned(),
        };
        assert_eq!(hex(&s.serialize(&unhashed).unwrap()), "81016f00000002");
        let r = ResponseSerde(dyn_serde(StringSerde));
        let resp = Response {
            hash,
            value: Some("x".to_owned()),
            partition: 7,
        };
        let bytes = r.serialize(&resp).unwrap();
        assert_eq!(hex(&bytes), "0030bfb4f39919e764566aea857401d1c678");
        // The partition is the sink's business, not written.
        let read = r.deserialize(&bytes).unwrap();
        assert_eq!(
            (read.hash, read.value, read.partition),
            (hash, Some("x".to_owned()), -1)
        );
        let none = Response {
            hash: None,
            value: None::<String>,
            partition: 7,
        };
        assert_eq!(hex(&r.serialize(&none).unwrap()), "80");
    }

    #[test]
    fn subscriptions_and_responses_round_trip() {
        let s = SubscriptionSerde(dyn_serde(StringSerde));
        for (instruction, hash) in [
            (Instruction::DeleteNoPropagate, None),
            (Instruction::PropagateOnlyIfPresent, Some([1, u64::MAX])),
        ] {
            let sub = Subscription {
                instruction,
                hash,
                partition: 7,
                pk: "order-1".to_owned(),
            };
            assert_eq!(s.deserialize(&s.serialize(&sub).unwrap()).unwrap(), sub);
        }
        assert!(
            s.deserialize(b"\x81\x09a\x00\x00\x00\x01").is_err(),
            "unknown instruction"
        );
        assert!(s.deserialize(b"\x81\x01").is_err(), "no partition");
        assert!(s.deserialize(b"\x02\x01").is_err(), "unknown version");
        // Version 0 has no partition.
        let v0 = s.deserialize(b"\x80\x01pk").unwrap();
        assert_eq!((v0.pk.as_str(), v0.partition), ("pk", -1));
        let r = ResponseSerde(dyn_serde(StringSerde));
        for value in [None, Some("x".to_owned())] {
            let resp = Response {
                hash: Some([3, 4]),
                value,
                partition: -1,
            };
            assert_eq!(r.deserialize(&r.serialize(&resp).unwrap()).unwrap(), resp);
        }
        // An empty right value is no right value, as in Kafka Streams.
        let empty = Response {
            hash: None,
            value: Some(String::new()),
            partition: -1,
        };
        assert_eq!(r.deserialize(&r.serialize(&empty).unwrap()).unwrap().value, None);
        assert!(r.deserialize(b"\x01").is_err(), "unknown version");
        assert!(r.deserialize(b"\x00\x01\x00").is_err(), "truncated hash");
    }

    #[test]
    fn subscription_keys_of_one_foreign_key_share_its_prefix_only() {
        let p = subscription_prefix(b"ab").unwrap();
        assert!(subscription_key(b"ab", b"x").unwrap().starts_with(&p));
        assert!(!subscription_key(b"abx", b"").unwrap().starts_with(&p));
        assert!(!subscription_key(b"a", b"bx").unwrap().starts_with(&p));
    }
}
