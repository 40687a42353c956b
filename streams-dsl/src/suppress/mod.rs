//! [`KTable::suppress`]: holds back a table's updates and forwards only the latest per key
//! once its time has come (Kafka Streams' `suppress`, KIP-328).
//!
//! - [`Suppressed::until_window_closes`] on a windowed aggregation's table: one final
//!   result per window, forwarded once stream time reaches the window's end plus the
//!   aggregation's grace period (`end + grace <= stream time`); deletions are dropped.
//! - [`Suppressed::until_time_limit`] on any table: a key's latest update is forwarded
//!   once stream time reaches its first buffered update's timestamp plus the limit.
//!
//! Invariants: stream time here is the largest timestamp this node has processed; the
//! buffer keeps the latest update per key in a changelogged store (`<node>-store`) in
//! Kafka Streams' changelog format, and their order by buffer time in memory (see
//! `buffer`), so emission reads only due entries, and a restarted task, or Kafka Streams
//! taking the application over, emits what was buffered before. An emitted update keeps
//! the timestamp and headers of the update it is. When the buffer holds more than its
//! [`BufferConfig`] allows, it either emits its oldest entries early or fails the task
//! with [`SuppressError::BufferFull`].

mod buffer;
mod processor;

use std::sync::Arc;
use std::time::Duration;

use streams_core::{ProcessorContext, ProcessorError, Stores};
use streams_state::serde::BytesSerde;
use streams_state::{Serde, SerdeError};

use crate::change::Change;
use crate::dyn_serde::{DynSerde, dyn_serde};
use crate::error::DslIssue;
use crate::kstream::KStream;
use crate::ktable::KTable;
use crate::processors::FromChanges;
use crate::windowed::Windowed;
use crate::windowed::millis;
use processor::SuppressProcessor;
use streams_state::serde::NullableSerde;

/// The buffer time of a key, when it is not the record's timestamp.
type TimeFn<K> = Arc<dyn Fn(&K) -> i64 + Send + Sync>;

/// What happens when a suppression buffer is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WhenFull {
    /// Emit the oldest entries early until it is not.
    EmitEarly,
    /// Fail the task.
    ShutDown,
}

/// How much a suppression buffer may hold (Kafka Streams' `BufferConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferConfig {
    max_records: Option<u64>,
    max_bytes: Option<u64>,
    when_full: WhenFull,
}

impl BufferConfig {
    /// No limit (the task's memory and store are the limit).
    pub fn unbounded() -> Self {
        Self {
            max_records: None,
            max_bytes: None,
            when_full: WhenFull::ShutDown,
        }
    }

    /// At most `n` keys; when full, emits early unless told otherwise.
    pub fn max_records(n: u64) -> Self {
        Self {
            max_records: Some(n),
            max_bytes: None,
            when_full: WhenFull::EmitEarly,
        }
    }

    /// At most `n` bytes (each entry: 8 + its serialized key and stored value); when full,
    /// emits early unless told otherwise.
    pub fn max_bytes(n: u64) -> Self {
        Self {
            max_records: None,
            max_bytes: Some(n),
            when_full: WhenFull::EmitEarly,
        }
    }

    /// Also at most `n` keys.
    pub fn with_max_records(self, n: u64) -> Self {
        Self {
            max_records: Some(n),
            ..self
        }
    }

    /// Also at most `n` bytes.
    pub fn with_max_bytes(self, n: u64) -> Self {
        Self {
            max_bytes: Some(n),
            ..self
        }
    }

    /// When full, forwards the oldest entries before their time.
    pub fn emit_early_when_full(self) -> Self {
        Self {
            when_full: WhenFull::EmitEarly,
            ..self
        }
    }

    /// When full, fails the task with [`SuppressError::BufferFull`].
    pub fn shut_down_when_full(self) -> Self {
        Self {
            when_full: WhenFull::ShutDown,
            ..self
        }
    }
}

/// How a table's updates are suppressed (Kafka Streams' `Suppressed<K>`).
pub struct Suppressed<K> {
    /// `None`: until the window closes (the limit is the upstream grace period).
    limit_ms: Option<i64>,
    time_of: Option<TimeFn<K>>,
    buffer: BufferConfig,
    name: Option<String>,
}

impl<K: 'static> Suppressed<Windowed<K>> {
    /// Only the final result of each window: buffered until stream time reaches the
    /// window's end plus the grace period of the windowed aggregation that made the table.
    /// The buffer must not emit early (that would not be final); a buffer that does, or a
    /// table not made by a windowed aggregation, is a build error.
    pub fn until_window_closes(buffer: BufferConfig) -> Self {
        Self {
            limit_ms: None,
            time_of: Some(Arc::new(|w: &Windowed<K>| w.end)),
            buffer,
            name: None,
        }
    }
}

impl<K> Suppressed<K> {
    /// The latest update per key, forwarded once stream time is `limit` past the key's
    /// first update since it was last forwarded.
    pub fn until_time_limit(limit: Duration, buffer: BufferConfig) -> Self {
        Self {
            limit_ms: Some(millis(limit)),
            time_of: None,
            buffer,
            name: None,
        }
    }

    /// Names the suppression node (its store is `<name>-store`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// The error a suppression node fails its task with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SuppressError {
    /// The buffer outgrew its [`BufferConfig`], which says to shut down when full.
    #[error(
        "suppression `{node}` buffer exceeded its capacity: {records}/{max_records:?} records, {bytes}/{max_bytes:?} bytes"
    )]
    BufferFull {
        /// The suppression node.
        node: String,
        /// Keys buffered.
        records: u64,
        /// The most keys allowed.
        max_records: Option<u64>,
        /// Bytes buffered.
        bytes: u64,
        /// The most bytes allowed.
        max_bytes: Option<u64>,
    },
}

/// A serde of `V` from a serde of `Option<V>` (a table's update serde).
struct SomeSerde<V>(DynSerde<Option<V>>);

impl<V: Clone + 'static> Serde for SomeSerde<V> {
    type Target = V;

    fn serialize_into(&self, value: &V, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        self.0.serialize_into(&Some(value.clone()), out)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<V, SerdeError> {
        self.0
            .deserialize(bytes)?
            .ok_or_else(|| SerdeError::new("SomeSerde", "a value serde read a null"))
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// This table's updates held back by `suppressed`: only the latest update per key is
    /// forwarded, when its time comes. The result is not materialized.
    pub fn suppress(&self, suppressed: Suppressed<K>) -> KTable<K, V> {
        // Kafka Streams' suppression reads the table's changes with no node between.
        let direct = self.shared.kafka_names() && self.changes.is_some();
        let updates = if direct {
            let value_serde = self.value_serde.clone().map(|vs| dyn_serde(NullableSerde(vs)));
            KStream::new(
                self.shared.clone(),
                self.node.clone(),
                self.key_serde.clone(),
                value_serde,
            )
        } else {
            self.to_stream()
        };
        // A named suppression takes no value of Kafka Streams' counter.
        let node = match &suppressed.name {
            Some(n) => self.shared.name(Some(n), "", ""),
            None => self.shared.table_name(None, &self.node, "suppress"),
        };
        let store = match &suppressed.name {
            None => self.shared.kafka_name("KTABLE-SUPPRESS-STATE-STORE-"),
            Some(_) => None,
        }
        .unwrap_or_else(|| format!("{node}-store"));
        let invalid = |reason: &'static str| DslIssue::InvalidSuppression {
            operator: node.clone(),
            reason,
        };
        let (limit_ms, drop_deletions) = match suppressed.limit_ms {
            Some(ms) => (ms, false),
            None => {
                if suppressed.buffer.when_full == WhenFull::EmitEarly {
                    self.shared.issue(invalid(
                        "until_window_closes needs a buffer that does not emit early",
                    ));
                }
                match self.shared.window_grace(&self.node) {
                    Some(grace) => (grace, true),
                    None => {
                        self.shared.issue(invalid(
                            "until_window_closes needs a table made by a windowed aggregation",
                        ));
                        (0, true)
                    }
                }
            }
        };
        let (Some(ks), Some(vs)) = (updates.key_serde.clone(), updates.value_serde.clone()) else {
            self.shared.issue(DslIssue::MissingSerde {
                operator: node.clone(),
                what: "key or value",
            });
            return KTable::new(self.shared.clone(), node, None);
        };
        let (buffer, time_of, store_name, name) =
            (suppressed.buffer, suppressed.time_of, store.clone(), node.clone());
        let (key_serde, value_serde) = (ks.clone(), vs.clone());
        let make = move |ctx: &mut ProcessorContext<'_, K, Option<V>>| {
            Ok::<_, ProcessorError>(SuppressProcessor::<K, V> {
                node: name.clone(),
                buffer: buffer::Buffer::new(ctx.kv_store::<BytesSerde, BytesSerde>(&store_name)?),
                key_serde: key_serde.clone(),
                value_serde: value_serde.clone(),
                time_of: time_of.clone(),
                limit_ms,
                config: buffer,
                drop_deletions,
                observed: crate::windowed::NO_TIMESTAMP,
            })
        };
        if direct {
            self.shared.processor_with::<_, K, Change<V>, K, Option<V>>(
                &node,
                move |ctx| Ok(FromChanges(make(ctx)?)),
                &updates.node,
            );
        } else {
            self.shared.processor_with(&node, make, &updates.node);
        }
        let (header, format) = buffer::FORMAT_HEADER;
        self.shared.store(
            Stores::in_memory_kv(store, BytesSerde, BytesSerde).with_changelog_header(header, format),
            &[&node],
        );
        KTable::new(self.shared.clone(), node, None).with_serdes(Some(ks), Some(dyn_serde(SomeSerde(vs))))
    }
}
