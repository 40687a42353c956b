//! Which records the DSL skips for a null key or value, as Kafka Streams does.
//!
//! A record's [`Nulls`](streams_core::Nulls) say whether its key or value was null on the
//! wire, whatever the serde made of it (`""` for a string). The operators listed in the
//! [crate docs](crate#null-keys-and-values) skip such records where Kafka Streams' own
//! processors do: they log a warning naming the record's topic, partition and offset, and
//! count it in the task's dropped-records metric. Every other operator passes nulls on:
//! `filter`, `peek`, `split`, `merge` keep them, and a sink writes them as null.

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
