//! What a foreign-key join sends between its two sides, and how it is written: the
//! subscription a left row sends to its foreign key ([`Subscription`]), the response the
//! right side sends back ([`Response`]), the subscription store's `[fk][pk]` keys, and the
//! 128-bit hash of a left value that lets the left side drop stale responses.
//!
//! Invariants:
//! - a subscription key is the foreign key's length (4 bytes, big-endian), its bytes, then
//!   the primary key's bytes, so every subscriber of one foreign key shares the prefix
//!   [`subscription_prefix`] and one prefix scan finds them all, whatever the key serdes;
//! - the hash is MurmurHash3 x64 128 (seed 0) of the left value's serialized bytes, the
//!   function Kafka Streams uses: equal bytes, equal hash, on every instance and version;
//! - every encoding starts with a version byte (`0`); an unknown version is a serde error,
//!   never a misread.

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
const VERSION: u8 = 0;

fn put_hash(hash: &Option<ValueHash>, out: &mut Vec<u8>) {
    match hash {
        Some([a, b]) => {
            out.push(1);
            out.extend_from_slice(&a.to_be_bytes());
            out.extend_from_slice(&b.to_be_bytes());
        }
        None => out.push(0),
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

fn get_hash(bytes: &mut &[u8], serde: &'static str) -> Result<Option<ValueHash>, SerdeError> {
    match take(bytes, 1, serde)?[0] {
        0 => Ok(None),
        1 => {
            let h = take(bytes, 16, serde)?;
            Ok(Some([u64_of(&h[..8]), u64_of(&h[8..])]))
        }
        f => Err(SerdeError::new(serde, format!("unknown hash flag {f}"))),
    }
}

fn check_version(bytes: &mut &[u8], serde: &'static str) -> Result<(), SerdeError> {
    match take(bytes, 1, serde)?[0] {
        VERSION => Ok(()),
        v => Err(SerdeError::new(serde, format!("unsupported version {v}"))),
    }
}

/// A [`Subscription`], on the subscription topic and in the subscription store: version,
/// instruction, hash flag and hash, partition (4 bytes), then the primary key.
pub(crate) struct SubscriptionSerde<K>(pub DynSerde<K>);

impl<K> Clone for SubscriptionSerde<K> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<K: 'static> Serde for SubscriptionSerde<K> {
    type Target = Subscription<K>;

    fn serialize_into(&self, s: &Subscription<K>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.push(VERSION);
        out.push(s.instruction.byte());
        put_hash(&s.hash, out);
        out.extend_from_slice(&s.partition.to_be_bytes());
        self.0.serialize_into(&s.pk, out)
    }

    fn deserialize(&self, mut bytes: &[u8]) -> Result<Subscription<K>, SerdeError> {
        let b = &mut bytes;
        check_version(b, SUB)?;
        let instruction = Instruction::from_byte(take(b, 1, SUB)?[0])?;
        let hash = get_hash(b, SUB)?;
        let partition = u64_of(take(b, 4, SUB)?) as u32 as i32;
        Ok(Subscription {
            instruction,
            hash,
            partition,
            pk: self.0.deserialize(b)?,
        })
    }
}

/// A [`Response`]: version, hash flag and hash, partition (4 bytes), a value flag, then the
/// right value's bytes when present.
pub(crate) struct ResponseSerde<VO>(pub DynSerde<VO>);

impl<VO> Clone for ResponseSerde<VO> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<VO: 'static> Serde for ResponseSerde<VO> {
    type Target = Response<VO>;

    fn serialize_into(&self, r: &Response<VO>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.push(VERSION);
        put_hash(&r.hash, out);
        out.extend_from_slice(&r.partition.to_be_bytes());
        match &r.value {
            Some(v) => {
                out.push(1);
                self.0.serialize_into(v, out)
            }
            None => {
                out.push(0);
                Ok(())
            }
        }
    }

    fn deserialize(&self, mut bytes: &[u8]) -> Result<Response<VO>, SerdeError> {
        let b = &mut bytes;
        check_version(b, RESP)?;
        let hash = get_hash(b, RESP)?;
        let partition = u64_of(take(b, 4, RESP)?) as u32 as i32;
        let value = match take(b, 1, RESP)?[0] {
            0 if b.is_empty() => None,
            1 => Some(self.0.deserialize(b)?),
            f => return Err(SerdeError::new(RESP, format!("bad value flag {f}"))),
        };
        Ok(Response {
            hash,
            value,
            partition,
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

/// MurmurHash3 x64 128 of `data` (seed 0).
pub(crate) fn hash128(data: &[u8]) -> ValueHash {
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
    let (mut h1, mut h2) = (0u64, 0u64);
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
        assert_eq!(hash128(b""), [0, 0]);
        assert_eq!(hash128(b"hello"), [0xcbd8_a7b3_41bd_9b02, 0x5b1e_906a_48ae_1d19]);
        let long = b"The quick brown fox jumps over the lazy dog";
        assert_eq!(hash128(long), [0xe34b_bc7b_bc07_1b6c, 0x7a43_3ca9_c49a_9347]);
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
        assert!(s.deserialize(b"\x00\x09\x00").is_err(), "unknown instruction");
        let r = ResponseSerde(dyn_serde(StringSerde));
        for value in [None, Some(String::new()), Some("x".to_owned())] {
            let resp = Response {
                hash: Some([3, 4]),
                value,
                partition: 1,
            };
            assert_eq!(r.deserialize(&r.serialize(&resp).unwrap()).unwrap(), resp);
        }
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
