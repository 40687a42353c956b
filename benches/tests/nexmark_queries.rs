//! Every Nexmark query of `streams_benches::nexmark::queries`, run by the topology test
//! driver over generated events, against the query computed directly from the events.
//! (The side-by-side harness compares the same queries with Kafka Streams' on a broker.)

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use streams_benches::nexmark::result::Digest;
use streams_benches::nexmark::{Auction, Bid, Event, Generator, Person, queries};
use streams_core::serdes::StringSerde;
use streams_core::state::serde::NullableSerde;
use streams_test_utils::{DriverConfig, TopologyTestDriver};

const SECOND: i64 = 1000;

/// 200 events per second of event time: 30,000 events span 150 s, so that every window
/// and session query sees many windows.
fn events(n: u64) -> Vec<Event> {
    let g = Generator::new(1_000_000, 200);
    (0..n).map(|i| g.event(i)).collect()
}

/// `query`'s output over `events`, piped in order with null keys.
fn run(query: &str, events: &[Event]) -> Digest {
    let topology = queries::topology(query, "events", "out").unwrap();
    let driver = TopologyTestDriver::new(topology, DriverConfig::default().commit_every(100)).unwrap();
    let input = driver.input_topic("events", StringSerde, StringSerde);
    for e in events {
        let json = serde_json::to_vec(e).unwrap();
        input.pipe_raw(None, Some(&json), e.date_time()).unwrap();
    }
    driver.commit().unwrap();
    let out = driver.output_topic("out", NullableSerde(StringSerde), NullableSerde(StringSerde));
    let mut digest = Digest::new(query);
    for (k, v) in out.read_key_values().unwrap() {
        digest.add(
            query,
            k.unwrap_or_default().as_bytes(),
            v.unwrap_or_default().as_bytes(),
        );
    }
    digest
}

fn auctions(events: &[Event]) -> impl Iterator<Item = &Auction> {
    events.iter().filter_map(|e| match e {
        Event::Auction(a) => Some(a),
        _ => None,
    })
}

fn bids(events: &[Event]) -> impl Iterator<Item = &Bid> {
    events.iter().filter_map(|e| match e {
        Event::Bid(b) => Some(b),
        _ => None,
    })
}

/// The digest of the last values `want`.
fn last(query: &str, want: BTreeMap<String, String>) -> Digest {
    let mut d = Digest::new(query);
    for (k, v) in want {
        d.add(query, k.as_bytes(), v.as_bytes());
    }
    d
}

/// q3: category-10 auctions of sellers from OR, ID or CA.
fn local_items(events: &[Event]) -> BTreeMap<String, String> {
    let people: HashMap<u64, &Person> = events
        .iter()
        .filter_map(|e| match e {
            Event::Person(p) if matches!(p.state.as_str(), "OR" | "ID" | "CA") => Some((p.id, p)),
            _ => None,
        })
        .collect();
    auctions(events)
        .filter(|a| a.category == 10)
        .filter_map(|a| {
            let p = people.get(&a.seller)?;
            Some((
                a.id.to_string(),
                format!("{},{},{},{}", p.name, p.city, p.state, a.id),
            ))
        })
        .collect()
}

/// Per auction, its highest bid between its start and its close.
fn winning_bids(events: &[Event]) -> HashMap<u64, u64> {
    let window = queries::AUCTION_WINDOW.as_millis() as i64;
    let by_id: HashMap<u64, &Auction> = auctions(events).map(|a| (a.id, a)).collect();
    let mut winning: HashMap<u64, u64> = HashMap::new();
    for b in bids(events) {
        let Some(a) = by_id.get(&b.auction) else { continue };
        if a.date_time <= b.date_time && b.date_time <= a.date_time + window && b.date_time <= a.expires {
            let w = winning.entry(a.id).or_default();
            *w = (*w).max(b.price);
        }
    }
    winning
}

/// q4: per category, the average of its auctions' winning bids.
fn category_averages(events: &[Event]) -> BTreeMap<String, String> {
    let category: HashMap<u64, u64> = auctions(events).map(|a| (a.id, a.category)).collect();
    let mut per_category: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (id, price) in winning_bids(events) {
        let (sum, count) = per_category.entry(category[&id]).or_default();
        *sum += price;
        *count += 1;
    }
    per_category
        .into_iter()
        .map(|(c, (sum, count))| (c.to_string(), (sum / count).to_string()))
        .collect()
}

/// q6: per seller, the average winning bid of their 10 auctions that close last.
fn seller_averages(events: &[Event]) -> BTreeMap<String, String> {
    let winning = winning_bids(events);
    let mut per_seller: BTreeMap<u64, Vec<(i64, u64, u64)>> = BTreeMap::new();
    for a in auctions(events) {
        if let Some(price) = winning.get(&a.id) {
            per_seller
                .entry(a.seller)
                .or_default()
                .push((a.expires, a.id, *price));
        }
    }
    per_seller
        .into_iter()
        .map(|(seller, mut all)| {
            all.sort_by_key(|x| Reverse((x.0, x.1)));
            let last: Vec<u64> = all.iter().take(10).map(|x| x.2).collect();
            (
                seller.to_string(),
                (last.iter().sum::<u64>() / last.len() as u64).to_string(),
            )
        })
        .collect()
}

/// q12: bids per bidder (the windows are the wall clock's: only totals compare).
fn bids_per_bidder(events: &[Event]) -> BTreeMap<String, String> {
    let mut n: BTreeMap<u64, u64> = BTreeMap::new();
    for b in bids(events) {
        *n.entry(b.bidder).or_default() += 1;
    }
    n.into_iter()
        .map(|(b, n)| (format!("{b}@0"), n.to_string()))
        .collect()
}

/// q5: per 10 s window advancing by 2 s, the auction with the most bids.
fn hot_items(events: &[Event]) -> BTreeMap<String, String> {
    let mut counts: BTreeMap<i64, HashMap<u64, u64>> = BTreeMap::new();
    for b in bids(events) {
        let t = b.date_time;
        let mut start = t - t % (2 * SECOND);
        while start > t - 10 * SECOND && start >= 0 {
            *counts.entry(start).or_default().entry(b.auction).or_default() += 1;
            start -= 2 * SECOND;
        }
    }
    counts
        .into_iter()
        .map(|(start, per_auction)| {
            let (auction, count) = per_auction
                .into_iter()
                .max_by_key(|(a, c)| (*c, Reverse(*a)))
                .expect("a window holds a bid");
            (start.to_string(), format!("{auction},{count}"))
        })
        .collect()
}

/// q7: per 10 s window, the highest bid.
fn highest_bids(events: &[Event]) -> BTreeMap<String, String> {
    let mut top: BTreeMap<i64, &Bid> = BTreeMap::new();
    let rank = |b: &Bid| (b.price, b.auction, b.bidder, b.date_time);
    for b in bids(events) {
        let start = b.date_time - b.date_time % (10 * SECOND);
        let e = top.entry(start).or_insert(b);
        if rank(b) > rank(e) {
            *e = b;
        }
    }
    top.into_iter()
        .map(|(s, b)| {
            (
                s.to_string(),
                format!("{},{},{},{}", b.auction, b.bidder, b.price, b.date_time),
            )
        })
        .collect()
}

/// q8: people who opened an auction in the 10 s window of their registration.
fn new_users(events: &[Event]) -> BTreeMap<String, String> {
    let window = |t: i64| t - t % (10 * SECOND);
    let mut people: HashMap<(u64, i64), &str> = HashMap::new();
    let mut sellers = Vec::new();
    for e in events {
        match e {
            Event::Person(p) => {
                people.insert((p.id, window(p.date_time)), &p.name);
            }
            Event::Auction(a) => sellers.push((a.seller, window(a.date_time))),
            Event::Bid(_) => {}
        }
    }
    sellers
        .into_iter()
        .filter_map(|(id, start)| {
            let name = people.get(&(id, start))?;
            Some((format!("{id}@{start}"), format!("{id},{name},{start}")))
        })
        .collect()
}

/// q11: per bidder, sessions of bids at most 10 s apart (events come in time order).
fn sessions(events: &[Event]) -> BTreeMap<String, String> {
    let mut sessions: BTreeMap<u64, Vec<(i64, i64, u64)>> = BTreeMap::new();
    for b in bids(events) {
        let s = sessions.entry(b.bidder).or_default();
        match s.last_mut() {
            Some((_, end, n)) if b.date_time <= *end + 10 * SECOND => {
                *end = b.date_time;
                *n += 1;
            }
            _ => s.push((b.date_time, b.date_time, 1)),
        }
    }
    sessions
        .into_iter()
        .flat_map(|(bidder, s)| {
            s.into_iter()
                .map(move |(start, end, n)| (format!("{bidder}@{start}/{end}"), n.to_string()))
        })
        .collect()
}

/// What `query` must produce from `events`, computed directly.
fn model(query: &str, events: &[Event]) -> Digest {
    let mut d = Digest::new(query);
    match query {
        "q0" | "q1" => {
            for b in bids(events) {
                let mut b = b.clone();
                if query == "q1" {
                    b.price = b.price * 89 / 100;
                }
                d.add(query, b"", &serde_json::to_vec(&b).unwrap());
            }
        }
        "q2" => {
            for b in bids(events).filter(|b| b.auction % 123 == 0) {
                d.add(query, b"", format!("{},{}", b.auction, b.price).as_bytes());
            }
        }
        "q3" => d = last(query, local_items(events)),
        "q4" => d = last(query, category_averages(events)),
        "q5" => d = last(query, hot_items(events)),
        "q6" => d = last(query, seller_averages(events)),
        "q7" => d = last(query, highest_bids(events)),
        "q8" => d = last(query, new_users(events)),
        "q11" => d = last(query, sessions(events)),
        "q12" => d = last(query, bids_per_bidder(events)),
        other => panic!("no model of {other}"),
    }
    d
}

#[test]
fn every_query_computes_its_definition() {
    let events = events(30_000);
    for query in queries::QUERIES {
        let (got, want) = (run(query, &events), model(query, &events));
        assert_eq!(got.diff(&want), None, "{query}");
        match &want {
            Digest::Records { count, .. } => assert!(*count > 0, "{query}: no records"),
            Digest::Last(last) | Digest::Totals(last) => {
                assert!(last.len() > 3, "{query}: {} results", last.len())
            }
        }
    }
}

#[test]
fn an_unknown_query_is_an_error() {
    let err = queries::topology("q99", "events", "out").unwrap_err().to_string();
    assert!(err.contains("unknown Nexmark query q99"), "{err}");
}
