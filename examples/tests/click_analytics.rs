//! The DSL click analytics (`streams_examples::clicks`) against the real broker (skipped
//! without one, see `streams_test_utils::kafka::require_kafka`): 20,000 clicks of 300 users
//! over 4 partitions and 2 stream threads; both output topics must end holding exactly the
//! per-user and per-region window results computed from the generated clicks, and every
//! click is counted once (the per-region totals add up to the clicks written).

use std::time::Duration;

use streams_examples::clicks::{ClickPlan, RunOptions, UNKNOWN_REGION, run};
use streams_test_utils::kafka;

#[test]
fn windowed_clicks_per_user_and_region_are_exact_on_the_broker() {
    let Some(bootstrap) = kafka::require_kafka("windowed_clicks_per_user_and_region_are_exact_on_the_broker")
    else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let plan = ClickPlan::new(300, 20_000, Duration::from_secs(60));
    let options = RunOptions {
        bootstrap,
        run_id: kafka::unique_name("clicks"),
        plan: plan.clone(),
        grace: Duration::from_secs(60),
        partitions: 4,
        threads: 2,
        state_dir: state.path().to_owned(),
        stall_timeout: Duration::from_secs(60),
    };
    let done = run(&options).unwrap();
    assert_eq!(done.per_region, plan.expected_per_region());
    assert_eq!(done.per_region.values().sum::<u64>(), 20_000);
    assert_eq!(done.per_user_windows, plan.expected_per_user().len());
    assert!(done.per_region.keys().any(|(region, _)| region == UNKNOWN_REGION));
    // 20,000 clicks over 20 ms each: 400 s of event time, 7 or 8 one-minute windows.
    let windows: std::collections::BTreeSet<i64> = done.per_region.keys().map(|(_, s)| *s).collect();
    assert!((7..=8).contains(&windows.len()), "{windows:?}");
}
