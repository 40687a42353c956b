//! Forwarding order, punctuation, store access rules, partitions and error handlers, run
//! through the TopologyTestDriver (the same task code as the runtime).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use streams_core::handlers::headers;
use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{
    ErrorHandling, ErrorPolicy, ProcessResult, Processor, ProcessorContext, PunctuationType, Record,
    ScheduleId, Stores, Topology, default_partition,
};
use streams_test_utils::processors::Count;
use streams_test_utils::{DriverConfig, TopologyTestDriver};

type Trace = Arc<Mutex<Vec<String>>>;

/// Records its name and the value, then forwards `value + name`.
struct Tag {
    name: &'static str,
    trace: Trace,
}
impl Processor<String, String, String, String> for Tag {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        self.trace
            .lock()
            .unwrap()
            .push(format!("{}:{}", self.name, r.value));
        let v = format!("{}{}", r.value, self.name);
        ctx.forward(r.with_value(v))
    }
}

#[test]
fn forwarding_is_depth_first_in_child_order() {
    let trace: Trace = Arc::default();
    let t = |name| {
        let trace = trace.clone();
        move || Tag {
            name,
            trace: trace.clone(),
        }
    };
    let mut b = Topology::builder();
    b.add_source("src", ["in"], StringSerde, StringSerde)
        .add_processor("a", t("a"), ["src"])
        .add_processor("b", t("b"), ["src"])
        .add_processor("a1", t("1"), ["a"])
        .add_processor("a2", t("2"), ["a"])
        .add_sink("out", "out", StringSerde, StringSerde, ["a1", "a2", "b"]);
    let d = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    d.input_topic("in", StringSerde, StringSerde)
        .pipe("k".into(), "x".into())
        .unwrap();
    assert_eq!(*trace.lock().unwrap(), vec!["a:x", "1:xa", "2:xa", "b:x"]);
    let out: Vec<String> = d
        .output_topic("out", StringSerde, StringSerde)
        .read_records()
        .unwrap()
        .into_iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(out, vec!["xa1", "xa2", "xb"]);
}

/// Sends even lengths to `even`, odd to `odd`.
struct Router;
impl Processor<String, String, String, String> for Router {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let to = if r.value.len().is_multiple_of(2) {
            "even"
        } else {
            "odd"
        };
        ctx.forward_to(to, r)
    }
}

#[test]
fn forward_to_reaches_one_named_child_and_rejects_others() {
    let mut b = Topology::builder();
    b.add_source("src", ["in"], StringSerde, StringSerde)
        .add_processor("router", || Router, ["src"])
        .add_sink("even", "even-out", StringSerde, StringSerde, ["router"])
        .add_sink("odd", "odd-out", StringSerde, StringSerde, ["router"]);
    let d = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let input = d.input_topic("in", StringSerde, StringSerde);
    for v in ["ab", "abc", "abcd"] {
        input.pipe("k".into(), v.into()).unwrap();
    }
    assert_eq!(
        d.output_topic("even-out", StringSerde, StringSerde)
            .read_key_values()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        d.output_topic("odd-out", StringSerde, StringSerde)
            .read_key_values()
            .unwrap()
            .len(),
        1
    );

    struct Bad;
    impl Processor<String, String, String, String> for Bad {
        fn process(
            &mut self,
            ctx: &mut ProcessorContext<'_, String, String>,
            r: Record<String, String>,
        ) -> ProcessResult {
            ctx.forward_to("nobody", r)
        }
    }
    let mut b = Topology::builder();
    b.add_source("src", ["in"], StringSerde, StringSerde)
        .add_processor("bad", || Bad, ["src"]);
    let d = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let err = d
        .input_topic("in", StringSerde, StringSerde)
        .pipe("k".into(), "v".into())
        .unwrap_err()
        .to_string();
    assert!(err.contains("`nobody` is not a child of `bad`"), "{err}");
    assert!(err.contains("node `bad` processing in-0@0"), "{err}");
}

/// Counts punctuations of both kinds into a shared log.
struct Ticker {
    log: Rc<RefCell<Vec<(PunctuationType, i64)>>>,
    stream: Option<ScheduleId>,
}
impl Processor<String, String> for Ticker {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, (), ()>) -> ProcessResult {
        self.stream = Some(
            ctx.schedule(Duration::from_millis(10), PunctuationType::StreamTime)
                .id(),
        );
        ctx.schedule(Duration::from_secs(1), PunctuationType::WallClock);
        Ok(())
    }
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, _: Record<String, String>) -> ProcessResult {
        Ok(())
    }
    fn punctuate(&mut self, _: &mut ProcessorContext<'_, (), ()>, id: ScheduleId, ts: i64) -> ProcessResult {
        let kind = if Some(id) == self.stream {
            PunctuationType::StreamTime
        } else {
            PunctuationType::WallClock
        };
        self.log.borrow_mut().push((kind, ts));
        Ok(())
    }
}

thread_local! {
    static TICKS: Rc<RefCell<Vec<(PunctuationType, i64)>>> = Rc::default();
}

#[test]
fn punctuation_by_stream_time_and_wall_clock() {
    let mut b = Topology::builder();
    b.add_source("src", ["in"], StringSerde, StringSerde)
        .add_processor(
            "tick",
            || Ticker {
                log: TICKS.with(Rc::clone),
                stream: None,
            },
            ["src"],
        );
    let d = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let input = d.input_topic("in", StringSerde, StringSerde);
    // Stream time starts at the first record (100): fires at >= 110, then every 10 ms of
    // stream time; an out-of-order record does not move stream time back.
    for ts in [100, 105, 111, 50, 125, 160] {
        input.pipe_at("k".into(), "v".into(), ts).unwrap();
    }
    d.advance_wall_clock(Duration::from_millis(999)).unwrap();
    d.advance_wall_clock(Duration::from_millis(1)).unwrap();
    d.advance_wall_clock(Duration::from_secs(5)).unwrap();
    let ticks = TICKS.with(|t| t.borrow().clone());
    let stream: Vec<i64> = ticks
        .iter()
        .filter(|t| t.0 == PunctuationType::StreamTime)
        .map(|t| t.1)
        .collect();
    let wall: Vec<i64> = ticks
        .iter()
        .filter(|t| t.0 == PunctuationType::WallClock)
        .map(|t| t.1)
        .collect();
    assert_eq!(stream, vec![111, 125, 160]);
    assert_eq!(wall, vec![1000, 6000]);
}

/// Asks for a store it is not connected to.
struct Snoop;
impl Processor<String, String> for Snoop {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, (), ()>) -> ProcessResult {
        ctx.kv_store::<StringSerde, StringSerde>("private")?;
        Ok(())
    }
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, _: Record<String, String>) -> ProcessResult {
        Ok(())
    }
}

/// Owns the store `private`, asks for it with the wrong value type.
struct WrongTypes;
impl Processor<String, String> for WrongTypes {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, (), ()>) -> ProcessResult {
        ctx.kv_store::<StringSerde, U64Serde>("private")?;
        Ok(())
    }
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, _: Record<String, String>) -> ProcessResult {
        Ok(())
    }
}

#[test]
fn unconnected_or_mistyped_store_is_an_init_error() {
    let mut b = Topology::builder();
    b.add_source("s1", ["a"], StringSerde, StringSerde)
        .add_processor("owner", || WrongTypes, ["s1"])
        .add_processor("snoop", || Snoop, ["s1"])
        .add_state_store(
            Stores::in_memory_kv("private", StringSerde, StringSerde),
            ["owner"],
        );
    let err = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("node `owner`"), "{err}");
    assert!(err.contains("U64Serde"), "{err}");

    let mut b = Topology::builder();
    b.add_source("s1", ["a"], StringSerde, StringSerde)
        .add_processor("snoop", || Snoop, ["s1"])
        .add_processor("other", || Snoop, ["s1"])
        .add_state_store(
            Stores::in_memory_kv("private", StringSerde, StringSerde),
            ["other"],
        );
    let err = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("store `private` is not connected to processor `snoop`"),
        "{err}"
    );
}

#[test]
fn keyed_records_land_on_murmur2_partitions_with_one_task_each() {
    let mut b = Topology::builder();
    b.add_source("src", ["words"], StringSerde, StringSerde)
        .add_processor("count", Count::default, ["src"])
        .add_state_store(
            Stores::persistent_kv("counts", StringSerde, U64Serde).with_caching(),
            ["count"],
        )
        .add_sink("out", "counts-out", StringSerde, U64Serde, ["count"]);
    let config = DriverConfig::default()
        .partitions("words", 4)
        .partitions("counts-out", 4)
        .application_id("wc");
    let d = TopologyTestDriver::new(b.build().unwrap(), config).unwrap();
    assert_eq!(d.task_ids().len(), 4);
    let input = d.input_topic("words", StringSerde, StringSerde);
    let words = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"];
    for round in 0..3 {
        for w in words {
            input.pipe_at(w.into(), "x".into(), round).unwrap();
        }
    }
    for w in words {
        let p = default_partition(w.as_bytes(), 4);
        let store = d.kv_store_at::<StringSerde, U64Serde>("counts", p).unwrap();
        assert_eq!(
            store.get(&w.to_string()).unwrap(),
            Some(3),
            "{w} on partition {p}"
        );
        for other in (0..4).filter(|&o| o != p) {
            let s = d.kv_store_at::<StringSerde, U64Serde>("counts", other).unwrap();
            assert_eq!(s.get(&w.to_string()).unwrap(), None);
        }
    }
    let out = d
        .output_topic("counts-out", StringSerde, U64Serde)
        .read_records()
        .unwrap();
    assert_eq!(out.len(), 21);
    assert!(
        out.iter()
            .all(|r| r.partition == default_partition(r.key.as_bytes(), 4))
    );
    // The changelog holds every write, on the task's partition.
    let changelog = d
        .output_topic("wc-counts-changelog", StringSerde, U64Serde)
        .read_records()
        .unwrap();
    assert_eq!(changelog.len(), 21);
    assert!(
        changelog
            .iter()
            .all(|r| r.partition == default_partition(r.key.as_bytes(), 4))
    );
}

#[test]
fn undeserializable_records_go_to_the_dead_letter_topic_with_their_bytes() {
    let mut b = Topology::builder();
    b.add_source("src", ["nums"], StringSerde, U64Serde).add_sink(
        "out",
        "nums-out",
        StringSerde,
        U64Serde,
        ["src"],
    );
    let policy = ErrorPolicy {
        deserialization: ErrorHandling::DeadLetterQueue,
        dead_letter_topic: Some("dlq".into()),
        ..ErrorPolicy::default()
    };
    let d = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default().errors(policy)).unwrap();
    let input = d.input_topic("nums", StringSerde, U64Serde);
    input.pipe("a".into(), 1).unwrap();
    input.pipe_raw(Some(b"bad"), Some(b"not-eight-bytes"), 7).unwrap();
    input.pipe("b".into(), 2).unwrap();
    assert_eq!(
        d.output_topic("nums-out", StringSerde, U64Serde)
            .read_key_values()
            .unwrap(),
        vec![("a".into(), 1), ("b".into(), 2)]
    );
    let dlq = d
        .output_topic("dlq", StringSerde, StringSerde)
        .read_records()
        .unwrap();
    assert_eq!(dlq.len(), 1);
    assert_eq!(dlq[0].key, "bad");
    assert_eq!(dlq[0].value, "not-eight-bytes");
    assert_eq!(
        dlq[0].headers.last_str(headers::EXCEPTION),
        Some("deserialization")
    );
    assert_eq!(dlq[0].headers.last_str(headers::TOPIC), Some("nums"));
    assert_eq!(dlq[0].headers.last_str(headers::OFFSET), Some("1"));
    assert!(
        dlq[0]
            .headers
            .last_str(headers::MESSAGE)
            .unwrap()
            .contains("expected 8 bytes")
    );

    // Log-and-fail (the default) stops with an error naming the record.
    let mut b = Topology::builder();
    b.add_source("src", ["nums"], StringSerde, U64Serde)
        .add_sink("out", "o", StringSerde, U64Serde, ["src"]);
    let d = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let err = d
        .input_topic("nums", StringSerde, U64Serde)
        .pipe_raw(None, Some(b"x"), 0)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("node `src` processing nums-0@0: cannot deserialize value"),
        "{err}"
    );
}

/// Serializes strings, failing on `"unserializable"`.
#[derive(Clone)]
struct PickySerde;

impl streams_core::serdes::Serde for PickySerde {
    type Target = String;
    fn serialize_into(
        &self,
        value: &String,
        out: &mut Vec<u8>,
    ) -> Result<(), streams_core::serdes::SerdeError> {
        if value == "unserializable" {
            return Err(streams_core::serdes::SerdeError::new(
                "picky",
                "refused by the test serde",
            ));
        }
        out.extend_from_slice(value.as_bytes());
        Ok(())
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<String, streams_core::serdes::SerdeError> {
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }
}

#[test]
fn sink_serialization_errors_go_to_the_production_handler() {
    let topology = || {
        let mut b = Topology::builder();
        b.add_source("src", ["words"], StringSerde, StringSerde).add_sink(
            "out",
            "words-out",
            StringSerde,
            PickySerde,
            ["src"],
        );
        b.build().unwrap()
    };
    // Production errors are skipped, processing errors would fail: the record is skipped.
    let policy = ErrorPolicy {
        processing: ErrorHandling::LogAndFail,
        production: ErrorHandling::LogAndContinue,
        ..ErrorPolicy::default()
    };
    let d = TopologyTestDriver::new(topology(), DriverConfig::default().errors(policy)).unwrap();
    let input = d.input_topic("words", StringSerde, StringSerde);
    for v in ["a", "unserializable", "b"] {
        input.pipe("k".into(), v.into()).unwrap();
    }
    let values: Vec<String> = d
        .output_topic("words-out", StringSerde, StringSerde)
        .read_key_values()
        .unwrap()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(values, ["a", "b"]);

    // The other way round, the error stops processing and is reported as a production error.
    let policy = ErrorPolicy {
        processing: ErrorHandling::LogAndContinue,
        production: ErrorHandling::LogAndFail,
        ..ErrorPolicy::default()
    };
    let d = TopologyTestDriver::new(topology(), DriverConfig::default().errors(policy)).unwrap();
    let err = d
        .input_topic("words", StringSerde, StringSerde)
        .pipe("k".into(), "unserializable".into())
        .unwrap_err();
    assert!(
        matches!(err, streams_core::StreamsError::Production { ref topic, .. } if topic == "words-out"),
        "{err:?}"
    );
}

/// Keeps the largest value seen under the metadata key `max`, forwarding what it found.
struct MaxSoFar;
impl Processor<String, u64, String, String> for MaxSoFar {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, u64>,
    ) -> ProcessResult {
        let before = ctx.processor_metadata("max");
        let value = i64::try_from(r.value).unwrap_or(i64::MAX);
        ctx.put_processor_metadata("max", before.unwrap_or(value).max(value));
        ctx.forward(r.with_value(format!("{before:?}")))
    }
}

#[test]
fn processor_metadata_is_the_tasks_and_resumes_with_the_largest_committed_value() {
    let topology = || {
        let mut b = Topology::builder();
        b.add_source("src", ["in"], StringSerde, U64Serde)
            .add_processor("max", || MaxSoFar, ["src"])
            .add_sink("out", "out", StringSerde, StringSerde, ["max"]);
        b.build().unwrap()
    };
    let d = TopologyTestDriver::new(topology(), DriverConfig::default()).unwrap();
    let input = d.input_topic("in", StringSerde, U64Serde);
    let out = d.output_topic("out", StringSerde, StringSerde);
    for v in [5, 3, 9] {
        input.pipe("k".into(), v).unwrap();
    }
    let seen: Vec<String> = out
        .read_key_values()
        .unwrap()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(seen, ["None", "Some(5)", "Some(5)"]);
    let committed = d.processor_metadata();
    assert_eq!(committed, [("max".to_owned(), 9)].into());

    // A task created from the offsets of two partitions starts with the larger value of
    // each key (as Kafka Streams merges them).
    let d = TopologyTestDriver::new(topology(), DriverConfig::default()).unwrap();
    d.resume_processor_metadata(&[("max".to_owned(), 4), ("other".to_owned(), 1)].into());
    d.resume_processor_metadata(&committed);
    d.input_topic("in", StringSerde, U64Serde)
        .pipe("k".into(), 1)
        .unwrap();
    let out = d.output_topic("out", StringSerde, StringSerde);
    assert_eq!(out.read_value().unwrap().as_deref(), Some("Some(9)"));
    assert_eq!(
        d.processor_metadata(),
        [("max".to_owned(), 9), ("other".to_owned(), 1)].into()
    );
}
