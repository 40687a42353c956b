//! Unit tests of the helpers that need no broker: names, the blocking executor, and the
//! record builders.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::naming::MAX_TOPIC_NAME_LEN;
use super::{ProduceRecord, block_on_timeout, unique_name};

#[test]
fn unique_names_differ_and_are_valid_topic_names() {
    let a = unique_name("orders in/€");
    let b = unique_name("orders in/€");
    assert_ne!(a, b);
    assert!(a.starts_with("orders_in__-"), "{a}");
    assert!(
        a.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    );
    let long = unique_name(&"x".repeat(400));
    assert_eq!(long.len(), MAX_TOPIC_NAME_LEN);
}

#[test]
fn block_on_timeout_returns_ready_value_and_times_out_on_pending() {
    assert_eq!(block_on_timeout(async { 7 }, Duration::from_millis(10)), Some(7));
    let started = Instant::now();
    let pending = block_on_timeout(std::future::pending::<()>(), Duration::from_millis(50));
    assert_eq!(pending, None);
    assert!(started.elapsed() >= Duration::from_millis(50));
}

#[test]
fn block_on_timeout_is_woken_by_another_thread() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    struct Recv(std::sync::mpsc::Receiver<()>, Arc<Mutex<Option<Waker>>>);
    impl Future for Recv {
        type Output = ();
        fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            *self.1.lock().unwrap_or_else(PoisonError::into_inner) = Some(cx.waker().clone());
            match self.0.try_recv() {
                Ok(()) => Poll::Ready(()),
                Err(_) => Poll::Pending,
            }
        }
    }
    let slot = Arc::new(Mutex::new(None::<Waker>));
    let waker_slot = Arc::clone(&slot);
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        tx.send(()).ok();
        if let Some(w) = waker_slot.lock().unwrap_or_else(PoisonError::into_inner).take() {
            w.wake();
        }
    });
    assert_eq!(
        block_on_timeout(Recv(rx, slot), Duration::from_secs(10)),
        Some(())
    );
    sender.join().ok();
}

#[test]
fn produce_record_builders() {
    let r = ProduceRecord::new("k", "v")
        .with_partition(2)
        .with_timestamp(5)
        .with_header("h", Some(b"x"));
    assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
    assert_eq!(r.partition, Some(2));
    assert_eq!(r.headers, vec![("h".to_owned(), Some(b"x".to_vec()))]);
    assert_eq!(ProduceRecord::tombstone("k").value, None);
    assert_eq!(ProduceRecord::keyless("v").key, None);
}
