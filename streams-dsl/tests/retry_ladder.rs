//! The retry ladder (`streams_dsl::retry`) in the TopologyTestDriver, on its mock wall
//! clock: every handler call is logged with the clock's time, and every record is checked
//! by its identity (key, stage, attempt), never by counts or maxima alone.
//!
//! The harness shared by the tests is here; the tests are in the modules, by topic.

#[path = "retry_ladder/dead_letters.rs"]
mod dead_letters;
#[path = "retry_ladder/restore.rs"]
mod restore;
#[path = "retry_ladder/scheduling.rs"]
mod scheduling;
#[path = "retry_ladder/topology.rs"]
mod topology;
#[path = "retry_ladder/walk.rs"]
mod walk;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use streams_core::serdes::{BytesSerde, NullableSerde, StringSerde};
use streams_core::{Headers, Topology};
use streams_dsl::retry::{
    Attempt, Outcome, RetryError, RetryLadder, RetryNodes, RetryOptions, add_retry_ladder, due_at_ms,
};
use streams_test_utils::{DriverConfig, TestRecord, TopologyTestDriver};

const START: i64 = 1_000_000;
const TICK: i64 = 100;
const APP: &str = "retry-test";

/// One call of the handler.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    key: String,
    stage: usize,
    number: u32,
    /// The wall clock when it was made.
    at: i64,
    /// The due time it carried (retry stages).
    due: Option<i64>,
}

/// One listener event: (key, stage, attempt, outcome).
type Event = (String, usize, u32, Outcome);

/// What a key asks of the handler: `ok*` succeeds, `fatal*` fails fatally, `down*` always
/// fails retriably, `flakyN*` fails retriably N times, then succeeds.
fn script(key: &str, number: u32) -> Result<(), RetryError> {
    if key.starts_with("fatal") {
        return Err(RetryError::fatal("bad request"));
    }
    if key.starts_with("down") {
        return Err(RetryError::retriable(format!("HTTP 503 (attempt {number})")));
    }
    if let Some(rest) = key.strip_prefix("flaky") {
        let n: u32 = rest
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or(0);
        if number <= n {
            return Err(RetryError::retriable(format!("HTTP 500 (attempt {number})")));
        }
    }
    Ok(())
}

struct Harness {
    driver: TopologyTestDriver,
    ladder: RetryLadder,
    nodes: RetryNodes,
    clock: Arc<AtomicI64>,
    calls: Arc<Mutex<Vec<Call>>>,
    events: Arc<Mutex<Vec<Event>>>,
}

type Raw = NullableSerde<BytesSerde>;

/// A record as written, in bytes.
type RawRecord = TestRecord<Option<Vec<u8>>, Option<Vec<u8>>>;

fn raw() -> Raw {
    NullableSerde(BytesSerde)
}

impl Harness {
    fn new(delays_ms: &[u64], options: RetryOptions, partitions: &[(&str, i32)]) -> Self {
        let delays: Vec<Duration> = delays_ms.iter().map(|&d| Duration::from_millis(d)).collect();
        let ladder = RetryLadder::new("req", &delays);
        let clock = Arc::new(AtomicI64::new(START));
        let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
        let events: Arc<Mutex<Vec<Event>>> = Arc::default();
        let handler = {
            let clock = clock.clone();
            let calls = calls.clone();
            move |a: &Attempt<'_, String, String>| {
                calls.lock().unwrap().push(Call {
                    key: a.key().clone(),
                    stage: a.stage(),
                    number: a.number(),
                    at: clock.load(Ordering::SeqCst),
                    due: due_at_ms(a.headers()),
                });
                script(a.key(), a.number())
            }
        };
        let options = {
            let events = events.clone();
            options
                .punctuate_every(Duration::from_millis(TICK as u64))
                .listener(move |e| {
                    let key = String::from_utf8_lossy(e.key.unwrap_or_default()).into_owned();
                    events
                        .lock()
                        .unwrap()
                        .push((key, e.stage, e.attempt, e.outcome.clone()));
                })
        };
        let mut b = Topology::builder();
        let nodes = add_retry_ladder(&mut b, &ladder, StringSerde, StringSerde, handler, &options);
        let mut config = DriverConfig::default().application_id(APP);
        config.start_wall_clock = START;
        for &(t, n) in partitions {
            config = config.partitions(t, n);
        }
        let driver = TopologyTestDriver::new(b.build().unwrap(), config).unwrap();
        Self {
            driver,
            ladder,
            nodes,
            clock,
            calls,
            events,
        }
    }

    /// Advances the wall clock to `to` in ticks of the punctuation interval, so a
    /// punctuation runs at every multiple of it.
    fn advance_to(&self, to: i64) {
        while self.clock.load(Ordering::SeqCst) < to {
            self.clock.fetch_add(TICK, Ordering::SeqCst);
            self.driver
                .advance_wall_clock(Duration::from_millis(TICK as u64))
                .unwrap();
            assert_eq!(self.driver.wall_clock(), self.clock.load(Ordering::SeqCst));
        }
    }

    fn pipe(&self, key: &str, value: &str) {
        self.driver
            .input_topic("req", StringSerde, StringSerde)
            .pipe_at(key.to_owned(), value.to_owned(), 42)
            .unwrap();
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// Every handler call of `key`, as (stage, number, at).
    fn calls_of(&self, key: &str) -> Vec<(usize, u32, i64)> {
        self.calls()
            .into_iter()
            .filter(|c| c.key == key)
            .map(|c| (c.stage, c.number, c.at))
            .collect()
    }

    /// Every record written to `topic`, in bytes.
    fn read(&self, topic: &str) -> Vec<RawRecord> {
        self.driver
            .output_topic(topic, raw(), raw())
            .read_records()
            .unwrap()
    }

    /// The records of `topic` by key text.
    fn read_by_key(&self, topic: &str) -> BTreeMap<String, Vec<RawRecord>> {
        let mut by_key: BTreeMap<String, Vec<_>> = BTreeMap::new();
        for r in self.read(topic) {
            let key = String::from_utf8(r.key.clone().unwrap_or_default()).unwrap();
            by_key.entry(key).or_default().push(r);
        }
        by_key
    }

    /// How many records wait in every retry stage's stores (all partitions).
    fn waiting(&self) -> usize {
        let mut n = 0;
        for store in self.nodes.stores() {
            for p in 0..4 {
                if let Ok(kv) = self.driver.store(&store, p) {
                    n += kv.read().unwrap().all().unwrap().count();
                }
            }
        }
        n
    }

    fn events_of(&self, key: &str) -> Vec<(usize, u32, Outcome)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.0 == key)
            .map(|e| (e.1, e.2, e.3.clone()))
            .collect()
    }
}

fn header(h: &Headers, name: &str) -> Option<String> {
    h.last_str(name).map(str::to_owned)
}

fn names(h: &Headers) -> Vec<String> {
    h.iter().map(|(k, _)| k.to_owned()).collect()
}
