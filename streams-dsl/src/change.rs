//! Table updates with their old values: [`Change`], the switch that turns old values on
//! ([`OldValues`]), and the repartition-topic serde of a change ([`ChangeSerde`]).
//!
//! A table node of the DSL forwards `Record<K, Change<V>>`: `new` is the key's value after
//! the update (`None` a deletion), `old` its value before, **only when a node downstream
//! asked for it** (Kafka Streams' "send old values"); otherwise `old` is always `None`
//! and no node reads a store to find it. Only re-grouping a table (`KTable::group_by`)
//! asks, when the DSL program is built: [`OldValues::enable`] turns the switch on for the
//! table's node and, through the nodes that compute their old value from their parent's
//! (an unmaterialized `filter`/`map_values`, a join), for the nodes above it. Processors
//! read the switch when a task makes them, after the program is complete.
//!
//! Invariants:
//! - with the switch on, `old` is the value the node forwarded for the key last time
//!   (`None` if it forwarded none or a deletion): it comes from the node's own store
//!   (table source, materialized table operator, aggregation) or from the parent's `old`
//!   passed through the same function as `new` (filter, map_values, join);
//! - a table made by an operator that forwards plain `Option<V>` updates (`suppress`)
//!   has no old values: [`OldValues::unavailable`] says so, and
//!   re-grouping such a table is a build error rather than a silently wrong aggregate.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use streams_core::{Headers, Nulls, Record};
use streams_state::{Serde, SerdeError};

use crate::dyn_serde::DynSerde;

/// One update of a table row: the new value and, when asked for, the old one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change<V> {
    /// The value after the update; `None` is a deletion.
    pub new: Option<V>,
    /// The value before the update, when old values are on; else `None`.
    pub old: Option<V>,
}

impl<V> Change<V> {
    /// The record that forwards this change of `key` at `timestamp`: neither its key nor
    /// its value null on the wire.
    pub fn into_record<K>(self, key: K, timestamp: i64, headers: Headers) -> Record<K, Change<V>> {
        Record {
            key,
            value: self,
            timestamp,
            headers,
            nulls: Nulls::NONE,
        }
    }
}

/// The value types a table operator may read: a plain update (`Option<V>`, from a table
/// that forwards no old values) or a [`Change`].
pub(crate) trait TableIn<V>: Clone + 'static {
    /// The update as a change; a plain update has no old value.
    fn into_change(self) -> Change<V>;
}

impl<V: Clone + 'static> TableIn<V> for Option<V> {
    fn into_change(self) -> Change<V> {
        Change { new: self, old: None }
    }
}

impl<V: Clone + 'static> TableIn<V> for Change<V> {
    fn into_change(self) -> Change<V> {
        self
    }
}

/// Whether a table node forwards old values, and how it finds them (see the
/// [module docs](self)). Shared between the DSL objects and the processors' suppliers.
#[derive(Debug)]
pub(crate) struct OldValues {
    on: AtomicBool,
    /// The tables whose old values this node's old values are computed from.
    parents: Vec<Arc<OldValues>>,
    /// `false` for a table that cannot forward old values.
    available: bool,
}

impl OldValues {
    /// A node that reads its old values from its own store.
    pub fn from_store() -> Arc<Self> {
        Arc::new(Self {
            on: AtomicBool::new(false),
            parents: Vec::new(),
            available: true,
        })
    }

    /// A node that computes its old values from those of `parents`.
    pub fn derived(parents: Vec<Arc<OldValues>>) -> Arc<Self> {
        let available = parents.iter().all(|p| p.available);
        Arc::new(Self {
            on: AtomicBool::new(false),
            parents,
            available,
        })
    }

    /// A table that has no old values.
    pub fn unavailable() -> Arc<Self> {
        Arc::new(Self {
            on: AtomicBool::new(false),
            parents: Vec::new(),
            available: false,
        })
    }

    /// Whether this node can forward old values.
    pub fn available(&self) -> bool {
        self.available
    }

    /// Turns old values on for this node and the nodes it computes them from; does nothing
    /// for a node that cannot forward them.
    pub fn enable(&self) {
        if self.available && !self.on.swap(true, Ordering::Relaxed) {
            for p in &self.parents {
                p.enable();
            }
        }
    }

    /// Whether this node forwards old values.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }
}

/// The serde of a [`Change`] on a repartition topic, in Kafka Streams' layout: the old
/// value then flag `0`; the new value then flag `1`; both as the new value's length
/// (a zig-zag varint), the new value, the old value, then flag `2`. A change with neither
/// value is an error.
pub(crate) struct ChangeSerde<V>(pub DynSerde<V>);

impl<V> Clone for ChangeSerde<V> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

const SERDE: &str = "ChangeSerde";

fn write_varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a zig-zag varint from the front of `bytes`: the value and the bytes it took.
fn read_varint(bytes: &[u8]) -> Result<(i64, usize), SerdeError> {
    let mut n: u64 = 0;
    for (i, b) in bytes.iter().take(5).enumerate() {
        n |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let v = (n >> 1) as i64 ^ -((n & 1) as i64);
            return Ok((v, i + 1));
        }
    }
    Err(SerdeError::new(SERDE, "truncated or over-long length varint"))
}

impl<V: 'static> Serde for ChangeSerde<V> {
    type Target = Change<V>;

    fn serialize_into(&self, value: &Change<V>, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        match (&value.new, &value.old) {
            (Some(new), Some(old)) => {
                let bytes = self.0.serialize(new)?;
                let len = u32::try_from(bytes.len())
                    .map_err(|_| SerdeError::new(SERDE, "new value longer than 4 GiB"))?;
                write_varint(u64::from(len) << 1, out);
                out.extend_from_slice(&bytes);
                self.0.serialize_into(old, out)?;
                out.push(2);
            }
            (Some(new), None) => {
                self.0.serialize_into(new, out)?;
                out.push(1);
            }
            (None, Some(old)) => {
                self.0.serialize_into(old, out)?;
                out.push(0);
            }
            (None, None) => return Err(SerdeError::new(SERDE, "a change with neither value")),
        }
        Ok(())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Change<V>, SerdeError> {
        let Some((&flag, body)) = bytes.split_last() else {
            return Err(SerdeError::new(SERDE, "empty change"));
        };
        match flag {
            0 => Ok(Change {
                new: None,
                old: Some(self.0.deserialize(body)?),
            }),
            1 => Ok(Change {
                new: Some(self.0.deserialize(body)?),
                old: None,
            }),
            2 => {
                let (len, used) = read_varint(body)?;
                let rest = &body[used..];
                let len = usize::try_from(len)
                    .ok()
                    .filter(|l| *l <= rest.len())
                    .ok_or_else(|| SerdeError::new(SERDE, "new value length out of range"))?;
                Ok(Change {
                    new: Some(self.0.deserialize(&rest[..len])?),
                    old: Some(self.0.deserialize(&rest[len..])?),
                })
            }
            f => Err(SerdeError::new(SERDE, format!("unknown flag {f}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use streams_state::serde::StringSerde;

    use super::*;
    use crate::dyn_serde::dyn_serde;

    fn serde() -> ChangeSerde<String> {
        ChangeSerde(dyn_serde(StringSerde))
    }

    fn change(new: Option<&str>, old: Option<&str>) -> Change<String> {
        Change {
            new: new.map(Into::into),
            old: old.map(Into::into),
        }
    }

    #[test]
    fn changes_round_trip_in_kafka_streams_layout() {
        let s = serde();
        assert_eq!(s.serialize(&change(Some("ab"), None)).unwrap(), b"ab\x01");
        assert_eq!(s.serialize(&change(None, Some("c"))).unwrap(), b"c\x00");
        assert_eq!(
            s.serialize(&change(Some("ab"), Some("c"))).unwrap(),
            b"\x04abc\x02"
        );
        let long = "x".repeat(300);
        for c in [
            change(Some("ab"), None),
            change(None, Some("")),
            change(Some(""), Some("")),
            change(Some(&long), Some("old")),
        ] {
            assert_eq!(s.deserialize(&s.serialize(&c).unwrap()).unwrap(), c);
        }
    }

    #[test]
    fn malformed_changes_are_errors() {
        let s = serde();
        assert!(s.serialize(&change(None, None)).is_err());
        assert!(s.deserialize(b"").is_err());
        assert!(s.deserialize(b"ab\x07").is_err());
        assert!(s.deserialize(b"\x10ab\x02").is_err(), "length past the end");
        assert!(s.deserialize(b"\xff\xff\xff\xff\xff\xff\x02").is_err());
    }

    #[test]
    fn enabling_old_values_reaches_the_parents_they_are_computed_from() {
        let source = OldValues::from_store();
        let other = OldValues::from_store();
        let join = OldValues::derived(vec![source.clone(), other.clone()]);
        let filter = OldValues::derived(vec![join.clone()]);
        assert!(filter.available());
        filter.enable();
        assert!(filter.is_on() && join.is_on() && source.is_on() && other.is_on());
        let plain = OldValues::derived(vec![OldValues::unavailable()]);
        assert!(!plain.available());
        plain.enable();
        assert!(
            !plain.is_on(),
            "a table without old values never claims to send them"
        );
        assert!(!OldValues::from_store().is_on());
    }
}
