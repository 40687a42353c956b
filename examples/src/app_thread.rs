//! A value that must stay on one thread — a [`KafkaStreams`](streams_core::KafkaStreams),
//! or something holding one — owned by a thread of its own and used from any thread
//! through closures run there.
//!
//! Why: `KafkaStreams` is neither `Send` nor `Sync` (it may hold the embedded mock
//! cluster, an `Rc`), so a server thread cannot call its methods, e.g.
//! `query_metadata_for_key`, even though the store handles it returns are `Send + Sync`.
//! [`AppThread::spawn`] makes the value on the new thread; [`AppHandle::call`] runs a
//! closure against it there and waits for the result.
//!
//! Invariants: closures run one at a time, in the order they were sent, on the owning
//! thread, so a long closure delays every caller (keep them short: read a state, a count, a
//! metadata lookup; poll from the caller's side rather than wait inside one); the value is
//! made, used and dropped on that thread only; [`AppThread::finish`] (or dropping the
//! [`AppThread`]) ends the thread after the closures sent before it, and a call after that
//! fails with [`Gone`] instead of waiting.

use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

/// What the owning thread is sent.
enum Message<T> {
    /// Run against the value.
    Call(Box<dyn FnOnce(&mut T) + Send>),
    /// Take the value (and end the thread).
    Finish(Box<dyn FnOnce(T) + Send>),
    /// Drop the value (and end the thread).
    Stop,
}

/// The owning thread has ended (or the value could not be made).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the application's thread has ended")]
pub struct Gone;

/// Runs closures against the value on its owning thread; cheap to clone, `Send + Sync`.
pub struct AppHandle<T> {
    tx: Sender<Message<T>>,
}

impl<T> Clone for AppHandle<T> {
    fn clone(&self) -> Self {
        Self { tx: self.tx.clone() }
    }
}

impl<T> std::fmt::Debug for AppHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppHandle").finish_non_exhaustive()
    }
}

impl<T> AppHandle<T> {
    /// Runs `f` against the value on its thread, after the closures sent before it, and
    /// returns its result.
    pub fn call<R: Send + 'static>(&self, f: impl FnOnce(&mut T) -> R + Send + 'static) -> Result<R, Gone> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.tx
            .send(Message::Call(Box::new(move |value: &mut T| {
                let _ = reply.send(f(value));
            })))
            .map_err(|_| Gone)?;
        // The closure is dropped without running (so `reply` too) if the thread ends first.
        answer.recv().map_err(|_| Gone)
    }
}

/// The owning thread and its value; ends the thread (dropping the value there) when
/// dropped.
pub struct AppThread<T> {
    handle: AppHandle<T>,
    thread: Option<JoinHandle<()>>,
}

impl<T: 'static> AppThread<T> {
    /// Starts a thread named `name` and makes the value there with `make`; its error, if it
    /// fails (the thread then ends).
    pub fn spawn<E: Send + 'static>(
        name: &str,
        make: impl FnOnce() -> Result<T, E> + Send + 'static,
    ) -> Result<Self, SpawnError<E>> {
        let (tx, rx) = mpsc::channel::<Message<T>>();
        let (made, made_rx) = mpsc::sync_channel::<Result<(), E>>(1);
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || own(make, &made, &rx))
            .map_err(SpawnError::Thread)?;
        let mut this = Self {
            handle: AppHandle { tx },
            thread: Some(thread),
        };
        match made_rx.recv() {
            Ok(Ok(())) => Ok(this),
            Ok(Err(e)) => {
                this.join();
                Err(SpawnError::Make(e))
            }
            Err(_) => {
                this.join();
                Err(SpawnError::Panicked)
            }
        }
    }

    /// A handle for other threads.
    pub fn handle(&self) -> AppHandle<T> {
        self.handle.clone()
    }

    /// [`AppHandle::call`].
    pub fn call<R: Send + 'static>(&self, f: impl FnOnce(&mut T) -> R + Send + 'static) -> Result<R, Gone> {
        self.handle.call(f)
    }

    /// Ends the thread: after the closures sent before, `f` takes the value there (e.g. to
    /// close it), and its result is returned once the thread has ended.
    pub fn finish<R: Send + 'static>(mut self, f: impl FnOnce(T) -> R + Send + 'static) -> Result<R, Gone> {
        let (reply, answer) = mpsc::sync_channel(1);
        let sent = self.handle.tx.send(Message::Finish(Box::new(move |value: T| {
            let _ = reply.send(f(value));
        })));
        let result = if sent.is_ok() {
            answer.recv().map_err(|_| Gone)
        } else {
            Err(Gone)
        };
        self.join();
        result
    }

    fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl<T> Drop for AppThread<T> {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = self.handle.tx.send(Message::Stop);
            let _ = t.join();
        }
    }
}

impl<T> std::fmt::Debug for AppThread<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppThread")
            .field("running", &self.thread.is_some())
            .finish_non_exhaustive()
    }
}

/// The owning thread's life: make the value, report, run closures until finished (or
/// every handle is gone), drop the value.
fn own<T, E>(
    make: impl FnOnce() -> Result<T, E>,
    made: &mpsc::SyncSender<Result<(), E>>,
    rx: &Receiver<Message<T>>,
) {
    let mut value = match make() {
        Ok(v) => v,
        Err(e) => {
            let _ = made.send(Err(e));
            return;
        }
    };
    let _ = made.send(Ok(()));
    while let Ok(message) = rx.recv() {
        match message {
            Message::Call(f) => f(&mut value),
            Message::Finish(f) => return f(value),
            Message::Stop => return,
        }
    }
}

/// Why [`AppThread::spawn`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError<E> {
    /// `make` failed.
    #[error("{0}")]
    Make(E),
    /// The thread could not be started.
    #[error("cannot start a thread: {0}")]
    Thread(std::io::Error),
    /// `make` panicked.
    #[error("the application's thread panicked while starting")]
    Panicked,
}

impl From<Gone> for crate::ExampleError {
    fn from(e: Gone) -> Self {
        Self::Other(e.to_string())
    }
}

impl<E: Into<crate::ExampleError>> From<SpawnError<E>> for crate::ExampleError {
    fn from(e: SpawnError<E>) -> Self {
        match e {
            SpawnError::Make(e) => e.into(),
            SpawnError::Thread(e) => Self::Io(e),
            SpawnError::Panicked => Self::Other("the application's thread panicked while starting".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    #[test]
    fn a_value_that_is_not_send_is_used_from_other_threads() {
        // An `Rc` cannot leave its thread: everything happens there.
        let owner = AppThread::spawn("rc", || Ok::<_, String>(Rc::new(std::cell::Cell::new(1)))).unwrap();
        let handle = owner.handle();
        let others: Vec<_> = (0..4)
            .map(|_| {
                let h = handle.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        h.call(|v| v.set(v.get() + 1)).unwrap();
                    }
                })
            })
            .collect();
        for t in others {
            t.join().unwrap();
        }
        assert_eq!(owner.call(|v| v.get()), Ok(401));
        assert_eq!(owner.finish(|v| Rc::strong_count(&v) + v.get()), Ok(402));
        assert_eq!(handle.call(|v| v.get()), Err(Gone), "the thread has ended");
    }

    #[test]
    fn a_failed_make_is_returned_and_dropping_ends_the_thread() {
        let failed = AppThread::<u8>::spawn("fails", || Err("no"));
        assert!(matches!(failed, Err(SpawnError::Make("no"))));
        let owner = AppThread::spawn("drop", || Ok::<_, ()>(7u8)).unwrap();
        let handle = owner.handle();
        drop(owner);
        assert_eq!(handle.call(|v| *v), Err(Gone));
    }
}
