//! `merge.repartition.topics` (part of `Optimizations::ALL`) in the TopologyTestDriver: the
//! groupings and joins of one re-keyed stream read one repartition topic, and each still
//! sees every record once.

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{Consumed, Grouped, Materialized, Optimizations, Produced, StreamsBuilder};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

/// Clicks (user, page) re-keyed by page: counted, concatenated, and upper-cased and
/// concatenated per page; with `optimizations`.
fn per_page(optimizations: Optimizations) -> streams_core::Topology {
    let b = StreamsBuilder::new().with_optimization(optimizations);
    let by_page = b
        .stream(["clicks"], Consumed::with(StringSerde, StringSerde))
        .select_key(|_, page| page.clone());
    by_page
        .group_by_key(Grouped::new())
        .count(Materialized::as_("counts"))
        .to_stream()
        .to(
            "page-counts",
            Produced::with(StringSerde, NullableSerde(U64Serde)),
        );
    by_page
        .map_values(|_, page| page.to_uppercase())
        .group_by_key(Grouped::as_("by-page-users"))
        .reduce(|a, c| format!("{a},{c}"), Materialized::as_("users"))
        .to_stream()
        .to(
            "page-users",
            Produced::with(StringSerde, NullableSerde(StringSerde)),
        );
    by_page
        .group_by_key(Grouped::new())
        .reduce(|a, c| format!("{a}{c}"), Materialized::as_("pages"))
        .to_stream()
        .to(
            "page-pages",
            Produced::with(StringSerde, NullableSerde(StringSerde)),
        );
    b.build().unwrap()
}

#[test]
fn one_stream_nodes_groupings_share_its_first_repartition_topic() {
    let merged = per_page(Optimizations::ALL).describe().to_string();
    let plain = per_page(Optimizations::NONE).describe().to_string();
    let repartition_sinks = |text: &str| {
        text.lines()
            .filter(|l| l.trim_start().starts_with("Sink: ") && l.contains("-repartition)"))
            .count()
    };
    // Without merging: one topic per grouping; with it, the two groupings of the re-keyed
    // node share one, and the grouping after `map_values` (another node) keeps its own.
    assert_eq!(repartition_sinks(&plain), 3, "{plain}");
    assert_eq!(repartition_sinks(&merged), 2, "{merged}");

    let config = DriverConfig::default()
        .application_id("pages")
        .partitions("clicks", 2);
    let driver = TopologyTestDriver::new(per_page(Optimizations::ALL), config).unwrap();
    let clicks = driver.input_topic("clicks", StringSerde, StringSerde);
    for (user, page) in [("u1", "home"), ("u2", "home"), ("u1", "cart"), ("u3", "home")] {
        clicks.pipe(user.into(), page.into()).unwrap();
    }
    let last = |topic: &str| {
        let mut out = std::collections::BTreeMap::new();
        for (k, v) in driver
            .output_topic(topic, StringSerde, NullableSerde(StringSerde))
            .read_key_values()
            .unwrap()
        {
            out.insert(k, v);
        }
        out
    };
    let counts: std::collections::BTreeMap<_, _> = driver
        .output_topic("page-counts", StringSerde, NullableSerde(U64Serde))
        .read_key_values()
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(counts["home"], Some(3));
    assert_eq!(counts["cart"], Some(1));
    assert_eq!(last("page-pages")["home"].as_deref(), Some("homehomehome"));
    assert_eq!(last("page-users")["home"].as_deref(), Some("HOME,HOME,HOME"));
}
