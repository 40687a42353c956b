//! Each stateless KStream operator, run in the TopologyTestDriver.

use std::sync::{Arc, Mutex};

use streams_core::serdes::{StringSerde, U64Serde};
use streams_core::{KvStore, ProcessResult, Processor, ProcessorContext, Record, Stores};
use streams_dsl::{Consumed, KStream, Produced, StreamsBuilder};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

type Pairs = Vec<(String, String)>;

fn strings() -> Consumed<StringSerde, StringSerde> {
    Consumed::with(StringSerde, StringSerde)
}

fn out() -> Produced<StringSerde, StringSerde> {
    Produced::with(StringSerde, StringSerde)
}

/// Builds with `f` applied to the stream of `in`, pipes `input` and returns what `out` got.
fn run(f: impl FnOnce(KStream<String, String>), input: &[(&str, &str)]) -> Pairs {
    let b = StreamsBuilder::new();
    f(b.stream(["in"], strings()));
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let topic = driver.input_topic("in", StringSerde, StringSerde);
    for (k, v) in input {
        topic.pipe((*k).into(), (*v).into()).unwrap();
    }
    driver
        .output_topic("out", StringSerde, StringSerde)
        .read_key_values()
        .unwrap()
}

fn pairs(p: &[(&str, &str)]) -> Pairs {
    p.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
}

const INPUT: &[(&str, &str)] = &[("a", "1"), ("b", "22"), ("c", "333")];

#[test]
fn filter_and_filter_not() {
    let got = run(|s| s.filter(|_, v| v.len() > 1).to("out", out()), INPUT);
    assert_eq!(got, pairs(&[("b", "22"), ("c", "333")]));
    let got = run(|s| s.filter_not(|_, v| v.len() > 1).to("out", out()), INPUT);
    assert_eq!(got, pairs(&[("a", "1")]));
}

#[test]
fn map_and_map_values() {
    let got = run(|s| s.map(|k, v| (v, k)).to("out", out()), INPUT);
    assert_eq!(got, pairs(&[("1", "a"), ("22", "b"), ("333", "c")]));
    let got = run(|s| s.map_values(|k, v| format!("{k}{v}")).to("out", out()), INPUT);
    assert_eq!(got, pairs(&[("a", "a1"), ("b", "b22"), ("c", "c333")]));
}

#[test]
fn map_values_changes_the_value_type_checked_at_compile_time() {
    let b = StreamsBuilder::new();
    b.stream(["in"], strings())
        .map_values(|_, v| v.len() as u64)
        .filter(|_, n| *n >= 2)
        .to("out", Produced::with(StringSerde, U64Serde));
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for (k, v) in INPUT {
        input.pipe((*k).into(), (*v).into()).unwrap();
    }
    let got = driver
        .output_topic("out", StringSerde, U64Serde)
        .read_key_values()
        .unwrap();
    assert_eq!(got, [("b".to_owned(), 2), ("c".to_owned(), 3)]);
}

#[test]
fn flat_map_and_flat_map_values() {
    let got = run(
        |s| {
            s.flat_map(|k, v| {
                v.chars()
                    .map(move |c| (format!("{k}{c}"), c.to_string()))
                    .collect::<Vec<_>>()
            })
            .to("out", out())
        },
        &[("a", "12")],
    );
    assert_eq!(got, pairs(&[("a1", "1"), ("a2", "2")]));
    let got = run(
        |s| {
            s.flat_map_values(|_, v| v.split(' ').map(str::to_owned).collect::<Vec<_>>())
                .to("out", out())
        },
        &[("k", "x y")],
    );
    assert_eq!(got, pairs(&[("k", "x"), ("k", "y")]));
}

#[test]
fn select_key_keeps_the_value() {
    let got = run(
        |s| s.select_key(|_, v| format!("len{}", v.len())).to("out", out()),
        INPUT,
    );
    assert_eq!(got, pairs(&[("len1", "1"), ("len2", "22"), ("len3", "333")]));
}

#[test]
fn peek_and_foreach_see_every_record() {
    let peeked = Arc::new(Mutex::new(Vec::new()));
    let each = Arc::new(Mutex::new(Vec::new()));
    let (p, e) = (peeked.clone(), each.clone());
    let got = run(
        move |s| {
            let s = s.peek(move |k, _| p.lock().unwrap().push(k.clone()));
            s.foreach(move |_, v| e.lock().unwrap().push(v.clone()));
            s.to("out", out());
        },
        INPUT,
    );
    assert_eq!(got.len(), 3);
    assert_eq!(*peeked.lock().unwrap(), ["a", "b", "c"]);
    assert_eq!(*each.lock().unwrap(), ["1", "22", "333"]);
}

#[test]
fn split_sends_each_record_to_the_first_matching_branch() {
    let b = StreamsBuilder::new();
    let branches = b
        .stream(["in"], strings())
        .split()
        .branch(|_, v| v.starts_with('x'))
        .branch_as("long", |_, v| v.len() > 2)
        .default_branch();
    assert_eq!(branches.len(), 3);
    for (i, s) in branches.iter().enumerate() {
        s.to(&format!("out{i}"), out());
    }
    let topology = b.build().unwrap();
    let text = topology.describe().to_string();
    assert!(text.contains("in-source-split-1"), "{text}");
    assert!(text.contains("Processor: long"), "{text}");
    assert!(text.contains("in-source-split-default"), "{text}");
    let driver = TopologyTestDriver::new(topology, DriverConfig::default()).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for v in ["xyz", "long", "s", "x"] {
        input.pipe("k".into(), v.into()).unwrap();
    }
    let read = |t: &str| -> Vec<String> {
        let o = driver.output_topic(t, StringSerde, StringSerde);
        o.read_key_values().unwrap().into_iter().map(|(_, v)| v).collect()
    };
    assert_eq!(read("out0"), ["xyz", "x"]);
    assert_eq!(read("out1"), ["long"]);
    assert_eq!(read("out2"), ["s"]);
}

#[test]
fn merge_interleaves_two_streams() {
    let b = StreamsBuilder::new();
    let a = b.stream(["in-a"], strings());
    let c = b.stream(["in-b"], strings()).map_values(|_, v| v.to_uppercase());
    a.merge(&c).to("out", out());
    let driver = TopologyTestDriver::new(b.build().unwrap(), DriverConfig::default()).unwrap();
    driver
        .input_topic("in-a", StringSerde, StringSerde)
        .pipe("1".into(), "a".into())
        .unwrap();
    driver
        .input_topic("in-b", StringSerde, StringSerde)
        .pipe("2".into(), "b".into())
        .unwrap();
    let got = driver
        .output_topic("out", StringSerde, StringSerde)
        .read_key_values()
        .unwrap();
    assert_eq!(got, pairs(&[("1", "a"), ("2", "B")]));
}

/// Numbers each key's records, in a store of its own.
#[derive(Default)]
struct Sequence {
    store: Option<KvStore<StringSerde, U64Serde>>,
}

impl Processor<String, String, String, String> for Sequence {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, String>) -> ProcessResult {
        self.store = Some(ctx.kv_store("seq")?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        r: Record<String, String>,
    ) -> ProcessResult {
        let store = self.store.as_ref().ok_or("not initialized")?;
        let n = store.get(&r.key)?.unwrap_or(0) + 1;
        store.put(&r.key, &n)?;
        let v = format!("{}#{n}", r.value);
        ctx.forward(r.with_value(v))
    }
}

#[test]
fn process_runs_a_user_processor_with_its_store() {
    let b = StreamsBuilder::new();
    b.add_state_store(Stores::in_memory_kv("seq", StringSerde, U64Serde));
    b.stream(["in"], strings())
        .named("sequence")
        .process(Sequence::default, &["seq"])
        .to("out", out());
    let topology = b.build().unwrap();
    assert!(
        topology
            .describe()
            .to_string()
            .contains("Processor: sequence (stores: [seq])")
    );
    let driver = TopologyTestDriver::new(topology, DriverConfig::default()).unwrap();
    let input = driver.input_topic("in", StringSerde, StringSerde);
    for (k, v) in [("a", "x"), ("a", "y"), ("b", "z")] {
        input.pipe(k.into(), v.into()).unwrap();
    }
    let got = driver
        .output_topic("out", StringSerde, StringSerde)
        .read_key_values()
        .unwrap();
    assert_eq!(got, pairs(&[("a", "x#1"), ("a", "y#2"), ("b", "z#1")]));
    let store = driver.kv_store::<StringSerde, U64Serde>("seq").unwrap();
    assert_eq!(store.get(&"a".into()).unwrap(), Some(2));
}
