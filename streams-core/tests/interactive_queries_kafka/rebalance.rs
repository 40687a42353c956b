//! Queries while a second instance joins: every answer whole or `Rebalancing`, and a cursor
//! held across the rebalance never mixing the old and the new assignment.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use streams_core::{KafkaStreams, QueryError, State};
use streams_test_utils::kafka;

use crate::app::{fixture, partition_of, second_instance, start_and_process};
use crate::{Entries, Model, N, PARTITIONS, Store, read, retry, wait_until};

/// Whether `entries` is a whole answer: keys strictly ascending, each with its value, and
/// of every input partition either all keys or none. The partitions present.
fn check_whole(entries: &[(String, String)], model: &Model) -> Result<BTreeSet<i32>, String> {
    if let Some(w) = entries.windows(2).find(|w| w[0].0 >= w[1].0) {
        return Err(format!("{:?} before {:?}", w[0].0, w[1].0));
    }
    let (mut got, mut size) = ([0usize; PARTITIONS as usize], [0usize; PARTITIONS as usize]);
    for (k, v) in entries {
        if model.get(k) != Some(v) {
            return Err(format!("{k:?} = {v:?}, written {:?}", model.get(k)));
        }
        got[partition_of(k) as usize] += 1;
    }
    for k in model.keys() {
        size[partition_of(k) as usize] += 1;
    }
    let mut present = BTreeSet::new();
    for p in 0..PARTITIONS {
        let (g, s) = (got[p as usize], size[p as usize]);
        if g == s && s > 0 {
            present.insert(p);
        } else if g != 0 {
            return Err(format!("partition {p}: {g} of its {s} keys (a partial answer)"));
        }
    }
    Ok(present)
}

/// Starts B and waits until it runs and A and B each answer whole, disjoint parts that
/// cover every partition.
fn join_and_settle(b_app: &mut KafkaStreams, a: &Store, b: &Store, model: &Model) {
    b_app.start().unwrap();
    assert!(
        b_app.wait_for_state(State::Running, Duration::from_secs(60)),
        "B: {:?}",
        b_app.state()
    );
    let whole = |s: &Store| {
        let entries = s.all().collect::<Result<Entries, _>>().ok()?;
        check_whole(&entries, model).ok()
    };
    wait_until("A and B sharing the partitions", Duration::from_secs(60), || {
        let (Some(pa), Some(pb)) = (whole(a), whole(b)) else {
            return false;
        };
        pa.is_disjoint(&pb) && pa.len() + pb.len() == PARTITIONS as usize
    });
}

/// What the querying thread saw of one instance.
#[derive(Debug, Default)]
struct Seen {
    whole: BTreeMap<BTreeSet<i32>, usize>,
    gets: usize,
    rebalancing: usize,
    not_started: usize,
    wrong: Vec<String>,
}

impl Seen {
    /// The answer, or `None` after counting the error.
    fn answer<T>(&mut self, r: Result<T, QueryError>) -> Option<T> {
        match r {
            Ok(t) => return Some(t),
            Err(QueryError::Rebalancing) => self.rebalancing += 1,
            Err(QueryError::NotRunning {
                state: State::Created,
            }) => self.not_started += 1,
            Err(e) => self.wrong.push(format!("error {e}")),
        }
        None
    }
}

/// One round of queries of `s`, checked: a `get`, and `all()` in chunks of 500.
fn query_round(s: &Store, model: &Model, round: usize, seen: &mut Seen) {
    let key = model.keys().nth(round * 7 % N).unwrap();
    match seen.answer(s.get(key)).flatten() {
        Some(v) if model.get(key) == Some(&v) => seen.gets += 1,
        Some(v) => seen.wrong.push(format!("get({key:?}) = {v:?}")),
        None => {}
    }
    if let Some(e) = seen.answer(s.all().chunk_size(500).collect::<Result<Entries, _>>()) {
        match check_whole(&e, model) {
            Ok(p) => *seen.whole.entry(p).or_default() += 1,
            Err(e) => seen.wrong.push(format!("all(): {e}")),
        }
    }
}

#[test]
fn queries_while_a_second_instance_joins_are_whole_or_rebalancing() {
    let Some(bootstrap) = kafka::require_kafka("interactive_queries_kafka rebalance") else {
        return;
    };
    let mut f = fixture(bootstrap, false, false, 1);
    start_and_process(&mut f.app, N as u64);
    let a = f.app.store(&f.kv).unwrap();
    let (mut b_app, b, _state_b) = second_instance(&f);
    let model = Arc::new(f.model.clone());
    let all = read("all", || Ok(a.all()));
    assert_eq!(check_whole(&all, &model).unwrap().len(), PARTITIONS as usize);

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new([Seen::default(), Seen::default()]));
    let querier = {
        let (a, b, model, stop, seen) = (a.clone(), b.clone(), model.clone(), stop.clone(), seen.clone());
        std::thread::spawn(move || {
            let mut round = 0;
            while !stop.load(Ordering::Acquire) {
                {
                    let mut seen = seen.lock().unwrap();
                    query_round(&a, &model, round, &mut seen[0]);
                    query_round(&b, &model, round, &mut seen[1]);
                }
                round += 1;
                // Errors come back at once: leave the stream threads some CPU.
                std::thread::sleep(Duration::from_millis(1));
            }
            round
        })
    };
    join_and_settle(&mut b_app, &a, &b, &model);
    // A few more rounds on the settled assignment.
    let settled = seen.lock().unwrap()[0].whole.values().sum::<usize>();
    wait_until("queries after the rebalance", Duration::from_secs(30), || {
        seen.lock().unwrap()[0].whole.values().sum::<usize>() > settled + 5
    });
    stop.store(true, Ordering::Release);
    let rounds = querier.join().unwrap();
    let [sa, sb] = &*seen.lock().unwrap();
    println!("{rounds} query rounds; A: {sa:?}\nB: {sb:?}");
    for (name, s) in [("A", sa), ("B", sb)] {
        assert!(s.wrong.is_empty(), "{name}: {:?}", s.wrong);
    }
    assert_eq!(sa.not_started, 0);
    let full: BTreeSet<i32> = (0..PARTITIONS).collect();
    assert!(
        sa.whole.contains_key(&full),
        "A answered for all partitions before B joined"
    );
    assert!(
        sa.whole.keys().any(|p| p.len() < full.len()) && sb.whole.keys().any(|p| !p.is_empty()),
        "both answered for their share after the rebalance"
    );
    if sa.rebalancing + sb.rebalancing == 0 {
        println!("no query observed a Rebalancing error");
    }
    assert!(b_app.close(Duration::from_secs(30)));
    assert!(f.app.close(Duration::from_secs(30)));
}

/// A cursor opened before a rebalance and read on after it never mixes the old and the new
/// assignment: once the tasks answering may differ from those that answered its first
/// chunk, it fails with `Rebalancing` for good (retrying does not help: the scan must start
/// over), and a new cursor reads the new assignment whole.
#[test]
fn a_cursor_read_across_a_rebalance_does_not_mix_assignments() {
    let Some(bootstrap) = kafka::require_kafka("interactive_queries_kafka held cursor") else {
        return;
    };
    let mut f = fixture(bootstrap, false, false, 1);
    start_and_process(&mut f.app, N as u64);
    let a = f.app.store(&f.kv).unwrap();
    let (mut b_app, b, _state_b) = second_instance(&f);
    let mut held = a.all().chunk_size(100);
    let mut entries = retry("first chunk", || held.next_chunk()).unwrap();
    assert_eq!(entries.len(), 100);
    join_and_settle(&mut b_app, &a, &b, &f.model);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut failed = None;
    for r in held {
        match r {
            Ok(e) => entries.push(e),
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    println!("held cursor: {} entries, ended with {failed:?}", entries.len());
    assert!(
        matches!(failed, Some(QueryError::Rebalancing)),
        "the held cursor went on across the rebalance ({} entries): {failed:?}",
        entries.len()
    );
    assert!(b_app.close(Duration::from_secs(30)));
    assert!(f.app.close(Duration::from_secs(30)));
}
