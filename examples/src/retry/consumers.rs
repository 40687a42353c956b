//! The public handle of a running ladder: starts one consumer thread per topic, reports
//! what they did, and stops them.
//!
//! Invariants: one failed consumer stops the others (the application is unhealthy, and
//! [`RetryConsumers::close`] returns that first error); closing or dropping the handle
//! stops every thread, and each commits what it handled before it leaves its group.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::handler::Handler;
use super::ladder::RetryLadder;
use super::options::RetryOptions;
use super::stage::Stage;
use super::stats::{Counters, DeliveryStats};
use crate::ExampleError;

/// The running consumers of a ladder: one thread per topic. See the [module docs](super).
pub struct RetryConsumers {
    threads: Vec<(String, JoinHandle<Result<(), ExampleError>>)>,
    counters: Vec<(String, Arc<Counters>)>,
    shutdown: Arc<AtomicBool>,
}

impl RetryConsumers {
    /// Starts one consumer per topic of `ladder` (the main topic and each retry topic); every
    /// one hands its records to `handler`. The topics must exist.
    pub fn start(
        bootstrap: &str,
        ladder: RetryLadder,
        handler: impl Handler,
        options: RetryOptions,
    ) -> Result<Self, ExampleError> {
        let ladder = Arc::new(ladder);
        let handler: Arc<dyn Handler> = Arc::new(handler);
        let shutdown = Arc::new(AtomicBool::new(false));
        let mut stages = Vec::new();
        for index in 0..=ladder.steps().len() {
            stages.push(Stage::new(
                bootstrap,
                index,
                ladder.clone(),
                handler.clone(),
                &options,
                shutdown.clone(),
            )?);
        }
        let mut this = Self {
            threads: Vec::new(),
            counters: Vec::new(),
            shutdown,
        };
        for stage in stages {
            let name = if stage.index == 0 {
                "delivery-main".to_owned()
            } else {
                format!("delivery-retry-{}", stage.index)
            };
            this.counters.push((stage.topic.clone(), stage.counters.clone()));
            let topic = stage.topic.clone();
            let thread_topic = topic.clone();
            let shutdown = this.shutdown.clone();
            let join = std::thread::Builder::new().name(name).spawn(move || {
                let result = stage.run();
                if let Err(e) = &result {
                    tracing::error!(topic = %thread_topic, error = %e, "delivery consumer failed");
                    // One failed stage stops the others: the application is unhealthy.
                    shutdown.store(true, Ordering::Relaxed);
                }
                result
            })?;
            this.threads.push((topic, join));
        }
        Ok(this)
    }

    /// What the consumers did so far.
    pub fn stats(&self) -> DeliveryStats {
        let stages = self.counters.iter().map(|(topic, c)| c.snapshot(topic)).collect();
        DeliveryStats { stages }
    }

    /// Whether every consumer thread is still running.
    pub fn is_running(&self) -> bool {
        !self.shutdown.load(Ordering::Relaxed) && self.threads.iter().all(|(_, t)| !t.is_finished())
    }

    /// Waits until `done(stats)` holds or `timeout` passes; returns the last stats and
    /// whether it held. Stops early (false) if a consumer failed.
    pub fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&DeliveryStats) -> bool,
    ) -> (DeliveryStats, bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let stats = self.stats();
            if done(&stats) {
                return (stats, true);
            }
            if Instant::now() >= deadline || !self.is_running() {
                return (stats, false);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the consumers (each commits what it handled and leaves its group) and returns
    /// the first error any of them failed with. Waits at most `timeout` for them.
    pub fn close(mut self, timeout: Duration) -> Result<(), ExampleError> {
        self.shutdown.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + timeout;
        let mut first_error = None;
        for (topic, t) in std::mem::take(&mut self.threads) {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !t.is_finished() {
                first_error.get_or_insert(ExampleError::Other(format!(
                    "consumer of {topic} did not stop in {timeout:?}"
                )));
                continue;
            }
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert(ExampleError::Other(format!("consumer of {topic} panicked")));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for RetryConsumers {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        for (_, t) in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for RetryConsumers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryConsumers")
            .field("stats", &self.stats())
            .finish()
    }
}
