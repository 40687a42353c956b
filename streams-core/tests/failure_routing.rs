//! Which handler a failure reaches, and which node it is blamed on, when processors between
//! the failing node and the engine catch or pass on the error.

use streams_core::serdes::{Serde, SerdeError, StringSerde};
use streams_core::{
    ErrorHandling, ErrorPolicy, ProcessResult, Processor, ProcessorContext, Record, SinkConfig, SourceConfig,
    StreamsError, Topology,
};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

/// Serializes strings, refusing `"bad"`.
#[derive(Clone)]
struct Picky;

impl Serde for Picky {
    type Target = String;
    fn serialize_into(&self, value: &String, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        if value == "bad" {
            return Err(SerdeError::new("picky", "refused"));
        }
        out.extend_from_slice(value.as_bytes());
        Ok(())
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<String, SerdeError> {
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// Forwards and ignores whatever error forwarding returns.
struct Swallow;
impl Processor<String, String, String, String> for Swallow {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let _ignored = ctx.forward(r);
        Ok(())
    }
}

/// Forwards, ignores the error, then fails on `"bad"` itself.
struct SwallowThenFail;
impl Processor<String, String, String, String> for SwallowThenFail {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let bad = r.value == "bad";
        let _ignored = ctx.forward(r);
        if bad {
            return Err("the record was bad".into());
        }
        Ok(())
    }
}

/// Fails on `"boom"`.
struct Boom;
impl Processor<String, String, String, String> for Boom {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        if r.value == "boom" {
            return Err("boom".into());
        }
        ctx.forward(r)
    }
}

fn fail_fast() -> DriverConfig {
    DriverConfig::default().errors(ErrorPolicy {
        processing: ErrorHandling::LogAndFail,
        production: ErrorHandling::LogAndFail,
        deserialization: ErrorHandling::LogAndFail,
        ..ErrorPolicy::default()
    })
}

/// `in` -> `middle` -> sink `out` (values through `Picky`).
fn with_middle<P>(middle: fn() -> P) -> Topology
where
    P: Processor<String, String, String, String>,
{
    let mut b = Topology::builder();
    let input = b.source("in", SourceConfig::new(["in"], StringSerde, StringSerde));
    let mid = b.processor("middle", [&input], move |_| Ok(middle()));
    b.sink("out", SinkConfig::topic("out", StringSerde, Picky), [&mid]);
    b.build().unwrap()
}

/// `in` -> `first` -> `second` -> sink `out`, each processor named and made as given.
fn chain<P, Q>((first, p): (&str, fn() -> P), (second, q): (&str, fn() -> Q)) -> Topology
where
    P: Processor<String, String, String, String>,
    Q: Processor<String, String, String, String>,
{
    let mut b = Topology::builder();
    let input = b.source("in", SourceConfig::new(["in"], StringSerde, StringSerde));
    let first = b.processor(first, [&input], move |_| Ok(p()));
    let second = b.processor(second, [&first], move |_| Ok(q()));
    b.sink(
        "out",
        SinkConfig::topic("out", StringSerde, StringSerde),
        [&second],
    );
    b.build().unwrap()
}

#[test]
fn a_swallowed_sink_failure_still_reaches_the_production_handler() {
    let driver = TopologyTestDriver::new(with_middle(|| Swallow), fail_fast()).unwrap();
    let err = driver
        .input_topic("in", StringSerde, StringSerde)
        .pipe("k".into(), "bad".into())
        .expect_err("the sink's failure must not vanish");
    match err {
        StreamsError::Production {
            origin,
            topic,
            retriable,
            ..
        } => {
            assert_eq!(origin.node, "out");
            assert_eq!(topic, "out");
            assert!(!retriable, "a serialization failure does not go away by retrying");
        }
        other => panic!("expected a production error, got {other:?}"),
    }
}

#[test]
fn a_swallowed_sink_failure_is_skipped_by_a_continuing_production_handler() {
    let config = DriverConfig::default().errors(ErrorPolicy {
        processing: ErrorHandling::LogAndFail,
        production: ErrorHandling::LogAndContinue,
        ..ErrorPolicy::default()
    });
    let driver = TopologyTestDriver::new(with_middle(|| Swallow), config).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for v in ["a", "bad", "b"] {
        input.pipe("k".into(), v.into()).unwrap();
    }
    let out: Vec<String> = driver
        .output_topic("out", StringSerde, StringSerde)
        .read_key_values()
        .unwrap()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(out, ["a", "b"]);
}

#[test]
fn a_processing_error_is_blamed_on_the_node_that_raised_it() {
    let topology = chain(("outer", || Swallow), ("inner", || Boom));
    let driver = TopologyTestDriver::new(topology, fail_fast()).unwrap();
    // `outer` swallows `inner`'s error: the record counts as processed.
    driver
        .input_topic("in", StringSerde, StringSerde)
        .pipe("k".into(), "boom".into())
        .unwrap();

    let topology = chain(("inner", || Boom), ("outer", || Swallow));
    let driver = TopologyTestDriver::new(topology, fail_fast()).unwrap();
    let err = driver
        .input_topic("in", StringSerde, StringSerde)
        .pipe("k".into(), "boom".into())
        .expect_err("inner fails");
    match err {
        StreamsError::Processing { origin, .. } => assert_eq!(origin.node, "inner"),
        other => panic!("expected a processing error, got {other:?}"),
    }
}

#[test]
fn a_node_that_fails_after_a_swallowed_child_error_is_blamed_itself() {
    let topology = chain(("outer", || SwallowThenFail), ("inner", || Boom));
    let driver = TopologyTestDriver::new(topology, fail_fast()).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    // `inner` fails on "boom", `outer` swallows it and succeeds.
    input.pipe("k".into(), "boom".into()).unwrap();
    // `outer` fails on "bad" itself (after `inner` passed it on).
    let err = input.pipe("k".into(), "bad".into()).expect_err("outer fails");
    match err {
        StreamsError::Processing { origin, source } => {
            assert_eq!(origin.node, "outer");
            assert_eq!(source.to_string(), "the record was bad");
        }
        other => panic!("expected a processing error, got {other:?}"),
    }
}

#[test]
fn an_undeserializable_record_is_a_deserialization_error_of_its_source() {
    let mut b = Topology::builder();
    let input = b.source(
        "in",
        SourceConfig::new(["in"], StringSerde, streams_core::serdes::U64Serde),
    );
    b.sink(
        "out",
        SinkConfig::topic("out", StringSerde, streams_core::serdes::U64Serde),
        [&input],
    );
    let driver = TopologyTestDriver::new(b.build().unwrap(), fail_fast()).unwrap();
    let err = driver
        .input_topic("in", StringSerde, StringSerde)
        .pipe("k".into(), "not eight bytes".into())
        .expect_err("the value is not a u64");
    match err {
        StreamsError::Deserialization { origin, what, .. } => {
            assert_eq!(origin.node, "in");
            assert_eq!(what, "value");
            assert_eq!(origin.record, Some(("in".to_owned(), 0, 0)));
        }
        other => panic!("expected a deserialization error, got {other:?}"),
    }
}

/// Fails on `"log"` with the error a logged store returns when its changelog refuses a
/// write, passed on by `?`.
struct ChangelogRefused;
impl Processor<String, String, String, String> for ChangelogRefused {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        if r.value == "log" {
            Err(streams_core::state::StoreError::Changelog {
                store: "counts".into(),
                message: "changelog `app-counts-changelog`: Message size too large".into(),
            })?;
        }
        ctx.forward(r)
    }
}

#[test]
fn a_refused_changelog_write_is_never_skipped_by_a_continuing_processing_handler() {
    let config = DriverConfig::default().errors(ErrorPolicy {
        processing: ErrorHandling::LogAndContinue,
        production: ErrorHandling::LogAndContinue,
        ..ErrorPolicy::default()
    });
    let driver = TopologyTestDriver::new(with_middle(|| ChangelogRefused), config).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    input.pipe("k".into(), "a".into()).unwrap();
    let err = input
        .pipe("k".into(), "log".into())
        .expect_err("a store ahead of its changelog must not be skipped past");
    assert!(err.changelog_failure().is_some(), "{err:?}");
    assert!(err.to_string().contains("Message size too large"), "{err}");
}
