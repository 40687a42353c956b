//! The definitions a topology is made of: sources, processors, sinks, stores.
//!
//! A definition is type-erased: it knows the `TypeId`s of the records a node takes and
//! gives (checked when the topology is built) and holds a factory that makes a fresh node
//! instance for each task.

use std::any::TypeId;
use std::sync::Arc;

use streams_state::StoreBuilder;

use crate::model::record::RawRecord;
use crate::processor::node::ErasedNode;

/// The types of the records crossing one edge: key and value, with their names for errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordTypes {
    pub key: TypeId,
    pub value: TypeId,
    pub key_name: &'static str,
    pub value_name: &'static str,
}

impl RecordTypes {
    pub fn of<K: 'static, V: 'static>() -> Self {
        Self {
            key: TypeId::of::<K>(),
            value: TypeId::of::<V>(),
            key_name: std::any::type_name::<K>(),
            value_name: std::any::type_name::<V>(),
        }
    }

    pub fn same(&self, other: &Self) -> bool {
        self.key == other.key && self.value == other.value
    }
}

/// Makes a fresh node instance for a task.
pub(crate) type NodeFactory = Arc<dyn Fn() -> Box<dyn ErasedNode> + Send + Sync>;

/// Extracts a record's timestamp from the raw record and the partition's current time.
pub type TimestampExtractor = Arc<dyn Fn(&RawRecord, i64) -> i64 + Send + Sync>;

/// Where a source starts when its group has no committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    /// The first offset of the partition (Kafka Streams' default).
    #[default]
    Earliest,
    /// The end of the partition.
    Latest,
}

/// How a store holds the records of the topic it is restored from: its changelog, or a
/// source topic (see
/// [`TopologyBuilder::use_source_topic_as_changelog`](crate::TopologyBuilder::use_source_topic_as_changelog)).
///
/// Changelogs are written as Kafka Streams writes them: a timestamped store's plain value
/// with the stored timestamp as the record's timestamp, a versioned store's key and value
/// with the version's timestamp. So a topic holds plain keys and values, and the variant
/// says what the store makes of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SourceValues {
    /// The key and value bytes as they are in the topic.
    #[default]
    Plain,
    /// The record's timestamp (8 bytes, big-endian) then the value bytes, as
    /// [`ValueAndTimestampSerde`](streams_state::ValueAndTimestampSerde) writes them (Kafka
    /// Streams' timestamped key-value stores).
    Timestamped,
    /// One entry per version, at the record's timestamp (a versioned key-value store; see
    /// [`streams_state::versioned::changelog`]).
    Versioned,
}

/// A changelog record as it goes out: key, value (`None`: a tombstone) and timestamp.
pub type ChangelogOut<'a> = (&'a [u8], Option<&'a [u8]>, i64);

impl SourceValues {
    /// The changelog record that logs the stored `key` → `value` (`None`: a delete),
    /// written while processing a record at `timestamp`, or `None` when nothing is logged:
    /// - a timestamped value goes out without its timestamp, which becomes the record's (a
    ///   delete at `timestamp`);
    /// - a versioned entry goes out as its key and value at the version's timestamp; the
    ///   stream time and removed versions are not logged;
    /// - anything else as it is, at `timestamp`.
    ///
    /// An error names stored bytes of no such store.
    pub fn changelog_record<'a>(
        self,
        key: &'a [u8],
        value: Option<&'a [u8]>,
        timestamp: i64,
    ) -> Result<Option<ChangelogOut<'a>>, streams_state::ChangelogError> {
        match (self, value) {
            (Self::Timestamped, Some(v)) => {
                let raw = streams_state::ValueAndTimestamp::from_bytes(v).ok_or_else(|| {
                    streams_state::ChangelogError::new(format!(
                        "a timestamped store's value has {} bytes, fewer than its 8-byte timestamp",
                        v.len()
                    ))
                })?;
                Ok(Some((key, Some(raw.value), raw.timestamp)))
            }
            (Self::Versioned, value) => streams_state::versioned::changelog::to_changelog(key, value)
                .map_err(|e| streams_state::ChangelogError::new(format!("a versioned store's entry: {e}"))),
            (_, value) => Ok(Some((key, value, timestamp))),
        }
    }
}

/// What kind of node a definition is, with what `describe()` shows of it.
#[derive(Clone)]
pub(crate) enum NodeKind {
    Source {
        topics: Vec<String>,
        extractor: Option<TimestampExtractor>,
        offset_reset: OffsetReset,
    },
    Processor,
    Sink {
        target: SinkTarget,
    },
}

/// Where a sink writes.
#[derive(Clone, Debug)]
pub(crate) enum SinkTarget {
    Topic(String),
    /// A topic-name extractor, by the name `describe()` shows for it.
    Extractor(String),
}

/// One node of the topology.
#[derive(Clone)]
pub(crate) struct NodeDef {
    pub name: String,
    pub kind: NodeKind,
    pub parents: Vec<String>,
    /// `None` for sources.
    pub input: Option<RecordTypes>,
    /// `None` for sinks.
    pub output: Option<RecordTypes>,
    pub factory: NodeFactory,
    /// Set for the source and processor of a global store.
    pub global: bool,
}

impl NodeDef {
    pub fn is_source(&self) -> bool {
        matches!(self.kind, NodeKind::Source { .. })
    }
}

/// One store of the topology and the processors connected to it.
#[derive(Clone)]
pub(crate) struct StoreDef {
    pub builder: Arc<dyn StoreBuilder>,
    pub processors: Vec<String>,
    pub global: bool,
}
