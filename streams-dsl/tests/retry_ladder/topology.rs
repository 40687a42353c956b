//! The ladder's shape in a topology: a sub-topology with a logged store per stage, and a
//! ladder hosted by a DSL program.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use streams_core::Topology;
use streams_core::serdes::StringSerde;
use streams_dsl::retry::{Attempt, RetryError, RetryLadder, RetryOptions, add_retry_ladder};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

use crate::{APP, START};

#[test]
fn each_stage_is_its_own_subtopology_with_a_logged_store() {
    let ladder = RetryLadder::new("req", &[Duration::from_secs(1), Duration::from_secs(2)]);
    let mut b = Topology::builder();
    let nodes = add_retry_ladder(
        &mut b,
        &ladder,
        StringSerde,
        StringSerde,
        |_: &Attempt<'_, String, String>| Ok(()),
        &RetryOptions::new(),
    );
    let t = b.build().unwrap();
    assert_eq!(t.subtopologies().len(), 3);
    assert_eq!(
        t.logged_stores().into_iter().map(|(_, s)| s).collect::<Vec<_>>(),
        ["req-retry-1-pending", "req-retry-2-pending"]
    );
    assert_eq!(nodes.stages[0].sinks, ["req-to-retry-1", "req-to-dlq"]);
    assert_eq!(
        nodes.stages[1].sinks,
        ["req-retry-1-to-retry-2", "req-retry-1-to-dlq"]
    );
    assert_eq!(nodes.stages[2].sinks, ["req-retry-2-to-dlq"]);
    let described = t.describe().to_string();
    assert!(
        described.contains("Processor: req-retry-1-attempt (stores: [req-retry-1-pending])"),
        "{described}"
    );
}

#[test]
fn a_dsl_program_hosts_the_ladder() {
    use streams_dsl::{Consumed, Produced, StreamsBuilder};

    let b = StreamsBuilder::new();
    b.stream(["orders"], Consumed::with(StringSerde, StringSerde))
        .map_values(|_, v: String| v.to_uppercase())
        .to("notify", Produced::with(StringSerde, StringSerde));
    let ladder = RetryLadder::new("notify", &[Duration::from_millis(500)]);
    let seen: Arc<Mutex<Vec<(String, u32)>>> = Arc::default();
    let log = seen.clone();
    b.retry_ladder(
        &ladder,
        StringSerde,
        StringSerde,
        move |a: &Attempt<'_, String, String>| {
            log.lock().unwrap().push((a.value().clone(), a.number()));
            if a.number() == 1 {
                Err(RetryError::retriable("once"))
            } else {
                Ok(())
            }
        },
        &RetryOptions::new().punctuate_every(Duration::from_millis(100)),
    );
    let mut config = DriverConfig::default().application_id(APP);
    config.start_wall_clock = START;
    let driver = TopologyTestDriver::new(b.build().unwrap(), config).unwrap();
    driver
        .input_topic("orders", StringSerde, StringSerde)
        .pipe("k".into(), "hello".into())
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [("HELLO".to_owned(), 1)]);
    for _ in 0..5 {
        driver.advance_wall_clock(Duration::from_millis(100)).unwrap();
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [("HELLO".to_owned(), 1), ("HELLO".to_owned(), 2)]
    );
}
