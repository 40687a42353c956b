//! A windowed count in the TopologyTestDriver, for the tests of time windows: the topic
//! `clicks` (string keys and values) counted per key in windows of [`SIZE`] into a named
//! store, the counts written to the topic `counts` under windowed keys. Each test binary
//! that uses it declares it with `#[path = "common/window_counts.rs"] mod window_counts;`;
//! every item here is used by every such binary.

use std::time::Duration;

use streams_core::Topology;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    Consumed, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows, Windowed, WindowedSerde,
};
use streams_test_utils::{DriverConfig, TestOutputTopic, TopologyTestDriver};

/// The size of the windows.
pub const SIZE: Duration = Duration::from_secs(10);

/// A driver of [`count_topology`], with the default configuration.
pub fn count_driver(
    consumed: Consumed<StringSerde, StringSerde>,
    windows: TimeWindows,
    store: &str,
) -> TopologyTestDriver {
    let topology = count_topology(consumed, windows, store);
    TopologyTestDriver::new(topology, DriverConfig::default()).unwrap()
}

/// A topology that counts `clicks`, read with `consumed`, per key in `windows` (of
/// [`SIZE`]) into the window store `store`, and writes the counts to `counts`.
pub fn count_topology(
    consumed: Consumed<StringSerde, StringSerde>,
    windows: TimeWindows,
    store: &str,
) -> Topology {
    let b = StreamsBuilder::new();
    b.stream(["clicks"], consumed)
        .group_by_key(Grouped::new())
        .windowed_by(windows)
        .count(Materialized::as_(store))
        .to_stream()
        .to(
            "counts",
            Produced::with(WindowedSerde::new(StringSerde, SIZE), NullableSerde(U64Serde)),
        );
    b.build().unwrap()
}

/// The topic `counts`.
pub fn counts_topic(
    driver: &TopologyTestDriver,
) -> TestOutputTopic<WindowedSerde<String>, NullableSerde<U64Serde>> {
    driver.output_topic(
        "counts",
        WindowedSerde::new(StringSerde, SIZE),
        NullableSerde(U64Serde),
    )
}

/// The window of `key` that starts at `start`.
pub fn w(key: &str, start: i64) -> Windowed<String> {
    Windowed {
        key: key.into(),
        start,
        end: start + 10_000,
    }
}
