//! Avro through a real schema registry on the real broker (each skipped without its address;
//! see `streams_test_utils::kafka::require_kafka` and `STREAMS_TEST_SCHEMA_REGISTRY`): the
//! Avro orders example here, and Avro keys of a windowed store in [`windowed`].
//!
//! The orders (`streams_examples::orders`): 20,000 orders of 200 customers over 3 partitions and
//! 2 stream threads, with four unreadable records among them. The totals topic must end
//! holding exactly the totals computed from the orders, and the dead-letter topic exactly
//! the four bad records, byte for byte, each with the reason it was refused.

use std::time::Duration;

use streams_examples::orders::{OrderPlan, RunOptions, run};
use streams_test_utils::kafka;

#[path = "avro_registry/windowed.rs"]
mod windowed;

/// The registry's URL from `STREAMS_TEST_SCHEMA_REGISTRY`; `None` (the test skips) without
/// it, unless `STREAMS_REQUIRE_SCHEMA_REGISTRY=1`.
fn registry(test: &str) -> Option<String> {
    match std::env::var("STREAMS_TEST_SCHEMA_REGISTRY") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("STREAMS_REQUIRE_SCHEMA_REGISTRY").as_deref() != Ok("1"),
                "{test}: STREAMS_REQUIRE_SCHEMA_REGISTRY=1 but STREAMS_TEST_SCHEMA_REGISTRY is not set"
            );
            eprintln!("{test}: skipped: STREAMS_TEST_SCHEMA_REGISTRY is not set");
            None
        }
    }
}

#[test]
fn avro_orders_total_exactly_and_dead_letter_the_unreadable_records() {
    let test = "avro_orders_total_exactly_and_dead_letter_the_unreadable_records";
    let Some(bootstrap) = kafka::require_kafka(test) else {
        return;
    };
    let Some(registry) = registry(test) else { return };
    let state = tempfile::tempdir().unwrap();
    let plan = OrderPlan::new(200, 20_000);
    let options = RunOptions {
        bootstrap,
        registry,
        run_id: kafka::unique_name("avro-orders"),
        plan: plan.clone(),
        partitions: 3,
        threads: 2,
        state_dir: state.path().to_owned(),
        stall_timeout: Duration::from_secs(60),
    };
    let done = run(&options).unwrap();
    assert_eq!(done.totals, plan.expected());
    assert_eq!(done.totals.values().map(|t| t.orders).sum::<i64>(), 20_000);
    // `run` checks each bad record's bytes and reason; here, that there were four of them.
    assert_eq!(done.dead_letters.len(), 4, "{:?}", done.dead_letters);
    // Registry calls do not grow with the records: one per schema and subject (the client
    // is shared by the writer, the application's serdes and the reader), plus the lookup
    // of the unknown schema id, which is not cached.
    assert!(
        done.registry_requests <= 12,
        "{} registry requests",
        done.registry_requests
    );
}
