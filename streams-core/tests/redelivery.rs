//! A running task never processes an offset twice: records the consumer delivers again
//! (a partition restarted from an older position while the task kept running) are dropped
//! and counted, and an offset reset the host made on purpose starts a new sequence.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use bytes::Bytes;
use streams_core::engine::{RecordCollector, SendError, Task, TaskFactory};
use streams_core::serdes::StringSerde;
use streams_core::state::RocksDbResources;
use streams_core::{ErrorPolicy, Headers, OutputRef, RawRecord, SinkConfig, SourceConfig, TaskId, Topology};

/// Keeps the values of every record sent.
struct Collect(Rc<RefCell<Vec<String>>>);

impl RecordCollector for Collect {
    fn send(&mut self, record: OutputRef<'_>) -> Result<(), SendError> {
        let value = String::from_utf8_lossy(record.value.unwrap_or_default()).into_owned();
        self.0.borrow_mut().push(value);
        Ok(())
    }

    fn partitions(&mut self, _topic: &str) -> Option<i32> {
        Some(1)
    }
}

fn record(offset: i64) -> RawRecord {
    RawRecord {
        topic: Arc::from("in"),
        partition: 0,
        offset,
        key: Some(Bytes::from("k")),
        value: Some(Bytes::from(offset.to_string())),
        timestamp: 1_000 + offset,
        headers: Headers::new(),
    }
}

/// A pass-through task (`in` -> `out`) and what it sends.
fn task() -> (Task, Rc<RefCell<Vec<String>>>) {
    let mut b = Topology::builder();
    let source = b.source("in", SourceConfig::new(["in"], StringSerde, StringSerde));
    b.sink(
        "out",
        SinkConfig::topic("out", StringSerde, StringSerde),
        [&source],
    );
    let topology = Arc::new(b.build().unwrap());
    let factory = TaskFactory::new(
        topology,
        Arc::from("redelivery"),
        ErrorPolicy::default(),
        0,
        RocksDbResources::default(),
    );
    let id = TaskId {
        subtopology: 0,
        partition: 0,
    };
    let dir = tempfile::tempdir().unwrap();
    let stores = factory.stores(id, dir.path(), None).unwrap();
    let sent = Rc::new(RefCell::new(Vec::new()));
    let mut task = factory
        .task(
            id,
            stores,
            Box::new(Collect(sent.clone())),
            0,
            Arc::new(AtomicI64::new(0)),
            None,
        )
        .unwrap();
    task.initialize().unwrap();
    (task, sent)
}

fn process_all(task: &mut Task) {
    while task.process_one().unwrap() {}
}

fn values(range: std::ops::Range<i64>) -> Vec<String> {
    range.map(|o| o.to_string()).collect()
}

#[test]
fn records_delivered_again_are_processed_once() {
    let (mut task, sent) = task();
    task.add_records((0..5).map(record));
    process_all(&mut task);
    // The consumer goes back to offset 2 while 5..8 are new: 2..5 were processed already.
    task.add_records((2..8).map(record));
    process_all(&mut task);
    // Queued but not yet processed counts too: 6..8 are in the queue when 6..10 come again.
    task.add_records((8..10).map(record));
    task.add_records((6..12).map(record));
    process_all(&mut task);
    assert_eq!(*sent.borrow(), values(0..12));
    assert_eq!(task.counters().redelivered, 3 + 4);
    assert_eq!(task.counters().processed, 12);
}

#[test]
fn an_offset_reset_starts_a_new_sequence() {
    let (mut task, sent) = task();
    task.add_records((10..15).map(record));
    process_all(&mut task);
    // The host moved the partition on purpose (say, to the earliest offset after the log
    // was truncated): its records are new to the task.
    task.forget_position("in", 0);
    task.add_records((0..3).map(record));
    process_all(&mut task);
    let mut expected = values(10..15);
    expected.extend(values(0..3));
    assert_eq!(*sent.borrow(), expected);
    assert_eq!(task.counters().redelivered, 0);
}
