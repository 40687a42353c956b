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
    Consumed, Grouped, JoinWindows, KStream, KTable, Materialized, Produced, SessionWindows, StreamJoined,
    StreamsBuilder, TimeWindows,
};

use super::model::{Auction, Bid, Event, Person};

/// The lateness every windowed query accepts.
pub const GRACE: Duration = Duration::from_secs(30);

/// The queries [`topology`] builds.
pub const QUERIES: [&str; 11] = ["q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q11", "q12"];

/// How long after its start q4 and q6 look for an auction's bids: longer than the generator's
/// auctions last at 167 or more events per second (they close within the time of
/// 2 × 1,667 events).
pub const AUCTION_WINDOW: Duration = Duration::from_secs(20);

/// A bid's price on an auction, with what q4 and q6 need of the auction.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct AuctionPrice {
    /// The auction.
    pub auction: u64,
    /// Its category.
    pub category: u64,
    /// Its seller.
    pub seller: u64,
    /// When it closes.
    pub expires: i64,
    /// The bid's price.
    pub price: u64,
    /// The bid came at or before the auction's `expires`.
    pub in_time: bool,
}

/// A sum and a count, for an average (q4).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SumCount {
    /// The sum of the values.
    pub sum: u64,
    /// The number of values.
    pub count: u64,
}

/// The wall clock (ms), q12's event time.
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

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

/// Per auction, its highest bid from its start to its close (q4, q6): auctions joined with
/// the bids of the following [`AUCTION_WINDOW`], the bids after the close dropped, the
/// highest kept.
fn winning_bids(b: &StreamsBuilder, input: &str) -> KTable<u64, AuctionPrice> {
    let events = events(b, input);
    let auctions = events.flat_map_values(|_, e| e.auction()).select_key(|_, a| a.id);
    let bids = events
        .flat_map_values(|_, e| e.bid())
        .select_key(|_, b| b.auction);
    auctions
        .join_stream(
            &bids,
            |_, a, b| AuctionPrice {
                auction: a.id,
                category: a.category,
                seller: a.seller,
                expires: a.expires,
                price: b.price,
                in_time: b.date_time <= a.expires,
            },
            JoinWindows::of_time_difference_with_grace(AUCTION_WINDOW, GRACE).before(Duration::ZERO),
            StreamJoined::with(U64Serde, JsonSerde::<Auction>::new(), JsonSerde::<Bid>::new()),
        )
        .filter(|_, w| w.in_time)
        .group_by_key(Grouped::with(U64Serde, JsonSerde::<AuctionPrice>::new()))
        .reduce(|a, w| if w.price > a.price { w } else { a }, Materialized::new())
}

/// The average price (rounded down) of the 10 auctions of `all` that close last (ties:
/// the greater id first); `None` for none.
pub fn last_ten_average(all: &[AuctionPrice]) -> Option<String> {
    let mut by_close: Vec<&AuctionPrice> = all.iter().collect();
    by_close.sort_by_key(|a| std::cmp::Reverse((a.expires, a.auction)));
    let last: Vec<u64> = by_close.iter().take(10).map(|a| a.price).collect();
    (!last.is_empty()).then(|| (last.iter().sum::<u64>() / last.len() as u64).to_string())
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
        // Local item suggestion: auctions of category 10 by sellers from Oregon, Idaho or
        // California, keyed by the auction: "name,city,state,auction". Both sides are
        // tables (the latest auction and person per id) joined on the foreign key
        // `seller`, so a person registered after their auction still joins.
        "q3" => {
            let events = events(&b, input);
            let people = events
                .flat_map_values(|_, e| e.person())
                .filter(|_, p| matches!(p.state.as_str(), "OR" | "ID" | "CA"))
                .select_key(|_, p| p.id)
                .group_by_key(Grouped::with(U64Serde, JsonSerde::<Person>::new()))
                .reduce(|_, latest| latest, Materialized::new());
            let auctions = events
                .flat_map_values(|_, e| e.auction())
                .filter(|_, a| a.category == 10)
                .select_key(|_, a| a.id)
                .group_by_key(Grouped::with(U64Serde, JsonSerde::<Auction>::new()))
                .reduce(|_, latest| latest, Materialized::new());
            auctions
                .join_foreign(
                    &people,
                    |a| a.seller,
                    |a, p| format!("{},{},{},{}", p.name, p.city, p.state, a.id),
                    Materialized::new().with_value_serde(StringSerde),
                )
                .to_stream()
                .map(|id, v| (id.to_string(), v))
                .to(output, Produced::with(StringSerde, NullableSerde(StringSerde)));
        }
        // Average price per category: the winning bid of each auction is its highest bid
        // from its start to its close; per category, the average of the winning bids
        // (rounded down), keyed by the category.
        "q4" => {
            winning_bids(&b, input)
                .group_by(|_, w| (w.category, w.price), Grouped::with(U64Serde, U64Serde))
                .aggregate(
                    SumCount::default,
                    |_, price, s| SumCount {
                        sum: s.sum + price,
                        count: s.count + 1,
                    },
                    |_, price, s| SumCount {
                        sum: s.sum - price,
                        count: s.count - 1,
                    },
                    Materialized::new().with_value_serde(JsonSerde::<SumCount>::new()),
                )
                .to_stream()
                .map(|category, s| {
                    let average = s.filter(|s| s.count > 0).map(|s| (s.sum / s.count).to_string());
                    (category.to_string(), average)
                })
                .to(output, Produced::with(StringSerde, NullableSerde(StringSerde)));
        }
        // Average selling price by seller: per seller, the average winning bid (rounded
        // down) of their 10 auctions that close last, keyed by the seller. The aggregate
        // keeps every auction of the seller that has a winning bid.
        "q6" => {
            winning_bids(&b, input)
                .group_by(
                    |_, w| (w.seller, w.clone()),
                    Grouped::with(U64Serde, JsonSerde::<AuctionPrice>::new()),
                )
                .aggregate(
                    Vec::new,
                    |_, w, mut all: Vec<AuctionPrice>| {
                        all.retain(|a| a.auction != w.auction);
                        all.push(w);
                        all
                    },
                    |_, w, mut all: Vec<AuctionPrice>| {
                        all.retain(|a| a.auction != w.auction);
                        all
                    },
                    Materialized::new().with_value_serde(JsonSerde::<Vec<AuctionPrice>>::new()),
                )
                .to_stream()
                .map(|seller, all| (seller.to_string(), all.and_then(|all| last_ten_average(&all))))
                .to(output, Produced::with(StringSerde, NullableSerde(StringSerde)));
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
        // Bids per bidder in 10 s windows of processing time (the wall clock as the
        // timestamp), keyed "bidder@windowStart".
        "q12" => {
            let consumed = Consumed::with(StringSerde, JsonSerde::<Event>::new())
                .with_timestamp_extractor(|_, _| wall_clock_ms());
            b.stream([input], consumed)
                .flat_map_values(|_, e| e.bid())
                .map(|_, b| (b.bidder, b.auction))
                .group_by_key(Grouped::with(U64Serde, U64Serde))
                .windowed_by(TimeWindows::of_size_no_grace(Duration::from_secs(10)))
                .count(Materialized::new())
                .to_stream()
                .map(|w, n| (format!("{}@{}", w.key, w.start), n.map(|n| n.to_string())))
                .to(output, Produced::with(StringSerde, NullableSerde(StringSerde)));
        }
        other => return Err(format!("unknown Nexmark query {other}; known: {QUERIES:?}").into()),
    }
    Ok(b.build()?)
}
