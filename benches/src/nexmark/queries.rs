//! The Nexmark queries, written with this project's DSL as a user of it would.
//!
//! Every query reads the one event topic (null keys, [`Event`] JSON values, the event time
//! as the record's timestamp) and writes one output topic; `benches/java/.../Nexmark.java`
//! holds the Kafka Streams twins, which write the same bytes (see [`super`] for the output
//! of each query). Windowed queries allow [`GRACE`] of lateness, so that a record is late
//! only when one input partition runs that far ahead of another in event time: their
//! final results then do not depend on the order the partitions were read in.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use streams_core::Topology;
use streams_core::serdes::{I64Serde, JsonSerde, StringSerde, U64Serde};
use streams_core::state::serde::NullableSerde;
use streams_dsl::{
    Consumed, Grouped, KStream, Materialized, Produced, SessionWindows, StreamsBuilder, TimeWindows,
};

use super::model::{Bid, Event};

/// The lateness every windowed query accepts.
pub const GRACE: Duration = Duration::from_secs(30);

/// The queries [`topology`] builds.
pub const QUERIES: [&str; 7] = ["q0", "q1", "q2", "q5", "q7", "q8", "q11"];

/// An auction's number of bids in one window (q5).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct AuctionCount {
    /// The auction.
    pub auction: u64,
    /// Its bids in the window.
    pub count: u64,
}

fn events(b: &StreamsBuilder, input: &str) -> KStream<String, Event> {
    b.stream([input], Consumed::with(StringSerde, JsonSerde::<Event>::new()))
}

fn bids(b: &StreamsBuilder, input: &str) -> KStream<String, Bid> {
    events(b, input)
        .filter(|_, e| matches!(e, Event::Bid(_)))
        .flat_map_values(|_, e| e.bid())
}

fn string_out() -> Produced<StringSerde, StringSerde> {
    Produced::with(StringSerde, StringSerde)
}

/// `windows` of `size` with [`GRACE`].
fn windows(size: Duration) -> TimeWindows {
    TimeWindows::of_size_with_grace(size, GRACE)
}

/// The topology of `query` (one of [`QUERIES`]) from `input` to `output`.
pub fn topology(
    query: &str,
    input: &str,
    output: &str,
) -> Result<Topology, Box<dyn std::error::Error + Send + Sync>> {
    let b = StreamsBuilder::new();
    match query {
        // Pass-through: every bid.
        "q0" => {
            bids(&b, input).to(output, Produced::with(StringSerde, JsonSerde::<Bid>::new()));
        }
        // Currency conversion: every bid, its price in euros (89 %, rounded down).
        "q1" => {
            bids(&b, input)
                .map_values(|_, b| Bid {
                    price: b.price * 89 / 100,
                    ..b
                })
                .to(output, Produced::with(StringSerde, JsonSerde::<Bid>::new()));
        }
        // Selection: the bids on every 123rd auction, as "auction,price".
        "q2" => {
            bids(&b, input)
                .filter(|_, b| b.auction % 123 == 0)
                .map_values(|_, b| format!("{},{}", b.auction, b.price))
                .to(output, string_out());
        }
        // Hot items: per 10 s window advancing by 2 s, the auction with the most bids
        // (the smallest id among equals), keyed by the window's start: "auction,count".
        "q5" => {
            bids(&b, input)
                .select_key(|_, b| b.auction)
                .group_by_key(Grouped::with(U64Serde, JsonSerde::<Bid>::new()))
                .windowed_by(windows(Duration::from_secs(10)).advance_by(Duration::from_secs(2)))
                .count(Materialized::new())
                .to_stream()
                .flat_map(|w, count| {
                    count.map(|count| {
                        let top = AuctionCount {
                            auction: w.key,
                            count,
                        };
                        (w.start, top)
                    })
                })
                .group_by_key(Grouped::with(I64Serde, JsonSerde::<AuctionCount>::new()))
                .reduce(
                    |a, b| {
                        if (b.count, std::cmp::Reverse(b.auction)) > (a.count, std::cmp::Reverse(a.auction)) {
                            b
                        } else {
                            a
                        }
                    },
                    Materialized::new(),
                )
                .to_stream()
                .map(|start, top| {
                    let value = top.map(|t| format!("{},{}", t.auction, t.count));
                    (start.to_string(), value)
                })
                .to(output, Produced::with(StringSerde, NullableSerde(StringSerde)));
        }
        // Highest bid: per 10 s tumbling window, the bid with the highest price (ties: the
        // greatest auction, bidder, time), keyed by the window's start:
        // "auction,bidder,price,dateTime".
        "q7" => {
            bids(&b, input)
                .select_key(|_, _| "all".to_owned())
                .group_by_key(Grouped::with(StringSerde, JsonSerde::<Bid>::new()))
                .windowed_by(windows(Duration::from_secs(10)))
                .reduce(
                    |a, b| {
                        let rank = |b: &Bid| (b.price, b.auction, b.bidder, b.date_time);
                        if rank(&b) > rank(&a) { b } else { a }
                    },
                    Materialized::new(),
                )
                .to_stream()
                .map(|w, top| {
                    let value =
                        top.map(|b| format!("{},{},{},{}", b.auction, b.bidder, b.price, b.date_time));
                    (w.start.to_string(), value)
                })
                .to(output, Produced::with(StringSerde, NullableSerde(StringSerde)));
        }
        // Monitor new users: the people who opened an auction in the 10 s tumbling window
        // they registered in, keyed "id@windowStart": "id,name,windowStart".
        "q8" => {
            let events = events(&b, input);
            let people = events
                .flat_map_values(|_, e| e.person())
                .map(|_, p| (p.id, p.name))
                .group_by_key(Grouped::with(U64Serde, StringSerde))
                .windowed_by(windows(Duration::from_secs(10)))
                .reduce(|first, _| first, Materialized::new());
            let sellers = events
                .flat_map_values(|_, e| e.auction())
                .map(|_, a| (a.seller, a.id))
                .group_by_key(Grouped::with(U64Serde, U64Serde))
                .windowed_by(windows(Duration::from_secs(10)))
                .count(Materialized::new());
            people
                .join(&sellers, |w, name, _auctions| {
                    format!("{},{name},{}", w.key, w.start)
                })
                .to_stream()
                .map(|w, v| (format!("{}@{}", w.key, w.start), v))
                .to(output, Produced::with(StringSerde, NullableSerde(StringSerde)));
        }
        // User sessions: bids per bidder per session (10 s of inactivity ends one), keyed
        // "bidder@start/end"; a session merged into a later one is deleted (null).
        "q11" => {
            bids(&b, input)
                .map(|_, b| (b.bidder, b.auction))
                .group_by_key(Grouped::with(U64Serde, U64Serde))
                .windowed_by_session(SessionWindows::of_inactivity_gap_with_grace(
                    Duration::from_secs(10),
                    GRACE,
                ))
                .count(Materialized::new())
                .to_stream()
                .map(|w, n| {
                    (
                        format!("{}@{}/{}", w.key, w.start, w.end),
                        n.map(|n| n.to_string()),
                    )
                })
                .to(output, Produced::with(StringSerde, NullableSerde(StringSerde)));
        }
        other => return Err(format!("unknown Nexmark query {other}; known: {QUERIES:?}").into()),
    }
    Ok(b.build()?)
}
