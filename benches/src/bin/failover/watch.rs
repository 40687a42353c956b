//! Watching the audit topic during the kill: per input partition (task), every record the
//! broker appended at or after a given wall-clock time (the driver then picks the first one
//! a survivor can have written).
//!
//! The audit topic is created with `LogAppendTime`, so a record's timestamp is when the
//! broker appended it; the audit record's key gives the input partition (`kafka_io`), since
//! the application's producer partitions the audit topic by its own hash. The watcher reads
//! from the end of every partition, so it only sees what is written after it started.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use crate::Res;
use crate::kafka_io::{key_index, partition_of};

/// Per input partition: whether anything was seen, and the records at or after `after`.
#[derive(Clone, Debug, Default)]
pub(crate) struct PartitionSeen {
    pub(crate) any: bool,
    /// (broker append time in ms since the epoch, when the watcher read it), in offset order.
    pub(crate) after: Vec<(i64, Instant)>,
}

impl PartitionSeen {
    /// The first record appended at or after `ms`.
    pub(crate) fn first_from(&self, ms: i64) -> Option<(i64, Instant)> {
        self.after.iter().find(|(ts, _)| *ts >= ms).copied()
    }
}

/// The watcher thread and what it saw.
pub(crate) struct Watcher {
    stop: Arc<AtomicBool>,
    after_ms: Arc<AtomicI64>,
    seen: Arc<Mutex<Vec<PartitionSeen>>>,
    handle: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts reading the end of `audit` (`partitions` partitions, as the input).
    pub(crate) fn start(bootstrap: &str, audit: &str, partitions: i32) -> Res<Self> {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "failover-watcher")
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "10")
            .create()?;
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(audit, p, Offset::End)?;
        }
        c.assign(&tpl)?;
        let stop = Arc::new(AtomicBool::new(false));
        let after_ms = Arc::new(AtomicI64::new(i64::MAX));
        let seen = Arc::new(Mutex::new(vec![PartitionSeen::default(); partitions as usize]));
        let handle = {
            let (stop, after_ms, seen) = (stop.clone(), after_ms.clone(), seen.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Some(Ok(m)) = c.poll(Duration::from_millis(50)) else {
                        continue;
                    };
                    let at = Instant::now();
                    let Some(k) = m.key().and_then(key_index) else {
                        continue;
                    };
                    let ts = m.timestamp().to_millis().unwrap_or(-1);
                    let Ok(mut seen) = seen.lock() else {
                        return;
                    };
                    let s = &mut seen[partition_of(k, partitions) as usize];
                    s.any = true;
                    if ts >= after_ms.load(Ordering::Relaxed) {
                        s.after.push((ts, at));
                    }
                }
            })
        };
        Ok(Self {
            stop,
            after_ms,
            seen,
            handle: Some(handle),
        })
    }

    /// From now on, records appended at or after `ms` (ms since the epoch) count.
    pub(crate) fn count_from(&self, ms: i64) {
        self.after_ms.store(ms, Ordering::Relaxed);
    }

    /// What was seen so far.
    pub(crate) fn seen(&self) -> Vec<PartitionSeen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
