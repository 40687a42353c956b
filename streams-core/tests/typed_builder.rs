//! The typed builder: handles as parents and stores, processors made by suppliers with
//! their context, and what `build()` and `init` still catch. What the compiler catches is
//! shown by the `compile_fail` examples in `src/topology/typed.rs`.

use std::time::Duration;

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::state::KvStore;
use streams_core::{
    ProcessResult, Processor, ProcessorContext, ProcessorError, PunctuationType, Record, ScheduleId,
    SinkConfig, SourceConfig, StoreRef, Stores, Topology, TopologyBuilder, TopologyIssue,
};
use streams_test_utils::processors::Count;
use streams_test_utils::{DriverConfig, TopologyTestDriver};

/// The supplier of a [`Count`] in `counts`.
fn count_in(
    counts: &StoreRef<StringSerde, U64Serde>,
) -> impl Fn(&mut ProcessorContext<'_, String, u64>) -> Result<Count, ProcessorError> + Send + Sync + 'static
{
    let counts = counts.clone();
    move |ctx| Ok(Count::new(ctx.store(&counts)?))
}

/// `words` -> `count` (in the store `counts`, connected when `connect`) -> `counts-out`.
fn count_builder(connect: bool) -> (TopologyBuilder, StoreRef<StringSerde, U64Serde>) {
    let mut b = Topology::builder();
    let words = b.source("words", SourceConfig::new(["words"], StringSerde, StringSerde));
    let counts = b.store(Stores::in_memory_kv("counts", StringSerde, U64Serde));
    let count = b.processor("count", [&words], count_in(&counts));
    if connect {
        b.connect(&count, &counts);
    }
    b.sink(
        "out",
        SinkConfig::topic("counts-out", StringSerde, U64Serde),
        [&count],
    );
    (b, counts)
}

fn count_topology() -> (Topology, StoreRef<StringSerde, U64Serde>) {
    let (b, counts) = count_builder(true);
    (b.build().unwrap(), counts)
}

#[test]
fn a_supplied_processor_counts_in_its_store() {
    let (topology, counts) = count_topology();
    let driver = TopologyTestDriver::new(topology, DriverConfig::default()).unwrap();
    let input = driver.input_topic("words", StringSerde, StringSerde);
    let output = driver.output_topic("counts-out", StringSerde, U64Serde);
    for k in ["a", "b", "a", "a"] {
        input.pipe(k.into(), "x".into()).unwrap();
    }
    let got: Vec<(String, u64)> = output.read_key_values().unwrap();
    let expected: Vec<(String, u64)> = [("a", 1), ("b", 1), ("a", 2), ("a", 3)]
        .into_iter()
        .map(|(k, n)| (k.to_owned(), n))
        .collect();
    assert_eq!(got, expected);
    let store = driver.store(&counts, 0).unwrap();
    assert_eq!(store.get(&"a".to_owned()).unwrap(), Some(3));
    assert_eq!(store.get(&"b".to_owned()).unwrap(), Some(1));
}

#[test]
fn the_typed_and_the_named_builder_describe_alike() {
    let (typed, _) = count_topology();
    let mut b = Topology::builder();
    b.add_source("words", ["words"], StringSerde, StringSerde)
        .add_processor("count", || Pass, ["words"])
        .add_state_store(Stores::in_memory_kv("counts", StringSerde, U64Serde), ["count"])
        .add_sink("out", "counts-out", StringSerde, U64Serde, ["count"]);
    let named = b.build().unwrap();
    assert_eq!(typed.describe().to_string(), named.describe().to_string());
}

/// Forwards a constant count; only its shape matters.
struct Pass;
impl Processor<String, String, String, u64> for Pass {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, String>,
    ) -> ProcessResult {
        ctx.forward(Record::new(r.key, 0, r.timestamp))
    }
}

#[test]
fn a_store_connected_to_nothing_fails_the_build() {
    let (b, _) = count_builder(false);
    let issues = b.build().expect_err("the store is connected to nothing").0;
    assert!(
        issues
            .iter()
            .any(|i| matches!(i, TopologyIssue::Store { store, .. } if store == "counts")),
        "{issues:?}"
    );
}

#[test]
fn a_store_opened_by_a_processor_it_is_not_connected_to_fails_at_start() {
    let mut b = Topology::builder();
    let words = b.source("words", SourceConfig::new(["words"], StringSerde, StringSerde));
    let counts = b.store(Stores::in_memory_kv("counts", StringSerde, U64Serde));
    let owner = b.processor("owner", [&words], count_in(&counts));
    b.connect(&owner, &counts);
    let thief = b.processor("thief", [&words], count_in(&counts));
    b.sink(
        "out",
        SinkConfig::topic("out", StringSerde, U64Serde),
        [&owner, &thief],
    );
    let topology = b.build().unwrap();
    let err = TopologyTestDriver::new(topology, DriverConfig::default())
        .err()
        .expect("thief is not connected to counts");
    let text = format!("{err}: {:?}", std::error::Error::source(&err));
    assert!(text.contains("counts") && text.contains("thief"), "{text}");
}

#[test]
fn a_supplier_error_fails_the_task_at_start_naming_the_processor() {
    let mut b = Topology::builder();
    let words = b.source("words", SourceConfig::new(["words"], StringSerde, StringSerde));
    let failing = b.processor(
        "failing",
        [&words],
        |_ctx: &mut ProcessorContext<'_, String, u64>| Err::<Pass, _>("no configuration".into()),
    );
    b.sink("out", SinkConfig::topic("out", StringSerde, U64Serde), [&failing]);
    let err = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default())
        .err()
        .expect("the supplier fails");
    assert!(err.to_string().contains("failing"), "{err}");
}

/// Emits the number of records seen on every wall-clock punctuation; schedules in its
/// supplier, which has the context.
struct Ticker {
    seen: u64,
}
impl Processor<String, String, String, u64> for Ticker {
    fn process(
        &mut self,
        _: &mut ProcessorContext<'_, String, u64>,
        _: Record<String, String>,
    ) -> ProcessResult {
        self.seen += 1;
        Ok(())
    }
    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        _: ScheduleId,
        at: i64,
    ) -> ProcessResult {
        ctx.forward(Record::new("seen".into(), self.seen, at))
    }
}

#[test]
fn a_supplier_can_schedule_and_processors_merge_typed_parents() {
    let mut b = Topology::builder();
    let left = b.source("left", SourceConfig::new(["left"], StringSerde, StringSerde));
    let right = b.source("right", SourceConfig::new(["right"], StringSerde, StringSerde));
    let ticker = b.processor("ticker", [&left, &right], |ctx| {
        ctx.schedule(Duration::from_secs(1), PunctuationType::WallClock);
        Ok(Ticker { seen: 0 })
    });
    b.sink(
        "out",
        SinkConfig::topic("ticks", StringSerde, U64Serde),
        [&ticker],
    );
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    driver
        .input_topic("left", StringSerde, StringSerde)
        .pipe("k".into(), "v".into())
        .unwrap();
    driver
        .input_topic("right", StringSerde, StringSerde)
        .pipe("k".into(), "v".into())
        .unwrap();
    driver.advance_wall_clock(Duration::from_secs(1)).unwrap();
    let out = driver.output_topic("ticks", StringSerde, U64Serde);
    assert_eq!(out.read_value().unwrap(), Some(2));
}

/// Writes every record into the global store.
struct Load {
    table: KvStore<StringSerde, StringSerde>,
}
impl Processor<String, String> for Load {
    fn process(&mut self, _: &mut ProcessorContext<'_, (), ()>, r: Record<String, String>) -> ProcessResult {
        self.table.put(&r.key, &r.value)?;
        Ok(())
    }
}

/// Looks each key up in the global table.
struct Lookup {
    table: KvStore<StringSerde, StringSerde>,
}
impl Processor<String, String, String, String> for Lookup {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let found = self.table.get(&r.key)?.unwrap_or_else(|| "-".into());
        ctx.forward(r.with_value(found))
    }
}

#[test]
fn a_typed_global_store_is_readable_without_connect() {
    let mut b = Topology::builder();
    let table = b.global_store(
        Stores::in_memory_kv("table", StringSerde, StringSerde).without_logging(),
        "table-source",
        SourceConfig::new(["table"], StringSerde, StringSerde),
        "table-loader",
        |_ctx, table| Ok(Load { table }),
    );
    assert_eq!(table.name(), "table");
    let events = b.source("events", SourceConfig::new(["events"], StringSerde, StringSerde));
    let lookup = b.processor("lookup", [&events], move |ctx| {
        Ok(Lookup {
            table: ctx.store(&table)?,
        })
    });
    b.sink(
        "out",
        SinkConfig::topic("enriched", StringSerde, StringSerde),
        [&lookup],
    );
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    driver
        .input_topic("table", StringSerde, StringSerde)
        .pipe("k1".into(), "one".into())
        .unwrap();
    let events = driver.input_topic("events", StringSerde, StringSerde);
    events.pipe("k1".into(), "e".into()).unwrap();
    events.pipe("k2".into(), "e".into()).unwrap();
    let out = driver.output_topic("enriched", StringSerde, StringSerde);
    assert_eq!(out.read_value().unwrap(), Some("one".into()));
    assert_eq!(out.read_value().unwrap(), Some("-".into()));
}

#[test]
fn internal_topics_are_named_for_the_application_that_runs_them() {
    let mut b = Topology::builder();
    let input = b.source("in", SourceConfig::new(["in"], StringSerde, StringSerde));
    b.sink(
        "to-internal",
        SinkConfig::topic("x-repartition", StringSerde, StringSerde),
        [&input],
    );
    let back = b.source(
        "from-internal",
        SourceConfig::new(["x-repartition"], StringSerde, StringSerde),
    );
    b.sink("out", SinkConfig::topic("out", StringSerde, StringSerde), [&back]);
    b.internal_topic("x-repartition")
        .set_repartition_partitions("x-repartition", std::num::NonZeroU16::new(2).unwrap());
    let topology = b.build().unwrap();
    let relative = topology.describe().to_string();
    assert!(
        relative.contains("Sink: to-internal (topic: x-repartition)"),
        "{relative}"
    );

    let named = topology.clone().with_application_id("app");
    let text = named.describe().to_string();
    assert!(
        text.contains("Sink: to-internal (topic: app-x-repartition)"),
        "{text}"
    );
    assert!(
        text.contains("Source: from-internal (topics: [app-x-repartition])"),
        "{text}"
    );
    assert_eq!(named.repartition_partitions().get("app-x-repartition"), Some(&2));
    assert!(named.source_topics().contains("app-x-repartition"));
    let again = named.clone().with_application_id("other");
    assert_eq!(again.describe().to_string(), text, "naming twice changes nothing");

    // The driver names them for its application id; the sink node writes there.
    let driver = TopologyTestDriver::new(topology, DriverConfig::default().application_id("app")).unwrap();
    driver
        .input_topic("in", StringSerde, StringSerde)
        .pipe("k".into(), "v".into())
        .unwrap();
    assert!(
        driver.topics().contains(&"app-x-repartition".to_owned()),
        "{:?}",
        driver.topics()
    );
    let out = driver.output_topic("out", StringSerde, StringSerde);
    assert_eq!(out.read_value().unwrap(), Some("v".into()));
}

/// Routes even lengths to one child and odd lengths to the other, children resolved once.
struct Router {
    even: streams_core::Child,
    odd: streams_core::Child,
}
impl Processor<String, String, String, String> for Router {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let to = if r.value.len().is_multiple_of(2) {
            self.even
        } else {
            self.odd
        };
        ctx.forward_to_child(to, r)
    }
}

#[test]
fn children_resolved_once_route_records() {
    let mut b = Topology::builder();
    let input = b.source("in", SourceConfig::new(["in"], StringSerde, StringSerde));
    let router = b.processor("router", [&input], |ctx| {
        Ok(Router {
            even: ctx.child("even")?,
            odd: ctx.child("odd")?,
        })
    });
    b.sink(
        "even",
        SinkConfig::topic("even", StringSerde, StringSerde),
        [&router],
    );
    b.sink(
        "odd",
        SinkConfig::topic("odd", StringSerde, StringSerde),
        [&router],
    );
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for v in ["ab", "abc", "abcd"] {
        input.pipe("k".into(), v.into()).unwrap();
    }
    let values = |topic: &str| -> Vec<String> {
        driver
            .output_topic(topic, StringSerde, StringSerde)
            .read_key_values()
            .unwrap()
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    };
    assert_eq!(values("even"), ["ab", "abcd"]);
    assert_eq!(values("odd"), ["abc"]);

    // A name that is not a child fails the task at start, naming both.
    let mut b = Topology::builder();
    let input = b.source("in", SourceConfig::new(["in"], StringSerde, StringSerde));
    let router = b.processor("router", [&input], |ctx| {
        Ok(Router {
            even: ctx.child("even")?,
            odd: ctx.child("nobody")?,
        })
    });
    b.sink(
        "even",
        SinkConfig::topic("even", StringSerde, StringSerde),
        [&router],
    );
    let err = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default())
        .err()
        .expect("`nobody` is not a child");
    let text = format!("{err}");
    assert!(text.contains("nobody") && text.contains("router"), "{text}");
}
