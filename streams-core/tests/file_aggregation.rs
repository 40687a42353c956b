//! The file-aggregation topology of the seed article in the test driver: 100,000 per-line
//! results of one file (plus a small second file, interleaved) arrive in random order;
//! the aggregator stores each under `<file>-part-%019d`, counts them idempotently, and
//! when the file is complete streams a range scan of its results, in line order, into the
//! result file, then deletes the file's state with `delete_prefix`.

use std::io::Write;
use std::path::PathBuf;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use streams_core::serdes::{JsonSerde, StringSerde, U64Serde};
use streams_core::{KvStore, ProcessResult, Processor, ProcessorContext, Record, Stores, Topology};
use streams_test_utils::{DriverConfig, TopologyTestDriver};

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Message {
    /// The result of one line.
    Line { line: u64, result: String },
    /// The file's number of lines, sent by the splitter after the last line.
    Total { lines: u64 },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Progress {
    received: u64,
    total: Option<u64>,
}

struct Aggregator {
    out_dir: PathBuf,
    parts: Option<KvStore<StringSerde, StringSerde>>,
    files: Option<KvStore<StringSerde, JsonSerde<Progress>>>,
}

fn part_key(file: &str, line: u64) -> String {
    format!("{file}-part-{line:019}")
}

impl Processor<String, Message, String, u64> for Aggregator {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, u64>) -> ProcessResult {
        self.parts = Some(ctx.kv_store("parts")?);
        self.files = Some(ctx.kv_store("files")?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, u64>,
        r: Record<String, Message>,
    ) -> ProcessResult {
        let (parts, files) = (
            self.parts.as_ref().ok_or("init")?,
            self.files.as_ref().ok_or("init")?,
        );
        let file = r.key.clone();
        let mut progress = files.get(&file)?.unwrap_or_default();
        match r.value {
            Message::Line { line, result } => {
                // Idempotent counting: a duplicated result does not count twice.
                if parts.put_if_absent(&part_key(&file, line), &result)?.is_none() {
                    progress.received += 1;
                }
            }
            Message::Total { lines } => progress.total = Some(lines),
        }
        if progress.total != Some(progress.received) {
            files.put(&file, &progress)?;
            return Ok(());
        }
        let path = self.out_dir.join(format!("{file}.out"));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
        {
            let reader = parts.read()?;
            for entry in reader.prefix_scan(&format!("{file}-part-"), &StringSerde)? {
                let (_, result) = entry?;
                writeln!(out, "{result}")?;
            }
        }
        out.flush()?;
        parts.delete_prefix(&format!("{file}-part-"), &StringSerde)?;
        files.delete(&file)?;
        ctx.forward(Record::new(file, progress.received, r.timestamp))
    }
}

#[test]
fn hundred_thousand_results_in_random_order_become_one_ordered_file() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_path_buf();
    let mut b = Topology::builder();
    b.add_source(
        "results",
        ["aggregator-input"],
        StringSerde,
        JsonSerde::<Message>::new(),
    )
    .add_processor(
        "aggregator",
        move || Aggregator {
            out_dir: out_dir.clone(),
            parts: None,
            files: None,
        },
        ["results"],
    )
    .add_state_store(
        Stores::persistent_kv("parts", StringSerde, StringSerde).with_caching(),
        ["aggregator"],
    )
    .add_state_store(
        Stores::persistent_kv("files", StringSerde, JsonSerde::<Progress>::new()).with_caching(),
        ["aggregator"],
    )
    .add_sink("done", "files-done", StringSerde, U64Serde, ["aggregator"]);
    let config = DriverConfig::default().commit_every(10_000).application_id("agg");
    let d = TopologyTestDriver::new(b.build().unwrap(), config).unwrap();
    let input = d.input_topic("aggregator-input", StringSerde, JsonSerde::<Message>::new());

    const BIG: u64 = 100_000;
    const SMALL: u64 = 1_000;
    let mut msgs: Vec<(String, Message)> = (0..BIG)
        .map(|l| {
            (
                "big".to_string(),
                Message::Line {
                    line: l,
                    result: format!("big line {l} ok"),
                },
            )
        })
        .chain((0..SMALL).map(|l| {
            (
                "small".to_string(),
                Message::Line {
                    line: l,
                    result: format!("small {l}"),
                },
            )
        }))
        .collect();
    // Two duplicated results (at-least-once redelivery) must not break the count.
    msgs.push((
        "big".into(),
        Message::Line {
            line: 7,
            result: "big line 7 ok".into(),
        },
    ));
    msgs.push((
        "small".into(),
        Message::Line {
            line: 999,
            result: "small 999".into(),
        },
    ));
    msgs.shuffle(&mut rand::rngs::StdRng::seed_from_u64(42));
    // The totals come after the splitter sent every line, but results may still be in flight.
    let split = msgs.len() - 500;
    for (k, m) in msgs.drain(..split) {
        input.pipe(k, m).unwrap();
    }
    input.pipe("big".into(), Message::Total { lines: BIG }).unwrap();
    input
        .pipe("small".into(), Message::Total { lines: SMALL })
        .unwrap();
    for (k, m) in msgs {
        input.pipe(k, m).unwrap();
    }
    d.commit().unwrap();

    let done = d
        .output_topic("files-done", StringSerde, U64Serde)
        .read_key_values()
        .unwrap();
    let mut done_sorted = done.clone();
    done_sorted.sort();
    assert_eq!(
        done_sorted,
        vec![("big".to_string(), BIG), ("small".to_string(), SMALL)]
    );

    let big = std::fs::read_to_string(dir.path().join("big.out")).unwrap();
    let lines: Vec<&str> = big.lines().collect();
    assert_eq!(lines.len() as u64, BIG);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(*l, format!("big line {i} ok"));
    }
    let small = std::fs::read_to_string(dir.path().join("small.out")).unwrap();
    assert_eq!(small.lines().count() as u64, SMALL);

    // The finished files' state is gone.
    let parts = d.kv_store::<StringSerde, StringSerde>("parts").unwrap();
    assert_eq!(parts.read().unwrap().all().unwrap().count(), 0);
    let files = d.kv_store::<StringSerde, JsonSerde<Progress>>("files").unwrap();
    assert_eq!(files.read().unwrap().all().unwrap().count(), 0);
}
