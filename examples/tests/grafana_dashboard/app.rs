//! The application under test, as a child process, and the records that keep flowing into
//! its input.

use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use streams_test_utils::kafka::{self, ProduceRecord};

use crate::KEYS;

/// The application under test; killed when dropped unless it was stopped.
pub(crate) struct App(pub(crate) Child);

impl Drop for App {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Records keep flowing into the input until dropped: a first batch, then a few hundred
/// every half second, so every rate over the last minute moves.
pub(crate) struct Feeder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Feeder {
    pub(crate) fn start(bootstrap: &str, topic: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (bootstrap, topic, flag) = (bootstrap.to_owned(), topic.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut seq = 0usize;
            let mut batch = 5_000;
            while !flag.load(Ordering::Relaxed) {
                let records: Vec<ProduceRecord> = (seq..seq + batch)
                    .map(|i| ProduceRecord::new(format!("k{:02}", i % KEYS), i.to_string()))
                    .collect();
                seq += batch;
                kafka::produce(&bootstrap, &topic, &records, Duration::from_secs(30))
                    .expect("feed the input");
                batch = 300;
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
