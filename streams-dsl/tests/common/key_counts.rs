//! A count per key in the TopologyTestDriver: the topic `in` (string keys and values)
//! counted into the store `counts`, the counts written to the topic `counts`. Each test
//! binary that uses it declares it with `#[path = "common/key_counts.rs"] mod key_counts;`;
//! every item here is used by every such binary.

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};

/// Adds to `b` the count of `in` per key into the store `counts`, written to `counts`.
pub fn count_by_key(b: &StreamsBuilder) {
    b.stream(["in"], Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::new())
        .count(Materialized::as_("counts"))
        .to_stream()
        .to("counts", Produced::with(StringSerde, NullableSerde(U64Serde)));
}
