//! Which records the DSL skips for a null key or value, as Kafka Streams does.
//!
//! A record's [`Nulls`](streams_core::Nulls) say whether its key or value was null on the
//! wire, whatever the serde made of it (`""` for a string). The operators below skip such
//! records, log a warning naming the record's topic, partition and offset, and count them
//! in the task's dropped-records metric, exactly where Kafka Streams' own processors do:
//!
//! | operator | skips a record whose |
//! |---|---|
//! | `count`, `reduce`, `aggregate` of a grouped stream (and its cogroups) | key or value is null |
//! | sliding-window aggregations | key or value is null |
//! | tumbling/hopping-window and session-window aggregations | key is null (a null value is aggregated) |
//! | stream-stream joins | key or value is null; except that a record with a null key and a value on the side that emits unmatched records (the left of a left join, either side of an outer join) is emitted at once, unmatched |
//! | stream-table and stream-global-table joins | key (or the global table key chosen for it) or value is null; except that a left join emits a record with a null key and a value, unmatched |
//! | a table read from a topic (`table`, `to_table`) | key is null (a null value deletes) |
//!
//! Every other operator passes nulls on: `filter`, `peek`, `split`, `merge` and
//! repartition topics keep them, and a sink writes them as null.

use streams_core::{ProcessorContext, Record};

/// What makes an operator skip a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// A null key.
    NullKey,
    /// A null key or a null value.
    NullKeyOrValue,
}

/// Whether `r` is to be skipped by `rule`; if so, it is logged and counted as dropped.
pub(crate) fn skipped<K, V, KO, VO>(
    ctx: &ProcessorContext<'_, KO, VO>,
    r: &Record<K, V>,
    rule: Skip,
) -> bool {
    let skip = r.nulls.key || (rule == Skip::NullKeyOrValue && r.nulls.value);
    if skip {
        drop_record(
            ctx,
            if r.nulls.key {
                "its key is null"
            } else {
                "its value is null"
            },
        );
    }
    skip
}

/// Logs that the current record is skipped for `reason`, and counts it as dropped.
pub(crate) fn drop_record<KO, VO>(ctx: &ProcessorContext<'_, KO, VO>, reason: &str) {
    match ctx.record_metadata() {
        Some(m) => tracing::warn!(
            node = ctx.node_name(),
            topic = %m.topic,
            partition = m.partition,
            offset = m.offset,
            "skipping a record: {reason}"
        ),
        None => tracing::warn!(node = ctx.node_name(), "skipping a record: {reason}"),
    }
    ctx.count_dropped();
}
