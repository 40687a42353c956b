//! Errors of [`StreamsBuilder::build`](crate::StreamsBuilder::build).

use streams_core::TopologyError;

/// A DSL program that cannot be compiled to a topology.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DslError {
    /// Problems found while the DSL calls were made, all of them.
    #[error("invalid DSL program: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<DslIssue>),
    /// The compiled topology did not validate.
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// One problem with a DSL program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DslIssue {
    /// An operator needs a serde that neither it nor its upstream was given.
    #[error(
        "`{operator}` needs a {what} serde: give it through Grouped, Materialized or the stream's Consumed"
    )]
    MissingSerde {
        /// The node of the operator.
        operator: String,
        /// `"key"` or `"value"`.
        what: &'static str,
    },
    /// [`StreamsBuilder::require_names`](crate::StreamsBuilder::require_names) is on and a
    /// stateful operator has no user-given name for its store or topic.
    #[error("`{operator}` creates {what} but was not named (require_names is on)")]
    Unnamed {
        /// The node of the operator.
        operator: String,
        /// What would have been named: `"a store"` or `"a repartition topic"`.
        what: &'static str,
    },
    /// Two operators were given the same name.
    #[error("name `{0}` is used twice")]
    DuplicateName(String),
    /// A join needs the table's values in a store, but the table is not materialized.
    #[error(
        "`{operator}` joins table `{table}`, which is not materialized; pass a Materialized to the operator that made it"
    )]
    NotMaterialized {
        /// The join's node.
        operator: String,
        /// The table's node.
        table: String,
    },
    /// A table is re-grouped (`KTable::group_by`) but its updates carry no old values (it
    /// is, or derives from, a suppressed table), so rows could not be subtracted from their
    /// old group.
    #[error("`{operator}` re-groups table `{table}`, whose updates carry no old values")]
    NoOldValues {
        /// The re-grouping node.
        operator: String,
        /// The table's node.
        table: String,
    },
    /// Time windows whose advance is zero, larger than their size, or so small that a
    /// record would fall into more than 65536 windows.
    #[error(
        "`{operator}` has windows of {size_ms} ms advancing by {advance_ms} ms; the advance must be in 1..=size and put a record in at most 65536 windows"
    )]
    InvalidWindows {
        /// The windowed aggregation's node.
        operator: String,
        /// The window size (ms).
        size_ms: i64,
        /// The advance (ms).
        advance_ms: i64,
    },
    /// A windowed aggregation's `Materialized` retention is shorter than its windows need:
    /// the window size (for sliding windows twice the time difference) plus the grace period.
    #[error("`{operator}` keeps windows {retention_ms} ms, less than the {least_ms} ms its windows need")]
    RetentionTooShort {
        /// The windowed aggregation's node.
        operator: String,
        /// The retention asked for (ms).
        retention_ms: i64,
        /// The least retention (ms).
        least_ms: i64,
    },
    /// A `suppress` that cannot work as asked.
    #[error("`{operator}`: {reason}")]
    InvalidSuppression {
        /// The suppression node.
        operator: String,
        /// Why.
        reason: &'static str,
    },
}
