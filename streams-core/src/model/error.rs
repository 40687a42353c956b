//! Errors of the topology builder, the Processor API and the runtime.

use std::fmt;

use streams_state::StoreError;

/// The error a processor returns: any error type, boxed. Store and serde errors convert with
/// `?`; user errors too (`Err("bad input".into())` works for strings).
pub type ProcessorError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a processor's `init`, `process` and `punctuate` return.
pub type ProcessResult = Result<(), ProcessorError>;

/// A topology that cannot be built, with every reason found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid topology: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct TopologyError(pub Vec<TopologyIssue>);

/// One reason a topology is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyIssue {
    /// Two nodes (or two stores) share a name.
    #[error("duplicate name `{0}`")]
    DuplicateName(String),
    /// A node names a parent that does not exist.
    #[error("node `{node}` names unknown parent `{parent}`")]
    UnknownParent {
        /// The node.
        node: String,
        /// The missing parent.
        parent: String,
    },
    /// A node that must have parents has none.
    #[error("node `{0}` has no parent")]
    NoParent(String),
    /// A sink was named as a parent.
    #[error("node `{node}` names sink `{parent}` as parent; sinks have no children")]
    SinkAsParent {
        /// The node.
        node: String,
        /// The sink.
        parent: String,
    },
    /// The nodes form a cycle.
    #[error("cycle through node `{0}`")]
    Cycle(String),
    /// A store is connected to a node that does not exist, or to none.
    #[error("store `{store}`: {message}")]
    Store {
        /// The store.
        store: String,
        /// What is wrong.
        message: String,
    },
    /// A node's input types are not its parent's output types.
    #[error(
        "type mismatch: `{parent}` outputs Record<{parent_key}, {parent_value}> but `{child}` takes Record<{child_key}, {child_value}>"
    )]
    TypeMismatch {
        /// The parent node.
        parent: String,
        /// The parent's output key type.
        parent_key: &'static str,
        /// The parent's output value type.
        parent_value: &'static str,
        /// The child node.
        child: String,
        /// The child's input key type.
        child_key: &'static str,
        /// The child's input value type.
        child_value: &'static str,
    },
    /// Two sources read the same topic.
    #[error("topic `{topic}` is read by both `{first}` and `{second}`")]
    SharedSourceTopic {
        /// The topic.
        topic: String,
        /// One source.
        first: String,
        /// The other source.
        second: String,
    },
    /// A source reads no topic.
    #[error("source `{0}` reads no topic")]
    NoTopics(String),
}

/// Where a failing record came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrorOrigin {
    /// The node that failed.
    pub node: String,
    /// The input record's topic, partition and offset (none inside a punctuator).
    pub record: Option<(String, i32, i64)>,
}

impl fmt::Display for ErrorOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node `{}`", self.node)?;
        if let Some((t, p, o)) = &self.record {
            write!(f, " processing {t}-{p}@{o}")?;
        }
        Ok(())
    }
}

/// An error raised while a task runs records through its processors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamsError {
    /// A processor returned an error.
    #[error("{origin}: {source}")]
    Processing {
        /// Which node failed, on which record (boxed: it keeps the error small).
        origin: Box<ErrorOrigin>,
        /// The processor's error.
        #[source]
        source: ProcessorError,
    },
    /// A record could not be deserialized and the handler chose to fail.
    #[error("{origin}: cannot deserialize {what}: {source}")]
    Deserialization {
        /// Which source failed, on which record.
        origin: Box<ErrorOrigin>,
        /// "key" or "value".
        what: &'static str,
        /// The serde's error.
        #[source]
        source: streams_state::SerdeError,
    },
    /// A record could not be written and the handler chose to fail.
    #[error("{origin}: cannot produce to `{topic}`: {message}")]
    Production {
        /// Which sink failed, on which record.
        origin: Box<ErrorOrigin>,
        /// The destination topic.
        topic: String,
        /// What failed.
        message: String,
        /// Whether trying again later may succeed (the producer's queue stayed full).
        retriable: bool,
    },
    /// A state store failed.
    #[error("store error: {0}")]
    Store(#[from] StoreError),
    /// The topology was invalid.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A Kafka client failed.
    #[error("kafka: {message}")]
    Kafka {
        /// What failed.
        message: String,
        /// Whether retrying the operation may succeed.
        retriable: bool,
    },
    /// The cluster refused the application's principal an operation it needs: an ACL is
    /// missing. Not retriable: the thread (or `start`) fails instead of retrying forever.
    #[error("not authorized: {resource}: {message}")]
    Authorization {
        /// The resource refused, e.g. ``topic `orders` `` or ``group `word-count` ``.
        resource: String,
        /// What was refused, and which ACL grants it.
        message: String,
    },
    /// The brokers refused the application's SASL credentials (a wrong user name or
    /// password, or a mechanism the listener does not offer).
    #[error("authentication failed: {message}")]
    Authentication {
        /// What the client reported.
        message: String,
    },
    /// The TLS handshake with a broker failed (its certificate is not signed by a trusted
    /// CA or does not name the host, or the protocols do not match).
    #[error("TLS handshake failed: {message}")]
    Tls {
        /// What the client reported.
        message: String,
    },
    /// The configuration is invalid.
    #[error("invalid config `{property}`: {message}")]
    Config {
        /// The property at fault.
        property: String,
        /// What is wrong with it.
        message: String,
    },
    /// Something the caller asked for does not exist or is not allowed now.
    #[error("{0}")]
    Usage(String),
    /// The group coordinator refused a member of the application's streams group (the
    /// streams rebalance protocol, `group.protocol=streams`). Not retriable.
    #[error("streams group `{group}`: {kind}: {message}")]
    StreamsGroup {
        /// The group (the `application.id`).
        group: String,
        /// Why.
        kind: StreamsGroupFailure,
        /// The coordinator's message, or what the client saw.
        message: String,
    },
}

/// Why the group coordinator refused a streams group member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamsGroupFailure {
    /// The broker does not offer the streams rebalance protocol (Apache Kafka before 4.2,
    /// or `streams.version` not finalized).
    #[error("the broker does not offer streams groups")]
    Unsupported,
    /// The group exists as a group of another type that the broker does not turn into a
    /// streams group: a consumer group, or a classic group that still has members (e.g.
    /// from an earlier run with another `group.protocol`). An empty classic group is
    /// turned into a streams group, keeping its committed offsets.
    #[error("the group exists with another protocol")]
    OtherGroupType,
    /// The coordinator rejected the topology (`STREAMS_INVALID_TOPOLOGY`).
    #[error("invalid topology")]
    InvalidTopology,
    /// The group runs a topology of another epoch (`STREAMS_INVALID_TOPOLOGY_EPOCH`,
    /// `STREAMS_TOPOLOGY_FENCED`).
    #[error("topology epoch mismatch")]
    TopologyEpoch,
    /// The group has as many members as `group.streams.max.size` allows.
    #[error("the group is full")]
    GroupFull,
    /// The broker answered something the client cannot use (an unexpected error code or
    /// an undecodable response).
    #[error("protocol error")]
    Protocol,
    /// The group's status says a source topic of the topology does not exist (deleted while
    /// the application ran): no task of it can be assigned.
    #[error("source topics missing")]
    MissingSourceTopics,
    /// The group's status says co-partitioned topics (sources of one subtopology) have
    /// different partition counts, e.g. partitions were added to one input topic.
    #[error("topics incorrectly partitioned")]
    IncorrectlyPartitioned,
    /// Another member joined with this member's `group.instance.id`
    /// (`FENCED_INSTANCE_ID`): two instances were configured with the same id.
    #[error("another member took this group.instance.id")]
    InstanceIdInUse,
    /// A member of the group asked the whole application to shut down (a thread's
    /// `ThreadFailureResponse::ShutdownApplication`, on this instance or another).
    #[error("application shutdown requested")]
    ShutdownRequested,
}

impl StreamsError {
    /// Whether another instance asked the whole application to shut down
    /// ([`StreamsGroupFailure::ShutdownRequested`]).
    pub fn is_shutdown_requested(&self) -> bool {
        matches!(
            self,
            StreamsError::StreamsGroup {
                kind: StreamsGroupFailure::ShutdownRequested,
                ..
            }
        )
    }

    /// The store error behind this error when a store's files were found corrupt
    /// ([`StoreError::is_corruption`]), returned by the store itself or by a processor that
    /// passed it on (found along the error's sources). The record is not at fault: the
    /// runtime rebuilds the store from its changelog and processes the record again, and
    /// the error handlers never skip or dead-letter it.
    pub fn corrupt_store(&self) -> Option<&StoreError> {
        self.store_cause().filter(|s| s.is_corruption())
    }

    /// The store error behind this error when a store's changelog refused a write
    /// ([`StoreError::Changelog`]), returned by the store itself or passed on by a
    /// processor. The record is not at fault and the error handlers never skip or
    /// dead-letter it: skipping would leave the store holding a change its changelog
    /// lacks.
    pub fn changelog_failure(&self) -> Option<&StoreError> {
        self.store_cause()
            .filter(|s| matches!(s, StoreError::Changelog { .. }))
    }

    /// The store error behind this error, if any (itself, or along a processor error's
    /// sources).
    fn store_cause(&self) -> Option<&StoreError> {
        match self {
            Self::Store(s) => Some(s),
            Self::Processing { source, .. } => {
                let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
                let mut found = None;
                while let Some(c) = cause {
                    if let Some(s) = c.downcast_ref::<StoreError>() {
                        found = Some(s);
                        break;
                    }
                    cause = c.source();
                }
                found
            }
            _ => None,
        }
    }

    /// Whether retrying the operation may succeed (a transient Kafka error).
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            Self::Kafka { retriable: true, .. } | Self::Production { retriable: true, .. }
        )
    }
}
