//! Tables of string keys read from a topic into a store named after it, for the table
//! tests. Each test binary that uses it declares it with
//! `#[path = "common/string_tables.rs"] mod string_tables;`; every item here is used by
//! every such binary.

use streams_core::serdes::StringSerde;
use streams_core::state::Serde;
use streams_dsl::{KTable, Materialized, StreamsBuilder};

/// The table of `topic`, string keys and values read with `values`, kept in the store
/// named `topic`.
pub fn table<V: Clone + 'static>(
    b: &StreamsBuilder,
    topic: &str,
    values: impl Serde<Target = V>,
) -> KTable<String, V> {
    b.table(
        topic,
        Materialized::as_(topic)
            .with_key_serde(StringSerde)
            .with_value_serde(values),
    )
}
