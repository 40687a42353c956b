//! Clean stops for the long-running binaries: SIGINT (Ctrl-C), SIGTERM (what `kill`, systemd
//! and Kubernetes send) and, where a caller drives the binary through a pipe, the end of
//! standard input. Each leads to `KafkaStreams::close`: the last commit, leaving the group,
//! releasing the state directory. SIGKILL cannot be caught: that is what the crash tests
//! use.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::ExampleError;

/// Why a binary stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// Standard input was closed.
    StdinClosed,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
            Self::StdinClosed => "end of standard input",
        })
    }
}

/// SIGINT and SIGTERM handlers, installed when this is made: from then on neither signal
/// ends the process by itself.
pub struct StopSignals {
    runtime: tokio::runtime::Runtime,
    interrupt: Signal,
    terminate: Signal,
}

impl StopSignals {
    /// Installs the handlers.
    pub fn install() -> Result<Self, ExampleError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (interrupt, terminate) = {
            let _entered = runtime.enter();
            (signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?)
        };
        Ok(Self {
            runtime,
            interrupt,
            terminate,
        })
    }

    /// Blocks until SIGINT or SIGTERM arrives, or (with `watch_stdin`) standard input
    /// closes.
    pub fn wait(mut self, watch_stdin: bool) -> Stop {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        if watch_stdin {
            // A blocking read cannot be cancelled; the thread ends with the process.
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut stdin = std::io::stdin();
                while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
                let _ = tx.send(());
            });
        }
        let stop = self.runtime.block_on(async {
            let stdin_closed = async {
                if watch_stdin && rx.await.is_ok() {
                    return;
                }
                std::future::pending::<()>().await;
            };
            tokio::select! {
                _ = self.interrupt.recv() => Stop::Interrupt,
                _ = self.terminate.recv() => Stop::Terminate,
                () = stdin_closed => Stop::StdinClosed,
            }
        });
        self.runtime.shutdown_background();
        stop
    }

    /// Runs `app` until a stop (standard input watched too), then closes it, prints which
    /// stop it was and how the close went, and removes `own_state_dir` when given. A close
    /// that times out is an error.
    pub fn serve(
        self,
        app: &mut streams_core::KafkaStreams,
        own_state_dir: Option<&std::path::Path>,
    ) -> Result<(), ExampleError> {
        let stop = self.wait(true);
        let closed = app.close(std::time::Duration::from_secs(30));
        println!(
            "{stop}: closed {}",
            if closed { "cleanly" } else { "with a timeout" }
        );
        if let Some(dir) = own_state_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        if !closed {
            return Err(ExampleError::Other(
                "the application did not stop within 30 s".into(),
            ));
        }
        Ok(())
    }

    /// Waits on a thread of its own and returns a flag set when SIGINT or SIGTERM arrives,
    /// for a loop that checks it between steps.
    pub fn into_flag(self) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        let set = flag.clone();
        std::thread::spawn(move || {
            let stop = self.wait(false);
            eprintln!("{stop}: stopping cleanly");
            set.store(true, Ordering::Release);
        });
        flag
    }
}
